/*
 * trigger.c — change capture.
 *
 * chroma_sync.capture() is a C AFTER trigger: INSERT, UPDATE and DELETE (row level)
 * append (mirror, key) to chroma_sync.queue, TRUNCATE (statement level) appends a
 * barrier. An UPDATE that changes no mirrored column appends nothing; one that changes
 * the key appends the old and the new key. The queue is written with the extension
 * owner's rights, so writers need no privilege on it. The worker is woken when the
 * transaction commits, never on rollback.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "mirror_config.h"
#include "partition.h"
#include "pg_compat.h"
#include "shared.h"
#include "trigger.h"

PG_FUNCTION_INFO_V1(chroma_sync_capture);

/* A mirror and the table a trigger of it fired on (its own, or one of its partitions). */
typedef struct CaptureKey
{
	int			mirror_id;
	Oid			relid;
} CaptureKey;

/* What the trigger needs to know about a mirror, cached per backend. */
typedef struct CaptureInfo
{
	CaptureKey	key;			/* hash key */
	Oid			relid;
	Oid			root;			/* the mirrored table: relid or a table above it */
	bool		partition;		/* relid is a partition of the mirrored table */
	int			nkeys;
	AttrNumber *key_attnums;
	Oid		   *key_types;
	int			ncols;
	AttrNumber *cols;			/* every mirrored column */
	bool		paused;			/* no need to wake the worker */
	bool		stale;			/* relid's or the mirrored table's definition changed */
} CaptureInfo;

static HTAB *capture_cache = NULL;
static MemoryContext capture_cxt = NULL;	/* what the cache's entries point to */
static uint64 capture_cache_generation = 0;
static bool capture_callback_registered = false;
static Oid	ext_owner = InvalidOid;

/* Keys buffered by this transaction (see enqueue). */
typedef struct PendingKey
{
	int			mirror_id;
	int			level;
	char	   *key;
} PendingKey;

static PendingKey *pending = NULL;
static int	npending = 0;
static int	cap_pending = 0;
static int	npending_outer = 0;	/* of levels below the current one (see flush_pending) */

/* Mirrors written by the current transaction (chroma_flush refuses to wait on them). */
#define MAX_TRACKED 64
static int	xact_mirrors[MAX_TRACKED];
static int	xact_nmirrors = 0;
static bool xact_overflow = false;
static bool xact_wake = false;

/*
 * Partitioned tables whose TRUNCATE is running now, by mirror (see capture_truncate):
 * their partitions' own TRUNCATE triggers need not queue keys, the whole collection is
 * cleared. Valid only for the command that set it.
 */
typedef struct TruncatingRoot
{
	int			mirror_id;
	CommandId	cid;
} TruncatingRoot;

static TruncatingRoot truncating[MAX_TRACKED];
static int	ntruncating = 0;

/*
 * This backend prepared a transaction that queued keys. Its COMMIT PREPARED wakes the
 * worker when it is a statement (utility_hook.c), but a logical replication apply worker
 * (a subscription with two_phase = true) commits what it prepared without one
 * (FinishPreparedTransaction): from then on, each commit of this backend sets the running
 * worker's latch (a shared lock and SetLatch), so those keys do not wait for its idle
 * timeout. An apply worker restarted between PREPARE and COMMIT PREPARED forgets it.
 */
static bool wake_after_prepare = false;

static void flush_pending(void);
static void capture_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									 SubTransactionId parentSubid, void *arg);

static void capture_cache_forget(void);

static void
capture_xact_callback(XactEvent event, void *arg)
{
	/*
	 * A transaction that changed a mirror's configuration, rolled back (or prepared, so no
	 * longer this backend's to see): what the cache read within it is not so, under a
	 * generation the rollback does not change (TAP 213). Relation changes are also
	 * followed by capture_relcache_changed.
	 */
	if ((event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		 event == XACT_EVENT_PREPARE) && chroma_config_changed_in_xact())
		capture_cache_forget();
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			flush_pending();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			chroma_config_xact_end(true);
			if (xact_wake)
				chroma_wake_worker(MyDatabaseId);
			else if (wake_after_prepare)
				chroma_wake_running_worker(MyDatabaseId);
			pg_fallthrough;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (event == XACT_EVENT_PREPARE && xact_wake)
				wake_after_prepare = true;
			chroma_config_xact_end(false);
			xact_wake = false;
			pending = NULL;		/* TopTransactionContext is gone */
			npending = cap_pending = npending_outer = 0;
			xact_nmirrors = 0;
			xact_overflow = false;
			ntruncating = 0;
			break;
		default:
			break;
	}
}

