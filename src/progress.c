/*
 * progress.c — progress of long chroma_upsert_query calls.
 *
 * Each call holds a slot in shared memory while it runs (released at the end, or when
 * its transaction aborts); chroma_sync.upsert_progress lists them. A NOTICE reports the
 * rows sent and the rate every PROGRESS_NOTICE_MS.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "progress.h"
#include "shared.h"

#define PROGRESS_NOTICE_MS 60000

PG_FUNCTION_INFO_V1(chroma_sync_upsert_progress);

static bool callback_registered = false;

static void
release_my_slots(void)
{
	if (chroma_shared == NULL)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
		if (chroma_shared->progress_slots[i].pid == MyProcPid)
			chroma_shared->progress_slots[i].pid = 0;
	LWLockRelease(chroma_shared->lock);
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		release_my_slots();
}

void
progress_begin(UpsertProgress *p, const char *collection)
{
	p->slot = -1;
	p->collection = collection;
	p->rows_sent = 0;
	p->started_at = p->last_notice_at = GetCurrentTimestamp();
	if (chroma_shared == NULL)
		return;
	if (!callback_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		callback_registered = true;
	}
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
	{
		ProgressSlot *s = &chroma_shared->progress_slots[i];

		if (s->pid == 0)
		{
			s->pid = MyProcPid;
			s->dboid = MyDatabaseId;
			strlcpy(s->collection, collection, sizeof(s->collection));
			s->rows_sent = 0;
			s->started_at = p->started_at;
			p->slot = i;
			break;
		}
	}
	LWLockRelease(chroma_shared->lock);
}

static double
rate(int64 rows, TimestampTz since, TimestampTz now)
{
	double		secs = (double) (now - since) / 1000000.0;

	return secs > 0 ? rows / secs : 0;
}

void
progress_update(UpsertProgress *p, int64 rows_sent)
{
	TimestampTz now = GetCurrentTimestamp();

	p->rows_sent = rows_sent;
	if (p->slot >= 0)
		chroma_shared->progress_slots[p->slot].rows_sent = rows_sent;	/* one writer */
	if (TimestampDifferenceExceeds(p->last_notice_at, now, PROGRESS_NOTICE_MS))
	{
		p->last_notice_at = now;
		ereport(NOTICE,
				(errmsg("chroma_upsert_query: " INT64_FORMAT " rows sent to \"%s\" (%.0f rows/s)",
						rows_sent, p->collection, rate(rows_sent, p->started_at, now))));
	}
}

void
progress_end(UpsertProgress *p)
{
	if (p->slot < 0 || chroma_shared == NULL)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	if (chroma_shared->progress_slots[p->slot].pid == MyProcPid)
		chroma_shared->progress_slots[p->slot].pid = 0;
	LWLockRelease(chroma_shared->lock);
	p->slot = -1;
}

Datum
chroma_sync_upsert_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ProgressSlot copy[CHROMA_MAX_PROGRESS];
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	if (chroma_shared == NULL)
		return (Datum) 0;
	LWLockAcquire(chroma_shared->lock, LW_SHARED);
	memcpy(copy, chroma_shared->progress_slots, sizeof(copy));
	LWLockRelease(chroma_shared->lock);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		if (copy[i].pid == 0 || copy[i].dboid != MyDatabaseId)
			continue;
		values[0] = Int32GetDatum(copy[i].pid);
		values[1] = CStringGetTextDatum(copy[i].collection);
		values[2] = Int64GetDatum(copy[i].rows_sent);
		values[3] = Float8GetDatum(rate(copy[i].rows_sent, copy[i].started_at, now));
		values[4] = TimestampTzGetDatum(copy[i].started_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
