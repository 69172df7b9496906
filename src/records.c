/*
 * records.c — SQL functions that write records: upsert, add, update, delete and
 * upsert_query. They act at once, in the caller's session, and are not transactional.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/portal.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "progress.h"
#include "records.h"

PG_FUNCTION_INFO_V1(chroma_upsert);
PG_FUNCTION_INFO_V1(chroma_add);
PG_FUNCTION_INFO_V1(chroma_update);
PG_FUNCTION_INFO_V1(chroma_delete);
PG_FUNCTION_INFO_V1(chroma_upsert_query);

static char *
collection_arg(FunctionCallInfo fcinfo)
{
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	chroma_check_collection_name(name);
	return name;
}

/* A 1-D array argument (or empty); raises for more dimensions. */
static int
array_length_1d(ArrayType *a, const char *argname)
{
	if (ARR_NDIM(a) == 0)
		return 0;
	if (ARR_NDIM(a) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	return ARR_DIMS(a)[0];
}

static void
collect_ids(ArrayType *ids, RecordSet *rs)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	(void) array_length_1d(ids, "ids");
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	record_set_init(rs, n);
	for (int i = 0; i < n; i++)
	{
		text	   *t;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("id of record %d is null", i + 1)));
		t = DatumGetTextPP(elems[i]);
		record_set_add(rs, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), i + 1);
	}
}

static void
collect_embeddings(ArrayType *emb, RecordSet *rs)
{
	int			n = rs->n;
	int			rows;
	int			dim;
	const float *data;

	if (ARR_NDIM(emb) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("embeddings is empty")));
	if (ARR_NDIM(emb) == 1)
	{
		if (n != 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("embeddings must be a two-dimensional array with one row per id"),
					 errdetail("A one-dimensional array is accepted only for a single id; %d ids were given.", n)));
		rows = 1;
		dim = ARR_DIMS(emb)[0];
	}
	else if (ARR_NDIM(emb) == 2)
	{
		rows = ARR_DIMS(emb)[0];
		dim = ARR_DIMS(emb)[1];
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("embeddings must be a two-dimensional array, not %d-dimensional",
						ARR_NDIM(emb))));
	if (rows != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("embeddings has %d rows but %d ids were given", rows, n)));
	if (ARR_HASNULL(emb))
	{
		uint8	   *bitmap = ARR_NULLBITMAP(emb);

		for (int i = 0; i < rows * dim; i++)
			if (!(bitmap[i / 8] & (1 << (i % 8))))
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("embedding of %s has a null at position %d",
								record_describe(rs, i / dim), i % dim + 1)));
	}
	data = float4_array_data(emb);
	rs->with_embeddings = true;
	for (int i = 0; i < n; i++)
		record_check_embedding(rs, i, data + (size_t) i * dim, dim);
}

static void
collect_documents(ArrayType *docs, RecordSet *rs)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	(void) array_length_1d(docs, "documents");
	deconstruct_array(docs, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != rs->n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("documents has %d elements but %d ids were given", n, rs->n)));
	rs->with_documents = true;
	for (int i = 0; i < n; i++)
	{
		if (!nulls[i])
		{
			text	   *t = DatumGetTextPP(elems[i]);

			record_set_document(rs, i, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
		}
	}
}

static void
collect_metadatas(ArrayType *metas, RecordSet *rs)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	bool		arrays = chroma_server(false)->supports_metadata_arrays;

	(void) array_length_1d(metas, "metadatas");
	deconstruct_array(metas, JSONBOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != rs->n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("metadatas has %d elements but %d ids were given", n, rs->n)));
	rs->with_metadatas = true;
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			record_set_metadata(rs, i, DatumGetJsonbP(elems[i]), arrays);
}

/* replace came in 0.5 (chroma_upsert only): the 0.4 definitions have no such argument. */
static bool
replace_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_NARGS() > argno && !PG_ARGISNULL(argno) && PG_GETARG_BOOL(argno);
}

