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

/* Drops a removed mirror's resend keys (inside a transaction, SPI connected). */
void
sync_unknown_forget_mirror(int mirror_id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mirror_id)};

	if (!resend_table_exists())
		return;
	if (SPI_execute_with_args("DELETE FROM chroma_sync.resend WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from chroma_sync.resend");
}