void
chroma_trigger_init(void)
{
	RegisterXactCallback(capture_xact_callback, NULL);
	RegisterSubXactCallback(capture_subxact_callback, NULL);
}

void
chroma_wake_at_commit(void)
{
	xact_wake = true;
}

bool
chroma_xact_wrote_mirror(int mirror_id)
{
	if (xact_overflow)
		return true;
	for (int i = 0; i < xact_nmirrors; i++)
		if (xact_mirrors[i] == mirror_id)
			return true;
	return false;
}

static void
note_write(int mirror_id, bool wake)
{
	if (wake)
		xact_wake = true;
	for (int i = 0; i < xact_nmirrors; i++)
		if (xact_mirrors[i] == mirror_id)
			return;
	if (xact_nmirrors < MAX_TRACKED)
		xact_mirrors[xact_nmirrors++] = mirror_id;
	else
		xact_overflow = true;
}

Oid
chroma_extension_owner(void)
{
	if (!OidIsValid(ext_owner))
	{
		Oid			extoid = get_extension_oid("chroma_sync", false);
		Relation	rel;
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		rel = table_open(ExtensionRelationId, AccessShareLock);
		ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(extoid));
		scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
		tup = systable_getnext(scan);
		if (HeapTupleIsValid(tup))
			ext_owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
		if (!OidIsValid(ext_owner))
			elog(ERROR, "could not find the owner of extension chroma_sync");
	}
	return ext_owner;
}

