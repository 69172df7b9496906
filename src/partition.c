/*
 * partition.c — one mirror for a partitioned table and every partition under it, as
 * partitions come and go.
 *
 * The mirror's row triggers are created on the partitioned table, and PostgreSQL clones
 * them to every partition, present and future (CREATE TABLE ... PARTITION OF, ATTACH).
 * Statement triggers are not cloned: each leaf partition gets a BEFORE TRUNCATE trigger
 * of the mirror, which queues the key of each of its rows (trigger.c), so that a TRUNCATE
 * of one partition takes only its records out of the collection. Here:
 *
 *  - ATTACH PARTITION: the attached table's rows are queued, its leaves get the trigger
 *    (only its leaves: a leaf of the tree whose trigger was dropped keeps lacking it, for
 *    the worker's check to pause the mirror, TAP 217);
 *  - CREATE TABLE ... PARTITION OF: the new leaf gets the trigger (it is empty);
 *  - DETACH PARTITION (also CONCURRENTLY, FINALIZE): once detached, its rows are queued
 *    (the worker finds them absent from the partitioned table and deletes them) and the
 *    trigger is dropped, in the transaction that completes the detach;
 *  - DROP of a partition, by any statement (DROP TABLE, DROP SCHEMA ... CASCADE, DROP
 *    OWNED): its rows are queued before it goes (the object access hook), unless the
 *    partitioned table itself is dropped by the same DROP TABLE.
 *
 * A leaf that leaves the tree (DETACH, DROP) lacking the mirror's TRUNCATE trigger, which
 * its owner may drop, may have been truncated unseen, and the worker's check of the tree
 * will no longer see it: the mirror is paused in the DDL's transaction, for a resync.
 *
 * Every key is queued in the DDL's own transaction: a rolled-back DDL queues nothing, a
 * committed one cannot lose its keys.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "commands/extension.h"
#include "commands/tablecmds.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "mirror_check.h"
#include "mirror_config.h"
#include "partition.h"
#include "shared.h"
#include "trigger.h"

static object_access_hook_type prev_object_access = NULL;

/* Partitioned tables a DROP TABLE running now drops (their mirrors go with them). */
static List *dropping_roots = NIL;

/*
 * The mirrors' own TRUNCATE triggers (enabled ALWAYS) of partitions that the utility
 * statement running now dropped: a leaf dropped by the statement had its trigger until
 * then (the trigger goes first, as the leaf's dependent). Reset as each utility statement
 * begins, so a trigger dropped by an earlier statement is not taken for one.
 */
typedef struct DroppedCapture
{
	Oid			leaf;
	int			mirror_id;
} DroppedCapture;

static List *captures_dropped = NIL;

/* Whether this database has the extension (the hooks run in every database). */
static bool
extension_here(void)
{
	return IsTransactionState() && OidIsValid(get_extension_oid("chroma_sync", true));
}

/*
 * The partitioned tables relid is a partition of, nearest first, including a parent it is
 * being detached from (DETACH ... CONCURRENTLY, until FINALIZE): get_partition_ancestors
 * stops there, though the partition's rows are still the mirror's and its triggers fire.
 */
List *
partition_ancestors(Oid relid)
{
	List	   *result = NIL;

	while (get_rel_relispartition(relid))
	{
		relid = get_partition_parent(relid, true);
		if (!OidIsValid(relid) || list_member_oid(result, relid))
			break;
		result = lappend_oid(result, relid);
	}
	return result;
}

/*
 * The mirrors (MirrorConfig) of the partitioned tables that relid is a partition of, at
 * any level.
 */
static List *
mirrors_above(Oid relid, bool itself)
{
	List	   *ancestors;
	List	   *result = NIL;
	List	   *mirrors;
	ListCell   *lc;
	ChromaSavedUser su;

	if (!(get_rel_relispartition(relid) || itself) || !extension_here() ||
		!OidIsValid(get_relname_relid("mirror", get_namespace_oid("chroma_sync", true))))
		return NIL;				/* (DROP EXTENSION ... CASCADE dropped it already) */
	ancestors = partition_ancestors(relid);
	if (itself)
		ancestors = lappend_oid(ancestors, relid);
	chroma_become_extension_owner(&su);
	mirrors = mirror_load_all();
	chroma_restore_user(&su);
	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (list_member_oid(ancestors, m->relid))
			result = lappend(result, m);
	}
	return result;
}

