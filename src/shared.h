/*
 * shared.h — shared memory: one slot per database worker, the launcher, progress.
 */
#ifndef CHROMA_SYNC_SHARED_H
#define CHROMA_SYNC_SHARED_H

#include "postgres.h"

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#define CHROMA_MAX_DATABASES 64

typedef enum DbWorkerState
{
	DBW_IDLE = 0,				/* not running; start when selected */
	DBW_STARTING,				/* registered, not yet attached */
	DBW_RUNNING,
	DBW_DORMANT					/* no extension or no mirror: start only when poked */
} DbWorkerState;

typedef struct DbWorkerSlot
{
	Oid			dboid;			/* InvalidOid: free slot */
	DbWorkerState state;
	pid_t		pid;
	Latch	   *latch;			/* the worker's latch while running */
	int			failures;		/* consecutive failed starts, for backoff */
	TimestampTz next_start;		/* not before */
	TimestampTz started_at;
	int			busy_mirror;	/* mirror of the step under way, 0 = none */
	int			lent_from;		/* a step waiting while busy_mirror's lent step runs */
	bool		wake_pending;	/* woken since the worker last looked: do not go dormant */
	uint64		starts;			/* how often a worker was started (tests) */
} DbWorkerSlot;

/* A running chroma_upsert_query, for chroma_sync.upsert_progress. */
#define CHROMA_MAX_PROGRESS 32

typedef struct ProgressSlot
{
	pid_t		pid;			/* 0: free */
	Oid			dboid;
	char		collection[128];
	int64		rows_sent;
	TimestampTz started_at;
} ProgressSlot;

/*
 * A backend inside chroma_unmirror asks the worker to leave a mirror: each call has an
 * entry of its own (two calls, in one session or in two, never share one), from before
 * it waits for the worker until it holds the table's lock; after that the worker skips
 * the mirror because the table is locked (see sync_mirror_step), until the transaction
 * or the savepoint that took the lock ends.
 */
#define CHROMA_MAX_STOPS 128

typedef struct StopRequest
{
	Oid			dboid;			/* InvalidOid: free */
	int			mirror_id;
	pid_t		pid;			/* the backend that asked */
} StopRequest;

typedef struct ChromaShared
{
	LWLock	   *lock;
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	pg_atomic_uint64 config_generation;	/* bumped on every mirror configuration change */
	pg_atomic_uint64 progress;	/* bumped after every batch a worker completes */
	ConditionVariable progress_cv;
	DbWorkerSlot slots[CHROMA_MAX_DATABASES];
	ProgressSlot progress_slots[CHROMA_MAX_PROGRESS];
	StopRequest stops[CHROMA_MAX_STOPS];
} ChromaShared;

extern ChromaShared *chroma_shared;

/* Called from _PG_init (shared_preload_libraries). */
extern void chroma_shmem_install_hooks(void);

/* Slot of the database, or NULL (caller holds the lock). */
extern DbWorkerSlot *chroma_find_slot(Oid dboid);

/* Slot of the database, a free one, or a dormant one taken over; NULL: all in use (lock held). */
extern DbWorkerSlot *chroma_claim_slot(Oid dboid);

/* ERROR (53400) when the database cannot get a worker slot (a mirror is being created). */
extern void chroma_check_worker_slot(Oid dboid);

/* Wakes this database's worker; asks the launcher to start one when none runs. */
extern void chroma_wake_worker(Oid dboid);
extern void chroma_wake_running_worker(Oid dboid);

/* Tells waiters (chroma_flush) that a worker made progress. */
extern void chroma_report_progress(void);

/* Mirror configuration changed: backends reload their trigger caches. */
extern void chroma_bump_config(void);
extern void chroma_config_xact_end(bool committed);
extern uint64 chroma_config_generation(void);
extern bool chroma_config_changed_in_xact(void);

/* A request of this backend that the worker of this database leave the mirror; its index. */
extern int	chroma_stop_request(int mirror_id);
extern void chroma_stop_release(int index);

/* Whether a backend asks this database's worker to leave the mirror. */
extern bool chroma_stop_requested(int mirror_id);

#endif							/* CHROMA_SYNC_SHARED_H */
