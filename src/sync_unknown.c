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

#include "chroma_sync.h"
#include "sync.h"
#include "sync_batch.h"

/* Whether chroma_sync.resend exists (0.5); looked up in a transaction. */
static bool
resend_table_exists(void)
{
	Oid			nsp = get_namespace_oid("chroma_sync", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("resend", nsp));
}

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

	if (st->resend_checked &&
		(st->resend_at == 0 || GetCurrentTimestamp() < st->resend_at))
		return;
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

/* Whether chroma_sync.resend_collection exists (0.5); inside a transaction. */
static bool
resend_collection_table_exists(void)
{
	Oid			nsp = get_namespace_oid("chroma_sync", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("resend_collection", nsp));
}

/*
 * Drops a removed mirror's resend keys (inside a transaction, SPI connected, before the
 * mirror's row is deleted). With keep_for_collection (the collection stays), the keys
 * whose request may still be applied are kept for the collection instead: a mirror
 * created into it later resends them once their time has come, after anything it sent
 * before (sync_unknown_adopt_collection), so a stale write of the old mirror does not
 * outlive the new mirror's newer one.
 */
void
sync_unknown_forget_mirror(int mirror_id, bool keep_for_collection)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mirror_id)};

	if (!resend_table_exists())
		return;
	if (keep_for_collection && resend_collection_table_exists() &&
		SPI_execute_with_args("INSERT INTO chroma_sync.resend_collection (collection_id, key, not_before) "
							  "SELECT m.collection_id, r.key, r.not_before "
							  "FROM chroma_sync.resend r JOIN chroma_sync.mirror m "
							  "ON m.mirror_id OPERATOR(pg_catalog.=) r.mirror_id "
							  "WHERE r.mirror_id OPERATOR(pg_catalog.=) $1 AND m.collection_id IS NOT NULL "
							  "AND r.not_before OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() "
							  "ON CONFLICT (collection_id, key) DO UPDATE SET not_before = "
							  "GREATEST(chroma_sync.resend_collection.not_before, excluded.not_before)",
							  1, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into chroma_sync.resend_collection");
	if (SPI_execute_with_args("DELETE FROM chroma_sync.resend WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from chroma_sync.resend");
}

/*
 * A new mirror into collection_id takes the keys an earlier mirror of the collection left
 * with an unknown outcome and a time still to come (inside a transaction, SPI connected,
 * after the mirror's row is inserted); the others are dropped, whatever their collection:
 * their requests can no longer be applied.
 */
void
sync_unknown_adopt_collection(int mirror_id, const char *collection_id)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2] = {Int32GetDatum(mirror_id), CStringGetTextDatum(collection_id)};

	if (!resend_table_exists() || !resend_collection_table_exists())
		return;
	if (SPI_execute_with_args("WITH kept AS (DELETE FROM chroma_sync.resend_collection "
							  "WHERE collection_id OPERATOR(pg_catalog.=) $2::pg_catalog.uuid "
							  "OR not_before OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() "
							  "RETURNING collection_id, key, not_before) "
							  "INSERT INTO chroma_sync.resend (mirror_id, key, not_before) "
							  "SELECT $1, kept.key, kept.not_before FROM kept "
							  "WHERE kept.collection_id OPERATOR(pg_catalog.=) $2::pg_catalog.uuid "
							  "AND kept.not_before OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp() "
							  "ON CONFLICT (mirror_id, key) DO UPDATE SET not_before = "
							  "GREATEST(chroma_sync.resend.not_before, excluded.not_before)",
							  2, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not move keys from chroma_sync.resend_collection");
}
