/*
 * progress.c — progress of long chroma_upsert_query calls.
 *
 * Each call holds a slot in shared memory while it runs; chroma_sync.upsert_progress
 * lists them. A slot is given back at the end of the call, when its transaction or
 * subtransaction aborts (a failure inside a savepoint), and when the backend exits;
 * a slot whose backend is gone anyway is never listed and is taken over when the slots
 * run out. A NOTICE reports the rows sent and the rate every PROGRESS_NOTICE_MS.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "progress.h"
#include "shared.h"

#define PROGRESS_NOTICE_MS 60000

PG_FUNCTION_INFO_V1(chroma_sync_upsert_progress);

static bool callbacks_registered = false;

/* Transaction nesting level that took each slot this backend holds; 0: not ours. */
static int	my_slot_level[CHROMA_MAX_PROGRESS];

/* Gives back this backend's slots taken at nesting level min_level or deeper. */
static void
release_my_slots(int min_level)
{
	if (chroma_shared == NULL)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
	{
		if (my_slot_level[i] == 0 || my_slot_level[i] < min_level)
			continue;
		if (chroma_shared->progress_slots[i].pid == MyProcPid)
			chroma_shared->progress_slots[i].pid = 0;
		my_slot_level[i] = 0;
	}
	LWLockRelease(chroma_shared->lock);
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		release_my_slots(1);
}

/* ROLLBACK TO SAVEPOINT and exception blocks: the aborted level's slots go back. */
static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		release_my_slots(GetCurrentTransactionNestLevel());
}

static void
progress_exit_callback(int code, Datum arg)
{
	release_my_slots(1);
}

static bool
backend_alive(pid_t pid)
{
	return BackendPidGetProc(pid) != NULL;
}

/* Frees slots whose backend is gone (an exit that ran no callback); caller holds no lock. */
static void
reclaim_dead_slots(void)
{
	pid_t		pids[CHROMA_MAX_PROGRESS];

	LWLockAcquire(chroma_shared->lock, LW_SHARED);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
		pids[i] = chroma_shared->progress_slots[i].pid;
	LWLockRelease(chroma_shared->lock);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
		if (pids[i] != 0 && pids[i] != MyProcPid && backend_alive(pids[i]))
			pids[i] = 0;		/* alive: keep */
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
		if (pids[i] != 0 && pids[i] != MyProcPid &&
			chroma_shared->progress_slots[i].pid == pids[i])
			chroma_shared->progress_slots[i].pid = 0;
	LWLockRelease(chroma_shared->lock);
}

/* Takes a free slot; -1 when none is. */
static int
take_slot(const UpsertProgress *p)
{
	int			slot = -1;

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_PROGRESS; i++)
	{
		ProgressSlot *s = &chroma_shared->progress_slots[i];

		if (s->pid == 0)
		{
			s->pid = MyProcPid;
			s->dboid = MyDatabaseId;
			strlcpy(s->collection, p->collection, sizeof(s->collection));
			s->rows_sent = 0;
			s->started_at = p->started_at;
			my_slot_level[i] = Max(GetCurrentTransactionNestLevel(), 1);
			slot = i;
			break;
		}
	}
	LWLockRelease(chroma_shared->lock);
	return slot;
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
	if (!callbacks_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		RegisterSubXactCallback(progress_subxact_callback, NULL);
		before_shmem_exit(progress_exit_callback, (Datum) 0);
		callbacks_registered = true;
	}
	p->slot = take_slot(p);
	if (p->slot < 0)
	{
		reclaim_dead_slots();
		p->slot = take_slot(p);
	}
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
	my_slot_level[p->slot] = 0;
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

		if (copy[i].pid == 0 || copy[i].dboid != MyDatabaseId || !backend_alive(copy[i].pid))
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