int
chroma_pin_search_path(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* Errors restore the user and search_path at (sub)transaction abort. */
void
chroma_become_extension_owner(ChromaSavedUser *s)
{
	Oid			owner = chroma_extension_owner();

	GetUserIdAndSecContext(&s->userid, &s->sec);
	s->guc_level = chroma_pin_search_path();
	SetUserIdAndSecContext(owner, s->sec | SECURITY_LOCAL_USERID_CHANGE);
}

void
chroma_restore_user(ChromaSavedUser *s)
{
	SetUserIdAndSecContext(s->userid, s->sec);
	AtEOXact_GUC(true, s->guc_level);
}

/*
 * The attnum in table relid of the mirrored table's column att: the same for the table
 * itself; for a partition, found by name (a partition attached after it was created
 * may order its columns otherwise, or have dropped ones). A column dropped from the
 * mirrored table has no match: InvalidAttrNumber, which capture treats as it treats the
 * plain table's dropped column (never changed; a key of it is NULL), so the table stays
 * writable while the worker pauses the mirror.
 */
static AttrNumber
map_attnum(Oid root, Oid relid, AttrNumber att)
{
	char	   *name;

	if (relid == root || att <= 0)
		return att;
	name = get_attname(root, att, true);
	return name ? get_attnum(relid, name) : InvalidAttrNumber;
}

/*
 * What capturing changes of table relid (natts columns) for mirror m needs, allocated
 * in cxt: relid is m's table or one of its partitions.
 */
static void
capture_info_fill(CaptureInfo *ci, MirrorConfig *m, Oid relid, int natts, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			n = 0;

	ci->relid = relid;
	ci->root = m->relid;
	ci->stale = false;
	ci->partition = relid != m->relid;
	ci->paused = m->paused;
	ci->nkeys = m->nkeys;
	ci->key_attnums = palloc_array(AttrNumber, m->nkeys);
	ci->key_types = palloc_array(Oid, m->nkeys);
	for (int i = 0; i < m->nkeys; i++)
		ci->key_attnums[i] = map_attnum(m->relid, relid, m->key_attnums[i]);
	memcpy(ci->key_types, m->key_types, sizeof(Oid) * m->nkeys);
	if (m->filter)
	{
		/* a filter may read any column: any change may move the row in or out */
		ci->cols = palloc(sizeof(AttrNumber) * Max(natts, 1));
		for (AttrNumber a = 1; a <= natts; a++)
			ci->cols[n++] = a;
	}
	else
	{
		AttrNumber	a;

		ci->cols = palloc(sizeof(AttrNumber) * (m->nmeta + 3));
		/* (a restored copy's recorded attnums may lie past this table's columns) */
		if (m->embedding_attnum <= natts || ci->partition)
			if ((a = map_attnum(m->relid, relid, m->embedding_attnum)) != InvalidAttrNumber)
				ci->cols[n++] = a;
		if (m->document_attnum > 0 && (m->document_attnum <= natts || ci->partition))
			if ((a = map_attnum(m->relid, relid, m->document_attnum)) != InvalidAttrNumber)
				ci->cols[n++] = a;
		for (int i = 0; i < m->nmeta; i++)
			if (m->meta_attnums[i] > 0 && (m->meta_attnums[i] <= natts || ci->partition))
				if ((a = map_attnum(m->relid, relid, m->meta_attnums[i])) != InvalidAttrNumber)
					ci->cols[n++] = a;
	}
	ci->ncols = n;
	MemoryContextSwitchTo(old);
}

/* Whether relid is a partition, at any level, of the partitioned table root. */
static bool
is_partition_of(Oid relid, Oid root)
{
	return list_member_oid(partition_ancestors(relid), root);
}

/*
 * A relation's definition changed, in this backend's transaction (also one rolled back:
 * its invalidations are run here at abort) or in a committed one: the entries built from
 * it are rebuilt at their next use (not freed here: one may be in use by a trigger).
 * relid InvalidOid: every relation.
 */
static void
capture_relcache_changed(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	CaptureInfo *ci;

	if (capture_cache == NULL)
		return;
	hash_seq_init(&seq, capture_cache);
	while ((ci = hash_seq_search(&seq)) != NULL)
		if (!OidIsValid(relid) || ci->relid == relid || ci->root == relid)
			ci->stale = true;
}

/* Every entry rebuilt at its next use. */
static void
capture_cache_forget(void)
{
	capture_relcache_changed((Datum) 0, InvalidOid);
}

static CaptureInfo *
capture_info(int mirror_id, Oid relid, int natts)
{
	CaptureInfo *ci;
	bool		found;
	uint64		gen = chroma_config_generation();
	CaptureKey	key;

	if (!capture_callback_registered)
	{
		CacheRegisterRelcacheCallback(capture_relcache_changed, (Datum) 0);
		capture_callback_registered = true;
	}
	if (capture_cache == NULL || gen != capture_cache_generation)
	{
		HASHCTL		ctl;

		if (capture_cache)
			hash_destroy(capture_cache);
		if (capture_cxt)
			MemoryContextReset(capture_cxt);
		else
			capture_cxt = AllocSetContextCreate(CacheMemoryContext, "chroma_sync capture",
												ALLOCSET_SMALL_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(CaptureKey);
		ctl.entrysize = sizeof(CaptureInfo);
		ctl.hcxt = CacheMemoryContext;
		capture_cache = hash_create("chroma_sync capture", 16, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		capture_cache_generation = gen;
		ext_owner = InvalidOid;
	}

	memset(&key, 0, sizeof(key));
	key.mirror_id = mirror_id;
	key.relid = relid;
	ci = hash_search(capture_cache, &key, HASH_FIND, &found);
	if (found && !ci->stale)
		return ci;
	if (found)
	{
		pfree(ci->key_attnums);
		pfree(ci->key_types);
		pfree(ci->cols);
		hash_search(capture_cache, &key, HASH_REMOVE, NULL);
	}

	{
		MirrorConfig *m;
		int			level = chroma_pin_search_path();

		m = mirror_load(mirror_id);
		AtEOXact_GUC(true, level);
		if (m == NULL)
			return NULL;		/* mirror dropped: nothing to capture */
		/* a partitioned table's row triggers are cloned to its partitions */
		if (m->relid != relid && !is_partition_of(relid, m->relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("trigger of mirror %d fired on table %s, which it does not mirror",
							mirror_id, get_rel_name(relid))));
		ci = hash_search(capture_cache, &key, HASH_ENTER, &found);
		PG_TRY();
		{
			capture_info_fill(ci, m, relid, natts, capture_cxt);
		}
		PG_CATCH();
		{
			hash_search(capture_cache, &key, HASH_REMOVE, NULL);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	return ci;
}

static bool
column_changed(HeapTuple oldtup, HeapTuple newtup, TupleDesc td, AttrNumber att)
{
	bool		oldnull;
	bool		newnull;
	Datum		o = heap_getattr(oldtup, att, td, &oldnull);
	Datum		n = heap_getattr(newtup, att, td, &newnull);
	Form_pg_attribute a = TupleDescAttr(td, att - 1);

	if (oldnull || newnull)
		return oldnull != newnull;
	return !datumIsEqual(o, n, a->attbyval, a->attlen);
}

/*
 * Keys are buffered per transaction and written to the queue in one statement per
 * PENDING_FLUSH_AT keys, before a TRUNCATE barrier, and at PRE_COMMIT at the latest:
 * a bulk write costs one queue INSERT per thousand rows, not one per row. Each key
 * remembers its subtransaction level, so a rolled-back savepoint drops its keys.
 *
 * A flush writes only the keys of the current level: a queue row inserted inside a
 * savepoint is deleted by ROLLBACK TO SAVEPOINT, so an outer level's keys must wait in
 * the buffer until their own level is current again (a released savepoint hands its
 * keys to its parent; PRE_COMMIT runs at the top level, where every key left belongs).
 */
#define PENDING_FLUSH_AT 1000


/*
 * The queue inserts, planned once per backend (the plan cache replans them if the
 * queue is re-created): parsing and planning on every commit would cost more than
 * the insert itself. Keys of a mirror removed since they were buffered (chroma_unmirror
 * later in the same transaction) are not written: nothing would ever take them out.
 */
static SPIPlanPtr one_plan = NULL;
static SPIPlanPtr many_plan = NULL;
static SPIPlanPtr barrier_plan = NULL;

static void
insert_rows(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *values)
{
	ChromaSavedUser su;
	bool		connected = false;
	bool		pushed = false;

	chroma_become_extension_owner(&su);
	/* at PRE_COMMIT no statement is running: give the insert a snapshot */
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pushed = true;
	}
	if (SPI_connect() == SPI_OK_CONNECT)
		connected = true;
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
		*plan = p;
	}
	if (SPI_execute_plan(*plan, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into chroma_sync.queue");
	if (connected)
		SPI_finish();
	if (pushed)
		PopActiveSnapshot();
	chroma_restore_user(&su);
}

static void
flush_pending(void)
{
	Datum	   *ids;
	Datum	   *keys;
	Oid			types[2] = {INT4ARRAYOID, TEXTARRAYOID};
	Datum		values[2];
	MemoryContext old;
	int			level = GetCurrentTransactionNestLevel();
	int			nflush = 0;
	int			k = 0;
	MemoryContext flushcxt;

	for (int i = 0; i < npending; i++)
		if (pending[i].level == level)
			nflush++;
	if (nflush == 0)
	{
		npending_outer = npending;
		return;
	}
	if (nflush == 1 && npending == 1)
	{
		/* the common single-row transaction */
		Oid			t1[2] = {INT4OID, TEXTOID};
		Datum		v1[2];

		v1[0] = Int32GetDatum(pending[0].mirror_id);
		v1[1] = CStringGetTextDatum(pending[0].key);
		npending = npending_outer = 0;
		insert_rows(&one_plan, "INSERT INTO chroma_sync.queue (mirror_id, key) SELECT $1, $2 "
					"WHERE EXISTS (SELECT FROM chroma_sync.mirror WHERE mirror_id OPERATOR(pg_catalog.=) $1)",
					2, t1, v1);
		return;
	}
	/* (freed once written: a TRUNCATE of a large partition queues millions) */
	flushcxt = AllocSetContextCreate(TopTransactionContext, "chroma_sync flush", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(flushcxt);
	ids = palloc_array(Datum, nflush);
	keys = palloc_array(Datum, nflush);
	nflush = 0;
	for (int i = 0; i < npending; i++)
	{
		if (pending[i].level != level)
		{
			pending[k++] = pending[i];	/* an outer level's: kept for its own level */
			continue;
		}
		ids[nflush] = Int32GetDatum(pending[i].mirror_id);
		keys[nflush] = CStringGetTextDatum(pending[i].key);
		pfree(pending[i].key);
		nflush++;
	}
	values[0] = PointerGetDatum(construct_array(ids, nflush, INT4OID, 4, true, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(keys, nflush, TEXTOID, -1, false, TYPALIGN_INT));
	MemoryContextSwitchTo(old);
	npending = npending_outer = k;
	insert_rows(&many_plan, "INSERT INTO chroma_sync.queue (mirror_id, key) "
				"SELECT u.m, u.k FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(m, k) "
				"WHERE EXISTS (SELECT FROM chroma_sync.mirror e WHERE e.mirror_id OPERATOR(pg_catalog.=) u.m)",
				2, types, values);
	MemoryContextDelete(flushcxt);
}

static void
enqueue(CaptureInfo *ci, int mirror_id, const char *key)
{
	/* a paused mirror's worker has nothing to do: waking it would only cost */
	note_write(mirror_id, !ci->paused);
	if (key == NULL)
	{
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(mirror_id)};

		/* a TRUNCATE barrier: earlier changes first */
		flush_pending();
		insert_rows(&barrier_plan, "INSERT INTO chroma_sync.queue (mirror_id, key) VALUES ($1, NULL)",
					1, types, values);
		return;
	}
	if (npending == cap_pending)
	{
		int			cap = cap_pending ? cap_pending * 2 : 64;

		pending = pending
			? repalloc(pending, sizeof(PendingKey) * cap)
			: MemoryContextAlloc(TopTransactionContext, sizeof(PendingKey) * cap);
		cap_pending = cap;
	}
	pending[npending].mirror_id = mirror_id;
	pending[npending].level = GetCurrentTransactionNestLevel();
	pending[npending].key = MemoryContextStrdup(TopTransactionContext, key);
	npending++;
	if (npending - npending_outer >= PENDING_FLUSH_AT)
		flush_pending();
}

static void
capture_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_START_SUB)
	{
		npending_outer = npending;	/* every key buffered so far is an outer level's */
		return;
	}
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		int			k = 0;

		if (chroma_config_changed_in_xact())
			capture_cache_forget();

		ntruncating = 0;		/* a TRUNCATE that failed half-way */

		for (int i = 0; i < npending; i++)
			if (pending[i].level < level)
				pending[k++] = pending[i];
		npending = k;
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = 0; i < npending; i++)
			if (pending[i].level >= level)
				pending[i].level = level - 1;
	}
	else
		return;
	/* the parent becomes current: its keys no longer count as outer */
	npending_outer = 0;
	for (int i = 0; i < npending; i++)
		if (pending[i].level < level - 1)
			npending_outer++;
}

static char *
row_key(CaptureInfo *ci, HeapTuple tup, TupleDesc td, bool *isnull)
{
	char	  **parts = palloc_array(char *, ci->nkeys);

	for (int i = 0; i < ci->nkeys; i++)
	{
		Datum		d;

		/* a restored copy's recorded attnum may lie past this table's columns */
		if (ci->key_attnums[i] < 1 || ci->key_attnums[i] > td->natts)
		{
			*isnull = true;
			return NULL;
		}
		d = heap_getattr(tup, ci->key_attnums[i], td, isnull);

		if (*isnull)
			return NULL;		/* a NULL in the key: the row has no id */
		parts[i] = mirror_key_text(ci->key_types[i], d);
	}
	return mirror_id_encode(ci->nkeys, parts);
}

static void capture_row(TriggerData *trigdata, CaptureInfo *ci, int mirror_id);

/*
 * Queues the key of every row of table rel, a partition of mirror's table (ci), or one
 * that was (DETACH): what is there now, whatever this transaction's snapshot (the caller
 * holds a lock that keeps other writers out, or their own triggers queue their rows). The
 * worker reads each key from the mirrored table, and deletes what is not there.
 */
static void
capture_table_keys(CaptureInfo *ci, int mirror_id, Relation rel)
{
	TupleDesc	td = RelationGetDescr(rel);
	Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
	TableScanDesc scan = chroma_table_beginscan(rel, snap);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "chroma_sync keys",
											  ALLOCSET_DEFAULT_SIZES);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		MemoryContext old = MemoryContextSwitchTo(tmp);
		bool		shouldfree;
		bool		isnull;
		HeapTuple	tup = ExecFetchSlotHeapTuple(slot, false, &shouldfree);
		char	   *key = row_key(ci, tup, td, &isnull);

		MemoryContextSwitchTo(old);
		if (!isnull)
			enqueue(ci, mirror_id, key);
		MemoryContextReset(tmp);
		CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snap);
	MemoryContextDelete(tmp);
}

