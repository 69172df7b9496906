/*
 * sync_batch.h — a batch of the worker's records and the outcome of sending it
 * (shared by sync.c, which reads and finishes batches, and sync_send.c, which sends them).
 */
#ifndef CHROMA_SYNC_SYNC_BATCH_H
#define CHROMA_SYNC_SYNC_BATCH_H

#include "postgres.h"

#include "chroma_api.h"
#include "encode.h"
#include "mirror_config.h"

/* One record of a batch, copied out of the read transaction. */
typedef struct SyncRecord
{
	char	   *key;			/* Chroma id, server encoding */
	cs_record	rec;			/* UTF-8 fields for the encoder */
	bool		upsert;			/* false: delete */
	bool		clear_document; /* document is NULL: delete before the upsert */
	char	   *error;			/* failed locally: the reason */
	bool		deferred;		/* not read: over the batch's byte budget (stays queued) */
} SyncRecord;

/*
 * What a batch may hold of embeddings, documents and metadata (a request is at most
 * CHROMA_MAX_BODY_BYTES anyway): 500 rows of 2 MB documents are read a few at a time,
 * not a gigabyte at once. A row larger than this alone is still read, alone. The worker's
 * batches in flight share it (Batch.budget).
 */
#define SYNC_BATCH_BYTES ((size_t) 32 * 1024 * 1024)

typedef struct Batch
{
	int			n;
	SyncRecord *recs;
	int			nqids;
	int64	   *qids;
	int			dim;
	List	   *new_keys;		/* metadata keys seen for the first time */
	char	   *last_key;		/* backfill: watermark after this page */
	char	   *page_after;		/* backfill: the watermark the page was read after */
	bool		budget_cut;		/* rows were left for the next batch (the byte budget) */
	size_t		budget;			/* its byte budget (0: SYNC_BATCH_BYTES) */
	size_t		bytes;			/* what the records read so far hold */
	int			rows_read;
} Batch;

typedef enum SendOutcome
{
	SEND_OK,
	SEND_RETRY,					/* transient: keep entries, back off */
	SEND_STOP					/* auth or collection gone: pause the mirror */
} SendOutcome;

typedef struct SendResult
{
	SendOutcome outcome;
	bool		outcome_unknown;
	bool		collection_gone;	/* 404: look the collection up again on resume */
	char	   *message;
	uint64		acknowledged;
	List	   *unknown_ids;	/* ids of a delete whose outcome is unknown (not the batch's) */
	long		retry_after_s;	/* SEND_RETRY: the server's Retry-After (0: none) */
	bool		throttled;		/* SEND_RETRY: HTTP 429 or 503, the server sheds load */
} SendResult;

/*
 * A batch that goes out as one request without waiting for it (the worker's pipeline):
 * only upserts or only deletes, within one request's size, no document to clear.
 */
typedef struct SyncFlight
{
	const char *op;				/* "upsert" or "delete" */
	SyncRecord **recs;			/* the records sent (not the locally failed ones) */
	int			n;
	bool		base64;
	cs_buf		body;
	ChromaHttpRequest *req;		/* NULL: nothing to send */
} SyncFlight;

/* true (f filled, body encoded) when b can go out as one request; else use sync_send_batch */
extern bool sync_flight_prepare(MirrorConfig *m, Batch *b, SyncFlight *f);
/* Starts the request (after the rate limit); it proceeds while the caller reads more. */
extern void sync_flight_begin(MirrorConfig *m, SyncFlight *f);
/* Waits until the request's response has arrived, without looking at it. */
extern void sync_flight_wait(SyncFlight *f);
/* Waits for the request; a refused one is bisected (synchronously) like sync_send_batch. */
extern void sync_flight_finish(MirrorConfig *m, Batch *b, SyncFlight *f, SendResult *res);

/* SEND_OK, SEND_RETRY or SEND_STOP (filling res), or (SendOutcome) -1: refused, bisect. */
extern SendOutcome sync_classify(ChromaResponse *resp, SendResult *res);
extern void sync_post(const char *url, cs_buf *body, ChromaResponse *resp);
/* Deletes (and clears documents) then upserts the batch's records; refused rows get a reason. */
extern void sync_send_batch(MirrorConfig *m, Batch *b, SendResult *res);
/* Deletes every record of the collection, page by page (TRUNCATE barrier). */
extern bool sync_clear_collection(MirrorConfig *m, SendResult *res);

/* ---- the worker's transactions (sync_txn.c) ---- */

/* The memory context the last sync_begin_txn was called in (restored by sync_end_txn). */
extern MemoryContext sync_txn_caller_ctx;
extern void sync_begin_txn(void);
extern void sync_end_txn(void);
/* Call after a read, before sending what it read (see sync_txn.c). */
extern void sync_flush_wal_of_read(void);
/* Runs a statement through SPI; any other result than expect is an ERROR. */
extern void sync_exec(const char *sql, int nargs, Oid *types, Datum *values,
					  const char *nulls, int expect);
extern Datum sync_text_array(List *strings);
/*
 * Runs fn(arg) in an internal subtransaction. False, with the error's message copied into
 * errctx, when it raised an ERROR (its work rolled back); the caller's memory context and
 * resource owner are current again either way. A transient error (deadlock, serialization
 * failure, lock not available) is raised again after the rollback.
 */
extern bool sync_try_subxact(void (*fn) (void *arg), void *arg, MemoryContext errctx,
							 char **error);
extern bool sync_try_subxact_code(void (*fn) (void *arg), void *arg, MemoryContext errctx,
								  char **error, int *sqlerrcode);

/* ---- reading rows (sync_rows.c) ---- */

/* Runs the mirror's SELECT as the mirror's owner. */
extern void sync_select_as_owner(MirrorConfig *m, const char *sql, int nargs, Oid *types,
								 Datum *values);
/* qsort/bsearch comparators: key strings, and SyncRecords by key */
extern int	sync_compare_keys(const void *a, const void *b);
extern int	sync_compare_records(const void *a, const void *b);
/* Reads the current rows of b->recs[0..b->n) (sorted by key) into the records. */
extern void sync_read_rows(MirrorConfig *m, Batch *b, MemoryContext batch_ctx);
/* Reads a backfill page with its rows (bad rows fail alone); returns its number of keys. */
extern uint64 sync_read_page(MirrorConfig *m, Batch *b, const char *after, int limit,
							 MemoryContext batch_ctx);
/* Persists newly seen metadata keys and a newly fixed dimension (before sending). */
extern void sync_remember_keys_and_dimension(MirrorConfig *m, Batch *b, MemoryContext keep);

#endif							/* CHROMA_SYNC_SYNC_BATCH_H */