static Datum
write_records(FunctionCallInfo fcinfo, const char *op)
{
	char	   *collection = collection_arg(fcinfo);
	bool		replace = strcmp(op, "upsert") == 0 && replace_arg(fcinfo, 5);
	RecordSet	rs;
	RecordSender sender;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ids must not be null")));
	collect_ids(PG_GETARG_ARRAYTYPE_P(1), &rs);

	if (PG_ARGISNULL(2))
	{
		if (strcmp(op, "update") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("embeddings must not be null"),
					 errhint("Only chroma_update can leave embeddings unchanged.")));
	}
	else if (rs.n > 0)
		collect_embeddings(PG_GETARG_ARRAYTYPE_P(2), &rs);
	if (!PG_ARGISNULL(3))
		collect_documents(PG_GETARG_ARRAYTYPE_P(3), &rs);
	if (!PG_ARGISNULL(4))
		collect_metadatas(PG_GETARG_ARRAYTYPE_P(4), &rs);

	record_set_dedupe(&rs);
	if (rs.n == 0)
		PG_RETURN_INT64(0);

	record_sender_init(&sender, collection, op);
	if (replace)
	{
		RecordSender deleter;
		RecordSet	clear;

		record_sender_init(&deleter, collection, "delete");
		record_set_replace(&rs, sender.collection_id, &clear);
		record_sender_send_replacing(&sender, &deleter, &rs, &clear);
	}
	else
		record_sender_send(&sender, &rs);
	PG_RETURN_INT64((int64) record_sender_finish(&sender));
}

Datum
chroma_upsert(PG_FUNCTION_ARGS)
{
	return write_records(fcinfo, "upsert");
}

Datum
chroma_add(PG_FUNCTION_ARGS)
{
	return write_records(fcinfo, "add");
}

Datum
chroma_update(PG_FUNCTION_ARGS)
{
	return write_records(fcinfo, "update");
}

Datum
chroma_delete(PG_FUNCTION_ARGS)
{
	char	   *collection = collection_arg(fcinfo);
	RecordSet	rs;
	RecordSender sender;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ids must not be null")));
	collect_ids(PG_GETARG_ARRAYTYPE_P(1), &rs);
	record_set_dedupe(&rs);
	if (rs.n == 0)
		PG_RETURN_INT64(0);
	record_sender_init(&sender, collection, "delete");
	record_sender_send(&sender, &rs);
	PG_RETURN_INT64((int64) record_sender_finish(&sender));
}

/* ---- chroma_upsert_query ---- */

typedef struct QueryColumns
{
	int			id;
	int			embedding;
	int			document;
	int			metadata;
	Oid			id_type;
	FmgrInfo	id_out;
	Oid			document_type;
	FmgrInfo	document_out;
} QueryColumns;

static void
find_query_columns(TupleDesc td, QueryColumns *qc)
{
	bool		isvarlena;
	Oid			outfn;

	qc->id = SPI_fnumber(td, "id");
	qc->embedding = SPI_fnumber(td, "embedding");
	qc->document = SPI_fnumber(td, "document");
	qc->metadata = SPI_fnumber(td, "metadata");
	if (qc->id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("query has no column named \"id\""),
				 errhint("The query must return columns id and embedding, and may return document and metadata.")));
	if (qc->embedding <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("query has no column named \"embedding\""),
				 errhint("The query must return columns id and embedding, and may return document and metadata.")));
	if (SPI_gettypeid(td, qc->embedding) != FLOAT4ARRAYOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"embedding\" of the query is of type %s, not real[]",
						format_type_be(SPI_gettypeid(td, qc->embedding))),
				 errhint("Cast it in the query: embedding::real[].")));
	if (qc->metadata > 0 && SPI_gettypeid(td, qc->metadata) != JSONBOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"metadata\" of the query is of type %s, not jsonb",
						format_type_be(SPI_gettypeid(td, qc->metadata)))));
	qc->id_type = SPI_gettypeid(td, qc->id);
	getTypeOutputInfo(qc->id_type, &outfn, &isvarlena);
	fmgr_info(outfn, &qc->id_out);
	if (qc->document > 0)
	{
		qc->document_type = SPI_gettypeid(td, qc->document);
		getTypeOutputInfo(qc->document_type, &outfn, &isvarlena);
		fmgr_info(outfn, &qc->document_out);
	}
}

/* Converts one fetched batch of rows into a record set (in the current context). */
static void
rows_to_records(SPITupleTable *tt, uint64 nrows, int64 first_pos, QueryColumns *qc,
				bool arrays, RecordSet *rs)
{
	TupleDesc	td = tt->tupdesc;

	record_set_init(rs, (int) nrows);
	rs->with_embeddings = true;
	rs->with_documents = qc->document > 0;
	rs->with_metadatas = qc->metadata > 0;
	for (uint64 r = 0; r < nrows; r++)
	{
		HeapTuple	tup = tt->vals[r];
		bool		isnull;
		Datum		d;
		char	   *id;
		ArrayType  *emb;
		int			i = rs->n;

		chroma_http_progress();

		d = SPI_getbinval(tup, td, qc->id, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("id of record %lld is null", (long long) (first_pos + r))));
		id = OutputFunctionCall(&qc->id_out, d);
		record_set_add(rs, id, strlen(id), first_pos + r);

		d = SPI_getbinval(tup, td, qc->embedding, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("embedding of %s is null", record_describe(rs, i))));
		emb = DatumGetArrayTypeP(d);
		if (ARR_NDIM(emb) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("embedding of %s is not a one-dimensional array",
							record_describe(rs, i))));
		if (ARR_HASNULL(emb))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("embedding of %s contains a null", record_describe(rs, i))));
		record_check_embedding(rs, i, float4_array_data(emb),
							   ARR_NDIM(emb) == 0 ? 0 : ARR_DIMS(emb)[0]);

		if (qc->document > 0)
		{
			d = SPI_getbinval(tup, td, qc->document, &isnull);
			if (!isnull)
			{
				char	   *doc = OutputFunctionCall(&qc->document_out, d);

				record_set_document(rs, i, doc, strlen(doc));
			}
		}
		if (qc->metadata > 0)
		{
			d = SPI_getbinval(tup, td, qc->metadata, &isnull);
			if (!isnull)
				record_set_metadata(rs, i, DatumGetJsonbP(d), arrays);
		}
	}
	record_set_dedupe(rs);
}