/* Whether the AFTER TRUNCATE trigger of mirror_id on rel fires in every session. */
static bool
after_truncate_fires(Relation rel, int mirror_id)
{
	TriggerDesc *desc = rel->trigdesc;
	char	   *name = psprintf("chroma_sync_%d_truncate", mirror_id);

	for (int i = 0; desc != NULL && i < desc->numtriggers; i++)
	{
		Trigger    *t = &desc->triggers[i];

		if (strcmp(t->tgname, name) == 0 &&
			TRIGGER_FOR_TRUNCATE(t->tgtype) && TRIGGER_FOR_AFTER(t->tgtype) &&
			t->tgenabled == TRIGGER_FIRES_ALWAYS)
			return true;
	}
	return false;
}

/*
 * TRUNCATE. Of the mirrored table: its AFTER trigger queues a barrier (the worker clears
 * the collection once the changes before it are sent). Of one partition of a mirrored
 * partitioned table: that partition's BEFORE trigger queues the key of each of its rows
 * (only those records leave the collection). When the partitioned table itself is
 * truncated, its BEFORE trigger fires first (the tables named come before the partitions
 * added) and notes it for this command, and its partitions' triggers queue nothing: the
 * barrier clears everything. A partition named before its partitioned table is queued
 * all the same (more work, same result).
 */
