/*
 * query.c — SQL functions that search a collection: chroma_query (one query embedding)
 * and chroma_query_batch (many per request, two requests in flight).
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
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
#include "read_filters.h"
#include "response.h"

PG_FUNCTION_INFO_V1(chroma_query);
PG_FUNCTION_INFO_V1(chroma_query_batch);

/* A batch request carries at most about this many bytes of query embeddings. */
#define QUERY_BODY_TARGET_BYTES (8 * 1024 * 1024)
/* From this many queries on, chroma_query_batch makes two requests at least. */
#define QUERY_SPLIT_MIN 64

/* What every request of one call asks, besides its query embeddings. */
typedef struct QuerySpec
{
	char	   *collection_id;
	char	   *url;			/* {collection}/query */
	int			dim;
	int			n_results;
	Jsonb	   *where;
	Jsonb	   *where_document;
	List	   *ids;			/* candidates, as JSON strings; NIL: every record */
} QuerySpec;

static int
n_results_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		k = PG_ARGISNULL(argno) ? 10 : PG_GETARG_INT32(argno);

	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n_results must be at least 1")));
	return k;
}

/* The filters at argno (where) and argno + 1 (where_document), when the function has them. */
static void
filter_args(FunctionCallInfo fcinfo, int argno, QuerySpec *qs)
{
	qs->where = PG_ARGISNULL(argno) ? NULL : PG_GETARG_JSONB_P(argno);
	qs->where_document = PG_NARGS() <= argno + 1 || PG_ARGISNULL(argno + 1)
		? NULL : PG_GETARG_JSONB_P(argno + 1);
	if (qs->where != NULL)
		read_filter_check_where(qs->where);
	if (qs->where_document != NULL)
		read_filter_check_document(qs->where_document, false);
}

/* Looks the collection up (argument 0) and checks that its dimension is the queries'. */
static void
collection_arg(FunctionCallInfo fcinfo, const char *argname, QuerySpec *qs)
{
	ChromaCollection coll;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection must not be null")));
	chroma_api_get_collection_id(text_to_cstring(PG_GETARG_TEXT_PP(0)), &coll, false);
	if (coll.dimension > 0 && coll.dimension != qs->dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s has %d dimensions, but collection \"%s\" has %d",
						argname, qs->dim, coll.name, coll.dimension)));
	qs->collection_id = coll.id;
	qs->url = chroma_records_url(coll.id, "query");
}

/* The body of a query for n embeddings of qs->dim floats each. */
static char *
query_body(const QuerySpec *qs, const float *v, int n, size_t *len)
{
	cs_buf		b;

	pgbuf_init(&b, 256 + (size_t) n * qs->dim * (CS_FLOAT_MAXLEN + 1));
	cs_buf_puts(&b, "{\"query_embeddings\":[");
	for (int q = 0; q < n; q++)
	{
		if (q > 0)
			cs_buf_putc(&b, ',');
		cs_json_float_array(&b, v + (size_t) q * qs->dim, qs->dim);
	}
	cs_buf_puts(&b, psprintf("],\"n_results\":%d", qs->n_results));
	cs_buf_puts(&b, ",\"include\":[\"distances\",\"documents\",\"metadatas\"]");
	if (qs->ids != NIL)
	{
		ListCell   *lc;

		cs_buf_puts(&b, ",\"ids\":[");
		foreach(lc, qs->ids)
		{
			if (lc != list_head(qs->ids))
				cs_buf_putc(&b, ',');
			cs_buf_puts(&b, (char *) lfirst(lc));
		}
		cs_buf_putc(&b, ']');
	}
	read_filters_append(&b, qs->where, qs->where_document);
	cs_buf_putc(&b, '}');
	*len = b.len;
	return pgbuf_cstring(&b);
}

/* The ids of ids that the collection holds, asked GET_PAGE_MAX_RECORDS at a time. */
static List *
existing_ids(const char *collection_id, List *ids)
{
	List	   *out = NIL;
	int			n = list_length(ids);

	for (int from = 0; from < n; from += GET_PAGE_MAX_RECORDS)
	{
		cs_buf		b;
		GetPager	pager;
		ChromaRows	rows;

		pgbuf_init(&b, 256);
		cs_buf_puts(&b, "\"include\":[],\"ids\":[");
		for (int i = from; i < Min(n, from + GET_PAGE_MAX_RECORDS); i++)
		{
			if (i > from)
				cs_buf_putc(&b, ',');
			cs_buf_puts(&b, (char *) list_nth(ids, i));
		}
		cs_buf_putc(&b, ']');
		get_pager_init(&pager, collection_id, pgbuf_cstring(&b), 0, -1, "query records");
		while (get_pager_next(&pager, &rows))
			for (int i = 0; i < rows.n; i++)
				out = lappend(out, read_filter_id_json(rows.ids[i], strlen(rows.ids[i])));
	}
	return out;
}

/* Metadata of record i as a jsonb Datum; *isnull when it has none. */
static Datum
metadata_datum(ChromaRows *rows, int i, bool *isnull)
{
	const char *txt = rows->has_metadatas ? rows->metadatas[i] : NULL;

	*isnull = (txt == NULL);
	if (txt == NULL)
		return (Datum) 0;
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(txt));
}

