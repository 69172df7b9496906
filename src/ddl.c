/*
 * ddl.c — what the DDL event triggers need from C: telling every backend that mirror
 * configuration changed (their trigger caches reload), checking the mirrored columns.
 *
 * The event triggers themselves are in the install script: DROP TABLE removes the
 * mirror, dropping a mirrored column pauses it, disabling its trigger is reported in
 * status; other changes of the mirrored columns are checked here.
 */
#include "postgres.h"

#include "catalog/pg_inherits.h"
#include "fmgr.h"
#include "utils/lsyscache.h"

#include "mirror_columns.h"
#include "shared.h"

PG_FUNCTION_INFO_V1(chroma_sync_config_changed);

Datum
chroma_sync_config_changed(PG_FUNCTION_ARGS)
{
	chroma_bump_config();
	PG_RETURN_VOID();
}

/*
 * After ALTER TABLE on a mirrored table (the DDL event trigger, in the same transaction):
 * each mirror of the table in its own database, paused or not, follows renames that change
 * nothing sent (its recorded column names and its filter's text), and a mirror that is not
 * paused pauses when its columns no longer match (mirror_columns.c).
 */
PG_FUNCTION_INFO_V1(chroma_sync_columns_changed);

Datum
chroma_sync_columns_changed(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	List	   *mirrors = mirror_load_all();
	/* ALTER TABLE on a parent recurses to its partitions and children, reported as one */
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (list_member_oid(rels, m->relid) && !mirror_columns_apply(m) && m->column_problem == NULL)
			mirror_filter_follow_names(m);
	}
	chroma_bump_config();
	PG_RETURN_VOID();
}

/*
 * After ALTER FUNCTION, ALTER TYPE, ALTER SCHEMA... (the DDL event trigger, in the same
 * transaction): every bound filter of this database whose text names something renamed
 * is written again (mirror_filter_follow_names), paused mirror or not.
 */
PG_FUNCTION_INFO_V1(chroma_sync_filters_renamed);

Datum
chroma_sync_filters_renamed(PG_FUNCTION_ARGS)
{
	List	   *mirrors = mirror_load_all();
	ListCell   *lc;

	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (m->filter != NULL && m->column_problem == NULL && get_rel_name(m->relid) != NULL)
			mirror_filter_follow_names(m);
	}
	PG_RETURN_VOID();
}

/*
 * The update to 0.5: binds a filter stored by 0.4 as text (in the mirror's own database),
 * as the worker would the first time it loads the mirror, so that the renames that follow
 * are followed for a paused mirror too. False when there is nothing to bind here.
 */
PG_FUNCTION_INFO_V1(chroma_sync_bind_filter);

Datum
chroma_sync_bind_filter(PG_FUNCTION_ARGS)
{
	MirrorConfig *m = mirror_load(PG_GETARG_INT32(0));

	if (m == NULL || !m->home || m->filter == NULL || m->filter_node != NULL ||
		get_rel_name(m->relid) == NULL || m->column_problem != NULL)
		PG_RETURN_BOOL(false);
	mirror_filter_store_bound(m, mirror_filter_derive(m));
	PG_RETURN_BOOL(true);
}

/*
 * The update to 0.5: records the columns of a mirror made before it (they were kept by
 * attnum only), from the catalog. Only in the mirror's own database: a restored copy's
 * attnums need not be its table's, so its columns stay unrecorded (chroma_adopt refuses
 * it; unmirror and mirror again).
 */
PG_FUNCTION_INFO_V1(chroma_sync_record_columns);

Datum
chroma_sync_record_columns(PG_FUNCTION_ARGS)
{
	MirrorConfig *m = mirror_load(PG_GETARG_INT32(0));

	if (m == NULL || !m->home || get_rel_name(m->relid) == NULL)
		PG_RETURN_BOOL(false);
	mirror_columns_record(m->mirror_id, m->relid, m->nkeys, m->key_attnums, m->embedding_attnum,
						  m->document_attnum, m->nmeta, m->meta_attnums,
						  m->filter ? mirror_filter_attnums(m->relid, m->filter, m->filter_node) : NULL);
	PG_RETURN_BOOL(true);
}
