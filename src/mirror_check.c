/*
 * mirror_check.c — what the worker checks of a mirrored table before each pass, so that
 * DDL the event triggers do not see (DROP TRIGGER, ALTER TABLE ... SET UNLOGGED, a
 * trigger disabled by a statement that is not ALTER TABLE, a table replaced under its
 * oid by a restore) pauses the mirror with a reason instead of letting the collection
 * drift in silence.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "mirror_check.h"

/*
 * Whether pg_trigger tuple tup (of a table of pg_trigger descriptor desc) is mirror_id's
 * own trigger for the events of type: chroma_sync.capture with the mirror id, no WHEN, no
 * column list. Its name and whether it is enabled are the caller's to check.
 */
bool
mirror_trigger_own(HeapTuple tup, TupleDesc desc, int mirror_id, int16 type)
{
	Form_pg_trigger t = (Form_pg_trigger) GETSTRUCT(tup);
	char	   *fname = get_func_name(t->tgfoid);
	bool		isnull;
	Datum		args;
	bytea	   *b;
	char	   *want;

	if (!(t->tgtype == type && t->tgnargs == 1 && t->tgattr.dim1 == 0 &&
		  heap_attisnull(tup, Anum_pg_trigger_tgqual, desc) &&
		  fname != NULL && strcmp(fname, "capture") == 0 &&
		  get_func_namespace(t->tgfoid) == get_namespace_oid("chroma_sync", true)))
		return false;
	args = heap_getattr(tup, Anum_pg_trigger_tgargs, desc, &isnull);
	if (isnull)
		return false;
	b = DatumGetByteaPP(args);
	want = psprintf("%d", mirror_id);
	/* tgargs: each argument followed by a NUL */
	return VARSIZE_ANY_EXHDR(b) == strlen(want) + 1 &&
		memcmp(VARDATA_ANY(b), want, strlen(want) + 1) == 0;
}

/*
 * Whether leaf partition relid has mirror_id's own BEFORE TRUNCATE trigger, by whatever
 * name, firing ALWAYS: whether a TRUNCATE of it reaches the queue.
 */
bool
mirror_leaf_truncate_captured(Oid relid, int mirror_id)
{
	Relation	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key[1];
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&key[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, TriggerRelidNameIndexId, true, NULL, 1, key);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
		found = ((Form_pg_trigger) GETSTRUCT(tup))->tgenabled == TRIGGER_FIRES_ALWAYS &&
			mirror_trigger_own(tup, RelationGetDescr(rel), mirror_id,
							   TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_TRUNCATE);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * What is wrong with the capture trigger name of relid, or NULL: it must be there, fire
 * ALWAYS, and be the mirror's own (mirror_trigger_own): the owner of a partition owned by
 * another role than the mirrored table's could otherwise put a trigger of their own under
 * its name.
 */
static char *
trigger_problem(Oid relid, const char *name, int mirror_id, int16 type)
{
	Relation	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	char		state = '\0';
	bool		own = false;

	ScanKeyInit(&key[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&key[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(name));
	scan = systable_beginscan(rel, TriggerRelidNameIndexId, true, NULL, 2, key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		state = ((Form_pg_trigger) GETSTRUCT(tup))->tgenabled;
		own = mirror_trigger_own(tup, RelationGetDescr(rel), mirror_id, type);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (state == '\0')
		return psprintf("trigger %s was dropped: changes are no longer captured; "
						"unmirror and mirror the table again", name);
	if (!own)
		return psprintf("trigger %s is not the mirror's own (another function, argument, event, "
						"column list or a WHEN condition): changes may be missed; "
						"unmirror and mirror the table again", name);
	if (state != TRIGGER_FIRES_ALWAYS)
		return psprintf("trigger %s is not ENABLE ALWAYS: changes may be missed; "
						"run ALTER TABLE ... ENABLE ALWAYS TRIGGER %s, then chroma_resume() and chroma_resync()",
						name, name);
	return NULL;
}

char *
mirror_shape_problem(MirrorConfig *m)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(m->relid));
	char		persistence;
	const char *suffixes[3] = {"", "_truncate", "_flush"};
	const int16 types[3] = {
		TRIGGER_TYPE_ROW | TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE,
		TRIGGER_TYPE_TRUNCATE,
	TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE};

	if (!HeapTupleIsValid(tup))
		return NULL;			/* dropped: the caller removes the mirror */
	persistence = ((Form_pg_class) GETSTRUCT(tup))->relpersistence;
	ReleaseSysCache(tup);
	if (persistence != RELPERSISTENCE_PERMANENT)
		return psprintf("the table is no longer a logged table (ALTER TABLE ... SET UNLOGGED?): "
						"a crash would empty it while Chroma keeps its rows; ALTER TABLE ... SET LOGGED, "
						"then chroma_resume() and chroma_resync()");
	for (int i = 0; i < 3; i++)
	{
		char	   *problem = trigger_problem(m->relid, psprintf("chroma_sync_%d%s", m->mirror_id, suffixes[i]),
												  m->mirror_id, types[i]);

		if (problem)
			return problem;
	}
	if (get_rel_relkind(m->relid) == RELKIND_PARTITIONED_TABLE)
	{
		/* each leaf: its cloned row trigger and its own TRUNCATE trigger (partition.c) */
		List	   *rels = find_all_inheritors(m->relid, NoLock, NULL);
		ListCell   *lc;

		foreach(lc, rels)
		{
			Oid			leaf = lfirst_oid(lc);
			char	   *problem;

			if (get_rel_relkind(leaf) != RELKIND_RELATION)
				continue;
			tup = SearchSysCache1(RELOID, ObjectIdGetDatum(leaf));
			if (!HeapTupleIsValid(tup))
				continue;		/* dropped meanwhile */
			persistence = ((Form_pg_class) GETSTRUCT(tup))->relpersistence;
			ReleaseSysCache(tup);
			if (persistence != RELPERSISTENCE_PERMANENT)
				return psprintf("partition %s is not a logged table (ALTER TABLE ... SET UNLOGGED?): "
								"a crash would empty it while Chroma keeps its rows; ALTER TABLE ... SET LOGGED, "
								"then chroma_resume() and chroma_resync()", get_rel_name(leaf));
			problem = trigger_problem(leaf, psprintf("chroma_sync_%d", m->mirror_id), m->mirror_id, types[0]);
			if (problem == NULL)
				problem = trigger_problem(leaf, psprintf("chroma_sync_%d_truncate", m->mirror_id),
										  m->mirror_id, TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_TRUNCATE);
			if (problem)
				return psprintf("partition %s: %s", get_rel_name(leaf), problem);
		}
	}
	return NULL;
}