static void
put_row(ReturnSetInfo *rsinfo, ChromaRows *rows, int i, int query_index, int rank)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int			c = 0;

	if (query_index > 0)
	{
		values[c++] = Int32GetDatum(query_index);
		values[c++] = Int32GetDatum(rank);
	}
	values[c++] = CStringGetTextDatum(rows->ids[i]);
	if (rows->has_distances && !isnan(rows->distances[i]))
		values[c] = Float4GetDatum(rows->distances[i]);
	else
		nulls[c] = true;
	c++;
	if (rows->has_documents && rows->documents[i])
		values[c] = CStringGetTextDatum(rows->documents[i]);
	else
		nulls[c] = true;
	c++;
	values[c] = metadata_datum(rows, i, &nulls[c]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * ids restricts the candidates. Chroma answers HTTP 500 ("Error finding id", 1.0.5 and
 * 1.3.4) when ids names a record it does not hold: ids are then narrowed to the records
 * that exist, and the query is sent once more.
 */
Datum
chroma_query(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *q;
	QuerySpec	qs;
	bool		has_ids;
	char	   *body;
	size_t		len;
	ChromaResponse resp;
	ChromaRows	rows;

	memset(&qs, 0, sizeof(qs));
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
	qs.dim = ARR_DIMS(q)[0];
	if (cs_first_nonfinite(float4_array_data(q), qs.dim) >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query_embedding has a non-finite value at position %d",
						(int) cs_first_nonfinite(float4_array_data(q), qs.dim) + 1)));
	qs.n_results = n_results_arg(fcinfo, 2);
	/* where_document and ids came in 0.5: 0.4's definition has four arguments */
	filter_args(fcinfo, 3, &qs);
	has_ids = PG_NARGS() > 5 && !PG_ARGISNULL(5);
	if (has_ids)
		qs.ids = read_filter_ids(PG_GETARG_ARRAYTYPE_P(5));
	collection_arg(fcinfo, "query_embedding", &qs);

	InitMaterializedSRF(fcinfo, 0);
	if (has_ids && qs.ids == NIL)
		return (Datum) 0;		/* no candidates */

	body = query_body(&qs, float4_array_data(q), 1, &len);
	chroma_call("POST", qs.url, body, len, &resp);
	if (resp.kind == CHROMA_TRANSIENT && resp.http.status == 500 && qs.ids != NIL)
	{
		qs.ids = existing_ids(qs.collection_id, qs.ids);
		if (qs.ids == NIL)
			return (Datum) 0;
		body = query_body(&qs, float4_array_data(q), 1, &len);
		chroma_call("POST", qs.url, body, len, &resp);
	}
	if (resp.kind != CHROMA_OK)
		chroma_raise(&resp, "query records");
	chroma_parse_rows(&resp.http.body, true, &rows);

	for (int i = 0; i < rows.n; i++)
		put_row(rsinfo, &rows, i, 0, 0);
	return (Datum) 0;
}

/* Checks the 2-D query_embeddings argument; returns the number of queries. */
static int
check_query_embeddings(ArrayType *a, int *dim)
{
	int			nq;
	ptrdiff_t	bad;

	if (ARR_NDIM(a) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("query_embeddings must not be empty")));
	if (ARR_NDIM(a) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("query_embeddings must be a two-dimensional array"),
				 errdetail("It has %d dimension%s; each row of a two-dimensional array is one query embedding.",
						   ARR_NDIM(a), ARR_NDIM(a) == 1 ? "" : "s"),
				 ARR_NDIM(a) == 1
				 ? errhint("Write one query embedding as ARRAY[[...]], or use chroma_query.")
				 : errhint("Aggregate the query embeddings with array_agg(embedding) over real[] values.")));
	nq = ARR_DIMS(a)[0];
	*dim = ARR_DIMS(a)[1];
	if (ARR_HASNULL(a))
	{
		uint8	   *bitmap = ARR_NULLBITMAP(a);
		int			k = 0;

		while (bitmap[k / 8] & (1 << (k % 8)))
			k++;
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query_embeddings contains a null"),
				 errdetail("Query embedding %d has a null at position %d.",
						   k / *dim + 1, k % *dim + 1)));
	}
	bad = cs_first_nonfinite(float4_array_data(a), (size_t) nq * *dim);
	if (bad >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query_embeddings has a non-finite value"),
				 errdetail("Query embedding %d has %s at position %d.",
						   (int) (bad / *dim) + 1,
						   isnan(float4_array_data(a)[bad]) ? "NaN" : "an infinity",
						   (int) (bad % *dim) + 1)));
	return nq;
}

/* One request of chroma_query_batch: query embeddings [from, from + n). */
typedef struct QueryFlight
{
	ChromaHttpRequest *req;		/* NULL: none in flight */
	int			from;
	int			n;
	MemoryContext ctx;			/* its body, then its response */
} QueryFlight;

