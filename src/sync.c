/*
 * sync.c — the worker's work on one mirror.
 *
 * A step reads a batch in one short transaction (queue entries by queue id, then the
 * CURRENT rows of their keys with the mirror owner's rights), commits, sends the
 * requests with no transaction open, and in a fresh transaction deletes exactly the
 * entries it read, records failures and progress. A refused batch is bisected so only
 * the bad rows go to chroma_sync.failed; a batch that may or may not have been applied
 * (timeout, connection lost) stays queued, and its keys are queued again after the next
 * success so a late-applied stale request cannot win.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "utils/resowner.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "collection_config.h"
#include "metadata.h"
#include "mirror_columns.h"
#include "pgbuf.h"
#include "response.h"
#include "shared.h"
#include "partition.h"
#include "sync.h"
#include "sync_batch.h"
#include "ownership.h"

int			chroma_test_stall_ms = 0;
int			chroma_retry_max_delay_ms = 60000;
int			chroma_max_records_per_second = 0;


/* ---- errors and backoff ---- */

static void
record_error(MirrorConfig *m, const char *msg, bool pause)
{
	Oid			types[3] = {INT4OID, TEXTOID, BOOLOID};
	Datum		values[3] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(msg), BoolGetDatum(pause)};

	sync_begin_txn();
	sync_exec("UPDATE chroma_sync.mirror SET in_error = true, last_error = $2, "
		 "last_error_at = pg_catalog.now(), paused = paused OR $3, "
		 "paused_reason = CASE WHEN $3 THEN $2 ELSE paused_reason END WHERE mirror_id = $1",
		 3, types, values, NULL, SPI_OK_UPDATE);
	sync_end_txn();
	/* for the rest of the worker's pass too (a lent step looks at it) */
	if (pause)
		m->paused = true;
}

/*
 * The next attempt after a failure: capped exponential backoff with jitter, and never
 * before the server's Retry-After (retry_after_s; 0: none), even beyond
 * chroma_sync.retry_max_delay (the server's word on its own load wins; at most
 * CHROMA_RETRY_AFTER_MAX_S).
 */
static void
back_off(MirrorState *st, TimestampTz *wake_at, long retry_after_s)
{
	long		delay = 250L << Min(st->failures, 10);

	st->failures++;
	if (delay > chroma_retry_max_delay_ms)
		delay = chroma_retry_max_delay_ms;
	/* jitter: 50% to 100% of the delay */
	delay = delay / 2 + (long) (random() % (delay / 2 + 1));
	if (retry_after_s > 0 && delay < retry_after_s * 1000L)
		delay = retry_after_s * 1000L;
	st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay);
	if (*wake_at == 0 || st->next_attempt < *wake_at)
		*wake_at = st->next_attempt;
}

static void
stall_for_tests(void)
{
	TimestampTz until;

	if (chroma_test_stall_ms <= 0)
		return;
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), chroma_test_stall_ms);
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		if (left <= 0)
			break;
		(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, Min(left, 100),
						 PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
}

/* ---- finishing a batch ---- */

/*
 * Every request the worker begins gets the next number: a success proves nothing about a
 * request that was in flight with it, only about those that completed before it began.
 */
static uint64 requests_begun = 0;

/* seq: the number of the request (or the last of the requests) that sent b */
static void
finish_batch(MirrorConfig *m, MirrorState *st, Batch *b, SendResult *res, bool backfill,
			 uint64 seq)
{
	List	   *ok_keys = NIL;
	Oid			t2[2] = {INT4OID, TEXTARRAYOID};

	sync_begin_txn();
	if (b->nqids > 0)
	{
		Datum	   *q = palloc_array(Datum, b->nqids);
		Oid			types[2] = {INT8ARRAYOID, INT4OID};
		Datum		values[2];

		for (int i = 0; i < b->nqids; i++)
			q[i] = Int64GetDatum(b->qids[i]);
		values[0] = PointerGetDatum(construct_array(q, b->nqids, INT8OID, 8, true, TYPALIGN_DOUBLE));
		values[1] = Int32GetDatum(m->mirror_id);
		/* (mirror_id, qid) is the queue's only index on qid */
		sync_exec("DELETE FROM chroma_sync.queue WHERE mirror_id = $2 AND qid = ANY ($1)",
			 2, types, values, NULL, SPI_OK_DELETE);
	}
	for (int i = 0; i < b->n; i++)
	{
		SyncRecord *r = &b->recs[i];

		if (r->error)
		{
			Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
			Datum		values[3] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(r->key),
			CStringGetTextDatum(r->error)};

			sync_exec("INSERT INTO chroma_sync.failed (mirror_id, source, id, error) "
				 "SELECT $1, source, $2, $3 FROM chroma_sync.mirror WHERE mirror_id = $1 "
				 "ON CONFLICT (mirror_id, id) DO UPDATE SET error = excluded.error, "
				 "attempts = failed.attempts + 1, failed_at = pg_catalog.now()",
				 3, types, values, NULL, SPI_OK_INSERT);
		}
		else
			ok_keys = lappend(ok_keys, r->key);
	}
	if (ok_keys != NIL)
	{
		Datum		values[2] = {Int32GetDatum(m->mirror_id), sync_text_array(ok_keys)};

		sync_exec("DELETE FROM chroma_sync.failed WHERE mirror_id = $1 AND id = ANY ($2)",
			 2, t2, values, NULL, SPI_OK_DELETE);
	}
	/*
	 * Keys whose earlier request may still be applied late, not in chroma_sync.resend
	 * (it does not exist before 0.5): send their state again after this success, if this
	 * request began after they were noted (not one that was in flight with theirs).
	 */
	if (st->unknown_keys != NIL && seq > st->unknown_seq)
	{
		Datum		values[2] = {Int32GetDatum(m->mirror_id), sync_text_array(st->unknown_keys)};

		sync_exec("INSERT INTO chroma_sync.queue (mirror_id, key) SELECT $1, k FROM pg_catalog.unnest($2) k",
			 2, t2, values, NULL, SPI_OK_INSERT);
		list_free_deep(st->unknown_keys);
		st->unknown_keys = NIL;
	}
	{
		Oid			types[7] = {INT4OID, INT8OID, BOOLOID, TEXTOID, INT8OID, TEXTOID, TIMESTAMPTZOID};
		Datum		values[7];
		char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

		values[0] = Int32GetDatum(m->mirror_id);
		values[1] = Int64GetDatum((int64) res->acknowledged);
		values[2] = BoolGetDatum(backfill);
		values[3] = b->last_key ? CStringGetTextDatum(b->last_key) : (Datum) 0;
		if (b->last_key == NULL)
			nulls[3] = 'n';
		values[4] = Int64GetDatum(b->rows_read);
		values[5] = b->page_after ? CStringGetTextDatum(b->page_after) : (Datum) 0;
		if (b->page_after == NULL)
			nulls[5] = 'n';
		values[6] = TimestampTzGetDatum(m->backfill_run);
		if (m->backfill_run == DT_NOBEGIN)
			nulls[6] = 'n';

		/*
		 * The watermark moves only from where this page started, in the backfill it was
		 * read for: a chroma_resync (or adopt) that restarted the backfill meanwhile is
		 * not undone by this stale page, the first page (from NULL) included.
		 */
		/*
		 * A backfill page that does not move the watermark (acknowledged after an earlier
		 * page failed, or stale) is read and sent again: it is counted then.
		 */
		sync_exec("UPDATE chroma_sync.mirror SET synced = synced + CASE WHEN NOT $3 "
			 "OR (backfill_after IS NOT DISTINCT FROM $6 "
			 "AND backfill_started_at IS NOT DISTINCT FROM $7) THEN $2 ELSE 0 END, "
			 "last_sync_at = pg_catalog.now(), "
			 "in_error = false, "
			 "backfill_after = CASE WHEN $3 AND backfill_after IS NOT DISTINCT FROM $6 "
			 "AND backfill_started_at IS NOT DISTINCT FROM $7 "
			 "THEN COALESCE($4, backfill_after) ELSE backfill_after END, "
			 "backfill_sent = CASE WHEN $3 AND backfill_after IS NOT DISTINCT FROM $6 "
			 "AND backfill_started_at IS NOT DISTINCT FROM $7 "
			 "THEN backfill_sent + $5 ELSE backfill_sent END "
			 "WHERE mirror_id = $1",
			 7, types, values, nulls, SPI_OK_UPDATE);
	}
	sync_end_txn();
	st->failures = 0;
	st->next_attempt = 0;
	chroma_report_progress();
}