List *
partition_mirrors_of(Oid relid)
{
	return mirrors_above(relid, false);
}

static char *
qualified(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Refuses to mirror table relid into the collection of a mirror of a partitioned table
 * above it, or of a partition under it, adopt or not: the records of one are rows of the
 * other, and the newcomer's backfill would delete the rest of the other's records.
 */
void
partition_check_collection(Oid relid, const char *collection)
{
	List	   *above = partition_ancestors(relid);
	List	   *below = find_all_inheritors(relid, NoLock, NULL);
	List	   *mirrors;
	ListCell   *lc;
	ChromaSavedUser su;

	if (above == NIL && list_length(below) <= 1)
		return;
	chroma_become_extension_owner(&su);
	mirrors = mirror_load_all();
	chroma_restore_user(&su);
	foreach(lc, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lc);

		if (strcmp(m->collection, collection) != 0 || m->relid == relid)
			continue;
		if (list_member_oid(above, m->relid) || list_member_oid(below, m->relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot mirror %s into collection \"%s\": it is the collection of %s, %s",
							get_rel_name(relid), collection, get_rel_name(m->relid),
							list_member_oid(above, m->relid) ? "a partitioned table it is a partition of"
							: "one of its partitions"),
					 errdetail("The rows of one are rows of the other: each would delete the other's records."),
					 errhint("Mirror it into another collection.")));
	}
}

/* Refuses a partition the mirror's triggers cannot see the rows of. */
void
partition_check_leaves(Oid relid, const char *root)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, rels)
	{
		char		kind = get_rel_relkind(lfirst_oid(lc));

		if (kind == RELKIND_RELATION &&
			get_rel_persistence(lfirst_oid(lc)) != RELPERSISTENCE_PERMANENT)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot mirror partitioned table %s: partition %s is not a logged table",
							root, get_rel_name(lfirst_oid(lc))),
					 errdetail("A crash empties an unlogged table without any change reaching the queue, so the collection would keep rows the table lost."),
					 errhint("Make it logged first: ALTER TABLE ... SET LOGGED.")));
		if (kind == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot mirror partitioned table %s: partition %s is a foreign table",
							root, get_rel_name(lfirst_oid(lc))),
					 errdetail("Changes to a foreign table's rows do not pass through this database's triggers.")));
	}
}

/*
 * Creates (or drops) the BEFORE TRUNCATE trigger of mirror_id on every leaf partition
 * at or under relid (where it is already, it is created again: the same).
 */
