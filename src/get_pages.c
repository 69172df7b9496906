/*
 * get_pages.c — reading a collection's records page by page.
 *
 * Each page is one get with limit and offset. The page size starts at Chroma Cloud's
 * cap and follows the size of the records: a page's response stays near
 * GET_PAGE_TARGET_BYTES, and a response over chroma_sync.max_response_size is asked
 * again one record at a time (a get changes nothing, so asking again is safe).
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "chroma_api.h"
#include "get_pages.h"

void
get_pager_init(GetPager *p, const char *collection_id, const char *fields,
			   int64 offset, int64 limit, const char *action)
{
	memset(p, 0, sizeof(*p));
	p->url = chroma_records_url(collection_id, "get");
	p->fields = pstrdup(fields);
	p->action = action;
	p->offset = offset;
	p->remaining = limit;
	p->page = GET_PAGE_MAX_RECORDS;
	p->ctx = CurrentMemoryContext;
}

/* The next page's size: about GET_PAGE_TARGET_BYTES of records like these. */
static int
next_page_size(size_t bytes, int n)
{
	size_t		per_record = Max(bytes / (size_t) n, 1);
	size_t		fit = GET_PAGE_TARGET_BYTES / per_record;

	return (int) Max(1, Min((size_t) GET_PAGE_MAX_RECORDS, fit));
}

bool
get_pager_next(GetPager *p, ChromaRows *rows)
{
	memset(rows, 0, sizeof(*rows));
	for (;;)
	{
		int			ask;
		char	   *body;
		ChromaResponse resp;
		size_t		bytes;

		if (p->done || p->remaining == 0)
		{
			p->done = true;
			return false;
		}
		ask = p->remaining < 0 ? p->page : (int) Min((int64) p->page, p->remaining);
		body = psprintf("{%s,\"limit\":%d,\"offset\":" INT64_FORMAT "}",
						p->fields, ask, p->offset);
		chroma_call("POST", p->url, body, strlen(body), &resp);
		pfree(body);
		if (resp.http.too_large && ask > 1)
		{
			/* records this large: one per request, then the size adapts again */
			pfree(resp.http.body.data);
			p->page = 1;
			continue;
		}
		if (resp.http.too_large)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("record " INT64_FORMAT " of the result is too large to read", p->offset + 1),
					 errdetail("Chroma's response for this one record is larger than chroma_sync.max_response_size (%d kB).",
							   chroma_max_response_kb),
					 errhint("Leave its embedding out (include_embeddings => false), or have a superuser raise chroma_sync.max_response_size.")));
		if (resp.kind != CHROMA_OK)
			chroma_raise(&resp, p->action);
		bytes = resp.http.body.len;
		chroma_parse_rows(&resp.http.body, false, rows);
		pfree(resp.http.body.data);

		if (rows->n > ask)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_JSON_TEXT),
					 errmsg("unexpected response from Chroma"),
					 errdetail("A get asked for %d records and received %d.", ask, rows->n)));
		if (rows->n > 0 && p->first_id != NULL && strcmp(rows->ids[0], p->first_id) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("Chroma sent the same page of records twice while trying to %s", p->action),
					 errdetail("The page at offset " INT64_FORMAT " begins with the same record as the page before: the server ignores offset, and the read would never end.",
							   p->offset)));
		if (p->first_id)
			pfree(p->first_id);
		p->first_id = rows->n > 0 ? MemoryContextStrdup(p->ctx, rows->ids[0]) : NULL;

		p->offset += rows->n;
		if (p->remaining > 0)
			p->remaining -= rows->n;
		if (rows->n < ask)
			p->done = true;		/* a short page is the last one */
		else
			p->page = next_page_size(bytes, rows->n);
		return rows->n > 0;
	}
}
