/*
 * records_read.c — SQL functions that read records: count and get (query.c searches).
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
#include "read_filters.h"
#include "response.h"

PG_FUNCTION_INFO_V1(chroma_count);
PG_FUNCTION_INFO_V1(chroma_get);

static char *
collection_id_arg(FunctionCallInfo fcinfo)
{
	ChromaCollection coll;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection must not be null")));
	chroma_api_get_collection_id(text_to_cstring(PG_GETARG_TEXT_PP(0)), &coll, false);
	return coll.id;
}

Datum
chroma_count(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(chroma_api_count(collection_id_arg(fcinfo)));
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

/* The get body's members other than limit and offset. */
static char *
get_fields(bool include_embeddings, Jsonb *where, Jsonb *where_document, List *ids,
		   int from, int to)
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
	read_filters_append(&b, where, where_document);
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
			values[3] = metadata_datum(&rows, i, &nulls[3]);
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
	char	   *id;
	/* include_embeddings and where_document came in 0.5: 0.4's definition has five arguments */
	bool		include_embeddings = PG_NARGS() < 6 || PG_ARGISNULL(5) || PG_GETARG_BOOL(5);
	List	   *ids = PG_ARGISNULL(1) ? NIL : read_filter_ids(PG_GETARG_ARRAYTYPE_P(1));
	Jsonb	   *where = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);
	Jsonb	   *where_document = PG_NARGS() < 7 || PG_ARGISNULL(6) ? NULL : PG_GETARG_JSONB_P(6);
	int64		limit = nonnegative_arg(fcinfo, 3, "limit", -1);
	int64		offset = nonnegative_arg(fcinfo, 4, "offset", 0);
	GetPager	pager;
	MemoryContext page_ctx;

	if (where != NULL)
		read_filter_check_where(where);
	if (where_document != NULL)
		read_filter_check_document(where_document, false);
	id = collection_id_arg(fcinfo);
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

			get_pager_init(&pager, id, get_fields(include_embeddings, where, where_document, ids, from, to),
						   0, -1, "get records");
			put_pages(rsinfo, &pager, page_ctx);
		}
	}
	else
	{
		get_pager_init(&pager, id,
					   get_fields(include_embeddings, where, where_document, ids, 0,
								  list_length(ids)),
					   offset, limit, "get records");
		put_pages(rsinfo, &pager, page_ctx);
	}
	MemoryContextDelete(page_ctx);
	return (Datum) 0;
}
