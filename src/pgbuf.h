/*
 * pgbuf.h — the encoder's cs_buf backed by palloc memory of the current context.
 */
#ifndef CHROMA_SYNC_PGBUF_H
#define CHROMA_SYNC_PGBUF_H

#include "postgres.h"
#include "utils/memutils.h"

#include "encode.h"

static void
pgbuf_grow(cs_buf *b, size_t need)
{
	size_t		cap = b->cap ? b->cap : 1024;

	while (cap < b->len + need + 1)
		cap *= 2;
	if (cap >= MaxAllocHugeSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("request body too large")));
	b->data = b->data ? repalloc_huge(b->data, cap)
		: MemoryContextAllocHuge(CurrentMemoryContext, cap);
	b->cap = cap;
}

static inline void
pgbuf_init(cs_buf *b, size_t initial)
{
	b->len = 0;
	b->cap = 0;
	b->data = NULL;
	b->grow = pgbuf_grow;
	b->ctx = NULL;
	pgbuf_grow(b, initial);
	b->data[0] = '\0';
}

/* NUL-terminates the buffer (cs_buf_reserve always keeps one spare byte). */
static inline char *
pgbuf_cstring(cs_buf *b)
{
	b->data[b->len] = '\0';
	return b->data;
}

#endif							/* CHROMA_SYNC_PGBUF_H */