/*
 * Backpressure with several in flight: a server that sheds load (429, 503, also Chroma's
 * "log needs compaction") halves the mirror's requests in flight, besides the back-off;
 * each run of as many acknowledged requests as are allowed in flight allows one more,
 * up to chroma_sync.max_concurrent_requests (additive increase, multiplicative decrease).
 * The cap is read when a step begins.
 */
static int
inflight_configured(void)
{
	return Max(1, Min(chroma_max_concurrent_requests, CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT));
}

static int
inflight_allowed(MirrorState *st)
{
	int			n = inflight_configured();

	return st->inflight_cap > 0 ? Min(st->inflight_cap, n) : n;
}

static void
inflight_throttled(MirrorConfig *m, MirrorState *st)
{
	int			cap = Max(1, inflight_allowed(st) / 2);

	if (inflight_configured() <= 1)
		return;
	st->inflight_cap = cap;
	st->cap_successes = 0;
	ereport(LOG,
			(errmsg("chroma_sync: mirror %d: the server sheds load: at most %d requests in flight",
					m->mirror_id, cap)));
}

/* Handles a send that did not fully succeed; returns false (retry later). */
static bool
send_failed(MirrorConfig *m, MirrorState *st, Batch *b, SendResult *res, TimestampTz *wake_at)
{
	if (res->outcome == SEND_STOP)
	{
		record_error(m, res->message, true);
		if (res->collection_gone)
		{
			sync_begin_txn();
			sync_exec(psprintf("UPDATE chroma_sync.mirror SET collection_id = NULL WHERE mirror_id = %d",
						  m->mirror_id), 0, NULL, NULL, NULL, SPI_OK_UPDATE);
			sync_end_txn();
		}
		/* no catalog access here: we are outside a transaction */
		ereport(LOG,
				(errmsg("chroma_sync: mirror %d into \"%s\" paused: %s",
						m->mirror_id, m->collection, res->message)));
		return false;
	}
	if (res->outcome_unknown)
	{
		ListCell   *lc;

		for (int i = 0; i < b->n; i++)
			sync_unknown_add(st, b->recs[i].key);
		foreach(lc, res->unknown_ids)
			sync_unknown_add(st, (const char *) lfirst(lc));
		st->unknown_seq = requests_begun;
		sync_unknown_persist(st);
	}
	if (res->throttled)
		inflight_throttled(m, st);
	record_error(m, res->message, false);
	back_off(st, wake_at, res->retry_after_s);
	return false;
}

/* ---- the steps ---- */

static bool reconcile(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at, const char *last_key);
static void backfill_done(MirrorConfig *m, const char *last_key, const char *set_sql);

/* ---- the pipeline ---- */

/*
 * A step sends batch after batch for up to PIPELINE_MAX_MS. While requests are in flight,
 * the next batch is read and encoded; it is sent the moment it may be, and a completed
 * batch is finished (queue entries deleted, watermark persisted) after that.
 *
 * Up to chroma_sync.max_concurrent_requests (N) requests are in flight, in a FIFO; with
 * N = 1 (the default) one request at a time, as Chroma applies writes one after the other
 * anyway. For any N (doc/concurrency.md):
 * - no key is in two requests in flight: a batch holding a key of a flight in flight
 *   waits (as the ready batch) until that flight has completed;
 * - flights complete oldest first, so batches and backfill pages are finished in the
 *   order they were read, each deleting exactly its own queue entries after its own
 *   request was acknowledged;
 * - a TRUNCATE barrier completes every flight before the clear (send_alone), and nothing
 *   is read past it;
 * - when a flight fails, every other flight is completed before the failure is recorded:
 *   keys whose outcome is unknown are queued again only after everything in flight with
 *   them has completed (and the request timeout has passed: sync_unknown.c).
 */
#define PIPELINE_MAX_BATCHES 64
#define PIPELINE_MAX_MS		1000	/* per step, so other mirrors get their turn */

typedef struct Flight
{
	MemoryContext ctx;			/* everything of the batch */
	Batch		b;
	SyncFlight	f;
	int64		scan_max;		/* drain: the last queue id of the ordered scan */
	uint64		seq;			/* requests_begun when its request began */
	char	  **keys;			/* N > 1: its keys, sorted (the overlap check) */
	int			nkeys;
} Flight;

typedef struct Pipeline
{
	MirrorConfig *m;
	MirrorState *st;
	TimestampTz *wake_at;
	bool		backfill;
	int			max_inflight;	/* chroma_sync.max_concurrent_requests */
	int			ninflight;
	Flight	   *inflight[CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT];	/* oldest first */
	Flight	   *ready;			/* read and encoded, sent when it may be */
	bool		backlog;		/* drain: the last read filled a batch */
	bool		table_busy;		/* another session holds a lock that stops reading the table */
	bool		stale;			/* backfill: restarted since the configuration was read */
	TimestampTz started;		/* the step's start (PIPELINE_MAX_MS) */
} Pipeline;

/*
 * Takes the lock the table's SELECT needs without waiting (in the read's transaction):
 * a session holding a stronger one (LOCK TABLE, a long ALTER TABLE) must not stop the
 * worker, and with it every other mirror of the database. False: try again later.
 */
static bool
lock_table_or_skip(Pipeline *p)
{
	/* and a partitioned table's partitions as its last DDL left them (partition.c) */
	if (ConditionalLockRelationOid(p->m->relid, AccessShareLock) &&
		partition_set_read_lock(p->m->relid))
		return true;
	p->table_busy = true;
	return false;
}

static Flight *
flight_new(void)
{
	MemoryContext ctx = AllocSetContextCreate(CurrentMemoryContext, "chroma_sync batch",
											  ALLOCSET_DEFAULT_SIZES);
	Flight	   *f = MemoryContextAllocZero(ctx, sizeof(Flight));

	f->ctx = ctx;
	return f;
}

static bool lending = false;	/* a lent step is under way (see sync_lend_wait) */

/*
 * A batch's byte budget: the requests in flight share SYNC_BATCH_BYTES, so that the
 * worker's memory does not grow with chroma_sync.max_concurrent_requests (TAP 033).
 */
static size_t
flight_budget(Pipeline *p)
{
	/* a lent step's batch is small beside the waiting step's (a row larger is read alone) */
	if (lending)
		return SYNC_BATCH_BYTES / CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT;
	return SYNC_BATCH_BYTES / (size_t) Max(1, p->max_inflight);
}

static void
flight_free(Flight *f)
{
	if (f != NULL)
		MemoryContextDelete(f->ctx);
}

static void
set_busy(int mirror_id)
{
	DbWorkerSlot *slot;

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	slot = chroma_find_slot(MyDatabaseId);
	if (slot)
		slot->busy_mirror = mirror_id;
	LWLockRelease(chroma_shared->lock);
	if (mirror_id == 0)
		ConditionVariableBroadcast(&chroma_shared->progress_cv);
}

/* Does a backend wait for this worker to leave the mirror (chroma_unmirror)? */
static bool
stop_requested(MirrorConfig *m)
{
	return chroma_stop_requested(m->mirror_id);
}

/* Keys of requests that may reach Chroma late: sent again once that cannot happen. */
static void
remember_unknown(MirrorState *st, Batch *b)
{
	for (int i = 0; i < b->n; i++)
		sync_unknown_add(st, b->recs[i].key);
	st->unknown_seq = requests_begun;
	sync_unknown_persist(st);
}

