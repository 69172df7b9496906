/*
 * shared.c — shared memory: one slot per database worker, the launcher, progress.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "shared.h"

ChromaShared *chroma_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(ChromaShared)));
	RequestNamedLWLockTranche("chroma_sync", 1);
}

static void
shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	chroma_shared = ShmemInitStruct("chroma_sync", sizeof(ChromaShared), &found);
	if (!found)
	{
		memset(chroma_shared, 0, sizeof(ChromaShared));
		chroma_shared->lock = &(GetNamedLWLockTranche("chroma_sync"))->lock;
		pg_atomic_init_u64(&chroma_shared->config_generation, 1);
		pg_atomic_init_u64(&chroma_shared->progress, 0);
		ConditionVariableInit(&chroma_shared->progress_cv);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
chroma_shmem_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

DbWorkerSlot *
chroma_find_slot(Oid dboid)
{
	for (int i = 0; i < CHROMA_MAX_DATABASES; i++)
		if (chroma_shared->slots[i].dboid == dboid)
			return &chroma_shared->slots[i];
	return NULL;
}

/*
 * The slot of the database, else a free one, else one whose worker went dormant (its
 * database had no mirror when it looked: it needs a worker only when woken, and then
 * takes a slot back the same way). NULL when every slot serves a database with mirrors.
 * Caller holds the lock exclusively.
 */
DbWorkerSlot *
chroma_claim_slot(Oid dboid)
{
	DbWorkerSlot *slot = chroma_find_slot(dboid);

	if (slot != NULL)
		return slot;
	slot = chroma_find_slot(InvalidOid);
	for (int i = 0; slot == NULL && i < CHROMA_MAX_DATABASES; i++)
		if (chroma_shared->slots[i].state == DBW_DORMANT && chroma_shared->slots[i].pid == 0)
			slot = &chroma_shared->slots[i];
	if (slot == NULL)
		return NULL;
	memset(slot, 0, sizeof(*slot));
	slot->dboid = dboid;
	return slot;
}

void
chroma_check_worker_slot(Oid dboid)
{
	DbWorkerSlot *slot = NULL;

	if (chroma_shared == NULL)
		return;

	/*
	 * Every slot taken may only mean that many databases' workers are still looking for
	 * mirrors (just started, or just created databases): one that finds none goes dormant
	 * and frees its slot within moments. Wait for that a little before refusing (TAP 031,
	 * under load).
	 */
	for (int tries = 0; tries < 100; tries++)
	{
		LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
		slot = chroma_claim_slot(dboid);
		if (slot != NULL && slot->state == DBW_DORMANT)
		{
			/* claimed for a mirror being created: started when its transaction commits */
			slot->state = DBW_IDLE;
			slot->failures = 0;
			slot->next_start = 0;
		}
		LWLockRelease(chroma_shared->lock);
		if (slot != NULL)
			break;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases have mirrors"),
				 errdetail("chroma_sync runs one worker per database, for at most %d databases with mirrors.",
						   CHROMA_MAX_DATABASES),
				 errhint("Unmirror the tables of a database that no longer needs them, or leave it out of chroma_sync.worker_databases.")));
}

/*
 * The latch of dboid's running worker, looked up under a shared lock; with
 * woken_only, only when a wake-up is already pending for it. NULL otherwise.
 */
static Latch *
running_worker_latch(Oid dboid, bool woken_only)
{
	DbWorkerSlot *slot;
	Latch	   *latch = NULL;

	LWLockAcquire(chroma_shared->lock, LW_SHARED);
	slot = chroma_find_slot(dboid);
	if (slot != NULL && slot->state == DBW_RUNNING && slot->latch != NULL &&
		(!woken_only || slot->wake_pending))
		latch = slot->latch;
	LWLockRelease(chroma_shared->lock);
	return latch;
}

/* Sets the latch of the worker of dboid if it runs; starts none. */
void
chroma_wake_running_worker(Oid dboid)
{
	Latch	   *latch;

	if (chroma_shared == NULL)
		return;
	if ((latch = running_worker_latch(dboid, false)) != NULL)
		SetLatch(latch);
}

