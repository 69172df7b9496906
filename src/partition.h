/*
 * partition.h — a mirror of a partitioned table follows its partitions (partition.c).
 */
#ifndef CHROMA_SYNC_PARTITION_H
#define CHROMA_SYNC_PARTITION_H

#include "nodes/nodes.h"
#include "nodes/pg_list.h"

/* The partitioned tables above relid, nearest first (also one it is being detached from). */
extern List *partition_ancestors(Oid relid);

/* The mirrors (MirrorConfig) of the partitioned tables relid is a partition of, at any level. */
extern List *partition_mirrors_of(Oid relid);

/* Refuses (ERROR) relid into the collection of a mirror above or under it in its tree. */
extern void partition_check_collection(Oid relid, const char *collection);

/* Refuses (ERROR) a foreign table at or under relid; root names the mirrored table. */
extern void partition_check_leaves(Oid relid, const char *root);

/* Creates or drops mirror_id's BEFORE TRUNCATE trigger on every leaf at or under relid. */
extern void partition_leaf_triggers(int mirror_id, Oid relid, bool create);

/*
 * Around a utility statement: before returns what the statement detaches (pausing a
 * mirror a leaf of it has lost its TRUNCATE trigger) and the leaves under the table it
 * alters, and notes the partitioned tables a DROP TABLE drops (*saved: for done); after
 * queues keys and creates or drops triggers; done ends what before noted (also on error).
 */
extern void *partition_utility_before(Node *stmt, int *saved);
extern void partition_utility_after(Node *stmt, void *state);
extern void partition_utility_done(int saved, void *state);

/*
 * Before the worker reads a partitioned table's rows (its lock on the table held): false
 * while a DDL that changed its partitions has not ended, or while a partition is locked
 * against reading (partition.c); the locks taken are held to the transaction's end.
 * True for others.
 */
extern bool partition_set_read_lock(Oid relid);

/* Installs the object access hook that sees partitions dropped (from _PG_init). */
extern void chroma_partition_init(void);

#endif							/* CHROMA_SYNC_PARTITION_H */