/* With several in flight: the batch's keys, sorted, for flights_overlap. */
static void
flight_sort_keys(Pipeline *p, Flight *f)
{
	if (p->max_inflight <= 1)
		return;
	f->keys = MemoryContextAlloc(f->ctx, sizeof(char *) * Max(f->b.n, 1));
	for (int i = 0; i < f->b.n; i++)
		f->keys[i] = f->b.recs[i].key;
	f->nkeys = f->b.n;
	qsort(f->keys, f->nkeys, sizeof(char *), sync_compare_keys);
}

/* Do the two batches share a key? (sorted keys, one merge) */
static bool
flights_overlap(Flight *a, Flight *b)
{
	int			i = 0;
	int			j = 0;

	while (i < a->nkeys && j < b->nkeys)
	{
		int			c = strcmp(a->keys[i], b->keys[j]);

		if (c == 0)
			return true;
		if (c < 0)
			i++;
		else
			j++;
	}
	return false;
}

/*
 * Whether f may begin now: a request slot is free, no flight holds one of its keys, and
 * the flights' records stay within SYNC_BATCH_BYTES (a row larger than a flight's share of
 * it is read alone: ten such rows must not be in flight at once, red-team TAP 299).
 */
static bool
may_begin(Pipeline *p, Flight *f)
{
	size_t		bytes = f->b.bytes;

	if (p->ninflight >= p->max_inflight)
		return false;
	for (int i = 0; i < p->ninflight; i++)
		bytes += p->inflight[i]->b.bytes;
	if (p->ninflight > 0 && bytes > SYNC_BATCH_BYTES)
		return false;
	for (int i = 0; i < p->ninflight; i++)
	{
		if (flights_overlap(p->inflight[i], f))
		{
			elog(DEBUG1, "chroma_sync: mirror %d: a batch waits for the request in flight that holds one of its keys",
				 p->m->mirror_id);
			return false;
		}
	}
	return true;
}

/* Begins f's request (after the test stall and the rate limit); f is in flight. */
static void
pipeline_begin(Pipeline *p, Flight *f)
{
	if (!p->backfill)
	{
		stall_for_tests();
		/* with several in flight, the test stall does not use up the step's time */
		if (p->max_inflight > 1 && chroma_test_stall_ms > 0)
			p->started = TimestampTzPlusMilliseconds(p->started, chroma_test_stall_ms);
	}
	sync_flight_begin(p->m, &f->f);
	f->seq = ++requests_begun;
	p->inflight[p->ninflight++] = f;
	if (p->ninflight > 1)
		elog(DEBUG1, "chroma_sync: mirror %d: %d requests in flight",
			 p->m->mirror_id, p->ninflight);
}

/*
 * Waits for the oldest flight's answer and only then takes it out of the FIFO: while it
 * is waited for (a cancel, an error in a bisection) it is still in flight, and
 * sync_abandon remembers its keys as outcome-unknown.
 */
static Flight *
pipeline_finish_oldest(Pipeline *p, SendResult *res)
{
	Flight	   *f = p->inflight[0];

	sync_flight_finish(p->m, &f->b, &f->f, res);
	p->ninflight--;
	memmove(&p->inflight[0], &p->inflight[1], sizeof(Flight *) * p->ninflight);
	p->inflight[p->ninflight] = NULL;
	return f;
}

/*
 * After a failure (first's result): completes every other flight, oldest first. An
 * acknowledged one is finished (its entries deleted); a failed one keeps its entries, and
 * its keys are remembered when its outcome is unknown. The failure count is first's; the
 * back-off honours the longest Retry-After of them all, and a flight that must pause the
 * mirror (a refused key, a collection gone) pauses it whatever first's outcome.
 */
static void
pipeline_settle(Pipeline *p, SendResult *first)
{
	int			failures = p->st->failures;
	TimestampTz next_attempt = p->st->next_attempt;

	while (p->ninflight > 0)
	{
		SendResult	res;
		Flight	   *f = pipeline_finish_oldest(p, &res);

		if (res.outcome == SEND_OK)
			finish_batch(p->m, p->st, &f->b, &res, p->backfill, f->seq);
		else
		{
			if (res.outcome_unknown)
				remember_unknown(p->st, &f->b);
			if (res.retry_after_s > first->retry_after_s)
				first->retry_after_s = res.retry_after_s;
			first->throttled |= res.throttled;
			if (res.outcome == SEND_STOP && first->outcome != SEND_STOP)
			{
				first->outcome = SEND_STOP;
				first->message = res.message;
				first->collection_gone = res.collection_gone;
			}
		}
		flight_free(f);
	}
	p->st->failures = failures;
	p->st->next_attempt = next_attempt;
}

/* One more request in flight after a run of acknowledgements (see inflight_throttled). */
static void
inflight_acknowledged(Pipeline *p)
{
	MirrorState *st = p->st;

	if (st->inflight_cap <= 0)
		return;
	if (++st->cap_successes < st->inflight_cap)
		return;
	st->cap_successes = 0;
	st->inflight_cap++;
	if (st->inflight_cap >= inflight_configured())
		st->inflight_cap = 0;
	elog(DEBUG1, "chroma_sync: mirror %d: at most %d requests in flight again",
		 p->m->mirror_id, inflight_allowed(st));
}

/*
 * Completes the oldest flight; on success sends the ready batch (when it may begin) and
 * then finishes the completed one. On failure the ready batch is dropped (its entries stay
 * queued, its page is read again), the other flights are completed, and false is returned.
 */
static bool
pipeline_complete(Pipeline *p)
{
	SendResult	res;
	Flight	   *f = pipeline_finish_oldest(p, &res);

	if (res.outcome != SEND_OK)
	{
		flight_free(p->ready);
		p->ready = NULL;
		/* remembered before the others are waited for (a cancel meanwhile) */
		if (res.outcome_unknown)
			remember_unknown(p->st, &f->b);
		pipeline_settle(p, &res);
		(void) send_failed(p->m, p->st, &f->b, &res, p->wake_at);
		flight_free(f);
		return false;
	}
	if (p->ready != NULL && may_begin(p, p->ready))
	{
		pipeline_begin(p, p->ready);
		p->ready = NULL;
	}
	finish_batch(p->m, p->st, &f->b, &res, p->backfill, f->seq);
	inflight_acknowledged(p);
	flight_free(f);
	return true;
}

static bool
pipeline_complete_all(Pipeline *p)
{
	while (p->ninflight > 0)
		if (!pipeline_complete(p))
			return false;
	return true;
}

void
sync_abandon(MirrorState *st)
{
	Pipeline   *p = (Pipeline *) st->pipeline;

	st->pipeline = NULL;
	set_busy(0);
	/* a synchronous write interrupted (a batch sent alone, a clear, a bisection) */
	if (sync_send_take_writing(st))
	{
		st->unknown_seq = requests_begun;
		sync_unknown_persist(st);
	}
	if (p == NULL)
		return;
	/* the requests are aborted, but may have reached the server */
	for (int i = 0; i < p->ninflight; i++)
		if (p->inflight[i]->f.n > 0)
			remember_unknown(st, &p->inflight[i]->b);
	p->ninflight = 0;
	p->ready = NULL;
}

/* ---- live changes first ---- */

/*
 * The mirrors whose waiting changes end another mirror's long step early: ready to send
 * (not paused, not in back-off, backfill done), set by the worker before each step.
 */
static int *yield_ids = NULL;
static int	nyield = 0;
static TimestampTz yield_checked = 0;

#define YIELD_CHECK_MS 50		/* at most one look at the queue per 50 ms */

/*
 * While other mirrors have live changes (found waiting within the last LIVE_WINDOW_MS),
 * a backfill sends small pages (a tenth of the batch size), one at a time: the other
 * mirrors' changes then wait for one small request of the backfill, not for several
 * full ones, at the cost of the backfill's rate meanwhile.
 */