static void
capture_truncate(TriggerData *trigdata, CaptureInfo *ci, int mirror_id)
{
	CommandId	cid = GetCurrentCommandId(false);

	if (TRIGGER_FIRED_AFTER(trigdata->tg_event))
	{
		int			k = 0;

		for (int i = 0; i < ntruncating; i++)
			if (truncating[i].mirror_id != mirror_id)
				truncating[k++] = truncating[i];
		ntruncating = k;
		enqueue(ci, mirror_id, NULL);
		return;
	}
	if (!ci->partition)
	{
		/* only when the barrier will follow: the AFTER trigger fires in every session */
		if (after_truncate_fires(trigdata->tg_relation, mirror_id) && ntruncating < MAX_TRACKED)
		{
			truncating[ntruncating].mirror_id = mirror_id;
			truncating[ntruncating].cid = cid;
			ntruncating++;
		}
		return;
	}
	for (int i = 0; i < ntruncating; i++)
		if (truncating[i].mirror_id == mirror_id && truncating[i].cid == cid)
			return;
	capture_table_keys(ci, mirror_id, trigdata->tg_relation);
}

/*
 * Queues the keys of every row of table relid and of its partitions, for mirror_id, whose
 * table it is a partition of, or was until now (ATTACH, DETACH, DROP).
 */