void
partition_leaf_triggers(int mirror_id, Oid relid, bool create)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;
	ChromaSavedUser su;
	bool		connected;

	chroma_become_extension_owner(&su);
	connected = SPI_connect() == SPI_OK_CONNECT;
	foreach(lc, rels)
	{
		Oid			leaf = lfirst_oid(lc);
		char	   *q;

		if (get_rel_relkind(leaf) != RELKIND_RELATION)
			continue;
		q = qualified(leaf);
		if (!create)
		{
			/* (gone already: no NOTICE of DROP TRIGGER IF EXISTS for the user) */
			if (OidIsValid(get_trigger_oid(leaf, psprintf("chroma_sync_%d_truncate", mirror_id), true)) &&
				SPI_execute(psprintf("DROP TRIGGER chroma_sync_%d_truncate ON %s",
									 mirror_id, q), false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not drop the TRUNCATE trigger of partition %s", q);
			continue;
		}
		/* fires for logical replication apply too, as the cloned row triggers do */
		if (SPI_execute(psprintf("CREATE OR REPLACE TRIGGER chroma_sync_%d_truncate BEFORE TRUNCATE ON %s "
								 "FOR EACH STATEMENT EXECUTE FUNCTION chroma_sync.capture('%d')",
								 mirror_id, q, mirror_id), false, 0) != SPI_OK_UTILITY ||
			SPI_execute(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER chroma_sync_%d_truncate",
								 q, mirror_id), false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create the TRUNCATE trigger of partition %s", q);
	}
	if (connected)
		SPI_finish();
	chroma_restore_user(&su);
}

/*
 * The worker reads a partitioned table's partitions from its relation cache, which a DDL
 * that changes them (ATTACH, CREATE ... PARTITION OF, DETACH ... CONCURRENTLY: their lock
 * on the partitioned table does not conflict with a read) updates in other backends only
 * after its commit is visible: the worker could see the keys it queued and read them
 * through the partitions of before, taking an attached partition's rows for deleted. The
 * DDL holds this lock (an object lock on the partitioned table, under a sub-id no column
 * has) until its transaction has ended, after its invalidations are sent; the worker takes
 * it before reading, without waiting, and processes the invalidations when it gets it.
 *
 * The DDL's mode (ROW EXCLUSIVE) does not conflict with itself, only with the worker's
 * (SHARE): two sessions changing partitions under one mirrored table never wait for each
 * other on it (TAP 263), and it is taken once the statement has done its own lookups,
 * checks and locks, in PostgreSQL's order (TAP 270-272: taken first, it made deadlocks
 * PostgreSQL alone resolves, and a statement skipped for IF NOT EXISTS held it).
 */
#define PARTITION_SET_SUBID 65000

static void
lock_partition_set(List *mirrors)
{
	ListCell   *lc;

	foreach(lc, mirrors)
		LockDatabaseObject(RelationRelationId, ((MirrorConfig *) lfirst(lc))->relid,
						   PARTITION_SET_SUBID, RowExclusiveLock);
}

bool
partition_set_read_lock(Oid relid)
{
	List	   *rels;
	ListCell   *lc;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return true;
	if (!ConditionalLockDatabaseObject(RelationRelationId, relid, PARTITION_SET_SUBID,
									   ShareLock))
		return false;

	/*
	 * Every partition too, without waiting: the read would otherwise wait for a DDL's lock
	 * on a partition while holding the lock above, which that DDL then waits for (a
	 * deadlock: CREATE TABLE ... PARTITION OF a partitioned partition, TAP 201).
	 */
	rels = find_all_inheritors(relid, NoLock, NULL);
	foreach(lc, rels)
		if (lfirst_oid(lc) != relid &&
			!ConditionalLockRelationOid(lfirst_oid(lc), AccessShareLock))
			return false;
	return true;
}

/*
 * Pauses mirror_id in the running transaction: leaf left the tree (how: "detached",
 * "dropped") without the mirror's TRUNCATE trigger, so a TRUNCATE of it may never have
 * reached the queue, and the worker's check of the tree no longer sees it.
 */
static void
pause_mirror(int mirror_id, const char *reason)
{
	ChromaSavedUser su;
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];

	ereport(WARNING,
			(errmsg("mirror %d is paused: %s", mirror_id, reason)));
	values[0] = Int32GetDatum(mirror_id);
	values[1] = CStringGetTextDatum(reason);
	chroma_become_extension_owner(&su);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET paused = true, paused_reason = $2, "
							  "in_error = true, last_error = $2, last_error_at = pg_catalog.now() "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not pause mirror %d", mirror_id);
	SPI_finish();
	chroma_restore_user(&su);
	chroma_bump_config();
	chroma_wake_at_commit();
}

static void
pause_for_leaf(int mirror_id, Oid leaf, const char *how)
{
	pause_mirror(mirror_id,
				 psprintf("partition %s was %s without the mirror's TRUNCATE trigger "
						  "chroma_sync_%d_truncate (dropped, replaced or disabled): a TRUNCATE of it "
						  "may not have reached the collection; run chroma_resume() and chroma_resync()",
						  get_rel_name(leaf), how, mirror_id));
}

static void
pause_for_name(int mirror_id, const char *leaf, const char *how)
{
	pause_mirror(mirror_id,
				 psprintf("partition %s was %s: its rows' records may be left in the collection; "
						  "run chroma_resume() and chroma_resync()", leaf, how));
}

/* Pauses each mirror of mirrors with a leaf at or under relid lacking its TRUNCATE trigger. */
static void
check_leaving_leaves(Oid relid, List *mirrors, const char *how)
{
	List	   *rels = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lm;
	ListCell   *lc;

	foreach(lm, mirrors)
	{
		MirrorConfig *m = (MirrorConfig *) lfirst(lm);

		foreach(lc, rels)
		{
			Oid			leaf = lfirst_oid(lc);

			if (get_rel_relkind(leaf) == RELKIND_RELATION &&
				!mirror_leaf_truncate_captured(leaf, m->mirror_id))
			{
				pause_for_leaf(m->mirror_id, leaf, how);
				break;
			}
		}
	}
}

/*
 * What a utility statement changes of partitions, noted before it runs: what it detaches
 * and the leaves under the table an ALTER TABLE alters.
 */
typedef struct PartitionStmt
{
	Oid			altered;		/* the table an ALTER TABLE of partitions alters */
	List	   *children_before;	/* oids: its partitions before (detach pending too) */
	List	   *outer_created;	/* created_relids of a statement this one runs within */
	List	   *outer_skipped;	/* skipped_drops of a statement this one runs within */
} PartitionStmt;

/*
 * Leaves the running DROP dropped without queueing their keys, as their mirror's table
 * was named by the DROP too: if that table is still there once the statement is done (a
 * name that found another table when the DROP ran, TAP 224), the mirror is paused.
 */
typedef struct SkippedDrop
{
	int			mirror_id;
	Oid			root;
	char	   *leaf;
} SkippedDrop;

static List *skipped_drops = NIL;

/*
 * The tables (and partitioned tables) the utility statement running now created, seen by
 * the object access hook: a CREATE TABLE ... PARTITION OF names its table, but the name
 * may find another table after the statement (search_path changed meanwhile by a function
 * the statement ran, TAP 220; IF NOT EXISTS that skipped, TAP 221).
 */
static List *created_relids = NIL;



/* The partitions of relid, detach pending ones too (no lock). */
static List *
children_of(Oid relid)
{
	return find_inheritance_children_extended(relid, false, NoLock, NULL, NULL);
}

static void
before_statement(Node *stmt, PartitionStmt *ps)
{
	ListCell   *lc;

	if (IsA(stmt, AlterTableStmt) && ((AlterTableStmt *) stmt)->objtype == OBJECT_TABLE)
	{
		AlterTableStmt *at = (AlterTableStmt *) stmt;
		bool		partitions = false;
		Oid			altered;
		List	   *mirrors;

		foreach(lc, at->cmds)
		{
			AlterTableCmd *cmd = (AlterTableCmd *) lfirst(lc);

			if (cmd->def != NULL && IsA(cmd->def, PartitionCmd))
				partitions = true;
		}
		if (!partitions || !extension_here())
			return;
		altered = RangeVarGetRelid(at->relation, NoLock, true);
		if (!OidIsValid(altered) || get_rel_relkind(altered) != RELKIND_PARTITIONED_TABLE)
			return;
		mirrors = mirrors_above(altered, true);
		if (mirrors == NIL)
			return;				/* no mirror: nothing of PostgreSQL's own order changes */

		/*
		 * The altered table, with the statement's own lock and checks, as the statement
		 * itself takes it first: its partitions cannot change until it ends, and it is
		 * the table the statement alters (a name looked up without the lock may find
		 * another table once a concurrent rename commits, TAP 223, or after the statement
		 * changed search_path, TAP 219). The tables attached or detached are not looked
		 * up by name at all: they are the partitions the altered table gained or lost
		 * (locking them here would change PostgreSQL's order, the DEFAULT partition
		 * first: TAP 260). The partition-set locks come after the statement.
		 */
		altered = AlterTableLookupRelation(at, AlterTableGetLockLevel(at->cmds));
		if (!OidIsValid(altered) || get_rel_relkind(altered) != RELKIND_PARTITIONED_TABLE)
			return;
		ps->altered = altered;
		ps->children_before = children_of(altered);
	}
	else if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_TABLE &&
			 extension_here())
	{
		foreach(lc, ((DropStmt *) stmt)->objects)
		{
			Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList((List *) lfirst(lc)),
												 NoLock, true);

			if (OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

				dropping_roots = lappend_oid(dropping_roots, relid);
				MemoryContextSwitchTo(old);
			}
		}
	}
}