#define LIVE_WINDOW_MS 5000
#define LIVE_PAGE_DIVISOR 10

static TimestampTz live_until = 0;

/* The mirror ids as an int4[] parameter (the looks at chroma_sync.queue below). */
static Datum
mirror_ids_array(int *ids, int n)
{
	Datum	   *d = palloc_array(Datum, n);

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(ids[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

static bool
others_live(void)
{
	return live_until != 0 && GetCurrentTimestamp() < live_until;
}

void
sync_set_yield_to(int *ids, int n)
{
	yield_ids = ids;
	nyield = n;
}

/*
 * Whether the step should stop reading (and end once its requests are in): another mirror
 * ready to send has changes queued. Looked for only after a commit woke the worker (its
 * latch is set: every commit that queues a change sets it) and at most every 50 ms, in a
 * transaction of its own (called outside one).
 */
static bool
others_waiting(Pipeline *p)
{
	TimestampTz now;
	bool		found;
	Oid			types[1] = {INT4ARRAYOID};
	Datum		values[1];

	if (nyield == 0 || !MyLatch->is_set)
		return false;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(yield_checked, now, YIELD_CHECK_MS))
		return false;
	yield_checked = now;
	values[0] = mirror_ids_array(yield_ids, nyield);
	sync_begin_txn();
	sync_exec("SELECT 1 FROM chroma_sync.queue WHERE mirror_id = ANY ($1) LIMIT 1",
			  1, types, values, NULL, SPI_OK_SELECT);
	found = SPI_processed > 0;
	sync_end_txn();
	if (found)
	{
		live_until = TimestampTzPlusMilliseconds(now, LIVE_WINDOW_MS);
		elog(DEBUG1, "chroma_sync: mirror %d: its step ends early: another mirror has changes waiting",
			 p->m->mirror_id);
	}
	return found;
}

/* ---- lending a step's waits ---- */

/*
 * While a step waits for a request, the worker serves other mirrors' live
 * changes (README, "Fairness"): when a commit has woken the worker and another mirror
 * ready to send (not paused, not in back-off, its backfill done, another collection)
 * has changes queued, the waiting step lends its wait to a "lent step" of that mirror,
 * round-robin among them: a drain of at most LENT_STEP_MS of reading, one request in
 * flight, which lends nothing itself. Its requests go out beside the waiting step's, so
 * a mirror in a long backfill, with a backlog, or writing to a slow collection does not
 * hold the others' changes back for its whole step: at most for LENT_CHECK_MS plus the
 * lent steps of the other mirrors. A lent step is a whole step of its own mirror, with
 * that mirror's invariants: the waiting step's keys, queue entries and requests are
 * another mirror's, in another collection (mirrors of one collection never lend to each
 * other: their order is the worker's).
 */
#define LENT_STEP_MS 250
#define LENT_CHECK_MS 50
#define LENT_LOCK_TIMEOUT_MS 200	/* sync_txn_lock_timeout_ms (sync_txn.c) */
#define LENT_GRACE_MS 1000		/* see lent_step_waits */

sync_lend_fn sync_lend_hook = NULL;
static int *lend_ids = NULL;
static int	nlend = 0;
static int	lend_last = 0;		/* the mirror last lent to (round-robin) */
static TimestampTz lend_checked = 0;

static int	lend_from = 0;		/* the mirror whose step lends */
static ChromaHttpRequest *lender_req = NULL;	/* the request it waits for */
static TimestampTz lender_done_at = 0;	/* when that request was seen answered */

void
sync_set_lend_to(int from, int *ids, int n)
{
	lend_from = from;
	lend_ids = ids;
	nlend = n;
}

/*
 * Whether another mirror may have a lent step now; *id: which one. Looked for only after
 * a commit woke the worker and at most every LENT_CHECK_MS, in a transaction of its own.
 */
static pg_noinline bool
lend_candidate(int *id)
{
	TimestampTz now;
	Oid			types[1] = {INT4ARRAYOID};
	Datum		values[1];
	int			best;
	int			after = 0;
	int			lowest = 0;

	if (sync_lend_hook == NULL || lending || nlend == 0 || !MyLatch->is_set ||
		IsTransactionState())
		return false;
	/*
	 * Not under chroma_sync.max_records_per_second: a lent step would wait for the budget
	 * inside the lending step's wait, between the requests of a batch sent in parts
	 * (red-team TAP 311); the mirrors take turns then, live changes first.
	 */
	if (chroma_max_records_per_second > 0)
		return false;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(lend_checked, now, LENT_CHECK_MS))
		return false;
	lend_checked = now;
	values[0] = mirror_ids_array(lend_ids, nlend);
	sync_begin_txn();
	sync_exec("SELECT i FROM pg_catalog.unnest($1) AS i WHERE EXISTS "
			  "(SELECT 1 FROM chroma_sync.queue q WHERE q.mirror_id = i)",
			  1, types, values, NULL, SPI_OK_SELECT);
	/* round-robin: the smallest id after the last one lent to, else the smallest */
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int			m = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r],
													SPI_tuptable->tupdesc, 1, &isnull));

		if (m > lend_last && (after == 0 || m < after))
			after = m;
		if (lowest == 0 || m < lowest)
			lowest = m;
	}
	best = after != 0 ? after : lowest;
	sync_end_txn();
	if (best == 0)
		return false;
	*id = best;
	return true;
}

/*
 * A lent step waits for one of its own requests (req). Once the lending step's request
 * has been answered, the lent step has LENT_GRACE_MS more: after that its request is
 * given up, with the error of a request interrupted (its keys are outcome-unknown, sent
 * again by the mirror's own steps after the request timeout), so that a collection that
 * turns slow holds the lending mirror back for at most that long (red-team TAP 307).
 */
static void
lent_step_waits(ChromaHttpRequest *req)
{
	TimestampTz now;

	if (lender_req == NULL || !chroma_http_done(lender_req))
		return;
	now = GetCurrentTimestamp();
	if (lender_done_at == 0)
		lender_done_at = now;
	if (!TimestampDifferenceExceeds(lender_done_at, now, LENT_GRACE_MS))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg("a lent step gave way to mirror %d: its request was not answered within %d ms of that mirror's",
					lend_from, LENT_GRACE_MS),
			 errdetail("The server may or may not have applied the request: its keys are sent again after chroma_sync.timeout, by the mirror's own step.")));
}

/*
 * Called by the HTTP client while the worker waits for a request begun and waited for
 * outside a transaction (chroma_http_wait_hook): a pipeline's oldest request, a batch
 * sent alone, a clear, a bisection, a look at the collection. Lends the wait to one
 * lent step when another mirror has changes waiting. The waiting step's state that
 * lives outside it (the synchronous write being waited for, the count of transient
 * read errors, the mirrors to yield to) is set aside meanwhile and put back after.
 */
void
sync_lend_wait(ChromaHttpRequest *req)
{
	int			id;
	int		   *saved_ids = yield_ids;
	int			saved_n = nyield;
	void	   *writing;
	int			transient;

	if (lending)
	{
		lent_step_waits(req);
		return;
	}
	if (!lend_candidate(&id))
		return;
	elog(DEBUG1, "chroma_sync: mirror %d lends its wait to mirror %d", lend_from, id);
	lend_last = id;
	lending = true;
	lender_req = req;
	lender_done_at = 0;
	yield_ids = NULL;
	nyield = 0;
	writing = sync_send_save_writing();
	transient = sync_transient_save();
	sync_txn_lock_timeout_ms = LENT_LOCK_TIMEOUT_MS;
	PG_TRY();
	{
		sync_lend_hook(id);
	}
	PG_FINALLY();
	{
		sync_txn_lock_timeout_ms = 0;
		lending = false;
		lender_req = NULL;
		yield_ids = saved_ids;
		nyield = saved_n;
		sync_send_restore_writing(writing);
		sync_transient_restore(transient);
	}
	PG_END_TRY();
}

