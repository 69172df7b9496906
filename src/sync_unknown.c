/*
 * sync_unknown.c — keys whose request's outcome is unknown: a timeout, a connection lost
 * mid-request, or HTTP 500/502/504 (a proxy that gave up while Chroma kept working). The
 * server may still apply such a request later, after a newer state of the same rows was
 * sent. Their keys are kept in chroma_sync.resend and queued again once the request
 * timeout has passed since the outcome became unknown, so the rows' current state is sent
 * after any late-applied stale request. The table survives worker restarts; without it
 * (a library newer than the installed extension) the keys wait in worker memory and are
 * queued again after the next success.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/guc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "nodes/value.h"
#include "parser/parse_func.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "shared.h"
#include "sync.h"
#include "sync_batch.h"
#include "trigger.h"

/* Whether chroma_sync.resend exists (0.5); looked up in a transaction. */
static bool
resend_table_exists(void)
{
	Oid			nsp = get_namespace_oid("chroma_sync", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("resend", nsp));
}

/* Keys this worker handed on to other mirrors (their states look at resend again). */
static uint64 handovers = 0;

static bool hand_over_exists(void);
static void hand_over(int mirror_id, const char *collection_id, const char *name);

void
sync_unknown_add(MirrorState *st, const char *key)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	st->unknown_keys = lappend(st->unknown_keys, pstrdup(key));
	MemoryContextSwitchTo(old);
}

/*
 * Writes the keys kept in memory to chroma_sync.resend, in a transaction of its own
 * (call outside one). On failure they stay in memory, to be tried again.
 */
void
sync_unknown_persist(MirrorState *st)
{
	MemoryContext caller = CurrentMemoryContext;
	volatile bool done = false;

	if (st->unknown_keys == NIL)
		return;
	PG_TRY();
	{
		sync_begin_txn();
		if (resend_table_exists())
		{
			/* durable: a crash must not forget them (the worker commits asynchronously) */
			Oid			types[3] = {INT4OID, TEXTARRAYOID, INT4OID};
			Datum		values[3] = {Int32GetDatum(st->mirror_id), sync_text_array(st->unknown_keys),
			Int32GetDatum(chroma_timeout_ms)};

			(void) set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);

			sync_exec("INSERT INTO chroma_sync.resend (mirror_id, key, not_before) "
					  "SELECT $1, k, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
					  "pg_catalog.make_interval(secs => ($3 OPERATOR(pg_catalog./) 1000.0::pg_catalog.float8)) "
					  "FROM (SELECT DISTINCT k FROM pg_catalog.unnest($2) AS u(k)) AS d "
					  "ON CONFLICT (mirror_id, key) DO UPDATE SET not_before = excluded.not_before",
					  3, types, values, NULL, SPI_OK_INSERT);

			/*
			 * The collection's other mirrors get a copy: one that took the collection over
			 * while the request was in flight writes it now, and this mirror pauses
			 * (red-team TAP 292).
			 */
			sync_exec("INSERT INTO chroma_sync.resend (mirror_id, key, not_before) "
					  "SELECT o.mirror_id, r.key, r.not_before FROM chroma_sync.resend r "
					  "JOIN chroma_sync.mirror m ON m.mirror_id OPERATOR(pg_catalog.=) r.mirror_id "
					  "JOIN chroma_sync.mirror o ON o.collection_id OPERATOR(pg_catalog.=) m.collection_id "
					  "AND o.mirror_id OPERATOR(pg_catalog.<>) m.mirror_id "
					  "WHERE r.mirror_id OPERATOR(pg_catalog.=) $1 AND r.key OPERATOR(pg_catalog.=) ANY ($2) "
					  "ON CONFLICT (mirror_id, key) DO UPDATE SET not_before = "
					  "GREATEST(chroma_sync.resend.not_before, excluded.not_before)",
					  2, types, values, NULL, SPI_OK_INSERT);
			if (SPI_processed > 0)
				handovers++;

			/*
			 * A request that ended after its mirror was removed (chroma_unmirror stopped
			 * waiting for it, a DROP TABLE does not wait): the keys are handed on like
			 * those the removal found. The row lock orders this against a removal still
			 * running (NOWAIT: an error keeps the keys in memory, to be tried again).
			 */
			if (hand_over_exists())
			{
				sync_exec("SELECT 1 FROM chroma_sync.mirror WHERE mirror_id OPERATOR(pg_catalog.=) $1 "
						  "FOR KEY SHARE NOWAIT", 1, types, values, NULL, SPI_OK_SELECT);
				if (SPI_processed == 0)
				{
					hand_over(st->mirror_id, st->collection_id, st->collection);
					handovers++;
				}
			}
			done = true;
		}
		sync_end_txn();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	if (done)
	{
		list_free_deep(st->unknown_keys);
		st->unknown_keys = NIL;
		/* the earliest of them is due one timeout from now */
		if (st->resend_at == 0)
			st->resend_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), chroma_timeout_ms);
	}
}

