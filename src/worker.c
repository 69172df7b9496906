/*
 * worker.c — the launcher and the per-database workers.
 *
 * The launcher (one per cluster) starts exactly one worker per selected database, with
 * capped exponential backoff after failed or crashed starts. A worker that finds no
 * extension or no mirror goes dormant until a mirror is created or a change commits in
 * its database. Both idle during recovery and start working after promotion.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "http.h"
#include "mirror_check.h"
#include "mirror_columns.h"
#include "mirror_config.h"
#include "shared.h"
#include "sync.h"
#include "unsettled.h"
#include "worker.h"

PGDLLEXPORT void chroma_launcher_main(Datum arg);
PGDLLEXPORT void chroma_worker_main(Datum arg);

char	   *chroma_worker_databases = NULL;

#define MAX_BACKOFF_MS 60000
#define IDLE_WAIT_MS 10000
/* A worker with no mirror left goes dormant (exits) after this long. */
#define DORMANT_AFTER_MS 10000
/* A terminated launcher is back after this long (the postmaster restarts it). */
#define LAUNCHER_RESTART_S 1
/* A worker registered by an earlier launcher that never claimed its slot is given up. */
#define STARTING_TIMEOUT_MS 30000

void
chroma_register_launcher(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = LAUNCHER_RESTART_S;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "chroma_sync");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "chroma_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "chroma_sync launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "chroma_sync launcher");
	RegisterBackgroundWorker(&bgw);
}

/* ---- the launcher ---- */

typedef struct DbInfo
{
	Oid			oid;
	char		name[NAMEDATALEN];
} DbInfo;

/*
 * The entries of chroma_sync.worker_databases, as written: comma-separated, blanks
 * around an entry ignored, double quotes optional ("a,b" names a database with a comma).
 * Names are never case-folded: a database called RT2Mixed is selected by RT2Mixed.
 */
static List *
worker_database_names(void)
{
	List	   *names = NIL;
	const char *p = chroma_worker_databases;

	if (p == NULL)
		return NIL;
	for (;;)
	{
		StringInfoData name;

		initStringInfo(&name);
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p == '"')
		{
			for (p++; *p != '\0'; p++)
			{
				if (*p == '"' && p[1] == '"')
					appendStringInfoChar(&name, *p++);
				else if (*p == '"')
				{
					p++;
					break;
				}
				else
					appendStringInfoChar(&name, *p);
			}
			while (*p != '\0' && *p != ',')
				p++;
		}
		else
		{
			const char *start = p;
			const char *end;

			while (*p != '\0' && *p != ',')
				p++;
			end = p;
			while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
				end--;
			appendBinaryStringInfo(&name, start, end - start);
		}
		if (name.len > 0)
			names = lappend(names, name.data);
		if (*p != ',')
			break;
		p++;
	}
	return names;
}