/* ---- reading batches ---- */

/* The queue ids of the batches in flight above after (their coalesced entries). */
static Datum
inflight_qids(Pipeline *p, int64 after)
{
	Datum	   *d;
	int			total = 0;
	int			n = 0;

	for (int i = 0; i < p->ninflight; i++)
		total += p->inflight[i]->b.nqids;
	d = palloc_array(Datum, Max(total, 1));
	for (int i = 0; i < p->ninflight; i++)
	{
		Batch	   *fb = &p->inflight[i]->b;

		for (int j = 0; j < fb->nqids; j++)
			if (fb->qids[j] > after)
				d[n++] = Int64GetDatum(fb->qids[j]);
	}
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, true, TYPALIGN_DOUBLE));
}

/*
 * The COLLATE clause that makes a key parameter match the queue's (mirror_id, key) index:
 * byte order since 0.4, the database's collation before (a library newer than the
 * installed extension, until ALTER EXTENSION chroma_sync UPDATE).
 */
static const char *
queue_key_collate(void)
{
	Oid			index = get_relname_relid("queue_mirror_key",
										  get_namespace_oid("chroma_sync", false));
	Oid			type,
				coll = InvalidOid;
	int32		typmod;

	if (OidIsValid(index))
		get_atttypetypmodcoll(index, 2, &type, &typmod, &coll);
	return coll == C_COLLATION_OID ? " COLLATE pg_catalog.\"C\"" : "";
}

/*
 * The batch's byte budget left some rows unread: they leave the batch, and so do their
 * queue entries (qkeys[i] is the key of b->qids[i]), which stay queued for the next one.
 */
static void
leave_deferred_queued(Pipeline *p, Batch *b, char **qkeys)
{
	int			k = 0;
	int			nq = 0;

	for (int i = 0; i < b->n; i++)
		if (!b->recs[i].deferred)
			b->recs[k++] = b->recs[i];
	b->n = k;
	for (int i = 0; i < b->nqids; i++)
	{
		SyncRecord	probe;

		memset(&probe, 0, sizeof(probe));
		probe.key = qkeys[i];
		if (bsearch(&probe, b->recs, b->n, sizeof(SyncRecord), sync_compare_records) != NULL)
			b->qids[nq++] = b->qids[i];
	}
	b->nqids = nq;
	p->backlog = true;
}

typedef enum DrainRead
{
	DRAIN_EMPTY,
	DRAIN_BATCH,
	DRAIN_BARRIER				/* the next entry is a TRUNCATE: b->qids[0] */
} DrainRead;

/*
 * Reads the next queue entries (not those in flight) and the current rows of their
 * keys into f->b, in f->ctx. While flights are in flight the scan goes on after the
 * newest one's (each scan starts after the last, so the newest went furthest).
 */
static DrainRead
read_drain_batch(Pipeline *p, Flight *f)
{
	MirrorConfig *m = p->m;
	Batch	   *b = &f->b;
	int			limit = chroma_effective_batch_size();
	int64		after = p->ninflight > 0 ? p->inflight[p->ninflight - 1]->scan_max : 0;
	char	  **keys;
	char	  **qkeys;
	int			nkeys = 0;
	Datum		excluded;

	b->dim = m->dimension;
	b->budget = flight_budget(p);
	sync_begin_txn();
	excluded = inflight_qids(p, after);
	{
		Oid			types[4] = {INT4OID, INT4OID, INT8OID, INT8ARRAYOID};
		Datum		values[4] = {Int32GetDatum(m->mirror_id), Int32GetDatum(limit),
		Int64GetDatum(after), excluded};

		sync_exec("SELECT qid, key FROM chroma_sync.queue WHERE mirror_id = $1 AND qid > $3 "
			 "AND qid <> ALL ($4) ORDER BY qid LIMIT $2",
			 4, types, values, NULL, SPI_OK_SELECT);
	}
	if (SPI_processed == 0)
	{
		sync_end_txn();
		return DRAIN_EMPTY;
	}
	{
		MemoryContext old = MemoryContextSwitchTo(f->ctx);
		uint64		n = SPI_processed;

		b->qids = palloc_array(int64, n);
		keys = palloc_array(char *, n);
		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;
			int64		qid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
			char	   *key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

			if (key == NULL)
			{
				if (i == 0)
				{
					b->qids[0] = qid;
					b->nqids = 1;
					MemoryContextSwitchTo(old);
					sync_end_txn();
					sync_flush_wal_of_read();	/* the TRUNCATE itself must be durable */
					return DRAIN_BARRIER;
				}
				break;			/* entries after a TRUNCATE wait for it */
			}
			b->qids[b->nqids++] = qid;
			keys[nkeys++] = key;
		}
		f->scan_max = b->qids[b->nqids - 1];
		p->backlog = (n == (uint64) limit && b->nqids == limit);
		MemoryContextSwitchTo(old);
	}

	/*
	 * Coalescing: later entries of the same keys (up to the next TRUNCATE barrier) are
	 * read too, so a key updated many times costs one send; they are deleted by the ids
	 * read, like the others.
	 */
	{
		Datum	   *kd = palloc_array(Datum, nkeys);
		Oid			types[5] = {INT4OID, TEXTARRAYOID, INT8OID, INT4OID, INT8ARRAYOID};
		Datum		values[5];

		for (int i = 0; i < nkeys; i++)
			kd[i] = CStringGetTextDatum(keys[i]);
		values[0] = Int32GetDatum(m->mirror_id);
		values[1] = PointerGetDatum(construct_array(kd, nkeys, TEXTOID, -1, false, TYPALIGN_INT));
		values[2] = Int64GetDatum(f->scan_max);
		values[3] = Int32GetDatum(limit * 20);
		values[4] = excluded;
		/*
		 * One index probe per key (queue_mirror_key): a plan that walks the rest of a
		 * long queue by queue id and filters the keys would cost O(backlog) per batch.
		 */
		sync_exec(psprintf("SELECT q.qid, q.key FROM pg_catalog.unnest($2::pg_catalog.text[]) AS k(key), "
			 "LATERAL (SELECT e.qid, e.key FROM chroma_sync.queue e WHERE e.mirror_id = $1 "
			 "AND e.key OPERATOR(pg_catalog.=) (k.key%s) AND e.qid > $3 OFFSET 0) q "
			 "WHERE q.qid <> ALL ($5) AND q.qid < COALESCE((SELECT pg_catalog.min(b.qid) "
			 "FROM chroma_sync.queue b WHERE b.mirror_id = $1 AND b.key IS NULL AND b.qid > $3), "
			 "9223372036854775807) ORDER BY q.qid LIMIT $4", queue_key_collate()),
				  5, types, values, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			MemoryContext old = MemoryContextSwitchTo(f->ctx);
			uint64		n = SPI_processed;

			b->qids = repalloc(b->qids, sizeof(int64) * (b->nqids + n));
			keys = repalloc(keys, sizeof(char *) * (nkeys + n));
			for (uint64 i = 0; i < n; i++)
			{
				bool		isnull;

				b->qids[b->nqids++] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
				keys[nkeys++] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
			}
			MemoryContextSwitchTo(old);
		}
	}
	chroma_http_pump();

	/* the key of each queue entry (keys[] is sorted below) */
	qkeys = palloc_array(char *, Max(nkeys, 1));
	memcpy(qkeys, keys, sizeof(char *) * nkeys);

	/* distinct keys, each read once in its current state */
	qsort(keys, nkeys, sizeof(char *), sync_compare_keys);
	{
		int			k = 0;

		for (int i = 0; i < nkeys; i++)
			if (k == 0 || strcmp(keys[k - 1], keys[i]) != 0)
				keys[k++] = keys[i];
		nkeys = k;
	}
	b->recs = MemoryContextAllocZero(f->ctx, sizeof(SyncRecord) * nkeys);
	for (int i = 0; i < nkeys; i++)
		b->recs[i].key = keys[i];
	b->n = nkeys;

	if (!lock_table_or_skip(p))
	{
		sync_end_txn();
		return DRAIN_EMPTY;
	}
	sync_read_rows(m, b, f->ctx);
	if (b->budget_cut)
		leave_deferred_queued(p, b, qkeys);
	sync_remember_keys_and_dimension(m, b, GetMemoryChunkContext(m));
	sync_end_txn();
	sync_flush_wal_of_read();
	chroma_http_pump();
	return DRAIN_BATCH;
}