/*
 * Queues the mirror's resend keys that are due (call outside a transaction); notes when
 * the next ones are. The first call after a worker start always looks.
 */
void
sync_unknown_requeue(MirrorState *st)
{
	bool		isnull;
	Datum		next;
	uint64		generation = chroma_config_generation();

	/*
	 * Keys handed over by a removed mirror of the collection: by a backend (unmirror, DROP)
	 * with a new configuration generation, by this worker with a new count.
	 */
	if (st->resend_checked && st->resend_generation == generation &&
		st->resend_handovers == handovers &&
		(st->resend_at == 0 || GetCurrentTimestamp() < st->resend_at))
		return;
	st->resend_generation = generation;
	st->resend_handovers = handovers;
	sync_begin_txn();
	if (!resend_table_exists())
	{
		sync_end_txn();
		st->resend_checked = true;
		st->resend_at = 0;
		return;
	}
	{
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(st->mirror_id)};

		sync_exec("WITH due AS (DELETE FROM chroma_sync.resend WHERE mirror_id OPERATOR(pg_catalog.=) $1 "
				  "AND not_before OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() RETURNING key) "
				  "INSERT INTO chroma_sync.queue (mirror_id, key) SELECT $1, due.key FROM due",
				  1, types, values, NULL, SPI_OK_INSERT);
		sync_exec("SELECT pg_catalog.min(not_before) FROM chroma_sync.resend "
				  "WHERE mirror_id OPERATOR(pg_catalog.=) $1",
				  1, types, values, NULL, SPI_OK_SELECT);
		next = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		st->resend_at = isnull ? 0 : DatumGetTimestampTz(next);
	}
	sync_end_txn();
	st->resend_checked = true;
}

/* Whether chroma_sync.resend_hand_over exists (0.5); inside a transaction. */
static bool
hand_over_exists(void)
{
	Oid			nsp = get_namespace_oid("chroma_sync", true);
	Oid			argtypes[3] = {INT4OID, UUIDOID, TEXTOID};
	List	   *name;

	if (!OidIsValid(nsp))
		return false;
	name = list_make1(makeString("chroma_sync"));
	name = lappend(name, makeString("resend_hand_over"));
	return OidIsValid(LookupFuncName(name, 3, argtypes, true));
}

/* The mirror's collection, kept for when its row is gone. */
void
sync_unknown_note_mirror(MirrorState *st, MirrorConfig *m)
{
	if (m->collection_id != NULL)
		strlcpy(st->collection_id, m->collection_id, sizeof(st->collection_id));
	if (m->collection != NULL)
		strlcpy(st->collection, m->collection, sizeof(st->collection));
}