/*
 * Before a utility statement: the partition-set locks and the table an ALTER TABLE of
 * partitions alters, with its partitions; the partitioned tables a DROP TABLE drops. An
 * error here (a name the statement would refuse too) leaves nothing noted (TAP 261).
 */
void *
partition_utility_before(Node *stmt, int *saved)
{
	PartitionStmt *ps = palloc0(sizeof(PartitionStmt));

	*saved = list_length(dropping_roots);
	list_free_deep(captures_dropped);
	captures_dropped = NIL;
	ps->outer_created = created_relids;
	created_relids = NIL;
	ps->outer_skipped = skipped_drops;
	skipped_drops = NIL;
	PG_TRY();
	{
		before_statement(stmt, ps);
	}
	PG_CATCH();
	{
		partition_utility_done(*saved, ps);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ps;
}

/* Keys and triggers of the partitions a statement attached, created or detached. */
void
partition_utility_after(Node *stmt, void *state)
{
	PartitionStmt *ps = (PartitionStmt *) state;
	ListCell   *lc;
	ListCell   *lm;

	if (OidIsValid(ps->altered))
	{
		/*
		 * The partitions the table altered lost (DETACH, FINALIZE, CONCURRENTLY once done)
		 * and gained (ATTACH; SPLIT and MERGE make new ones, whose rows also come from the
		 * partitions they drop, the hook below): no name looked up again. The statement
		 * still holds its locks on them and their partitions, so the TRUNCATE triggers
		 * checked are those it detached with (TAP 262, 266).
		 */
		List	   *mirrors = mirrors_above(ps->altered, true);
		List	   *now = children_of(ps->altered);
		List	   *gone = list_difference_oid(ps->children_before, now);
		List	   *came = list_difference_oid(now, ps->children_before);

		lock_partition_set(mirrors);
		foreach(lc, gone)
		{
			Oid			relid = lfirst_oid(lc);

			if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
				continue;		/* dropped by the same statement: the hook below */
			check_leaving_leaves(relid, mirrors, "detached");
			foreach(lm, mirrors)
			{
				MirrorConfig *m = (MirrorConfig *) lfirst(lm);

				partition_leaf_triggers(m->mirror_id, relid, false);
				chroma_capture_partition_keys(m->mirror_id, relid);
			}
		}

		/*
		 * Only the partitions it gained get the TRUNCATE trigger: one dropped from a leaf
		 * that was there stays missing, for the worker's check to find (TAP 217, 264).
		 */
		foreach(lc, came)
		{
			Oid			relid = lfirst_oid(lc);

			foreach(lm, mirrors)
			{
				MirrorConfig *m = (MirrorConfig *) lfirst(lm);

				partition_check_leaves(relid, get_rel_name(m->relid));
				partition_leaf_triggers(m->mirror_id, relid, true);
				chroma_capture_partition_keys(m->mirror_id, relid);
			}
		}
	}
	else if (IsA(stmt, DropStmt))
	{
		ListCell   *ls;

		foreach(ls, skipped_drops)
		{
			SkippedDrop *d = (SkippedDrop *) lfirst(ls);

			if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(d->root)))
				pause_for_name(d->mirror_id, d->leaf,
							   "dropped by a DROP that named its partitioned table, which was not dropped");
		}
	}
	else if ((IsA(stmt, CreateStmt) || IsA(stmt, CreateForeignTableStmt)) &&
			 ((CreateStmt *) stmt)->partbound != NULL)
	{
		ListCell   *lr;

		foreach(lr, created_relids)
		{
			Oid			relid = lfirst_oid(lr);
			List	   *mirrors;

			if (!get_rel_relispartition(relid))
				continue;		/* a TOAST table, an index, or not made a partition */
			mirrors = partition_mirrors_of(relid);
			lock_partition_set(mirrors);
			foreach(lm, mirrors)
			{
				MirrorConfig *m = (MirrorConfig *) lfirst(lm);

				partition_check_leaves(relid, get_rel_name(m->relid));
				partition_leaf_triggers(m->mirror_id, relid, true);
			}
		}
	}
}