/*
 * Reads the backfill page after the key 'after' (NULL: the first page, which also
 * counts the rows to send) into f->b. Returns the number of keys the page had.
 */
static uint64
read_backfill_batch(Pipeline *p, Flight *f, const char *after, int limit)
{
	MirrorConfig *m = p->m;
	Batch	   *b = &f->b;
	char	   *table;
	uint64		n;

	b->dim = m->dimension;
	b->budget = flight_budget(p);
	sync_begin_txn();
	table = mirror_table_sql(m);
	if (!lock_table_or_skip(p))
	{
		sync_end_txn();
		return 0;
	}
	if (after == NULL)
	{
		/* a (re)started backfill: count what is to send, for progress in status */
		bool		isnull;
		int64		total;

		sync_select_as_owner(m, psprintf("SELECT pg_catalog.count(*) FROM %s WHERE %s", table,
									mirror_present_sql(m)),
						0, NULL, NULL);
		total = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		/*
		 * Only in the backfill this configuration was read in: a restart since (a new
		 * backfill_started_at) makes this page stale, and the configuration is read again.
		 * A backfill not restarted since 0.5 gets its backfill_started_at here.
		 */
		{
			Oid			types[2] = {INT8OID, TIMESTAMPTZOID};
			Datum		values[2] = {Int64GetDatum(total), TimestampTzGetDatum(m->backfill_run)};
			char		nulls[2] = {' ', m->backfill_run == DT_NOBEGIN ? 'n' : ' '};

			sync_exec(psprintf("UPDATE chroma_sync.mirror SET backfill_total = $1, backfill_sent = 0, "
							   "backfill_started_at = COALESCE(backfill_started_at, pg_catalog.clock_timestamp()) "
							   "WHERE mirror_id = %d AND NOT backfill_done AND backfill_after IS NULL "
							   "AND backfill_started_at IS NOT DISTINCT FROM $2 RETURNING backfill_started_at",
							   m->mirror_id),
					  2, types, values, nulls, SPI_OK_UPDATE_RETURNING);
			if (SPI_processed == 0)
			{
				p->stale = true;
				sync_end_txn();
				return 0;
			}
			m->backfill_run = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
																SPI_tuptable->tupdesc, 1, &isnull));
		}
	}
	b->page_after = after ? MemoryContextStrdup(f->ctx, after) : NULL;
	n = sync_read_page(m, b, after, limit, f->ctx);
	{
		/* rows without an embedding (or gone since) are not sent during a backfill */
		int			k = 0;

		for (int i = 0; i < b->n; i++)
			if (b->recs[i].upsert || b->recs[i].error)
				b->recs[k++] = b->recs[i];
		b->n = k;
	}
	b->rows_read = b->n;		/* rows with an embedding: what backfill_total counts */
	sync_remember_keys_and_dimension(m, b, GetMemoryChunkContext(m));
	sync_end_txn();
	sync_flush_wal_of_read();
	chroma_http_pump();
	return n;
}

/* ---- the steps ---- */

/* Ends a step: nothing in flight, the slot no longer busy. */
static void
pipeline_end(Pipeline *p)
{
	while (p->ninflight > 0)
	{
		/* only when asked to stop: wait, and forget */
		SendResult	res;
		Flight	   *f = pipeline_finish_oldest(p, &res);

		if (res.outcome_unknown)
			remember_unknown(p->st, &f->b);
		flight_free(f);
	}
	flight_free(p->ready);
	p->ready = NULL;
	p->st->pipeline = NULL;
}

/*
 * Sends one batch that cannot go out as a single request (deletes and upserts, cleared
 * documents, a TRUNCATE), synchronously, after the request in flight.
 */
static bool
send_alone(Pipeline *p, Flight *f, bool barrier)
{
	SendResult	res;

	if (barrier && p->ninflight > 0)
		elog(DEBUG1, "chroma_sync: mirror %d: TRUNCATE barrier: the %d requests in flight complete before the clear",
			 p->m->mirror_id, p->ninflight);
	if (!pipeline_complete_all(p))
		return false;
	if (barrier)
	{
		if (!sync_clear_collection(p->m, &res))
			return send_failed(p->m, p->st, &f->b, &res, p->wake_at);
	}
	else
	{
		if (!p->backfill)
			stall_for_tests();
		sync_send_batch(p->m, &f->b, &res);
		if (res.outcome != SEND_OK)
			return send_failed(p->m, p->st, &f->b, &res, p->wake_at);
	}
	/* its requests began after every earlier one completed */
	finish_batch(p->m, p->st, &f->b, &res, p->backfill, ++requests_begun);
	return true;
}

/*
 * Drains the queue, or sends backfill pages, through the pipeline. Returns true when
 * there may be more to do right away.
 */
static bool
run_pipeline(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at, bool backfill)
{
	Pipeline   *p = palloc0_object(Pipeline);
	int			limit = chroma_effective_batch_size();
	int			batches = 0;
	bool		exhausted = false;	/* nothing more to read in this step */
	bool		last_page = false;	/* backfill: the last page has been read */
	bool		ok = true;
	bool		yielded = false;	/* ended early for another mirror's changes */
	bool		lent_left_barrier = false;	/* a lent step stopped at a TRUNCATE */
	char	   *after_key = m->backfill_after ? pstrdup(m->backfill_after) : NULL;

	p->m = m;
	p->st = st;
	p->wake_at = wake_at;
	p->backfill = backfill;
	p->started = GetCurrentTimestamp();
	p->max_inflight = inflight_allowed(st);
	if (lending)
		p->max_inflight = 1;	/* a lent step: live changes, one request beside the waiting step's */
	if (backfill && others_live())
	{
		/* live changes first: small pages, one at a time */
		limit = Max(1, limit / LIVE_PAGE_DIVISOR);
		p->max_inflight = 1;
		elog(DEBUG1, "chroma_sync: mirror %d: backfill pages of %d while other mirrors have live changes",
			 m->mirror_id, limit);
	}
	st->pipeline = p;
	while (ok)
	{
		if (stop_requested(m))
		{
			/* chroma_unmirror holds locks our transactions would wait for: leave now */
			ok = false;
			break;
		}
		/*
		 * Read ahead while a request is in flight only with a backlog. Otherwise the next
		 * batch is read once the response has arrived, so it also picks up what was
		 * committed meanwhile, but before the completed batch is finished: the next
		 * request goes out first, and finishing overlaps it (lower latency).
		 */
		if (!backfill && p->ninflight > 0 && p->ready == NULL && !p->backlog && !exhausted)
			sync_flight_wait(&p->inflight[0]->f);
		/*
		 * Live changes first: a backfill stops reading when another mirror has changes
		 * waiting; its requests in flight complete, and the worker serves the other
		 * mirrors before it goes on. A drain does not: two drains with backlogs would
		 * yield to each other after every batch, and empty their pipelines each time
		 * (red-team TAP 238).
		 */
		if (!yielded && batches > 0 && backfill && p->ready == NULL &&
			!exhausted && others_waiting(p))
			yielded = true;
		if (p->ready == NULL && !exhausted && !yielded && batches < PIPELINE_MAX_BATCHES &&
			!TimestampDifferenceExceeds(p->started, GetCurrentTimestamp(),
										lending ? LENT_STEP_MS : PIPELINE_MAX_MS))
		{
			Flight	   *f = flight_new();
			MemoryContext old = MemoryContextSwitchTo(f->ctx);
			bool		barrier = false;

			batches++;
			if (backfill)
			{
				uint64		n = read_backfill_batch(p, f, after_key, limit);

				if (p->table_busy || p->stale)
				{
					MemoryContextSwitchTo(old);
					flight_free(f);
					exhausted = true;
					continue;
				}
				if (n < (uint64) limit)
					exhausted = last_page = true;
				if (n == 0)
				{
					MemoryContextSwitchTo(old);
					flight_free(f);
					continue;
				}
				after_key = MemoryContextStrdup(GetMemoryChunkContext(p), f->b.last_key);
			}
			else
			{
				DrainRead	r = read_drain_batch(p, f);

				if (r == DRAIN_EMPTY)
				{
					MemoryContextSwitchTo(old);
					flight_free(f);
					exhausted = true;
					continue;
				}
				barrier = (r == DRAIN_BARRIER);
				if (barrier && lending)
				{
					/*
					 * A TRUNCATE's clear deletes the whole collection, many requests:
					 * the mirror's own step does it, not a lent step (red-team TAP 310)
					 */
					MemoryContextSwitchTo(old);
					flight_free(f);
					exhausted = true;
					lent_left_barrier = true;
					st->lend_own_first = true;
					continue;
				}
			}
			if (barrier || !sync_flight_prepare(m, &f->b, &f->f))
			{
				ok = send_alone(p, f, barrier);
				MemoryContextSwitchTo(old);
				flight_free(f);
				continue;
			}
			flight_sort_keys(p, f);
			MemoryContextSwitchTo(old);
			if (may_begin(p, f))
				pipeline_begin(p, f);
			else
				p->ready = f;
			continue;
		}
		if (p->ninflight == 0)
			break;
		ok = pipeline_complete(p);
		/* commits during the request may have queued more: look again */
		if (!backfill)
			exhausted = false;
	}
	pipeline_end(p);
	if (p->stale)
		return false;			/* the worker reads the configuration again */
	if (p->table_busy)
	{
		/* look again in a second; the other mirrors go on meanwhile */
		st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
		if (*wake_at == 0 || st->next_attempt < *wake_at)
			*wake_at = st->next_attempt;
		return false;
	}
	if (!ok)
		return false;
	if (backfill && last_page)
	{
		if (m->reconcile)
			return reconcile(m, st, wake_at, after_key);
		sync_begin_txn();
		backfill_done(m, after_key, "backfill_done = true");
		sync_end_txn();
		chroma_report_progress();
	}
	return backfill || yielded || !exhausted || batches >= PIPELINE_MAX_BATCHES ||
		lent_left_barrier;
}

