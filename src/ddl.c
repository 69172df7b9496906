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
#include "catalog/pg_type.h"
#include "executor/spi.h"
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

		if (!list_member_oid(rels, m->relid))
			continue;
		(void) mirror_columns_apply(m);
		/* paused for another column's change too: its filter is still written (TAP 124) */
		if (m->filter_node != NULL && mirror_columns_filter_intact(m))
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
	bool		all_types = PG_GETARG_BOOL(0);
	List	   *mirrors = mirror_load_all();
	ListCell   *lc;
	bool		types_renamed = false;

	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (get_rel_name(m->relid) == NULL)
			continue;
		/*
		 * A mirrored column's type, or its schema, renamed: the same type (TAP 123). After
		 * ALTER TABLE and the like, only row types (renamed with their table: TAP 130),
		 * whose typmod is always -1; any other type there may be a typmod change (TAP 126).
		 */
		if (mirror_columns_follow_type_renames(m, !all_types))
		{
			types_renamed = true;
			mirror_columns_resolve(m);
		}
		/*
		 * ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE renames the columns of typed tables
		 * and of their inheritance children (TAP 144, 156): followed, or the mirror
		 * paused, here as after ALTER TABLE. The workers are told only when something
		 * changed, not after every DDL of any role (TAP 151).
		 */
		if (all_types && m->home && m->columns != NULL)
		{
			mirror_columns_resolve(m);
			if ((m->columns_renamed && m->column_problem == NULL) ||
				(m->column_problem != NULL && !m->paused))
			{
				(void) mirror_columns_apply(m);
				types_renamed = true;
			}
		}
		/* paused for another column's change too: its filter is still written (TAP 124) */
		if (m->filter_node != NULL && mirror_columns_filter_intact(m))
			mirror_filter_follow_names(m);
	}
	/* the workers read the recorded type names again */
	if (types_renamed)
		chroma_bump_config();
	PG_RETURN_VOID();
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
	if (m->filter != NULL && m->filter_node == NULL)
	{
		/*
		 * The text's columns were found under the table's name now (rel.col): the worker
		 * binds the text under it, should the table be renamed first (TAP 153).
		 */
		Oid			type = INT4OID;
		Datum		id = Int32GetDatum(m->mirror_id);

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args("UPDATE chroma_sync.mirror m SET filter_relname = c.relname "
								  "FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) m.source "
								  "AND m.mirror_id OPERATOR(pg_catalog.=) $1",
								  1, &type, &id, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the table name of mirror %d", m->mirror_id);
		SPI_finish();
	}
	PG_RETURN_BOOL(true);
}
