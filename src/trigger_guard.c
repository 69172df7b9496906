/*
 * trigger_guard.c — a capture trigger dropped by someone else than the extension pauses
 * its mirror, even when the trigger is back by the time the transaction commits.
 *
 * The worker checks a mirror's triggers in the committed catalog (mirror_check.c): a
 * trigger dropped and created again within one transaction (a partition's TRUNCATE
 * trigger, which ALTER TABLE ... ATTACH PARTITION makes again for every leaf; TAP 217) is
 * in place when it looks, while the changes made in between were not captured. So each
 * drop of a pg_trigger row named like a mirror's trigger is noted here (not the
 * extension's own: unmirror, DETACH), and before the transaction commits, each noted
 * trigger whose row is really gone (not in a rolled-back savepoint) on a table that still
 * exists and is the mirror's table or a partition under it pauses that mirror, saying why.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "trigger.h"
#include "trigger_guard.h"

typedef struct DroppedTrigger
{
	Oid			trigoid;
	Oid			relid;
	int			mirror_id;
	char		name[NAMEDATALEN];
} DroppedTrigger;

static List *dropped = NIL;		/* of DroppedTrigger, in TopTransactionContext */
static int	own_depth = 0;

void
trigger_guard_own_begin(void)
{
	own_depth++;
}

void
trigger_guard_own_end(void)
{
	if (own_depth > 0)
		own_depth--;
}

/* The mirror id of a trigger name of a mirror (chroma_sync_N and its suffixes), or -1. */
static int
mirror_of_trigger_name(const char *name)
{
	const char *p = name + strlen("chroma_sync_");
	const char *end;
	long		id;

	if (strncmp(name, "chroma_sync_", strlen("chroma_sync_")) != 0 || !isdigit((unsigned char) *p))
		return -1;
	id = strtol(p, (char **) &end, 10);
	if (id <= 0 || id > PG_INT32_MAX)
		return -1;
	if (*end != '\0' && strcmp(end, "_truncate") != 0 && strcmp(end, "_flush") != 0 &&
		strcmp(end, "_truncate_begin") != 0)
		return -1;
	return (int) id;
}

/* The pg_trigger row of trigoid: its name and table, or false when there is none. */
static bool
trigger_row(Oid trigoid, char *name, Oid *relid)
{
	Relation	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(trigoid));
	scan = systable_beginscan(rel, TriggerOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_trigger t = (Form_pg_trigger) GETSTRUCT(tup);

		if (name)
			strlcpy(name, NameStr(t->tgname), NAMEDATALEN);
		if (relid)
			*relid = t->tgrelid;
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

void
trigger_guard_dropped(Oid trigoid)
{
	char		name[NAMEDATALEN];
	Oid			relid;
	int			mirror_id;
	MemoryContext old;
	DroppedTrigger *d;

	if (own_depth > 0 || !trigger_row(trigoid, name, &relid))
		return;
	if ((mirror_id = mirror_of_trigger_name(name)) < 0)
		return;
	old = MemoryContextSwitchTo(TopTransactionContext);
	d = palloc(sizeof(DroppedTrigger));
	d->trigoid = trigoid;
	d->relid = relid;
	d->mirror_id = mirror_id;
	strlcpy(d->name, name, NAMEDATALEN);
	dropped = lappend(dropped, d);
	MemoryContextSwitchTo(old);
}

void
trigger_guard_pre_commit(void)
{
	ListCell   *lc;
	List	   *todo = NIL;

	if (dropped == NIL)
		return;
	foreach(lc, dropped)
	{
		DroppedTrigger *d = (DroppedTrigger *) lfirst(lc);

		/* the drop was in a savepoint rolled back, or the table went too */
		if (trigger_row(d->trigoid, NULL, NULL) ||
			!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(d->relid)))
			continue;
		todo = lappend(todo, d);
	}
	dropped = NIL;
	/* the extension dropped in this transaction: nothing to pause */
	if (todo == NIL || !OidIsValid(get_extension_oid("chroma_sync", true)))
		return;
	{
		ChromaSavedUser su;
		Oid			types[3] = {INT4OID, OIDOID, TEXTOID};

		chroma_become_extension_owner(&su);
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		foreach(lc, todo)
		{
			DroppedTrigger *d = (DroppedTrigger *) lfirst(lc);
			char	   *relname = get_rel_name(d->relid);
			Datum		values[3];

			values[0] = Int32GetDatum(d->mirror_id);
			values[1] = ObjectIdGetDatum(d->relid);
			values[2] = CStringGetTextDatum(psprintf("trigger %s of %s was dropped: changes made without "
													 "it were not captured; unmirror and mirror the table "
													 "again (or, if it is back, chroma_resume() and "
													 "chroma_resync())",
													 d->name, relname ? relname : "?"));
			if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET in_error = true, paused = true, "
									  "paused_reason = $3, last_error = $3, last_error_at = pg_catalog.now() "
									  "WHERE mirror_id OPERATOR(pg_catalog.=) $1 "
									  "AND (source::pg_catalog.oid OPERATOR(pg_catalog.=) $2 "
									  "OR source::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (ARRAY("
									  "SELECT a.relid::pg_catalog.oid FROM "
									  "pg_catalog.pg_partition_ancestors($2::pg_catalog.regclass) a)))",
									  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not pause the mirror of a dropped trigger");
		}
		SPI_finish();
		chroma_restore_user(&su);
	}
}

void
trigger_guard_xact_end(void)
{
	dropped = NIL;				/* TopTransactionContext is gone */
	own_depth = 0;
}
