/*
 * records_read.c — SQL functions that read records: count, get and query.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "get_pages.h"
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

static int
cmp_json_ids(const void *a, const void *b, void *arg)
{
	char	  **json = (char **) arg;
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;
	int			c = strcmp(json[ia], json[ib]);

	if (c != 0)
		return c;
	return ia < ib ? -1 : (ia > ib ? 1 : 0);
}

static Datum
metadata_datum(const char *txt, bool *isnull)
{
	*isnull = (txt == NULL);
	if (txt == NULL)
		return (Datum) 0;
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(txt));
}

/* ids as UTF-8 JSON strings, each id once (its first occurrence), in the caller's order. */
static List *
get_ids(ArrayType *ids)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	char	  **json;
	int		   *order;
	List	   *out = NIL;

	if (ARR_NDIM(ids) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("ids must be a one-dimensional array")));
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	json = palloc_array(char *, Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		text	   *t;
		char	   *u;
		cs_buf		b;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("id %d is null", i + 1)));
		t = DatumGetTextPP(elems[i]);
		u = pg_server_to_any(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), PG_UTF8);
		pgbuf_init(&b, 32);
		cs_json_string(&b, u, u == VARDATA_ANY(t) ? VARSIZE_ANY_EXHDR(t) : strlen(u));
		json[i] = pgbuf_cstring(&b);
	}
	/* a repeated id would come back once per chunk that names it */
	order = palloc_array(int, Max(n, 1));
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), cmp_json_ids, json);
	for (int k = 1, first = order[0]; k < n; k++)
	{
		/* ties sort by position: the first occurrence stays */
		if (strcmp(json[order[k]], json[first]) == 0)
			json[order[k]] = NULL;
		else
			first = order[k];
	}
	for (int i = 0; i < n; i++)
		if (json[i] != NULL)
			out = lappend(out, json[i]);
	return out;
}

/* The get body's members other than limit and offset. */
static char *
get_fields(bool include_embeddings, Jsonb *where, List *ids, int from, int to)
{
	cs_buf		b;

	pgbuf_init(&b, 256);
	cs_buf_puts(&b, include_embeddings
				? "\"include\":[\"embeddings\",\"documents\",\"metadatas\"]"
				: "\"include\":[\"documents\",\"metadatas\"]");
	if (ids != NIL)
	{
		cs_buf_puts(&b, ",\"ids\":[");
		for (int i = from; i < to; i++)
		{
			if (i > from)
				cs_buf_putc(&b, ',');
			cs_buf_puts(&b, (char *) list_nth(ids, i));
		}
		cs_buf_putc(&b, ']');
	}
	if (where != NULL && JB_ROOT_COUNT(where) > 0)	/* Chroma refuses {}: it means no filter */
		append_jsonb_field(&b, "where", where);
	return pgbuf_cstring(&b);
}

static int64
nonnegative_arg(FunctionCallInfo fcinfo, int argno, const char *name, int64 if_null)
{
	int32		v;

	if (PG_ARGISNULL(argno))
		return if_null;
	v = PG_GETARG_INT32(argno);
	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", name)));
	return v;
}

/* Every page of pager into the result; page_ctx is reset after each. */
static void
put_pages(ReturnSetInfo *rsinfo, GetPager *pager, MemoryContext page_ctx)
{
	ChromaRows	rows;
	MemoryContext old = MemoryContextSwitchTo(page_ctx);

	while (get_pager_next(pager, &rows))
	{
		for (int i = 0; i < rows.n; i++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			values[0] = CStringGetTextDatum(rows.ids[i]);
			if (rows.has_embeddings && rows.embeddings[i])
				values[1] = PointerGetDatum(chroma_rows_embedding(&rows, i));
			else
				nulls[1] = true;
			if (rows.has_documents && rows.documents[i])
				values[2] = CStringGetTextDatum(rows.documents[i]);
			else
				nulls[2] = true;
			values[3] = metadata_datum(rows.has_metadatas ? rows.metadatas[i] : NULL, &nulls[3]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		MemoryContextReset(page_ctx);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(old);
}

/*
 * Pages of at most GET_PAGE_MAX_RECORDS records go into the result one at a time (the
 * tuplestore spills to disk past work_mem), so memory stays bounded whatever the
 * collection holds. ids without limit and offset are asked GET_PAGE_MAX_RECORDS at a
 * time (a page by offset would send every id again with each page).
 */
Datum
chroma_get(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *id = collection_id_arg(fcinfo);
	/* include_embeddings came in 0.5: the 0.4 definition has five arguments */
	bool		include_embeddings = PG_NARGS() < 6 || PG_ARGISNULL(5) || PG_GETARG_BOOL(5);
	List	   *ids = PG_ARGISNULL(1) ? NIL : get_ids(PG_GETARG_ARRAYTYPE_P(1));
	Jsonb	   *where = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);
	int64		limit = nonnegative_arg(fcinfo, 3, "limit", -1);
	int64		offset = nonnegative_arg(fcinfo, 4, "offset", 0);
	GetPager	pager;
	MemoryContext page_ctx;

	if (where != NULL)
		check_where(where);
	InitMaterializedSRF(fcinfo, 0);
	if (!PG_ARGISNULL(1) && ids == NIL)
		return (Datum) 0;		/* an empty ids array matches nothing */
	page_ctx = AllocSetContextCreate(CurrentMemoryContext, "chroma_get page",
									 ALLOCSET_DEFAULT_SIZES);
	if (ids != NIL && PG_ARGISNULL(3) && PG_ARGISNULL(4))
	{
		int			n = list_length(ids);

		for (int from = 0; from < n; from += GET_PAGE_MAX_RECORDS)
		{
			int			to = Min(n, from + GET_PAGE_MAX_RECORDS);

			get_pager_init(&pager, id, get_fields(include_embeddings, where, ids, from, to),
						   0, -1, "get records");
			put_pages(rsinfo, &pager, page_ctx);
		}
	}
	else
	{
		get_pager_init(&pager, id,
					   get_fields(include_embeddings, where, ids, 0, list_length(ids)),
					   offset, limit, "get records");
		put_pages(rsinfo, &pager, page_ctx);
	}
	MemoryContextDelete(page_ctx);
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