static bool
database_selected(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp((char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * Databases that should have a worker now, allocated in the caller's context. Entries
 * of chroma_sync.worker_databases that name no database are logged once per change of
 * the setting.
 */
static List *
selected_databases(void)
{
	List	   *result = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;
	bool		star = chroma_worker_databases && strcmp(chroma_worker_databases, "*") == 0;
	List	   *names = star ? NIL : worker_database_names();
	List	   *matched = NIL;
	ListCell   *lc;
	static char *warned_for = NULL;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		DbInfo	   *info;

		MemoryContext txn = MemoryContextSwitchTo(caller);

		if (!star && database_selected(names, NameStr(db->datname)))
			matched = lappend(matched, pstrdup(NameStr(db->datname)));
		MemoryContextSwitchTo(txn);
		if (!db->datallowconn)
			continue;
		/* templates only when named: a connection to one blocks CREATE DATABASE */
		if (db->datistemplate && star)
			continue;
		if (!star && !database_selected(names, NameStr(db->datname)))
			continue;
		txn = MemoryContextSwitchTo(caller);
		info = palloc(sizeof(DbInfo));
		info->oid = db->oid;
		strlcpy(info->name, NameStr(db->datname), NAMEDATALEN);
		result = lappend(result, info);
		MemoryContextSwitchTo(txn);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(caller);

	if (chroma_worker_databases != NULL &&
		(warned_for == NULL || strcmp(warned_for, chroma_worker_databases) != 0))
	{
		foreach(lc, names)
		{
			char	   *name = (char *) lfirst(lc);

			if (!database_selected(matched, name))
				ereport(LOG,
						(errmsg("chroma_sync.worker_databases names \"%s\", which is no database of this cluster",
								name),
						 errhint("Database names are matched exactly as written, case included.")));
		}
		if (warned_for)
			pfree(warned_for);
		warned_for = MemoryContextStrdup(TopMemoryContext, chroma_worker_databases);
	}
	return result;
}

static BackgroundWorkerHandle *handles[CHROMA_MAX_DATABASES];
/* Databases whose worker found no mirror and whose slot another database took over. */
static List *dormant_dbs = NIL;

static long
backoff_ms(int failures)
{
	long		ms = 1000L << Min(failures, 8);

	return Min(ms, MAX_BACKOFF_MS);
}

static bool
start_worker(DbWorkerSlot *slot, int index)
{
	BackgroundWorker bgw;
	MemoryContext old;
	bool		ok;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;	/* the launcher restarts, with backoff */
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "chroma_sync");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "chroma_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "chroma_sync worker for database %u", slot->dboid);
	snprintf(bgw.bgw_type, BGW_MAXLEN, "chroma_sync worker");
	bgw.bgw_main_arg = ObjectIdGetDatum(slot->dboid);
	bgw.bgw_notify_pid = MyProcPid;
	/* the handle outlives the pass (whose memory is reset) */
	old = MemoryContextSwitchTo(TopMemoryContext);
	ok = RegisterDynamicBackgroundWorker(&bgw, &handles[index]);
	MemoryContextSwitchTo(old);
	return ok;
}

/* Whether a live process holds the slot (caller holds the lock). */
static bool
slot_worker_alive(DbWorkerSlot *slot)
{
	return slot->pid != 0 && kill(slot->pid, 0) == 0;
}

/* Crashed, terminated or refused: try again later, less often each time. */
static void
slot_restart_later(DbWorkerSlot *slot, TimestampTz now)
{
	slot->state = DBW_IDLE;
	slot->pid = 0;
	slot->latch = NULL;
	slot->next_start = TimestampTzPlusMilliseconds(now, backoff_ms(slot->failures));
	slot->failures++;
}

/* One pass: start what should run, notice what stopped, forget dropped databases. */
static TimestampTz
launcher_pass(void)
{
	List	   *dbs = selected_databases();
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = TimestampTzPlusMilliseconds(now, IDLE_WAIT_MS);
	ListCell   *lc;

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);

	/*
	 * Slots for newly seen databases, so each is looked at once. A database whose worker
	 * found nothing to do and whose slot was taken over by another is not looked at
	 * again: it gets a slot back when woken (a commit on a mirrored table, a new mirror).
	 */
	foreach(lc, dbs)
	{
		DbInfo	   *db = (DbInfo *) lfirst(lc);

		if (chroma_find_slot(db->oid) == NULL && !list_member_oid(dormant_dbs, db->oid))
		{
			DbWorkerSlot *slot;
			Oid			evicted = InvalidOid;

			slot = chroma_find_slot(InvalidOid);
			for (int i = 0; slot == NULL && i < CHROMA_MAX_DATABASES; i++)
				if (chroma_shared->slots[i].state == DBW_DORMANT && chroma_shared->slots[i].pid == 0 &&
					handles[i] == NULL)
				{
					slot = &chroma_shared->slots[i];
					evicted = slot->dboid;
				}
			if (slot == NULL)
				break;
			if (OidIsValid(evicted))
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

				dormant_dbs = lappend_oid(dormant_dbs, evicted);
				MemoryContextSwitchTo(old);
			}
			memset(slot, 0, sizeof(*slot));
			slot->dboid = db->oid;
		}
	}
	/* a database that has a slot again (woken) is no longer known dormant */
	{
		List	   *still = NIL;
		ListCell   *dc;
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		foreach(dc, dormant_dbs)
			if (chroma_find_slot(lfirst_oid(dc)) == NULL)
				still = lappend_oid(still, lfirst_oid(dc));
		list_free(dormant_dbs);
		dormant_dbs = still;
		MemoryContextSwitchTo(old);
	}
	for (int i = 0; i < CHROMA_MAX_DATABASES; i++)
	{
		DbWorkerSlot *slot = &chroma_shared->slots[i];
		bool		selected = false;
		pid_t		pid;

		if (slot->dboid == InvalidOid)
			continue;
		foreach(lc, dbs)
			if (((DbInfo *) lfirst(lc))->oid == slot->dboid)
				selected = true;

		/* notice stopped workers */
		if (handles[i] != NULL &&
			GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED)
		{
			pfree(handles[i]);
			handles[i] = NULL;
			/* unless another worker holds the slot (one started by an earlier launcher) */
			if (slot->state != DBW_DORMANT && !slot_worker_alive(slot))
				slot_restart_later(slot, now);
		}
		else if (handles[i] == NULL &&
				 (slot->state == DBW_RUNNING || slot->state == DBW_STARTING) &&
				 !slot_worker_alive(slot) &&
				 (slot->state == DBW_RUNNING ||
				  TimestampDifferenceExceeds(slot->started_at, now, STARTING_TIMEOUT_MS)))
		{
			/* a worker this launcher did not start (a launcher restart) is gone */
			slot_restart_later(slot, now);
		}

		if (!selected)
		{
			/* also a worker an earlier launcher started (this one has no handle for it) */
			if (slot_worker_alive(slot))
				kill(slot->pid, SIGTERM);
			else if (handles[i] == NULL)
				memset(slot, 0, sizeof(*slot));
			continue;
		}
		if (slot->state == DBW_IDLE && handles[i] == NULL)
		{
			if (slot->next_start <= now)
			{
				if (start_worker(slot, i))
				{
					slot->state = DBW_STARTING;
					slot->starts++;
					slot->started_at = now;
				}
				else
					slot->next_start = TimestampTzPlusMilliseconds(now, 1000);
			}
			if (slot->state == DBW_IDLE && slot->next_start < next)
				next = slot->next_start;
		}
	}
	LWLockRelease(chroma_shared->lock);
	return next;
}

