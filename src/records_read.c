/*
 * records_read.c — SQL functions that read records: count, get and query.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "pgbuf.h"
#include "response.h"

PG_FUNCTION_INFO_V1(chroma_count);
PG_FUNCTION_INFO_V1(chroma_get);
PG_FUNCTION_INFO_V1(chroma_query);

static char *
collection_id_arg(FunctionCallInfo fcinfo)
{
	ChromaCollection coll;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection must not be null")));
	chroma_api_get_collection(text_to_cstring(PG_GETARG_TEXT_PP(0)), &coll, false);
	return coll.id;
}

Datum
chroma_count(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(chroma_api_count(collection_id_arg(fcinfo)));
}

/* Appends "key":<jsonb as UTF-8 JSON> */
static void
append_jsonb_field(cs_buf *b, const char *key, Jsonb *jb)
{
	char	   *txt = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	char	   *u = pg_server_to_any(txt, strlen(txt), PG_UTF8);

	cs_buf_putc(b, ',');
	cs_json_string(b, key, strlen(key));
	cs_buf_putc(b, ':');
	cs_buf_puts(b, u);
}

static void
check_where(Jsonb *where)
{
	if (!JB_ROOT_IS_OBJECT(where) || JB_ROOT_IS_SCALAR(where))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"where\" must be a JSON object"),
				 errhint("For example: '{\"lang\": \"en\"}' or '{\"year\": {\"$gte\": 2020}}'.")));
}

static Datum
float_array(const float *v, int n)
{
	Datum	   *d = palloc_array(Datum, Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Float4GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, FLOAT4OID, sizeof(float4), true, TYPALIGN_INT));
}

static Datum
metadata_datum(const char *txt, bool *isnull)
{
	*isnull = (txt == NULL);
	if (txt == NULL)
		return (Datum) 0;
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(txt));
}

Datum
chroma_get(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *id = collection_id_arg(fcinfo);
	cs_buf		b;
	ChromaResponse resp;
	ChromaRows	rows;

	InitMaterializedSRF(fcinfo, 0);

	pgbuf_init(&b, 256);
	cs_buf_puts(&b, "{\"include\":[\"embeddings\",\"documents\",\"metadatas\"]");
	if (!PG_ARGISNULL(1))
	{
		ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(1);
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(ids) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("ids must be a one-dimensional array")));
		deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		cs_buf_puts(&b, ",\"ids\":[");
		for (int i = 0; i < n; i++)
		{
			text	   *t;
			char	   *u;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("id %d is null", i + 1)));
			t = DatumGetTextPP(elems[i]);
			u = pg_server_to_any(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), PG_UTF8);
			if (i > 0)
				cs_buf_putc(&b, ',');
			cs_json_string(&b, u, u == VARDATA_ANY(t) ? VARSIZE_ANY_EXHDR(t) : strlen(u));
		}
		cs_buf_putc(&b, ']');
	}
	if (!PG_ARGISNULL(2))
	{
		Jsonb	   *where = PG_GETARG_JSONB_P(2);

		check_where(where);
		if (JB_ROOT_COUNT(where) > 0)	/* Chroma refuses {}: it means no filter */
			append_jsonb_field(&b, "where", where);
	}
	if (!PG_ARGISNULL(3))
	{
		int32		limit = PG_GETARG_INT32(3);

		if (limit < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("limit must not be negative")));
		cs_buf_puts(&b, psprintf(",\"limit\":%d", limit));
	}
	if (!PG_ARGISNULL(4))
	{
		int32		offset = PG_GETARG_INT32(4);

		if (offset < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("offset must not be negative")));
		cs_buf_puts(&b, psprintf(",\"offset\":%d", offset));
	}
	cs_buf_putc(&b, '}');

	chroma_call_or_raise("POST", chroma_records_url(id, "get"), b.data, b.len, &resp,
						 "get records");
	chroma_parse_rows(&resp.http.body, false, &rows);

	for (int i = 0; i < rows.n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = CStringGetTextDatum(rows.ids[i]);
		if (rows.has_embeddings && rows.embeddings[i])
			values[1] = float_array(rows.embeddings[i], rows.dims[i]);
		else
			nulls[1] = true;
		if (rows.has_documents && rows.documents[i])
			values[2] = CStringGetTextDatum(rows.documents[i]);
		else
			nulls[2] = true;
		values[3] = metadata_datum(rows.has_metadatas ? rows.metadatas[i] : NULL, &nulls[3]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
chroma_query(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *id;
	ArrayType  *q;
	int			dim;
	int32		k;
	cs_buf		b;
	ChromaResponse resp;
	ChromaRows	rows;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query_embedding must not be null")));
	q = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(q) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("query_embedding must be a non-empty one-dimensional array")));
	if (ARR_HASNULL(q))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query_embedding contains a null")));
	dim = ARR_DIMS(q)[0];
	if (cs_first_nonfinite(float4_array_data(q), dim) >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query_embedding has a non-finite value at position %d",
						(int) cs_first_nonfinite(float4_array_data(q), dim) + 1)));
	k = PG_ARGISNULL(2) ? 10 : PG_GETARG_INT32(2);
	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_results must be at least 1")));

	{
		ChromaCollection coll;

		if (PG_ARGISNULL(0))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("collection must not be null")));
		chroma_api_get_collection(text_to_cstring(PG_GETARG_TEXT_PP(0)), &coll, false);
		id = coll.id;
		if (coll.dimension > 0 && coll.dimension != dim)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("query_embedding has %d dimensions, but collection \"%s\" has %d",
							dim, coll.name, coll.dimension)));
	}

	InitMaterializedSRF(fcinfo, 0);

	pgbuf_init(&b, 64 + (size_t) dim * (CS_FLOAT_MAXLEN + 1));
	cs_buf_puts(&b, "{\"query_embeddings\":[");
	cs_json_float_array(&b, float4_array_data(q), dim);
	cs_buf_puts(&b, psprintf("],\"n_results\":%d", k));
	cs_buf_puts(&b, ",\"include\":[\"distances\",\"documents\",\"metadatas\"]");
	if (!PG_ARGISNULL(3))
	{
		Jsonb	   *where = PG_GETARG_JSONB_P(3);

		check_where(where);
		if (JB_ROOT_COUNT(where) > 0)	/* Chroma refuses {}: it means no filter */
			append_jsonb_field(&b, "where", where);
	}
	cs_buf_putc(&b, '}');

	chroma_call_or_raise("POST", chroma_records_url(id, "query"), b.data, b.len, &resp,
						 "query records");
	chroma_parse_rows(&resp.http.body, true, &rows);

	for (int i = 0; i < rows.n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = CStringGetTextDatum(rows.ids[i]);
		if (rows.has_distances && !isnan(rows.distances[i]))
			values[1] = Float4GetDatum(rows.distances[i]);
		else
			nulls[1] = true;
		if (rows.has_documents && rows.documents[i])
			values[2] = CStringGetTextDatum(rows.documents[i]);
		else
			nulls[2] = true;
		values[3] = metadata_datum(rows.has_metadatas ? rows.metadatas[i] : NULL, &nulls[3]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
