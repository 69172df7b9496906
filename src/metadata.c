/*
 * metadata.c — Chroma metadata from jsonb: validation and rendering as UTF-8 JSON.
 *
 * Chroma accepts string, int64, float64 and bool values (newer servers also homogeneous
 * arrays of those); nested objects, empty keys, '#'/'$'-prefixed keys and the reserved
 * "chroma:" prefix are refused. Everything is checked here, before anything is sent.
 */
#include "postgres.h"

#include <math.h>

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
 * A whole number beyond int64 (such as a float8 column's 1e+300, which jsonb keeps as
 * digits) goes out as a float when its significant digits fit a double exactly as a
 * decimal (at most 15); NULL when it would be rounded.
 */
static char *
whole_number_as_float(const char *txt)
{
	const char *p = txt;
	bool		neg = (*p == '-');
	int			len;
	int			sig;
	double		d;

	if (neg || *p == '+')
		p++;
	len = strlen(p);
	sig = len;
	while (sig > 1 && p[sig - 1] == '0')
		sig--;
	if (sig > 15)
		return NULL;
	d = strtod(txt, NULL);
	if (isinf(d))
		return NULL;
	return psprintf("%s%c%s%.*se%d", neg ? "-" : "", p[0], sig > 1 ? "." : ".0",
					sig - 1, p + 1, len - 1);
}

void
chroma_json_numeric(cs_buf *out, Numeric num, const char *key, const char *who)
{
	char	   *txt;

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
		if (errno == ERANGE || *end != '\0')
		{
			char	   *f = whole_number_as_float(txt);

			if (f == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						 errmsg("metadata value \"%s\" of %s is out of range for a 64-bit integer",
								key, who),
						 errdetail("Chroma stores whole numbers as 64-bit integers, and this one has too many digits for a double precision float.")));
			cs_buf_puts(out, f);
			pfree(txt);
			return;
		}
	}
	else
	{
		double		d = strtod(txt, NULL);

		if (isinf(d))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("metadata value \"%s\" of %s is out of range for a double precision float",
							key, who)));
	}
	cs_buf_puts(out, txt);
	pfree(txt);
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
