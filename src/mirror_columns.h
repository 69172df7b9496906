/*
 * mirror_columns.h — a mirror's columns by name and type: what survives pg_dump (which
 * drops dropped columns, so attnums move) and what DDL can change under the mirror.
 */
#ifndef CHROMA_SYNC_MIRROR_COLUMNS_H
#define CHROMA_SYNC_MIRROR_COLUMNS_H

#include "mirror_config.h"
#include "nodes/bitmapset.h"

/*
 * Resolves m's recorded columns against the table as it is now and sets m's attnums
 * (key, embedding, document, metadata) to the resolved ones. In the database the
 * columns were recorded in (m->home) a column is its recorded attnum, which must still
 * have the recorded name (a rename changing nothing sent is noted in
 * m->columns_renamed) and type; elsewhere (a restored copy) a column is found by its
 * name and must have the recorded type. A mismatch is described in
 * m->column_problem. In a transaction.
 */
extern void mirror_columns_resolve(MirrorConfig *m);

/*
 * The attnums of the columns a filter names: the filter parsed against the table, with
 * the caller's search_path (as chroma_mirror checked it).
 */
extern Bitmapset *mirror_filter_attnums(Oid relid, const char *filter, const char *filter_node);

/*
 * Records the columns of a mirror from the catalog: names, attnums and types of the
 * given columns and of the filter's (filter_atts). Writes chroma_sync.mirror.
 */
extern void mirror_columns_record(int mirror_id, Oid relid, int nkeys, const AttrNumber *keys,
								  AttrNumber embedding, AttrNumber document, int nmeta,
								  const AttrNumber *meta, const Bitmapset *filter_atts);

/* Writes m's columns as resolved (attnums) and named (names) back to its row. */
/*
 * After DDL that renames types or schemas: the recorded type names of columns whose type
 * is the same one, renamed, are recorded again (rowtypes_only: only composite row types,
 * after ALTER TABLE and the like, where a typmod may have changed). True when any was.
 */
extern bool mirror_columns_follow_type_renames(MirrorConfig *m, bool rowtypes_only);
/* Whether every column the bound filter reads is still there (its text can be written). */
extern bool mirror_columns_filter_intact(MirrorConfig *m);
extern void mirror_columns_store(MirrorConfig *m);

/*
 * In the mirror's own database: follows renames that change nothing sent (paused or not),
 * or pauses a mirror that is not paused with m->column_problem. True when it paused it.
 */
extern bool mirror_columns_apply(MirrorConfig *m);

/* The status text of a column problem: the problem and how to go on. */
extern char *mirror_columns_status(MirrorConfig *m);

/* ERROR (the problem's SQLSTATE, errdetail naming the column) when m's columns mismatch. */
extern void mirror_columns_require(MirrorConfig *m, const char *action);

#endif							/* CHROMA_SYNC_MIRROR_COLUMNS_H */
