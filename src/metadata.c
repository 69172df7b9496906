/*
 * metadata.c — Chroma metadata from jsonb: validation and rendering as UTF-8 JSON.
 *
 * Chroma accepts string, int64, float64 and bool values (newer servers also homogeneous
 * arrays of those); nested objects, empty keys, '#'/'$'-prefixed keys and the reserved
 * "chroma:" prefix are refused. Everything is checked here, before anything is sent.
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "metadata.h"

void
chroma_json_server_string(cs_buf *out, const char *s, int len)
{
	char	   *u = pg_server_to_any(s, len, PG_UTF8);

	cs_json_string(out, u, u == s ? (size_t) len : strlen(u));
	if (u != s)
		pfree(u);
}

void
chroma_metadata_check_key(const char *key, int len, const char *who)
{
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata of %s has an empty key", who)));
	if (key[0] == '#' || key[0] == '$')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata key \"%.*s\" of %s starts with \"%c\"", len, key, who, key[0]),
				 errdetail("Chroma reserves keys starting with '#' and '$'.")));
	if (len >= 7 && strncmp(key, "chroma:", 7) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata key \"%.*s\" of %s uses the reserved prefix \"chroma:\"",
						len, key, who)));
}

/*
 * The number txt as a JSON float Chroma reads back as the same value: the shortest
 * decimal of its double, with a fractional part or an exponent; NULL when the double is
 * not the number (more digits than a double holds, or beyond its range): Chroma would
 * round it.
 */
static char *
number_as_float(Numeric num, const char *txt)
{
	char		buf[DOUBLE_SHORTEST_DECIMAL_LEN + 2];
	double		d = strtod(txt, NULL);
	Numeric		back;
	int			len;

	if (isinf(d) || isnan(d))
		return NULL;
	len = double_to_shortest_decimal_buf(d, buf);
	back = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(buf),
											   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(num),
										  NumericGetDatum(back))) != 0)
		return NULL;
	if (strpbrk(buf, ".e") == NULL)
		strcpy(buf + len, ".0");
	return pstrdup(buf);
}

void
chroma_json_numeric(cs_buf *out, Numeric num, const char *key, const char *who)
{
	char	   *txt;
	char	   *f;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("metadata value \"%s\" of %s is not a finite number", key, who)));
	txt = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	if (strchr(txt, '.') == NULL)
	{
		char	   *end;

		errno = 0;
		(void) strtoll(txt, &end, 10);
		if (errno != ERANGE && *end == '\0')
		{
			cs_buf_puts(out, txt);	/* a whole number: int64 */
			pfree(txt);
			return;
		}
		/* beyond int64: a float when a double holds it exactly */
		f = number_as_float(num, txt);
		if (f == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is out of range for a 64-bit integer",
							key, who),
					 errdetail("Chroma stores whole numbers as 64-bit integers, and this one has too many digits for a double precision float.")));
	}
	else
	{
		if (isinf(strtod(txt, NULL)))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is out of range for a double precision float",
							key, who)));
		f = number_as_float(num, txt);
		if (f == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s has more digits than a double precision float holds",
							key, who),
					 errdetail("Chroma stores numbers with a fractional part as 64-bit floats: %s would be rounded.",
							   txt)));
	}
	cs_buf_puts(out, f);
	pfree(txt);
	pfree(f);
}

static const char *
jbv_type_name(enum jbvType t)
{
	switch (t)
	{
		case jbvString:
			return "string";
		case jbvNumeric:
			return "number";
		case jbvBool:
			return "boolean";
		case jbvNull:
			return "null";
		default:
			return "object";
	}
}

/* Number kind for array homogeneity: ints and floats are different Chroma types. */
static int
value_kind(JsonbValue *v)
{
	if (v->type == jbvNumeric)
	{
		char	   *txt = DatumGetCString(DirectFunctionCall1(numeric_out,
															  NumericGetDatum(v->val.numeric)));
		int			k = strchr(txt, '.') ? 11 : 10;

		pfree(txt);
		return k;
	}
	return (int) v->type;
}

