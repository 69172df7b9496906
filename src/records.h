/*
 * records.h — validated record sets and the pipelined sender shared by the record
 * functions (and, later, the mirror worker's SQL-side helpers).
 */
#ifndef CHROMA_SYNC_RECORDS_H
#define CHROMA_SYNC_RECORDS_H

#include "chroma_sync.h"
#include "encode.h"
#include "http.h"
#include "utils/jsonb.h"

typedef struct RecordSet
{
	int			n;
	int			cap;
	cs_record  *recs;
	char	  **names;			/* id in server encoding, for messages */
	int64	   *positions;		/* 1-based position in the caller's input */
	int			dim;			/* floats per embedding; 0 when none */
	bool		with_embeddings;
	bool		with_documents;
	bool		with_metadatas;
} RecordSet;

/* An id of a request in flight (UTF-8, not terminated) */
typedef struct SenderId
{
	const char *id;
	size_t		len;
} SenderId;

/* One request of a sender: in flight, or the one being built. */
typedef struct SenderRequest
{
	ChromaHttpRequest *req;		/* NULL: not in flight */
	uint64		seq;			/* order in which the sender started its requests */
	int			n;				/* records in the request */
	int			nids;			/* ids kept for the overlap check (0: none kept) */
	SenderId   *ids;			/* those ids, sorted */
	MemoryContext ctx;			/* its body and ids; reset when the slot is reused */
} SenderRequest;

typedef struct RecordSender
{
	const char *collection;
	const char *op;				/* upsert, add, update, delete */
	char	   *collection_id;
	char	   *url;
	bool		base64;
	int			batch_size;
	int			dim;			/* the collection's dimension; 0 while unknown */
	uint64		sent;			/* records acknowledged */
	int			max_inflight;	/* requests in flight at most (1 unless set) */
	int			ninflight;
	uint64		next_seq;
	struct ChromaResponse *failure; /* the earliest started request that failed */
	uint64		failure_seq;
	MemoryContext mcxt;			/* where the slots' contexts are made */
	/* max_inflight in flight, and one more being built while they are */
	SenderRequest slots[CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT + 1];
} RecordSender;

extern void record_set_init(RecordSet *rs, int cap);
extern void record_set_add(RecordSet *rs, const char *id_server, int id_len, int64 position);
extern char *record_describe(const RecordSet *rs, int i);
extern void record_set_dedupe(RecordSet *rs);
extern void record_check_embedding(RecordSet *rs, int i, const float *v, int dim);
extern void record_set_document(RecordSet *rs, int i, const char *doc, int len);
extern void record_set_metadata(RecordSet *rs, int i, Jsonb *jb, bool allow_arrays);

extern void record_sender_init(RecordSender *s, const char *collection, const char *op);
/*
 * Lets up to n requests be in flight at once (1 to CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT).
 * No id is ever in two of them: a request holding an id of one in flight starts only
 * after that one is acknowledged, so the later record wins as it would sent one by one.
 */
extern void record_sender_set_concurrency(RecordSender *s, int n);
/* The checks record_sender_send makes before sending anything (dimension, sizes). */
extern void record_sender_check(RecordSender *s, RecordSet *rs);
extern void record_sender_send(RecordSender *s, RecordSet *rs);
/* Waits until every request in flight is acknowledged. */
extern void record_sender_wait(RecordSender *s);
/* Waits until every request in flight that holds an id of rs is acknowledged. */
extern void record_sender_wait_for(RecordSender *s, const RecordSet *rs);
/*
 * After an error of the caller's own (a bad row): waits for the requests in flight
 * without raising their failures, so what was sent before the error has landed.
 */
extern void record_sender_settle(RecordSender *s);
extern uint64 record_sender_finish(RecordSender *s);

/*
 * replace => true (records_replace.c): documents and metadata become exactly what rs
 * holds. Adds to rs's metadata every key the stored records have and rs lacks, as null;
 * *clear gets the records whose document is NULL, to delete before the upsert.
 */
extern void record_set_replace(RecordSet *rs, const char *collection_id, RecordSet *clear);
/* Checks rs, deletes the records of clear (and waits), then sends rs with sender. */
extern void record_sender_send_replacing(RecordSender *sender, RecordSender *deleter,
										 RecordSet *rs, RecordSet *clear);

#endif							/* CHROMA_SYNC_RECORDS_H */