/*
 * rows_to_records; a bad row's error is raised once the requests in flight have landed,
 * so the batches before it are in Chroma whatever max_concurrent_requests is. Only our
 * own conversion is caught (no query runs in it); a cancel is raised at once.
 */
static void
records_or_settle(SPITupleTable *tt, uint64 nrows, int64 first_pos, QueryColumns *qc,
				  bool arrays, RecordSet *rs, RecordSender *sender)
{
	MemoryContext ctx = CurrentMemoryContext;

	PG_TRY();
	{
		rows_to_records(tt, nrows, first_pos, qc, arrays, rs);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED || ProcDiePending ||
			sender->ninflight == 0)
		{
			FreeErrorData(edata);
			PG_RE_THROW();
		}
		FlushErrorState();
		record_sender_settle(sender);
		ReThrowError(edata);
	}
	PG_END_TRY();
}

Datum
chroma_upsert_query(PG_FUNCTION_ARGS)
{
	char	   *collection = collection_arg(fcinfo);
	char	   *query;
	SPIPlanPtr	plan;
	Portal		portal;
	RecordSender sender;
	QueryColumns qc;
	MemoryContext batch_ctx;
	MemoryContext caller_ctx = CurrentMemoryContext;
	int64		pos = 1;
	bool		arrays;
	int			fetch;
	UpsertProgress progress;
	bool		replace = replace_arg(fcinfo, 2);
	RecordSender deleter;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query must not be null")));
	query = text_to_cstring(PG_GETARG_TEXT_PP(1));

	record_sender_init(&sender, collection, "upsert");
	record_sender_set_concurrency(&sender, chroma_max_concurrent_requests);
	if (replace)
		record_sender_init(&deleter, collection, "delete");
	arrays = chroma_server(false)->supports_metadata_arrays;
	fetch = sender.batch_size;
	batch_ctx = AllocSetContextCreate(caller_ctx, "chroma_sync batch", ALLOCSET_DEFAULT_SIZES);

	SPI_connect();
	plan = SPI_prepare_cursor(query, 0, NULL, CURSOR_OPT_NO_SCROLL);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare query: %s", SPI_result_code_string(SPI_result))));
	if (!SPI_is_cursor_plan(plan))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query does not return rows"),
				 errhint("Pass a SELECT (or another statement that returns rows).")));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	progress_begin(&progress, collection);
	/* Check the columns before the first fetch, so a query with no rows is checked too. */
	find_query_columns(portal->tupDesc, &qc);

	for (;;)
	{
		MemoryContext old;
		RecordSet	rs;
		uint64		nrows;

		SPI_cursor_fetch(portal, true, fetch);
		nrows = SPI_processed;
		if (nrows == 0)
			break;

		/* the sender keeps what its requests in flight need: the batch's records may go */
		MemoryContextReset(batch_ctx);
		old = MemoryContextSwitchTo(batch_ctx);
		records_or_settle(SPI_tuptable, nrows, pos, &qc, arrays, &rs, &sender);
		if (replace)
		{
			RecordSet	clear;

			/* earlier batches may hold the same ids: they land before those are read */
			record_sender_wait_for(&sender, &rs);
			record_set_replace(&rs, sender.collection_id, &clear);
			record_sender_send_replacing(&sender, &deleter, &rs, &clear);
		}
		else
			record_sender_send(&sender, &rs);
		MemoryContextSwitchTo(old);
		SPI_freetuptable(SPI_tuptable);
		pos += nrows;
		progress_update(&progress, (int64) sender.sent);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	SPI_finish();
	{
		int64		sent = (int64) record_sender_finish(&sender);

		progress_end(&progress);
		PG_RETURN_INT64(sent);
	}
}