void
chroma_wake_worker(Oid dboid)
{
	DbWorkerSlot *slot;
	Latch	   *latch = NULL;
	bool		poke_launcher = false;

	if (chroma_shared == NULL)
		return;
	/* the common case, a running worker that was already woken: a shared lock is enough */
	latch = running_worker_latch(dboid, true);
	if (latch)
	{
		SetLatch(latch);
		return;
	}

	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	slot = chroma_find_slot(dboid);
	if (slot != NULL && slot->state == DBW_RUNNING && slot->latch != NULL)
	{
		/* a worker about to go dormant sees this and looks again */
		slot->wake_pending = true;
		latch = slot->latch;
	}
	else
	{
		if (slot == NULL)
			slot = chroma_claim_slot(dboid);
		if (slot != NULL)
		{
			if (slot->state == DBW_DORMANT)
			{
				slot->state = DBW_IDLE;
				slot->failures = 0;
				slot->next_start = 0;
			}
		}
		poke_launcher = true;
	}
	if (poke_launcher && chroma_shared->launcher_latch)
		latch = chroma_shared->launcher_latch;
	LWLockRelease(chroma_shared->lock);
	if (latch)
		SetLatch(latch);
}

void
chroma_report_progress(void)
{
	pg_atomic_fetch_add_u64(&chroma_shared->progress, 1);
	ConditionVariableBroadcast(&chroma_shared->progress_cv);
}

/* A change of this transaction: bumped again once it has committed (see below). */
static bool bump_at_commit = false;

void
chroma_bump_config(void)
{
	if (chroma_shared)
		pg_atomic_fetch_add_u64(&chroma_shared->config_generation, 1);
	bump_at_commit = true;
}

/*
 * Called at the end of every transaction. A backend that reloaded its cache between
 * the bump and the commit read the configuration as it was before the change, under
 * the new generation: the second bump, after the commit is visible, makes it read again.
 */
void
chroma_config_xact_end(bool committed)
{
	if (bump_at_commit && committed && chroma_shared)
		pg_atomic_fetch_add_u64(&chroma_shared->config_generation, 1);
	bump_at_commit = false;
}

/* Whether this transaction changed the configuration (not yet committed). */
bool
chroma_config_changed_in_xact(void)
{
	return bump_at_commit;
}

uint64
chroma_config_generation(void)
{
	return chroma_shared ? pg_atomic_read_u64(&chroma_shared->config_generation) : 0;
}

/* Frees the requests of a backend that exits in the middle of chroma_unmirror (FATAL). */
static void
release_stops_at_exit(int code, Datum arg)
{
	if (chroma_shared == NULL)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_STOPS; i++)
		if (chroma_shared->stops[i].pid == MyProcPid)
			memset(&chroma_shared->stops[i], 0, sizeof(StopRequest));
	LWLockRelease(chroma_shared->lock);
}

int
chroma_stop_request(int mirror_id)
{
	static bool exit_hook = false;
	int			index = -1;

	if (!exit_hook)
	{
		before_shmem_exit(release_stops_at_exit, (Datum) 0);
		exit_hook = true;
	}
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CHROMA_MAX_STOPS && index < 0; i++)
		if (!OidIsValid(chroma_shared->stops[i].dboid))
		{
			index = i;
			chroma_shared->stops[i].dboid = MyDatabaseId;
			chroma_shared->stops[i].mirror_id = mirror_id;
			chroma_shared->stops[i].pid = MyProcPid;
		}
	LWLockRelease(chroma_shared->lock);
	if (index < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many chroma_unmirror calls are running at once"),
				 errdetail("At most %d calls can wait for a worker to leave their mirror at the same time.",
						   CHROMA_MAX_STOPS),
				 errhint("Try again when some of them have returned.")));
	return index;
}

void
chroma_stop_release(int index)
{
	if (index < 0 || index >= CHROMA_MAX_STOPS)
		return;
	LWLockAcquire(chroma_shared->lock, LW_EXCLUSIVE);
	if (chroma_shared->stops[index].pid == MyProcPid)
		memset(&chroma_shared->stops[index], 0, sizeof(StopRequest));
	LWLockRelease(chroma_shared->lock);
}

bool
chroma_stop_requested(int mirror_id)
{
	bool		stop = false;

	LWLockAcquire(chroma_shared->lock, LW_SHARED);
	for (int i = 0; i < CHROMA_MAX_STOPS && !stop; i++)
		stop = chroma_shared->stops[i].dboid == MyDatabaseId &&
			chroma_shared->stops[i].mirror_id == mirror_id;
	LWLockRelease(chroma_shared->lock);
	return stop;
}
