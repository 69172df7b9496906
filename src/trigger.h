/*
 * trigger.h — change capture: the AFTER trigger and the wake-up at commit.
 */
#ifndef CHROMA_SYNC_TRIGGER_H
#define CHROMA_SYNC_TRIGGER_H

/* Registers the transaction callback (from _PG_init). */
extern void chroma_trigger_init(void);

/* Whether the current transaction queued changes for this mirror. */
extern bool chroma_xact_wrote_mirror(int mirror_id);

/* Wake this database's worker when the current transaction commits. */
extern void chroma_wake_at_commit(void);

/* The extension owner (the queue is written with its rights). */
extern Oid	chroma_extension_owner(void);

#endif							/* CHROMA_SYNC_TRIGGER_H */
