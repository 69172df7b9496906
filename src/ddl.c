/*
 * ddl.c — what the DDL event triggers need from C: telling every backend that mirror
 * configuration changed (their trigger caches reload), checking the mirrored columns.
 *
 * The event triggers themselves are in the install script: DROP TABLE removes the
 * mirror, dropping a mirrored column pauses it, disabling its trigger is reported in
 * status; other changes of the mirrored columns are checked here.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
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
 * The text of a bound filter, rewritten with the names as they are now, in the DDL's own
 * transaction: a dump taken at any time (the mirror paused, the worker not yet run) holds
 * names that chroma_adopt binds to the same columns.
 */
static void
follow_filter_names(MirrorConfig *m)
{
	char	   *text = mirror_filter_text_now(m);
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];

	if (text == NULL || strcmp(text, m->filter) == 0)
		return;
	values[0] = Int32GetDatum(m->mirror_id);
	values[1] = CStringGetTextDatum(text);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET filter = $2 "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the filter of mirror %d", m->mirror_id);
	SPI_finish();
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
	ListCell   *lc;

	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (m->relid == relid && !mirror_columns_apply(m) && m->column_problem == NULL)
			follow_filter_names(m);
	}
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
	PG_RETURN_BOOL(true);
}
