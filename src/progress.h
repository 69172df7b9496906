/*
 * progress.h — progress of long chroma_upsert_query calls, visible to other sessions
 * (chroma_sync.upsert_progress) and reported by NOTICE every few seconds.
 */
#ifndef CHROMA_SYNC_PROGRESS_H
#define CHROMA_SYNC_PROGRESS_H

#include "datatype/timestamp.h"

typedef struct UpsertProgress
{
	int			slot;			/* -1: no shared slot free (NOTICEs still work) */
	const char *collection;
	int64		rows_sent;
	TimestampTz started_at;
	TimestampTz last_notice_at;
} UpsertProgress;

extern void progress_begin(UpsertProgress *p, const char *collection);
extern void progress_update(UpsertProgress *p, int64 rows_sent);
extern void progress_end(UpsertProgress *p);

#endif							/* CHROMA_SYNC_PROGRESS_H */
