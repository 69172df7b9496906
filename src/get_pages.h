/*
 * get_pages.h — reading a collection's records page by page (Chroma's get with limit
 * and offset), so no response holds more than a bounded number of records.
 */
#ifndef CHROMA_SYNC_GET_PAGES_H
#define CHROMA_SYNC_GET_PAGES_H

#include "utils/palloc.h"

#include "response.h"

/* Chroma Cloud returns at most 300 records per get. */
#define GET_PAGE_MAX_RECORDS 300
/* Pages shrink so that a response stays near this size whatever the records weigh. */
#define GET_PAGE_TARGET_BYTES (8 * 1024 * 1024)

typedef struct GetPager
{
	char	   *url;			/* {collection}/get */
	char	   *fields;			/* the body's fields other than limit and offset */
	const char *action;			/* for messages: "get records" */
	int64		offset;			/* of the next page */
	int64		remaining;		/* records still wanted; -1: all */
	int			page;			/* records asked for per page */
	char	   *first_id;		/* the previous page's first id (a server ignoring offset) */
	bool		done;
	MemoryContext ctx;			/* where first_id lives: outlives the caller's pages */
} GetPager;

/*
 * fields: JSON members without braces, e.g. "\"include\":[\"metadatas\"],\"ids\":[..]";
 * limit < 0: every matching record. Allocates in the current memory context.
 */
extern void get_pager_init(GetPager *p, const char *collection_id, const char *fields,
						   int64 offset, int64 limit, const char *action);

/*
 * Fetches the next page into *rows (allocated in the current memory context, which
 * the caller may reset between pages); false when there is none.
 */
extern bool get_pager_next(GetPager *p, ChromaRows *rows);

#endif							/* CHROMA_SYNC_GET_PAGES_H */