void
chroma_capture_partition_keys(int mirror_id, Oid relid)
{
	MirrorConfig *m;
	int			level = chroma_pin_search_path();
	List	   *rels;
	ListCell   *lc;
	Oid			save_userid;
	int			save_sec;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(chroma_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	m = mirror_load(mirror_id);
	SetUserIdAndSecContext(save_userid, save_sec);
	AtEOXact_GUC(true, level);
	if (m == NULL)
		return;
	rels = find_all_inheritors(relid, AccessShareLock, NULL);
	foreach(lc, rels)
	{
		Oid			leaf = lfirst_oid(lc);
		Relation	rel;
		CaptureInfo ci;

		if (get_rel_relkind(leaf) != RELKIND_RELATION)
			continue;
		rel = table_open(leaf, AccessShareLock);
		memset(&ci, 0, sizeof(ci));
		capture_info_fill(&ci, m, leaf, RelationGetDescr(rel)->natts, CurrentMemoryContext);
		capture_table_keys(&ci, mirror_id, rel);
		table_close(rel, NoLock);
	}
}

Datum
chroma_sync_capture(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	CaptureInfo *ci;
	int			mirror_id;
	TriggerEvent ev;
	Oid			save_userid;
	int			save_sec;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("chroma_sync.capture() must be called as a trigger")));
	trigger = trigdata->tg_trigger;
	ev = trigdata->tg_event;
	/* (a partitioned table's TRUNCATE triggers fire BEFORE too: capture_truncate) */
	if ((!TRIGGER_FIRED_AFTER(ev) && !(TRIGGER_FIRED_BY_TRUNCATE(ev) && TRIGGER_FIRED_BEFORE(ev))) ||
		trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("chroma_sync.capture() must be an AFTER trigger with the mirror id as argument")));
	mirror_id = pg_strtoint32(trigger->tgargs[0]);

	/* The queue and the configuration are read and written with the owner's rights. */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(chroma_extension_owner(),
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		ci = capture_info(mirror_id, RelationGetRelid(trigdata->tg_relation),
						  RelationGetDescr(trigdata->tg_relation)->natts);
		if (ci != NULL)
			capture_row(trigdata, ci, mirror_id);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	return PointerGetDatum(NULL);
}