static void
render_scalar(cs_buf *out, JsonbValue *v, const char *key, const char *who)
{
	switch (v->type)
	{
		case jbvString:
			chroma_json_server_string(out, v->val.string.val, v->val.string.len);
			break;
		case jbvNumeric:
			chroma_json_numeric(out, v->val.numeric, key, who);
			break;
		case jbvBool:
			cs_buf_puts(out, v->val.boolean ? "true" : "false");
			break;
		case jbvNull:
			cs_buf_puts(out, "null");
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

int
chroma_metadata_render(Jsonb *jb, bool allow_arrays, cs_buf *out, const char *who)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			nkeys = 0;
	char	   *key = NULL;
	int			depth = 0;
	int			array_kind = -1;
	int			array_len = 0;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metadata of %s is not a JSON object", who)));

	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_OBJECT:
				if (depth > 0 &&
					JsonbIteratorNext(&it, &v, false) == WJB_KEY &&
					v.val.string.len == strlen(METADATA_NOT_FINITE) &&
					memcmp(v.val.string.val, METADATA_NOT_FINITE, v.val.string.len) == 0 &&
					JsonbIteratorNext(&it, &v, false) == WJB_VALUE && v.type == jbvString)
					ereport(ERROR,
							(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
							 errmsg("metadata value \"%s\" of %s is not a finite number (%.*s)",
									key, who, v.val.string.len, v.val.string.val),
							 errdetail("Chroma stores finite numbers only.")));
				if (depth > 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata value \"%s\" of %s is a nested object", key, who),
							 errdetail("Chroma metadata values are strings, numbers, booleans%s.",
									   allow_arrays ? " or arrays of one of those" : "")));
				cs_buf_putc(out, '{');
				depth++;
				break;
			case WJB_END_OBJECT:
				cs_buf_putc(out, '}');
				depth--;
				break;
			case WJB_KEY:
				key = pnstrdup(v.val.string.val, v.val.string.len);
				chroma_metadata_check_key(v.val.string.val, v.val.string.len, who);
				if (nkeys > 0)
					cs_buf_putc(out, ',');
				chroma_json_server_string(out, v.val.string.val, v.val.string.len);
				cs_buf_putc(out, ':');
				nkeys++;
				break;
			case WJB_VALUE:
				render_scalar(out, &v, key, who);
				break;
			case WJB_BEGIN_ARRAY:
				if (depth > 1)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata value \"%s\" of %s is a nested array", key, who)));
				if (!allow_arrays)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("metadata value \"%s\" of %s is an array", key, who),
							 errdetail("This Chroma server does not accept array metadata values.")));
				cs_buf_putc(out, '[');
				depth++;
				array_kind = -1;
				array_len = 0;
				break;
			case WJB_ELEM:
				if (v.type == jbvNull)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata array \"%s\" of %s contains null", key, who)));
				if (array_kind >= 0 && value_kind(&v) != array_kind)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata array \"%s\" of %s mixes value types", key, who),
							 errdetail("Found a %s after values of another type; Chroma arrays hold one type.",
									   jbv_type_name(v.type))));
				array_kind = value_kind(&v);
				if (array_len++ > 0)
					cs_buf_putc(out, ',');
				render_scalar(out, &v, key, who);
				break;
			case WJB_END_ARRAY:
				if (array_len == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata array \"%s\" of %s is empty", key, who)));
				cs_buf_putc(out, ']');
				depth--;
				break;
			default:
				break;
		}
	}
	return nkeys;
}

List *
chroma_metadata_keys(Jsonb *jb)
{
	List	   *keys = NIL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (jb == NULL || !JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		return NIL;
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_KEY)
			keys = lappend(keys, pnstrdup(v.val.string.val, v.val.string.len));
	return keys;
}

int
chroma_metadata_append_nulls(cs_buf *out, char *const *keys, int nkeys, List *present)
{
	int			added = 0;

	for (int i = 0; i < nkeys; i++)
	{
		bool		found = false;
		ListCell   *lc;

		foreach(lc, present)
			if (strcmp((char *) lfirst(lc), keys[i]) == 0)
				found = true;
		if (found)
			continue;
		out->len--;				/* drop the closing brace */
		if (out->len > 1)
			cs_buf_putc(out, ',');
		chroma_json_server_string(out, keys[i], strlen(keys[i]));
		cs_buf_puts(out, ":null}");
		added++;
	}
	return added;
}