/* The statement is over (or failed): a statement it ran within keeps its own. */
void
partition_utility_done(int saved, void *state)
{
	PartitionStmt *ps = (PartitionStmt *) state;

	dropping_roots = saved > 0 ? list_truncate(dropping_roots, saved) : NIL;
	list_free(created_relids);
	created_relids = ps ? ps->outer_created : NIL;
	list_free_deep(skipped_drops);
	skipped_drops = ps ? ps->outer_skipped : NIL;
}

/*
 * A trigger about to be dropped: noted in captures_dropped if it is a mirror's own
 * TRUNCATE trigger of a partition, firing ALWAYS.
 */
static void
note_capture_dropped(Oid trigger_oid)
{
	Relation	rel;
	ScanKeyData key[1];
	SysScanDesc scan;
	HeapTuple	tup;

	if (!extension_here())
		return;
	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(trigger_oid));
	scan = systable_beginscan(rel, TriggerOidIndexId, true, NULL, 1, key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_trigger t = (Form_pg_trigger) GETSTRUCT(tup);
		bool		isnull;
		Datum		args = heap_getattr(tup, Anum_pg_trigger_tgargs, RelationGetDescr(rel), &isnull);

		if (t->tgtype == (TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_TRUNCATE) && t->tgnargs == 1 &&
			t->tgenabled == TRIGGER_FIRES_ALWAYS && !isnull &&
			get_rel_relispartition(t->tgrelid))
		{
			bytea	   *b = DatumGetByteaPP(args);
			char	   *text = pnstrdup(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
			int			mirror_id = atoi(text);

			if (mirror_id > 0 && mirror_trigger_own(tup, RelationGetDescr(rel), mirror_id, t->tgtype))
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
				DroppedCapture *d = palloc(sizeof(DroppedCapture));

				d->leaf = t->tgrelid;
				d->mirror_id = mirror_id;
				captures_dropped = lappend(captures_dropped, d);
				MemoryContextSwitchTo(old);
			}
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/* Whether the statement running now dropped leaf's TRUNCATE trigger of mirror_id. */
static bool
dropped_with_capture(Oid leaf, int mirror_id)
{
	ListCell   *lc;

	foreach(lc, captures_dropped)
	{
		DroppedCapture *d = (DroppedCapture *) lfirst(lc);

		if (d->leaf == leaf && d->mirror_id == mirror_id)
			return true;
	}
	return false;
}

/*
 * A leaf partition about to be dropped, by whatever statement: its rows are queued while
 * they can still be read, for each mirror of a partitioned table above it that is not
 * dropped itself by the same DROP TABLE. A leaf that had lost its TRUNCATE trigger before
 * the statement pauses the mirror.
 */
static void
partition_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	if (access == OAT_DROP && classId == TriggerRelationId)
	{
		note_capture_dropped(objectId);
		return;
	}
	if (access == OAT_POST_CREATE && classId == RelationRelationId && subId == 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		created_relids = lappend_oid(created_relids, objectId);
		MemoryContextSwitchTo(old);
		return;
	}
	if (access != OAT_DROP || classId != RelationRelationId || subId != 0)
		return;
	if (get_rel_relkind(objectId) != RELKIND_RELATION || !get_rel_relispartition(objectId))
		return;
	{
		ListCell   *lc;

		foreach(lc, partition_mirrors_of(objectId))
		{
			MirrorConfig *m = (MirrorConfig *) lfirst(lc);
			List	   *gone = partition_ancestors(m->relid);
			ListCell   *lg;
			bool		dropped = false;

			/* the mirror's own table dropped too (or a table above it): the mirror goes */
			gone = lappend_oid(gone, m->relid);
			foreach(lg, gone)
				if (list_member_oid(dropping_roots, lfirst_oid(lg)))
					dropped = true;
			if (dropped)
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
				SkippedDrop *d = palloc(sizeof(SkippedDrop));

				d->mirror_id = m->mirror_id;
				d->root = m->relid;
				d->leaf = pstrdup(get_rel_name(objectId));
				skipped_drops = lappend(skipped_drops, d);
				MemoryContextSwitchTo(old);
				continue;
			}
			chroma_capture_partition_keys(m->mirror_id, objectId);
			if (!dropped_with_capture(objectId, m->mirror_id) &&
				!mirror_leaf_truncate_captured(objectId, m->mirror_id))
				pause_for_leaf(m->mirror_id, objectId, "dropped");
		}
	}
}

void
chroma_partition_init(void)
{
	prev_object_access = object_access_hook;
	object_access_hook = partition_object_access;
}
