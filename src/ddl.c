/*
 * ddl.c — what the DDL event triggers need from C: telling every backend that mirror
 * configuration changed (their trigger caches reload), checking the mirrored columns.
 *
 * The event triggers themselves are in the install script: DROP TABLE removes the
 * mirror, dropping a mirrored column pauses it, disabling its trigger is reported in
 * status; other changes of the mirrored columns are checked here.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
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
 * The value a sync worker of this database starts with for a setting: the one ALTER ROLE
 * ... IN DATABASE, ALTER ROLE, ALTER DATABASE or ALTER ROLE ALL ... SET stored for the
 * worker's role (the bootstrap superuser) and this database, in PostgreSQL's order; else
 * the configuration file's (postgresql.conf, ALTER SYSTEM); else the built-in default. A session's own
 * values (its connection options, its role's settings) are not a worker's.
 */
static char *
worker_start_value(const char *name)
{
	Oid			types[3] = {TEXTOID, OIDOID, OIDOID};
	Datum		values[3] = {CStringGetTextDatum(name), ObjectIdGetDatum(MyDatabaseId),
	ObjectIdGetDatum(BOOTSTRAP_SUPERUSERID)};
	char	   *r = NULL;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(
							  "SELECT v FROM ("
							  " SELECT CASE WHEN s.setdatabase OPERATOR(pg_catalog.=) $2"
							  "   AND s.setrole OPERATOR(pg_catalog.=) $3 THEN 1"
							  "  WHEN s.setrole OPERATOR(pg_catalog.=) $3 THEN 2"
							  "  WHEN s.setdatabase OPERATOR(pg_catalog.=) $2 THEN 3 ELSE 4 END AS o,"
							  "  pg_catalog.substr(c, pg_catalog.strpos(c, '=') OPERATOR(pg_catalog.+) 1) AS v, 0 AS seq"
							  " FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) AS c"
							  " WHERE (s.setdatabase OPERATOR(pg_catalog.=) $2 OR s.setdatabase OPERATOR(pg_catalog.=) 0)"
							  "  AND (s.setrole OPERATOR(pg_catalog.=) $3 OR s.setrole OPERATOR(pg_catalog.=) 0)"
							  "  AND pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) OPERATOR(pg_catalog.=) pg_catalog.lower($1)"
							  " UNION ALL SELECT 5, f.setting, f.seqno FROM pg_catalog.pg_file_settings f"
							  "  WHERE pg_catalog.lower(f.name) OPERATOR(pg_catalog.=) pg_catalog.lower($1) AND f.applied"
							  " UNION ALL SELECT 6, g.boot_val, 0 FROM pg_catalog.pg_settings g"
							  "  WHERE pg_catalog.lower(g.name) OPERATOR(pg_catalog.=) pg_catalog.lower($1)"
							  ") AS x ORDER BY o, seq DESC LIMIT 1",	/* the file's last line wins (TAP 134) */
							  3, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the configured value of %s", name);
	if (SPI_processed == 1)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (v != NULL)
			r = MemoryContextStrdup(TopTransactionContext, v);
	}
	SPI_finish();
	return r;
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

	const char *settings[] = {"DateStyle", "IntervalStyle", "TimeZone",
	"standard_conforming_strings", "array_nulls", "search_path"};
	int			level;

	if (m == NULL || !m->home || m->filter == NULL || m->filter_node != NULL ||
		get_rel_name(m->relid) == NULL || m->column_problem != NULL)
		PG_RETURN_BOOL(false);

	/*
	 * The text is read as the worker would read it, with the values a worker starts with,
	 * not what the updating session set (TAP 111) nor what its connection brought
	 * (TAP 118).
	 */
	level = NewGUCNestLevel();
	for (int i = 0; i < (int) lengthof(settings); i++)
		(void) set_config_option(settings[i], worker_start_value(settings[i]), PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* and what every worker pins right after connecting, as 0.4's did (TimeZone UTC: TAP 137) */
	mirror_fix_render_settings();
	mirror_filter_store_bound(m, mirror_filter_derive(m));
	AtEOXact_GUC(false, level);
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
