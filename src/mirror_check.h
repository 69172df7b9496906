/*
 * mirror_check.h — checks of a mirrored table's shape that DDL could break unseen.
 */
#ifndef CHROMA_SYNC_MIRROR_CHECK_H
#define CHROMA_SYNC_MIRROR_CHECK_H

#include "access/htup.h"
#include "access/tupdesc.h"

#include "mirror_config.h"

/* Why the mirror cannot stay exact as the table now is, or NULL (in a transaction). */
extern char *mirror_shape_problem(MirrorConfig *m);

/* Whether pg_trigger tuple tup is mirror_id's own trigger for the events of type. */
extern bool mirror_trigger_own(HeapTuple tup, TupleDesc desc, int mirror_id, int16 type);

/* Whether leaf relid has mirror_id's own BEFORE TRUNCATE trigger, firing ALWAYS. */
extern bool mirror_leaf_truncate_captured(Oid relid, int mirror_id);

#endif							/* CHROMA_SYNC_MIRROR_CHECK_H */