static void
capture_row(TriggerData *trigdata, CaptureInfo *ci, int mirror_id)
{
	TriggerEvent ev = trigdata->tg_event;
	TupleDesc	td = RelationGetDescr(trigdata->tg_relation);

	if (TRIGGER_FIRED_BY_TRUNCATE(ev))
		capture_truncate(trigdata, ci, mirror_id);
	else if (!TRIGGER_FIRED_FOR_ROW(ev))
		flush_pending();		/* end of statement: the queue shows this statement's keys */
	else
	{
		bool		isnull;
		char	   *key;

		if (TRIGGER_FIRED_BY_INSERT(ev))
		{
			key = row_key(ci, trigdata->tg_trigtuple, td, &isnull);
			if (!isnull)
				enqueue(ci, mirror_id, key);
		}
		else if (TRIGGER_FIRED_BY_DELETE(ev))
		{
			key = row_key(ci, trigdata->tg_trigtuple, td, &isnull);
			if (!isnull)
				enqueue(ci, mirror_id, key);
		}
		else if (TRIGGER_FIRED_BY_UPDATE(ev))
		{
			HeapTuple	oldtup = trigdata->tg_trigtuple;
			HeapTuple	newtup = trigdata->tg_newtuple;
			bool		oldnull;
			bool		newnull;
			char	   *oldkey = row_key(ci, oldtup, td, &oldnull);
			char	   *newkey = row_key(ci, newtup, td, &newnull);

			if (oldnull != newnull || (!oldnull && strcmp(oldkey, newkey) != 0))
			{
				if (!oldnull)
					enqueue(ci, mirror_id, oldkey);
				if (!newnull)
					enqueue(ci, mirror_id, newkey);
			}
			else if (!newnull)
			{
				for (int i = 0; i < ci->ncols; i++)
				{
					if (column_changed(oldtup, newtup, td, ci->cols[i]))
					{
						enqueue(ci, mirror_id, newkey);
						break;
					}
				}
			}
		}
	}
}