static void
launcher_exit(int code, Datum arg)
{
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	if (chroma_shared->launcher_pid == MyProcPid)
	{
		chroma_shared->launcher_pid = 0;
		chroma_shared->launcher_latch = NULL;
	}
	LWLockRelease(chroma_shared->lock);
}

void
chroma_launcher_main(Datum arg)
{
	MemoryContext pass_ctx;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("chroma_sync launcher");

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	chroma_shared->launcher_pid = MyProcPid;
	chroma_shared->launcher_latch = MyLatch;
	/*
	 * After a launcher restart, the workers the last one started are unknown: a slot
	 * whose worker is gone (or never claimed it) is started afresh; a live worker keeps
	 * its slot and is noticed by its pid when it exits.
	 */
	for (int i = 0; i < CHROMA_MAX_DATABASES; i++)
	{
		DbWorkerSlot *slot = &chroma_shared->slots[i];

		if ((slot->state == DBW_STARTING || slot->state == DBW_RUNNING) && !slot_worker_alive(slot))
		{
			slot->state = DBW_IDLE;
			slot->pid = 0;
			slot->latch = NULL;
		}
	}
	LWLockRelease(chroma_shared->lock);
	before_shmem_exit(launcher_exit, (Datum) 0);
	pass_ctx = AllocSetContextCreate(TopMemoryContext, "chroma_sync launcher pass",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		TimestampTz next;
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextReset(pass_ctx);
		MemoryContextSwitchTo(pass_ctx);
		next = launcher_pass();
		MemoryContextSwitchTo(TopMemoryContext);
		wait_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(wait_ms, 10), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ---- a database's worker ---- */

static DbWorkerSlot *my_slot = NULL;
static List *states = NIL;		/* MirrorState of every mirror seen */

static void
worker_exit(int code, Datum arg)
{
	Latch	   *launcher = NULL;

	if (my_slot == NULL)
		return;

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	if (my_slot->pid == MyProcPid)
	{
		my_slot->pid = 0;
		my_slot->latch = NULL;
		my_slot->busy_mirror = 0;
		my_slot->lent_from = 0;
		/* terminated or failed: the launcher starts another (whoever started this one) */
		if (my_slot->state == DBW_RUNNING)
		{
			my_slot->state = DBW_IDLE;
			my_slot->next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 1000);
		}
		launcher = chroma_shared->launcher_latch;
	}
	LWLockRelease(chroma_shared->lock);
	ConditionVariableBroadcast(&chroma_shared->progress_cv);
	if (launcher)
		SetLatch(launcher);
}

/* Exits until woken again, unless a wake-up came in since the mirrors were read. */
static void
go_dormant(void)
{
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	if (my_slot->wake_pending)
	{
		LWLockRelease(chroma_shared->lock);
		return;
	}
	my_slot->state = DBW_DORMANT;
	my_slot->failures = 0;
	LWLockRelease(chroma_shared->lock);
	proc_exit(0);
}

/*
 * Outcome-unknown keys still in memory of mirrors removed since (writing them failed, or
 * their request ended after the removal): written now, and handed on to the collection
 * (sync_unknown_persist). Outside a transaction.
 */
static void
persist_removed_mirrors(List *mirrors)
{
	ListCell   *lc;

	foreach(lc, states)
	{
		MirrorState *st = (MirrorState *) lfirst(lc);
		bool		present = false;
		ListCell   *mc;

		if (st->unknown_keys == NIL)
			continue;
		foreach(mc, mirrors)
			if (((MirrorConfig *) lfirst(mc))->mirror_id == st->mirror_id)
				present = true;
		if (!present)
			sync_unknown_persist(st);
	}
}

static MirrorState *
state_for(List **states, int mirror_id)
{
	ListCell   *lc;
	MirrorState *st;
	MemoryContext old;

	foreach(lc, *states)
	{
		st = (MirrorState *) lfirst(lc);
		if (st->mirror_id == mirror_id)
			return st;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	st = palloc0_object(MirrorState);
	st->mirror_id = mirror_id;
	*states = lappend(*states, st);
	MemoryContextSwitchTo(old);
	return st;
}

#define RESTORED_COPY_REASON "this mirror was created in another database or cluster, or for a table since " \
	"restored in its place (a restored copy?); " \
	"mirror the table into another collection, or take this one over with chroma_adopt()"

/* Mirrors to work on; drops those whose table is gone, pauses restored copies. */
static List *
load_mirrors(bool *have_extension)
{
	List	   *mirrors = NIL;
	MemoryContext caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	*have_extension = OidIsValid(get_extension_oid("chroma_sync", true));
	if (*have_extension)
	{
		ListCell   *lc;

		MemoryContextSwitchTo(caller);
		mirrors = mirror_load_all();
		foreach(lc, mirrors)
		{
			MirrorConfig *m = (MirrorConfig *) lfirst(lc);
			char	   *sql = NULL;
			char	   *problem;

			if (get_rel_name(m->relid) == NULL)
				sql = psprintf("DELETE FROM chroma_sync.queue WHERE mirror_id = %d; "
							   "DELETE FROM chroma_sync.failed WHERE mirror_id = %d; "
							   "DELETE FROM chroma_sync.mirror WHERE mirror_id = %d",
							   m->mirror_id, m->mirror_id, m->mirror_id);
			else if (!m->home)
			{
				/* the reason follows the table's columns (DDL in the copy) until it is adopted */
				const char *reason = quote_literal_cstr(psprintf("%s%s%s", RESTORED_COPY_REASON,
																 m->column_problem ? " once the table's columns match the mirror's: " : "",
																 m->column_problem ? m->column_problem : ""));

				sql = psprintf("UPDATE chroma_sync.mirror SET paused = true, paused_reason = %s "
							   "WHERE mirror_id = %d AND (NOT paused OR pg_catalog.starts_with(paused_reason, %s)) "
							   "AND paused_reason IS DISTINCT FROM %s",
							   reason, m->mirror_id, quote_literal_cstr(RESTORED_COPY_REASON), reason);
			}
			else if (mirror_columns_apply(m))
				continue;		/* paused: the columns changed */
			else if (!m->paused && (problem = mirror_shape_problem(m)) != NULL)
			{
				const char *q = quote_literal_cstr(problem);

				sql = psprintf("UPDATE chroma_sync.mirror SET paused = true, paused_reason = %s, "
							   "in_error = true, last_error = %s, last_error_at = pg_catalog.now() "
							   "WHERE mirror_id = %d", q, q, m->mirror_id);
			}
			if (sql)
			{
				bool		gone = get_rel_name(m->relid) == NULL;

				SPI_connect();
				/* the table is gone, the collection stays: its keys are handed on */
				if (gone)
					sync_unknown_forget_mirror(m->mirror_id, true);
				SPI_execute(sql, false, 0);
				SPI_finish();
				if (gone)
				{
					ListCell   *sc;

					/* another mirror of the collection may have taken them */
					foreach(sc, states)
						((MirrorState *) lfirst(sc))->resend_checked = false;
				}
				m->paused = true;
			}
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(caller);
	return mirrors;
}

static void record_failure(int mirror_id, const char *message, bool pause);
static bool run_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at,
					 MemoryContext step_ctx, bool lent);

/* ---- lent steps (sync.c, "lending a step's waits") ---- */

#define LENT_SLOW_MS 1000		/* a lent step this long ... */
#define LENT_SLOW_PAUSE_MS 60000	/* ... means none of that mirror for a minute */

static List *lend_mirrors = NIL;	/* this pass's mirrors */
static uint64 lend_generation = 0;	/* the configuration they were loaded in */
static TimestampTz *lend_wake_at = NULL;
static bool lend_more = false;	/* a lent step found more to do */
static MemoryContext lend_ctx = NULL;

/* Whether the two mirrors write to one collection (they never lend to each other). */
static bool
same_collection(MirrorConfig *a, MirrorConfig *b)
{
	if (strcmp(a->collection, b->collection) == 0)
		return true;
	return a->collection_id != NULL && b->collection_id != NULL &&
		pg_strcasecmp(a->collection_id, b->collection_id) == 0;
}

/* The mirror of this pass with that id (NULL: none). */
static MirrorConfig *
lend_mirror(int mirror_id)
{
	ListCell   *lc;

	foreach(lc, lend_mirrors)
	{
		if (((MirrorConfig *) lfirst(lc))->mirror_id == mirror_id)
			return (MirrorConfig *) lfirst(lc);
	}
	return NULL;
}

/*
 * One lent step of a mirror, while the step under way waits for its requests: a whole
 * step, its errors caught and recorded like any step's. The waiting mirror stays busy
 * for chroma_unmirror (lent_from) throughout.
 */
static void
lent_step(int mirror_id)
{
	MirrorConfig *m = lend_mirror(mirror_id);
	MirrorState *st;
	int			outer;
	TimestampTz started = GetCurrentTimestamp();

	if (m == NULL || m->paused || !m->backfill_done || lend_wake_at == NULL)
		return;
	/*
	 * Not with a configuration changed since the pass loaded it: a pause, a takeover of
	 * the collection (whose owner every mirror checks again before it writes: TAP 301), a
	 * resync wait for the next pass (red-team TAP 304, 308).
	 */
	if (chroma_config_generation() != lend_generation)
		return;
	st = state_for(&states, mirror_id);
	/* its collection, for its outcome-unknown keys if its row goes (red-team TAP 306) */
	sync_unknown_note_mirror(st, m);
	if (st->next_attempt != 0 && started < st->next_attempt)
		return;
	/* its last lent step was slow (below), or left a TRUNCATE to its own step */
	if ((st->lend_slow_until != 0 && started < st->lend_slow_until) || st->lend_own_first)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	outer = my_slot->busy_mirror;
	my_slot->lent_from = outer;
	LWLockRelease(chroma_shared->lock);
	PG_TRY();
	{
		lend_more |= run_step(m, st, lend_wake_at, lend_ctx, true);
	}
	PG_FINALLY();
	{
		LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
		my_slot->busy_mirror = outer;
		my_slot->lent_from = 0;
		LWLockRelease(chroma_shared->lock);
	}
	PG_END_TRY();

	/*
	 * A lent step waits for its own request, which holds back the mirror that lent its
	 * wait: a mirror whose lent step took long (a slow collection) has none for a while,
	 * only its own steps (red-team TAP 307).
	 */
	if (TimestampDifferenceExceeds(started, GetCurrentTimestamp(), LENT_SLOW_MS))
	{
		st->lend_slow_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LENT_SLOW_PAUSE_MS);
		elog(DEBUG1, "chroma_sync: mirror %d: its lent step was slow: no lent step of it for %d s",
			 mirror_id, LENT_SLOW_PAUSE_MS / 1000);
	}
}

/* One step of one mirror; an error is recorded and backed off, never fatal. */
static bool
run_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at, MemoryContext step_ctx,
		 bool lent)
{
	MemoryContext old = CurrentMemoryContext;
	volatile bool more = false;
	uint64		mark = chroma_http_mark();

	MemoryContextReset(step_ctx);
	MemoryContextSwitchTo(step_ctx);
	PG_TRY();
	{
		pgstat_report_activity(STATE_RUNNING, m->collection);
		more = sync_mirror_step(m, st, wake_at);
		sync_transient_reset();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *message;
		bool		pause;

		MemoryContextSwitchTo(step_ctx);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		/* a lent step's error leaves the waiting step's requests in flight */
		if (lent)
			chroma_http_abort_since(mark);
		else
			chroma_http_abort_all();
		sync_abandon(st);
		/* the detail holds Chroma's answer (HTTP status and message) */
		message = edata->detail ? psprintf("%s: %s", edata->message, edata->detail) : edata->message;
		/* a key refused (401/403) on any request: no retry helps, like a refused batch */
		pause = edata->sqlerrcode == ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		/* a stored filter that no longer passes its check: no retry helps either */
		if (m->filter_needs_confirmation)
		{
			/* DDL before the binding of a 0.4 text: the reason says what confirms it */
			pause = true;
			message = edata->hint ? psprintf("%s: %s", edata->message, edata->hint) : edata->message;
		}
		else if (m->filter_invalid)
		{
			pause = true;
			message = psprintf("the stored filter \"%s\" is refused (re-create the mirror): %s",
							   m->filter, message);
		}
		/* already paused (its 0.4 filter bound while paused): the reason stays the one given */
		if (m->paused)
			pause = false;
		ereport(LOG,
				(errmsg("chroma_sync: mirror of \"%s\" %s: %s",
						m->collection, pause ? "paused" : "failed", message)));
		record_failure(m->mirror_id, message, pause);
		if (pause)
			m->paused = true;	/* for the rest of the pass (a lent step looks at it) */
		st->failures++;
		st->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Min(1000L << Min(st->failures, 6),
														   (long) chroma_retry_max_delay_ms));
		if (*wake_at == 0 || st->next_attempt < *wake_at)
			*wake_at = st->next_attempt;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	return more;
}

/* Records a step's error in a fresh transaction, never in the one that failed. */
static void
record_failure(int mirror_id, const char *message, bool pause)
{
	const char *q = quote_literal_cstr(message);

	PG_TRY();
	{
		StartTransactionCommand();
		sync_txn_apply_lock_timeout();	/* a lent step's (sync_txn.c) */
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_execute(psprintf("UPDATE chroma_sync.mirror SET in_error = true, "
							 "last_error = %s, last_error_at = pg_catalog.now()%s "
							 "WHERE mirror_id = %d",
							 q, pause ? psprintf(", paused = true, paused_reason = %s", q) : "",
							 mirror_id),
					false, 0);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
}

void
chroma_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	MemoryContext loop_ctx;
	MemoryContext step_ctx;
	TimestampTz idle_since = 0;		/* since when no mirror was found */
	TimestampTz unsettled;		/* nothing is sent before (unsettled.c) */
	bool		timeline_checked = false;
	uint64		owners_generation = 0;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("chroma_sync worker");
	mirror_filter_in_worker = true;
	mirror_fix_render_settings();
	/* the worker's own statements pin search_path (the owners' SELECTs too: mirror_config.h) */
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);

	/*
	 * The worker's own commits (queue entries done, progress, watermarks) need not wait
	 * for the WAL flush: after a crash, what they record is just done again (upserts and
	 * deletes are idempotent). The one exception, metadata keys remembered before they
	 * are sent, commits synchronously (sync.c).
	 */
	(void) set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);

	/*
	 * Chroma's answers are UTF-8 and are converted outside transactions too: with UTF-8 as
	 * the worker's client encoding, that conversion is the cached one (in a LATIN1
	 * database no mirror synced before, red-team TAP 302). Looked up in a transaction.
	 */
	StartTransactionCommand();
	(void) set_config_option("client_encoding", "UTF8", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, WARNING, false);
	CommitTransactionCommand();

	/* exactly one worker per database: claim the slot or leave */
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	my_slot = chroma_find_slot(dboid);
	if (my_slot == NULL || (my_slot->pid != 0 && my_slot->pid != MyProcPid &&
							kill(my_slot->pid, 0) == 0))
	{
		LWLockRelease(chroma_shared->lock);
		my_slot = NULL;
		proc_exit(0);
	}
	my_slot->pid = MyProcPid;
	my_slot->latch = MyLatch;
	my_slot->state = DBW_RUNNING;
	LWLockRelease(chroma_shared->lock);
	before_shmem_exit(worker_exit, (Datum) 0);

	unsettled = unsettled_begin();
	if (unsettled != 0)
		ereport(LOG,
				(errmsg("chroma_sync worker: requests of the previous worker of this database may still be applied until %s: nothing is sent before then",
						timestamptz_to_str(unsettled)),
				 errdetail("That worker exited with requests whose answer had not come (terminated, killed, or the server stopped): a newer state sent before them could be overwritten.")));

	loop_ctx = AllocSetContextCreate(TopMemoryContext, "chroma_sync worker loop",
									 ALLOCSET_DEFAULT_SIZES);
	step_ctx = AllocSetContextCreate(TopMemoryContext, "chroma_sync worker step",
									 ALLOCSET_DEFAULT_SIZES);
	lend_ctx = AllocSetContextCreate(TopMemoryContext, "chroma_sync worker lent step",
									 ALLOCSET_DEFAULT_SIZES);
	sync_lend_hook = lent_step;
	chroma_http_wait_hook = sync_lend_wait;

	for (;;)
	{
		List	   *mirrors;
		ListCell   *lc;
		bool		more = false;
		bool		have_extension;
		TimestampTz wake_at = 0;
		long		wait_ms = IDLE_WAIT_MS;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			chroma_forget_server();
		}
		if (RecoveryInProgress())
		{
			/* a standby: the queue arrives with the WAL; work starts after promotion */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 5000, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		if (!timeline_checked)
		{
			TimestampTz other = unsettled_check_timeline();

			timeline_checked = true;
			unsettled = Max(unsettled, other);
		}
		if (unsettled != 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now < unsettled)
			{
				pgstat_report_activity(STATE_IDLE, "waiting for the previous worker's requests");
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 Max(1, Min(1000, TimestampDifferenceMilliseconds(now, unsettled))),
								 PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
				continue;
			}
			unsettled = 0;
		}

		MemoryContextReset(loop_ctx);
		MemoryContextSwitchTo(loop_ctx);
		LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
		my_slot->wake_pending = false;
		LWLockRelease(chroma_shared->lock);
		lend_generation = chroma_config_generation();	/* before the load: see lent_step */
		mirrors = load_mirrors(&have_extension);
		if (have_extension)
		{
			persist_removed_mirrors(mirrors);
			sync_unknown_collect();
		}
		if (chroma_config_generation() != owners_generation)
		{
			ListCell   *sc;

			/*
			 * A mirror made, adopted or resumed in this database may have taken a
			 * collection over: every mirror checks its collection's owner before it
			 * writes again, not up to a minute later (red-team TAP 301).
			 */
			owners_generation = chroma_config_generation();
			foreach(sc, states)
				((MirrorState *) lfirst(sc))->owner_checked_at = 0;
		}
		if (!have_extension || mirrors == NIL)
		{
			/*
			 * No mirror left: stay a while before going dormant, so a table unmirrored
			 * and mirrored again (to change its options) does not pay a worker start.
			 */
			if (have_extension)
			{
				TimestampTz now = GetCurrentTimestamp();

				if (idle_since == 0)
					idle_since = now;
				if (!TimestampDifferenceExceeds(idle_since, now, DORMANT_AFTER_MS))
				{
					(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
									 Max(1, DORMANT_AFTER_MS -
										 TimestampDifferenceMilliseconds(idle_since, now)),
									 PG_WAIT_EXTENSION);
					ResetLatch(MyLatch);
					continue;
				}
			}
			go_dormant();
			continue;			/* woken meanwhile: look again */
		}
		idle_since = 0;

		LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
		my_slot->failures = 0;
		LWLockRelease(chroma_shared->lock);

		foreach(lc, mirrors)
		{
			MirrorConfig *m = (MirrorConfig *) lfirst(lc);
			MirrorState *st = state_for(&states, m->mirror_id);
			int		   *ready_ids;
			int			nready = 0;
			int		   *lend_ids;
			int			nlend = 0;
			TimestampTz now = GetCurrentTimestamp();
			ListCell   *oc;

			sync_unknown_note_mirror(st, m);
			ready_ids = palloc_array(int, list_length(mirrors));
			lend_ids = palloc_array(int, list_length(mirrors));
			/* live changes first: the other mirrors ready to send end a long step early */
			foreach(oc, mirrors)
			{
				MirrorConfig *o = (MirrorConfig *) lfirst(oc);
				MirrorState *ost = state_for(&states, o->mirror_id);

				if (o != m && !o->paused && o->backfill_done &&
					(ost->next_attempt == 0 || ost->next_attempt <= now))
				{
					ready_ids[nready++] = o->mirror_id;
					/* and have lent steps while its step waits (another collection) */
					if (!same_collection(m, o))
						lend_ids[nlend++] = o->mirror_id;
				}
			}
			sync_set_yield_to(ready_ids, nready);
			sync_set_lend_to(m->mirror_id, lend_ids, nlend);
			lend_mirrors = mirrors;
			lend_wake_at = &wake_at;
			more |= run_step(m, st, &wake_at, step_ctx, false);
			sync_set_yield_to(NULL, 0);
			sync_set_lend_to(0, NULL, 0);
			lend_mirrors = NIL;
			lend_wake_at = NULL;
			more |= lend_more;
			lend_more = false;
			MemoryContextSwitchTo(loop_ctx);
		}
		pgstat_report_activity(STATE_IDLE, NULL);

		if (more)
		{
			/*
			 * Every mirror is looked at again at once; a commit from now on sets the latch
			 * again, and a long step reads that as another mirror's changes waiting.
			 */
			ResetLatch(MyLatch);
			continue;
		}
		if (wake_at != 0)
			wait_ms = Max(1, Min(IDLE_WAIT_MS, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), wake_at)));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

void
chroma_stop_worker_for_drop(Oid dboid)
{
	DbWorkerSlot *slot;
	pid_t		pid = 0;

	if (chroma_shared == NULL)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	slot = chroma_find_slot(dboid);
	if (slot != NULL)
	{
		pid = slot->pid;
		/* not restarted at once; if the database is gone, the launcher forgets it */
		slot->state = DBW_IDLE;
		slot->next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 5000);
	}
	LWLockRelease(chroma_shared->lock);
	if (pid == 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 500; i++)
	{
		bool		gone;

		LWLockAcquire(chroma_shared->lock, LW_SHARED);
		gone = (slot->pid != pid);
		LWLockRelease(chroma_shared->lock);
		if (gone)
			return;
		pg_usleep(10000);
		CHECK_FOR_INTERRUPTS();
	}
}