static void
flight_begin(const QuerySpec *qs, const float *v, QueryFlight *f, int from, int n)
{
	MemoryContext old;
	char	   *body;
	size_t		len;

	MemoryContextReset(f->ctx);
	old = MemoryContextSwitchTo(f->ctx);
	body = query_body(qs, v + (size_t) from * qs->dim, n, &len);
	MemoryContextSwitchTo(old);
	f->from = from;
	f->n = n;
	f->req = chroma_http_begin("POST", qs->url, body, len);
}

/* Waits for f's response and drops it. */
static void
flight_discard(QueryFlight *f)
{
	ChromaHttpResult res;
	MemoryContext old = MemoryContextSwitchTo(f->ctx);

	memset(&res, 0, sizeof(res));
	chroma_http_finish(f->req, &res);
	f->req = NULL;
	MemoryContextSwitchTo(old);
	MemoryContextReset(f->ctx);
}

/*
 * Waits for f's response and puts its rows into the result; false when the response is
 * too large and f holds more than one query (to be asked again in smaller requests).
 */
static bool
flight_finish(ReturnSetInfo *rsinfo, QueryFlight *f)
{
	ChromaResponse resp;
	ChromaRows	rows;
	MemoryContext old = MemoryContextSwitchTo(f->ctx);

	memset(&resp, 0, sizeof(resp));
	chroma_http_finish(f->req, &resp.http);
	f->req = NULL;
	chroma_classify(&resp);
	if ((resp.http.too_large || resp.kind == CHROMA_TOO_LARGE) && f->n > 1)
	{
		MemoryContextSwitchTo(old);
		MemoryContextReset(f->ctx);
		return false;
	}
	if (resp.http.too_large)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the results of query embedding %d are too large to read", f->from + 1),
				 errdetail("Chroma's response for this one query is larger than chroma_sync.max_response_size (%d kB).",
						   chroma_max_response_kb),
				 errhint("Ask for fewer results (n_results), or have a superuser raise chroma_sync.max_response_size.")));
	if (resp.kind != CHROMA_OK)
		chroma_raise(&resp, "query records");
	chroma_parse_query_results(&resp.http.body, &rows);
	if (rows.nqueries != f->n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("unexpected response from Chroma"),
				 errdetail("A query of %d embeddings received %d results.", f->n, rows.nqueries)));
	for (int i = 0, rank = 0; i < rows.n; i++)
	{
		rank = (i > 0 && rows.query[i] == rows.query[i - 1]) ? rank + 1 : 1;
		put_row(rsinfo, &rows, i, f->from + rows.query[i] + 1, rank);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(f->ctx);
	return true;
}

/*
 * Query embeddings go out chroma_sync.batch_size at a time (capped by the server's
 * max_batch_size, and so that a body stays near QUERY_BODY_TARGET_BYTES), two requests in
 * flight: the server searches for one while the other is sent or read (a call of
 * QUERY_SPLIT_MIN queries or more makes two requests at least). Results are put in query
 * order. A response over chroma_sync.max_response_size is asked again in halves: a query
 * changes nothing.
 */
Datum
chroma_query_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *a;
	const float *v;
	QuerySpec	qs;
	int			nq;
	int			per_request;
	QueryFlight fl[2];
	int			head = 0;		/* the older request */
	int			next = 0;		/* the first query embedding not sent yet */

	memset(&qs, 0, sizeof(qs));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query_embeddings must not be null")));
	a = PG_GETARG_ARRAYTYPE_P(1);
	nq = check_query_embeddings(a, &qs.dim);
	v = float4_array_data(a);
	qs.n_results = n_results_arg(fcinfo, 2);
	filter_args(fcinfo, 3, &qs);
	collection_arg(fcinfo, "each row of query_embeddings", &qs);

	InitMaterializedSRF(fcinfo, 0);
	per_request = Min(chroma_effective_batch_size(),
					  Max(1, QUERY_BODY_TARGET_BYTES / (qs.dim * (CS_FLOAT_MAXLEN + 1))));
	if (nq >= QUERY_SPLIT_MIN)
		per_request = Min(per_request, (nq + 1) / 2);
	for (int i = 0; i < 2; i++)
	{
		fl[i].req = NULL;
		fl[i].ctx = AllocSetContextCreate(CurrentMemoryContext, "chroma_query_batch request",
										  ALLOCSET_DEFAULT_SIZES);
	}
	for (;;)
	{
		for (int i = 0; i < 2; i++)
		{
			QueryFlight *f = &fl[head ^ i];

			if (f->req == NULL && next < nq)
			{
				int			n = Min(per_request, nq - next);

				flight_begin(&qs, v, f, next, n);
				next += n;
			}
		}
		if (fl[head].req == NULL)
			break;
		if (!flight_finish(rsinfo, &fl[head]))
		{
			/* too large: from this request's first query on, in halves */
			per_request = fl[head].n / 2;
			next = fl[head].from;
			if (fl[head ^ 1].req != NULL)
				flight_discard(&fl[head ^ 1]);
			continue;
		}
		head ^= 1;
		CHECK_FOR_INTERRUPTS();
	}
	for (int i = 0; i < 2; i++)
		MemoryContextDelete(fl[i].ctx);
	return (Datum) 0;
}
