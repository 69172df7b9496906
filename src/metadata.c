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

MetadataNumber
chroma_metadata_number(Numeric num, double *as_float)
{
	char	   *txt;
	char	   *end;
	double		d;
	MetadataNumber kind;

	if (numeric_is_nan(num) || numeric_is_inf(num))
		return METADATA_NUMBER_NOT_FINITE;
	txt = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	errno = 0;
	if (strchr(txt, '.') == NULL)
	{
		(void) strtoll(txt, &end, 10);
		if (errno != ERANGE && *end == '\0')
		{
			pfree(txt);
			return METADATA_NUMBER_INT;
		}
		/* beyond int64: a float when the float64's shortest decimal is this number */
		errno = 0;
		d = strtod(txt, NULL);
		kind = METADATA_NUMBER_INT_RANGE;
		if (errno != ERANGE && !isinf(d))
		{
			char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];
			Numeric		back;

			double_to_shortest_decimal_buf(d, buf);
			back = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(buf),
													   ObjectIdGetDatum(InvalidOid),
													   Int32GetDatum(-1)));
			if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(num),
												  NumericGetDatum(back))) == 0)
				kind = METADATA_NUMBER_FLOAT;
		}
	}
	else
	{
		/* the nearest float64, as float8in (the cast ::float8) rounds and refuses */
		d = strtod(txt, NULL);
		if (errno == ERANGE && (d == 0.0 || isinf(d)))
			kind = METADATA_NUMBER_FLOAT_RANGE;
		else
			kind = METADATA_NUMBER_FLOAT;
	}
	pfree(txt);
	if (kind == METADATA_NUMBER_FLOAT && as_float != NULL)
		*as_float = d;
	return kind;
}

void
chroma_json_numeric(cs_buf *out, Numeric num, const char *key, const char *who)
{
	double		d = 0;
	char		buf[DOUBLE_SHORTEST_DECIMAL_LEN + 2];
	int			len;

	switch (chroma_metadata_number(num, &d))
	{
		case METADATA_NUMBER_INT:
			{
				char	   *txt = DatumGetCString(DirectFunctionCall1(numeric_out,
																	  NumericGetDatum(num)));

				cs_buf_puts(out, txt);
				pfree(txt);
				return;
			}
		case METADATA_NUMBER_FLOAT:
			break;
		case METADATA_NUMBER_NOT_FINITE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is not a finite number", key, who)));
			break;
		case METADATA_NUMBER_INT_RANGE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is out of range for a 64-bit integer",
							key, who),
					 errdetail("Chroma stores whole numbers as 64-bit integers, and this one has too many digits for a double precision float.")));
			break;
		case METADATA_NUMBER_FLOAT_RANGE:
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is out of range for a double precision float",
							key, who)));
			break;
	}
	/* the shortest decimal that reads back as d, always with a fraction or an exponent */
	len = double_to_shortest_decimal_buf(d, buf);
	if (strpbrk(buf, ".e") == NULL)
		strcpy(buf + len, ".0");
	cs_buf_puts(out, buf);
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

/*
 * Kind for array homogeneity: ints and floats (as sent) are different Chroma types; -1
 * for a number that is refused (rendering it says why).
 */
static int
value_kind(JsonbValue *v)
{
	if (v->type == jbvNumeric)
		switch (chroma_metadata_number(v->val.numeric, NULL))
		{
			case METADATA_NUMBER_INT:
				return 10;
			case METADATA_NUMBER_FLOAT:
				return 11;
			default:
				return -1;
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
	int			kind;

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
				kind = value_kind(&v);
				if (array_kind >= 0 && kind >= 0 && kind != array_kind)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metadata array \"%s\" of %s mixes value types", key, who),
							 errdetail("Found a %s after values of another type; Chroma arrays hold one type.",
									   jbv_type_name(v.type))));
				if (kind >= 0)
					array_kind = kind;
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