/* Calls chroma_sync.resend_hand_over (inside a transaction, SPI connected). */
static void
hand_over(int mirror_id, const char *collection_id, const char *name)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		values[3] = {Int32GetDatum(mirror_id),
		collection_id[0] ? CStringGetTextDatum(collection_id) : (Datum) 0,
	name[0] ? CStringGetTextDatum(name) : (Datum) 0};
	char		nulls[3] = {' ', collection_id[0] ? ' ' : 'n', name[0] ? ' ' : 'n'};

	if (SPI_execute_with_args("SELECT chroma_sync.resend_hand_over($1, $2::pg_catalog.uuid, $3)",
							  3, types, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not hand over the keys of chroma_sync.resend");
}

/*
 * Drops a removed mirror's resend keys (inside a transaction, SPI connected, before the
 * mirror's row is deleted). With keep_for_collection (the collection stays), the keys
 * are handed on instead (chroma_sync.resend_hand_over): to the other mirrors of the
 * collection, or kept for the collection, for the next mirror
 * created into it (sync_unknown_adopt_collection). A stale write of the old mirror then
 * cannot outlive what the new mirror sends.
 */
void
sync_unknown_forget_mirror(int mirror_id, bool keep_for_collection)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mirror_id)};

	if (!resend_table_exists())
		return;
	if (keep_for_collection && hand_over_exists())
	{
		if (SPI_execute_with_args("SELECT chroma_sync.resend_hand_over(m.mirror_id, m.collection_id, m.collection) "
								  "FROM chroma_sync.mirror m WHERE m.mirror_id OPERATOR(pg_catalog.=) $1",
								  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not hand over the keys of chroma_sync.resend");
		if (SPI_processed > 0)
			return;
	}
	if (SPI_execute_with_args("DELETE FROM chroma_sync.resend WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from chroma_sync.resend");
}

/*
 * A new mirror takes the keys an earlier mirror of its collection left with an unknown
 * outcome, whatever their time (inside a transaction, SPI connected, after the mirror's
 * row is inserted). Those already due are queued at its first step. It also gets a copy
 * of the keys of the other mirrors of the collection: one it takes over pauses and would
 * never send them (red-team TAP 286).
 */
void
sync_unknown_adopt_collection(int mirror_id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mirror_id)};

	if (!resend_table_exists() || !hand_over_exists())
		return;
	if (SPI_execute_with_args("WITH kept AS (DELETE FROM chroma_sync.resend_collection k "
							  "USING chroma_sync.mirror m WHERE m.mirror_id OPERATOR(pg_catalog.=) $1 "
							  "AND k.collection_id OPERATOR(pg_catalog.=) m.collection_id "
							  "RETURNING k.key, k.not_before), "
							  "others AS (SELECT r.key, r.not_before FROM chroma_sync.resend r "
							  "JOIN chroma_sync.mirror o ON o.mirror_id OPERATOR(pg_catalog.=) r.mirror_id "
							  "JOIN chroma_sync.mirror m ON m.mirror_id OPERATOR(pg_catalog.=) $1 "
							  "WHERE o.mirror_id OPERATOR(pg_catalog.<>) $1 "
							  "AND o.collection_id OPERATOR(pg_catalog.=) m.collection_id) "
							  "INSERT INTO chroma_sync.resend (mirror_id, key, not_before) "
							  "SELECT $1, a.key, pg_catalog.max(a.not_before) "
							  "FROM (SELECT * FROM kept UNION ALL SELECT * FROM others) a GROUP BY a.key "
							  "ON CONFLICT (mirror_id, key) DO UPDATE SET not_before = "
							  "GREATEST(chroma_sync.resend.not_before, excluded.not_before)",
							  1, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not move keys from chroma_sync.resend_collection");
}

/*
 * Whether keys are kept for a collection named name (chroma_sync.resend_collection), as
 * the extension's owner (SPI connected here).
 */
bool
sync_unknown_kept_for_name(const char *name)
{
	ChromaSavedUser su;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		kept = false;

	chroma_become_extension_owner(&su);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (resend_table_exists() && hand_over_exists())
	{
		if (SPI_execute_with_args("SELECT 1 FROM chroma_sync.resend_collection "
								  "WHERE collection OPERATOR(pg_catalog.=) $1 LIMIT 1",
								  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read chroma_sync.resend_collection");
		kept = SPI_processed > 0;
	}
	SPI_finish();
	chroma_restore_user(&su);
	return kept;
}

/*
 * The collection collection_id was deleted (chroma_delete_collection): no request to it
 * can be applied any more, so the keys kept for it are dropped (red-team TAP 287), as the
 * extension's owner (SPI connected here).
 */
void
sync_unknown_forget_collection(const char *collection_id)
{
	ChromaSavedUser su;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(collection_id)};

	chroma_become_extension_owner(&su);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (resend_table_exists() && hand_over_exists() &&
		SPI_execute_with_args("DELETE FROM chroma_sync.resend_collection "
							  "WHERE collection_id OPERATOR(pg_catalog.=) $1::pg_catalog.uuid",
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from chroma_sync.resend_collection");
	SPI_finish();
	chroma_restore_user(&su);
}

/* How often the worker looks for keys kept for collections that are gone, and for how many. */
#define COLLECT_EVERY_MS 5000
#define COLLECT_PER_ROUND 20
#define COLLECT_FIRST "00000000-0000-0000-0000-000000000000"

/* The last collection id looked at (the next round starts after it). */
static char cursor[40] = COLLECT_FIRST;

/*
 * Drops the keys kept for collections (chroma_sync.resend_collection) that no longer
 * exist: Chroma answers 404 for their id, so no late request can land in them (call
 * outside a transaction; at most every COLLECT_EVERY_MS). Such keys are left by
 * chroma_unmirror(drop_collection => true), which keeps them in case the drop at commit
 * fails (red-team TAP 294), by a collection deleted outside the extension, and by a
 * request that ends after its mirror and collection were removed (TAP 289).
 */
void
sync_unknown_collect(void)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext caller = CurrentMemoryContext;
	List	   *ids = NIL;
	List	   *gone = NIL;
	ListCell   *lc;

	if (last != 0 && !TimestampDifferenceExceeds(last, now, COLLECT_EVERY_MS))
		return;
	last = now;
	PG_TRY();
	{
		sync_begin_txn();
		if (resend_table_exists() && hand_over_exists())
		{
			Oid			types[1] = {TEXTOID};
			Datum		values[1] = {CStringGetTextDatum(cursor)};

			/* COLLECT_PER_ROUND ids after the last one looked at: each is reached in turn */
			sync_exec("SELECT DISTINCT k.collection_id FROM chroma_sync.resend_collection k "
					  "WHERE k.collection_id OPERATOR(pg_catalog.>) $1::pg_catalog.uuid "
					  "AND NOT EXISTS (SELECT 1 FROM chroma_sync.mirror m "
					  "WHERE m.collection_id OPERATOR(pg_catalog.=) k.collection_id) "
					  "ORDER BY k.collection_id LIMIT " CppAsString2(COLLECT_PER_ROUND),
					  1, types, values, NULL, SPI_OK_SELECT);
			if (SPI_processed < COLLECT_PER_ROUND)
				strlcpy(cursor, COLLECT_FIRST, sizeof(cursor));
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				char	   *id = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
				MemoryContext old = MemoryContextSwitchTo(caller);

				ids = lappend(ids, pstrdup(id));
				MemoryContextSwitchTo(old);
				if (SPI_processed == COLLECT_PER_ROUND)
					strlcpy(cursor, id, sizeof(cursor));
			}
		}
		sync_end_txn();
		foreach(lc, ids)
		{
			char	   *id = (char *) lfirst(lc);
			ChromaIdState state = chroma_api_collection_id_state(id);

			if (state == CHROMA_ID_GONE)
				gone = lappend(gone, id);
			else if (state == CHROMA_ID_UNKNOWN)
				break;			/* Chroma cannot tell now: the mirrors are not kept waiting */
		}
		if (gone != NIL)
		{
			Oid			types[1] = {TEXTARRAYOID};
			Datum		values[1];

			sync_begin_txn();
			values[0] = sync_text_array(gone);
			sync_exec("DELETE FROM chroma_sync.resend_collection "
					  "WHERE collection_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.uuid[])",
					  1, types, values, NULL, SPI_OK_DELETE);
			sync_end_txn();
			elog(DEBUG1, "chroma_sync: dropped the keys kept for %d collections that are gone",
				 list_length(gone));
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
}
