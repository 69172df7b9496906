/*
 * records_delete.c — chroma_delete_where: deletes the records that match a metadata
 * filter ("where") and/or a document filter (where_document), and says how many.
 *
 * Servers that answer a delete with {"deleted": N} (announced in their OpenAPI document)
 * are sent the filter itself with a limit, again until a request deletes fewer than the
 * limit: each request is bounded, and the counts add up. Other servers delete by filter
 * without saying how many: there the matching ids are read first (a get with no fields,
 * in pages, kept in a tuplestore that spills to disk), then deleted by id in batches of
 * chroma_sync.batch_size capped by the server's max_batch_size.
 */
#include "postgres.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "chroma_api.h"
#include "get_pages.h"
#include "pg_compat.h"
#include "pgbuf.h"
#include "read_filters.h"
#include "records.h"
#include "response.h"

PG_FUNCTION_INFO_V1(chroma_delete_where);

/* A jsonb argument; NULL when SQL NULL or {} (Chroma reads {} as no filter at all). */
static Jsonb *
filter_arg(FunctionCallInfo fcinfo, int argno)
{
	Jsonb	   *jb;

	if (PG_ARGISNULL(argno))
		return NULL;
	jb = PG_GETARG_JSONB_P(argno);
	if (JB_ROOT_IS_OBJECT(jb) && !JB_ROOT_IS_SCALAR(jb) && JB_ROOT_COUNT(jb) == 0)
		return NULL;
	return jb;
}

/* Where the server counts: the filter with a limit, until a request deletes fewer. */
static int64
delete_by_filter(const char *collection, const char *collection_id, const char *filters)
{
	char	   *url = chroma_records_url(collection_id, "delete");
	int			limit = chroma_effective_batch_size();
	int64		total = 0;

	for (;;)
	{
		char	   *body = psprintf("{\"limit\":%d%s}", limit, filters);
		char	   *action = psprintf("delete records of collection \"%s\" by filter (" INT64_FORMAT " records were deleted before this request)",
									  collection, total);
		ChromaResponse resp;
		Jsonb	   *jb;
		JsonbValue *v;
		int64		n;

		chroma_call_or_raise("POST", url, body, strlen(body), &resp, action);
		jb = chroma_parse_body(&resp, action);
		v = JB_ROOT_IS_OBJECT(jb) ? chroma_jsonb_get(jb, "deleted") : NULL;
		if (v == NULL || v->type != jbvNumeric ||
			(n = DatumGetInt64(DirectFunctionCall1(numeric_int8,
												   NumericGetDatum(v->val.numeric)))) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_JSON_TEXT),
					 errmsg("unexpected response from Chroma while trying to %s", action),
					 errdetail("The response has no \"deleted\" count: " INT64_FORMAT " records were deleted before it.",
							   total)));
		total += n;
		pfree(body);
		pfree(action);
		if (n < limit)
			return total;
		CHECK_FOR_INTERRUPTS();
	}
}

/* Where the server does not count: the matching ids first, then a delete by ids. */
static int64
delete_by_ids(const char *collection, const char *collection_id, const char *filters)
{
	TupleDesc	td = CreateTemplateTupleDesc(1);
	Tuplestorestate *ids;
	TupleTableSlot *slot;
	GetPager	pager;
	ChromaRows	rows;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext page_ctx = AllocSetContextCreate(caller, "chroma_sync delete page",
												   ALLOCSET_DEFAULT_SIZES);
	RecordSender sender;
	int64		pos = 0;
	bool		more = true;

	TupleDescInitEntry(td, 1, "id", TEXTOID, -1, 0);
	chroma_tupdesc_finalize(td);
	ids = tuplestore_begin_heap(false, false, work_mem);
	get_pager_init(&pager, collection_id, psprintf("\"include\":[]%s", filters), 0, -1,
				   psprintf("read the ids of the records of collection \"%s\" to delete",
							collection));
	MemoryContextSwitchTo(page_ctx);
	while (get_pager_next(&pager, &rows))
	{
		for (int i = 0; i < rows.n; i++)
		{
			Datum		value = CStringGetTextDatum(rows.ids[i]);
			bool		isnull = false;

			tuplestore_putvalues(ids, td, &value, &isnull);
		}
		MemoryContextReset(page_ctx);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(caller);

	record_sender_init(&sender, collection, "delete");
	slot = MakeSingleTupleTableSlot(td, &TTSOpsMinimalTuple);
	while (more)
	{
		RecordSet	rs;

		/* the request in flight holds its own body (the sender's): rs may go */
		MemoryContextReset(page_ctx);
		MemoryContextSwitchTo(page_ctx);
		record_set_init(&rs, sender.batch_size);
		while (rs.n < sender.batch_size)
		{
			bool		isnull;
			char	   *id;

			/* a tuple read back from disk is the slot's to free: not in page_ctx */
			MemoryContextSwitchTo(caller);
			more = tuplestore_gettupleslot(ids, true, false, slot);
			MemoryContextSwitchTo(page_ctx);
			if (!more)
				break;
			/* a copy: the slot's tuple goes with the next read, and rs keeps the id */
			id = TextDatumGetCString(slot_getattr(slot, 1, &isnull));
			record_set_add(&rs, id, strlen(id), ++pos);
		}
		record_set_dedupe(&rs);
		record_sender_send(&sender, &rs);
		MemoryContextSwitchTo(caller);
		CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	tuplestore_end(ids);
	return (int64) record_sender_finish(&sender);
}

Datum
chroma_delete_where(PG_FUNCTION_ARGS)
{
	char	   *collection;
	Jsonb	   *where = filter_arg(fcinfo, 1);
	Jsonb	   *where_document = filter_arg(fcinfo, 2);
	ChromaCollection coll;
	cs_buf		filters;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection must not be null")));
	collection = text_to_cstring(PG_GETARG_TEXT_PP(0));
	chroma_check_collection_name(collection);
	if (where != NULL)
		read_filter_check_where_for_delete(where);
	if (where_document != NULL)
		read_filter_check_document(where_document, true);
	if (where == NULL && where_document == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chroma_delete_where needs a filter: \"where\" or where_document"),
				 errdetail("Both are null or empty; a delete without a filter would remove every record."),
				 errhint("To remove every record, drop the collection (chroma_delete_collection) or delete its ids (chroma_delete).")));

	pgbuf_init(&filters, 256);
	/* both checked above: JSON objects, each NULL when empty */
	read_filters_append(&filters, where, where_document);
	(void) pgbuf_cstring(&filters);

	chroma_api_get_collection_id(collection, &coll, false);
	if (chroma_server(false)->supports_delete_count)
		PG_RETURN_INT64(delete_by_filter(collection, coll.id, filters.data));
	PG_RETURN_INT64(delete_by_ids(collection, coll.id, filters.data));
}
