/*
 * records.h — validated record sets and the pipelined sender shared by the record
 * functions (and, later, the mirror worker's SQL-side helpers).
 */
#ifndef CHROMA_SYNC_RECORDS_H
#define CHROMA_SYNC_RECORDS_H

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
	uint64		inflight_n;
	ChromaHttpRequest *inflight;
	MemoryContext body_ctx[2];
	int			cur;
} RecordSender;

extern void record_set_init(RecordSet *rs, int cap);
extern void record_set_add(RecordSet *rs, const char *id_server, int id_len, int64 position);
extern char *record_describe(const RecordSet *rs, int i);
extern void record_set_dedupe(RecordSet *rs);
extern void record_check_embedding(RecordSet *rs, int i, const float *v, int dim);
extern void record_set_document(RecordSet *rs, int i, const char *doc, int len);
extern void record_set_metadata(RecordSet *rs, int i, Jsonb *jb, bool allow_arrays);

extern void record_sender_init(RecordSender *s, const char *collection, const char *op);
/* The checks record_sender_send makes before sending anything (dimension, sizes). */
extern void record_sender_check(RecordSender *s, RecordSet *rs);
extern void record_sender_send(RecordSender *s, RecordSet *rs);
/* Waits until the request in flight, if any, is acknowledged. */
extern void record_sender_wait(RecordSender *s);
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
