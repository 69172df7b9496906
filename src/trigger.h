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

/*
 * Queues the key of every row of table relid and of its partitions for mirror_id, whose
 * partitioned table it is a partition of, or was until now (ATTACH, DETACH, DROP).
 */
extern void chroma_capture_partition_keys(int mirror_id, Oid relid);

/* The extension owner (the queue is written with its rights). */
extern Oid	chroma_extension_owner(void);

/*
 * Statements run with the extension owner's rights in a caller's session use
 * search_path = pg_catalog, pg_temp: the caller's search_path could otherwise put its
 * own operators and functions in front of pg_catalog's and have them run as the owner.
 */
typedef struct ChromaSavedUser
{
	Oid			userid;
	int			sec;
	int			guc_level;
} ChromaSavedUser;

extern void chroma_become_extension_owner(ChromaSavedUser *s);
extern void chroma_restore_user(ChromaSavedUser *s);

/* Pins search_path to pg_catalog, pg_temp; returns the level for AtEOXact_GUC. */
extern int	chroma_pin_search_path(void);

#endif							/* CHROMA_SYNC_TRIGGER_H */