/*
 * Marks the backfill done (set_sql: what to set) unless it was restarted meanwhile: the
 * watermark is still where this worker's last page left it (within a transaction).
 */
static void
backfill_done(MirrorConfig *m, const char *last_key, const char *set_sql)
{
	Oid			types[3] = {INT4OID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[3] = {Int32GetDatum(m->mirror_id), last_key ? CStringGetTextDatum(last_key) : (Datum) 0,
	TimestampTzGetDatum(m->backfill_run)};
	char		nulls[3] = {' ', last_key ? ' ' : 'n', m->backfill_run == DT_NOBEGIN ? 'n' : ' '};

	sync_exec(psprintf("UPDATE chroma_sync.mirror SET %s WHERE mirror_id = $1 "
					   "AND backfill_after IS NOT DISTINCT FROM $2 "
					   "AND backfill_started_at IS NOT DISTINCT FROM $3", set_sql),
			  3, types, values, nulls, SPI_OK_UPDATE);
}

/* Deletes collection ids that the table lacks (after a backfill or resync). */
static bool
reconcile(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at, const char *last_key)
{
	int			offset = 0;
	const int	page = 1000;
	uint64		deleted = 0;

	for (;;)
	{
		ChromaResponse resp;
		ChromaRows	rows;
		char	   *get = psprintf("{\"limit\":%d,\"offset\":%d,\"include\":[]}", page, offset);
		List	   *extra = NIL;
		SendResult	res;

		memset(&res, 0, sizeof(res));
		res.outcome = SEND_OK;
		memset(&resp, 0, sizeof(resp));
		chroma_http_request("POST", chroma_records_url(m->collection_id, "get"), get,
							strlen(get), &resp.http);
		chroma_classify(&resp);
		if (sync_classify(&resp, &res) != SEND_OK)
		{
			Batch		b;

			memset(&b, 0, sizeof(b));
			if (res.outcome == SEND_OK)
				res.outcome = SEND_RETRY;
			return send_failed(m, st, &b, &res, wake_at);
		}
		chroma_parse_rows(&resp.http.body, false, &rows);
		if (rows.n == 0)
			break;

		/* which of these ids are rows with an embedding? */
		sync_begin_txn();
		if (!ConditionalLockRelationOid(m->relid, AccessShareLock) || !partition_set_read_lock(m->relid))
		{
			/* a session holds the table locked: do not wait for it (see lock_table_or_skip) */
			sync_end_txn();
			st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
			if (*wake_at == 0 || st->next_attempt < *wake_at)
				*wake_at = st->next_attempt;
			return false;
		}
		{
			char	   *sql = psprintf("SELECT u.chroma_sync_id FROM pg_catalog.unnest($1::pg_catalog.text[]) "
									   "AS u(chroma_sync_id) WHERE NOT EXISTS (SELECT 1 FROM %s "
									   "WHERE %s = u.chroma_sync_id AND %s)",
									   mirror_table_sql(m),
									   mirror_id_text_sql(m), mirror_present_sql(m));
			Datum	   *kd = palloc_array(Datum, rows.n);
			Oid			types[1] = {TEXTARRAYOID};
			Datum		values[1];
			MemoryContext outer = sync_txn_caller_ctx;

			for (int i = 0; i < rows.n; i++)
				kd[i] = CStringGetTextDatum(rows.ids[i]);
			values[0] = PointerGetDatum(construct_array(kd, rows.n, TEXTOID, -1, false, TYPALIGN_INT));
			sync_select_as_owner(m, sql, 1, types, values);
			for (uint64 r = 0; r < SPI_processed; r++)
			{
				char	   *id = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
				MemoryContext old = MemoryContextSwitchTo(outer);

				extra = lappend(extra, pstrdup(id));
				MemoryContextSwitchTo(old);
			}
		}
		sync_end_txn();
		sync_flush_wal_of_read();	/* a DELETE seen must not come back after a crash */

		if (extra != NIL)
		{
			cs_buf		body;
			ListCell   *lc;
			bool		first = true;

			pgbuf_init(&body, 1024);
			cs_buf_puts(&body, "{\"ids\":[");
			foreach(lc, extra)
			{
				char	   *u = pg_server_to_any(lfirst(lc), strlen(lfirst(lc)), PG_UTF8);

				if (!first)
					cs_buf_putc(&body, ',');
				first = false;
				cs_json_string(&body, u, strlen(u));
			}
			cs_buf_puts(&body, "]}");
			sync_post(chroma_records_url(m->collection_id, "delete"), &body, &resp);
			if (sync_classify(&resp, &res) != SEND_OK)
			{
				Batch		b;

				memset(&b, 0, sizeof(b));
				if (res.outcome == SEND_OK)
					res.outcome = SEND_RETRY;
				/* a late delete could remove a row written since: resend those ids */
				res.unknown_ids = extra;
				return send_failed(m, st, &b, &res, wake_at);
			}
			deleted += list_length(extra);
		}
		offset += rows.n - list_length(extra);
		if (rows.n < page)
			break;
	}

	sync_begin_txn();
	backfill_done(m, last_key, psprintf("reconcile = false, backfill_done = true, synced = synced + " UINT64_FORMAT,
										deleted));
	sync_end_txn();
	chroma_report_progress();
	return true;
}

/* Makes sure the mirror knows its collection's id (after a 404 it is looked up again). */
static bool
ensure_collection(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at)
{
	ChromaCollection coll;

	if (m->collection_id != NULL)
	{
		/* now and then: has another mirror adopted the collection? */
		if (st->owner_checked_at == 0 ||
			TimestampDifferenceExceeds(st->owner_checked_at, GetCurrentTimestamp(), 60000))
		{
			char	   *owner;
			char	   *mine = ownership_tag(m->system_identifier, m->database_oid, m->relid);

			st->owner_checked_at = GetCurrentTimestamp();
			if (chroma_api_get_collection(m->collection, &coll, true) &&
				pg_strcasecmp(coll.id, m->collection_id) == 0)
			{
				if ((owner = ownership_of(&coll)) != NULL && strcmp(owner, mine) != 0)
				{
					record_error(m, psprintf("collection \"%s\" was adopted by another mirror (owner %s); "
											 "this mirror is paused", m->collection, owner), true);
					return false;
				}
			}
			else if (chroma_api_collection_id_exists(m->collection_id))
			{
				/*
				 * Its name names another collection or none, yet the collection is there:
				 * renamed. Its owner cannot be checked by name any more, and another
				 * mirror may write it under the new name (red-team TAP 296).
				 */
				record_error(m, psprintf("collection \"%s\" (id %s) has another name now (renamed?); "
										 "this mirror is paused: unmirror the table and mirror it into the "
										 "collection's new name", m->collection, m->collection_id), true);
				return false;
			}
		}
		return true;
	}
	/* created again with the mirror's configuration; one created meanwhile must agree */
	if (m->configuration != NULL)
	{
		ChromaCollection existing;
		ChromaConfigConflict c;

		if (chroma_api_get_collection(m->collection, &existing, true) &&
			chroma_configuration_conflict(m->configuration, existing.configuration, true, &c))
		{
			record_error(m, psprintf("collection \"%s\" exists with %s %s, not the mirror's %s; "
									 "this mirror is paused", m->collection, c.key, c.existing, c.given),
						 true);
			return false;
		}
	}
	chroma_api_create_collection(m->collection, NULL, NULL, m->configuration, true, &coll);
	ownership_claim(&coll, ownership_tag(m->system_identifier, m->database_oid, m->relid), false);
	sync_begin_txn();
	{
		Oid			types[2] = {INT4OID, TEXTOID};
		Datum		values[2] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(coll.id)};

		/* a new collection: send everything again */
		sync_exec("UPDATE chroma_sync.mirror SET collection_id = $2::uuid, backfill_done = false, "
			 "backfill_after = NULL, backfill_sent = 0, reconcile = true, dimension = NULL, "
			 "backfill_started_at = pg_catalog.clock_timestamp() "
			 "WHERE mirror_id = $1", 2, types, values, NULL, SPI_OK_UPDATE);
	}
	sync_end_txn();
	return false;				/* reload the configuration */
}

