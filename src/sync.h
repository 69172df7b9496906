/*
 * sync.h — the worker's work on one mirror: drain the queue, backfill, truncate,
 * isolate bad rows, back off through outages.
 */
#ifndef CHROMA_SYNC_SYNC_H
#define CHROMA_SYNC_SYNC_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/timestamp.h"

#include "mirror_config.h"

/* Worker-local state of one mirror (survives between steps, not restarts). */
typedef struct MirrorState
{
	int			mirror_id;
	TimestampTz next_attempt;	/* backoff: not before */
	int			failures;		/* consecutive transient failures */
	List	   *unknown_keys;	/* outcome-unknown keys not yet in chroma_sync.resend */
	uint64		unknown_seq;	/* the last request begun when unknown_keys were noted */
	bool		resend_checked; /* chroma_sync.resend looked at since the worker started */
	TimestampTz resend_at;		/* when its earliest key is due; 0: none */
	TimestampTz owner_checked_at;	/* last check of the collection's owner */
	void	   *pipeline;		/* the step's batches in flight (sync.c) */
	int			inflight_cap;	/* after a 429/503: requests in flight at most; 0: none */
	int			cap_successes;	/* requests acknowledged since the cap last grew */
	uint64		paused_bind_generation; /* configuration a paused mirror's 0.4 filter was bound in */
	uint64		resend_generation;	/* configuration chroma_sync.resend was last looked at in */
	uint64		resend_handovers;	/* this worker's hand-overs when it was last looked at */
	TimestampTz lend_slow_until;	/* no lent step of it before (its last one was slow) */
	bool		lend_own_first; /* a lent step left a TRUNCATE: none before its own step */
	char		collection_id[40];	/* the mirror's, for its keys once its row is gone ("": none) */
	char		collection[520];	/* and its name (a Chroma name has at most 512 bytes) */
} MirrorState;

/* Test setting: stall between reading a batch and deleting its entries (ms). */
extern int	chroma_test_stall_ms;
extern int	chroma_retry_max_delay_ms;
extern int	chroma_max_records_per_second;

/*
 * Does one unit of work for the mirror (a batch, a backfill page, a truncate) in its
 * own transactions. Returns true when there may be more to do right away.
 * Must be called outside a transaction.
 */
extern bool sync_mirror_step(MirrorConfig *m, MirrorState *st, TimestampTz *wake_at);

/*
 * After a step failed with an error (its requests aborted): the keys of requests that
 * may have reached Chroma are sent again after the next success. Call before the step's
 * memory is reset.
 */
extern void sync_abandon(MirrorState *st);
extern void sync_set_yield_to(int *ids, int n);

/*
 * Lending a step's waits (sync.c): the mirrors a waiting step may lend its wait to, and
 * the worker's function that runs one lent step of a mirror (a whole step, errors caught).
 */
typedef void (*sync_lend_fn) (int mirror_id);
extern sync_lend_fn sync_lend_hook;
extern void sync_set_lend_to(int from, int *ids, int n);
/* the HTTP client's wait hook in the worker (chroma_http_wait_hook) */
struct ChromaHttpRequest;
extern void sync_lend_wait(struct ChromaHttpRequest *req);
/* a lent step's transactions wait at most this long for a lock (0: as configured) */
extern int	sync_txn_lock_timeout_ms;
extern void sync_txn_apply_lock_timeout(void);

/* sync_abandon: the keys of the synchronous write an error interrupted (sync_send.c) */
extern bool sync_send_take_writing(MirrorState *st);
/* a lent step (sync_lend_wait): the waiting step's synchronous write, set aside and back */
extern void *sync_send_save_writing(void);
extern void sync_send_restore_writing(void *saved);

/* ---- outcome-unknown keys (sync_unknown.c) ---- */

/* Remembers a key of a request whose outcome is unknown (in memory until persisted). */
extern void sync_unknown_add(MirrorState *st, const char *key);
/* Writes the remembered keys to chroma_sync.resend (outside a transaction). */
extern void sync_unknown_persist(MirrorState *st);
/* Queues the keys that are due again (outside a transaction). */
extern void sync_unknown_requeue(MirrorState *st);
/* Drops a removed mirror's keys (in a transaction, SPI connected). */
extern void sync_unknown_forget_mirror(int mirror_id, bool keep_for_collection);
extern void sync_unknown_adopt_collection(int mirror_id);
/* Drops the keys kept for collections that are gone (worker, outside a transaction). */
extern void sync_unknown_collect(void);
/* Whether keys are kept for a collection of that name (connects SPI itself). */
extern bool sync_unknown_kept_for_name(const char *name);
/* Drops the keys kept for the collection, deleted (connects SPI itself). */
extern void sync_unknown_forget_collection(const char *collection_id);
/* Notes the mirror's collection in its state (for sync_unknown_persist). */
extern void sync_unknown_note_mirror(MirrorState *st, MirrorConfig *m);

/* A worker step ended well: transient read errors count from zero again (sync_txn.c). */
extern void sync_transient_reset(void);
/* a lent step: the waiting step's count, set aside (counting from 0) and back */
extern int	sync_transient_save(void);
extern void sync_transient_restore(int n);

#endif							/* CHROMA_SYNC_SYNC_H */