/*
 * Checks the stored filter once per loaded configuration, before any read: one that
 * fails (text stored by 0.4 that does not pass, a function or a column it reads gone)
 * raises with m->filter_invalid, and the worker pauses the mirror (a failure inside a
 * row's read would only fail that row). Stores the tree of a filter 0.4 left unbound, and
 * the text of a bound one after renames. False when the table is locked: checked on a
 * later step.
 */
static bool
check_filter(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at)
{
	if (m->filter == NULL || m->filter_sql != NULL)
		return true;
	sync_begin_txn();
	if (!ConditionalLockRelationOid(m->relid, AccessShareLock))
	{
		sync_end_txn();
		st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
		if (*wake_at == 0 || st->next_attempt < *wake_at)
			*wake_at = st->next_attempt;
		return false;
	}
	(void) mirror_filter_sql(m);
	if (m->filter_node_derived != NULL && m->filter_node == NULL)
	{
		/* a filter stored by 0.4 (not bound by ALTER EXTENSION UPDATE), bound now */
		mirror_filter_store_bound(m, m->filter_node_derived);
	}
	else
	{
		/*
		 * Renames are followed by the DDL's own transaction; this catches what no event
		 * trigger reports (the text shown and dumped, and the references, follow the tree)
		 */
		mirror_filter_follow_names(m);
	}
	sync_end_txn();
	return true;
}

/*
 * Whether the table can be read now: false while another session holds a lock that
 * stops the worker's reads, in particular chroma_unmirror's until its transaction (or
 * savepoint) ends. The mirror is then left alone: that session may also hold the mirror
 * row and its queue and resend rows, and waiting for them would stop every mirror of
 * the database. Looked at again in a second.
 */
static bool
table_free(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at)
{
	bool		unlocked;

	sync_begin_txn();
	unlocked = ConditionalLockRelationOid(m->relid, AccessShareLock);
	sync_end_txn();
	if (!unlocked)
	{
		st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
		if (*wake_at == 0 || st->next_attempt < *wake_at)
			*wake_at = st->next_attempt;
	}
	return unlocked;
}

static bool mirror_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at);

/*
 * Whether a paused mirror's 0.4 filter can be bound now: the extension is updated (0.5)
 * and the columns the filter reads are as recorded (the mirror may be paused for another
 * column's change: TAP 145).
 */
static bool
paused_filter_bindable(MirrorConfig *m)
{
	bool		r;

	sync_begin_txn();
	r = mirror_filter_binds() && mirror_columns_filter_intact(m);
	/* DDL ran since the update: bound only once confirmed, by chroma_resume() (TAP 160) */
	if (r)
	{
		MirrorConfig *now = mirror_load(m->mirror_id);

		r = now != NULL && !now->filter_ddl_after_update;
	}
	sync_end_txn();
	return r;
}

bool
sync_mirror_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at)
{
	bool		more = false;

	if (m->paused)
	{
		/*
		 * A filter stored by 0.4 is bound while paused too, once per mirror configuration
		 * (a failure is not tried again on every pass: TAP 141): renames that follow are
		 * then followed by its text (TAP 099), and chroma_resync can run (TAP 145).
		 */
		if (m->filter != NULL && m->filter_node == NULL && m->home &&
			st->paused_bind_generation != chroma_config_generation())
		{
			set_busy(m->mirror_id);
			if (!stop_requested(m) && table_free(m, st, wake_at) && paused_filter_bindable(m))
			{
				st->paused_bind_generation = chroma_config_generation();
				(void) check_filter(m, st, wake_at);
			}
			set_busy(0);
		}
		return false;
	}
	if (st->next_attempt != 0 && GetCurrentTimestamp() < st->next_attempt)
	{
		if (*wake_at == 0 || st->next_attempt < *wake_at)
			*wake_at = st->next_attempt;
		return false;
	}

	/*
	 * Busy first, then the request to leave: chroma_unmirror makes its request and then
	 * waits until the mirror is not busy, so either it sees this step or this step sees
	 * its request. After its request it holds the table's lock, which table_free sees.
	 */
	set_busy(m->mirror_id);
	if (!stop_requested(m) && table_free(m, st, wake_at))
	{
		if (!lending)
			st->lend_own_first = false; /* its own step: lent steps again after it */
		more = mirror_step(m, st, wake_at);
	}
	set_busy(0);
	return more;
}

static bool
mirror_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at)
{
	bool		more = false;

	if (!check_filter(m, st, wake_at))
		return false;
	if (!ensure_collection(m, st, wake_at))
		return true;
	sync_unknown_persist(st);	/* what an earlier step could not write */
	sync_unknown_requeue(st);
	if (st->resend_at != 0 && (*wake_at == 0 || st->resend_at < *wake_at))
		*wake_at = st->resend_at;
	if (!m->backfill_done)
	{
		if (lending)
			return true;		/* a lent step only drains; its own turn backfills */
		more |= run_pipeline(m, st, wake_at, true);
	}
	if (st->next_attempt == 0 || GetCurrentTimestamp() >= st->next_attempt)
		more |= run_pipeline(m, st, wake_at, false);
	return more;
}
