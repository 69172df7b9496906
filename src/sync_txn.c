/*
 * sync_txn.c — the worker's short transactions: each runs with SPI connected and a
 * snapshot pushed, and returns to the caller's memory context when it commits; and the
 * subtransaction that lets a read of the mirrored table fail alone (worker and verify).
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "pg_compat.h"
#include "sync.h"
#include "sync_batch.h"

/* The context to return to after a transaction (commit leaves TopMemoryContext). */
MemoryContext sync_txn_caller_ctx = NULL;

/*
 * > 0 while a lent step runs (sync.c): each of its transactions waits at most this long
 * for a lock. A session holding a lock the lent step needs (a mirror row, its queue
 * entries) may itself wait for the mirror that lent its wait (chroma_flush, red-team TAP
 * 305): the lent step fails and backs off instead, and its mirror's own step waits.
 */
int			sync_txn_lock_timeout_ms = 0;

void
sync_txn_apply_lock_timeout(void)
{
	char		buf[32];

	if (sync_txn_lock_timeout_ms <= 0 ||
		(LockTimeout > 0 && LockTimeout <= sync_txn_lock_timeout_ms))
		return;
	snprintf(buf, sizeof(buf), "%d", sync_txn_lock_timeout_ms);
	(void) set_config_option("lock_timeout", buf, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
}

void
sync_begin_txn(void)
{
	sync_txn_caller_ctx = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	sync_txn_apply_lock_timeout();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
}

void
sync_end_txn(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(sync_txn_caller_ctx);
}

/*
 * Every commit a read saw is in the WAL before the insert position after it: flushing
 * up to there means nothing sent can be undone by a crash (a writer with
 * synchronous_commit = off commits before its WAL is on disk). Usually a no-op: the
 * WAL writer or a synchronous commit got there first.
 */
void
sync_flush_wal_of_read(void)
{
	XLogRecPtr	end;

	if (GetFlushRecPtr(NULL) >= GetXLogInsertRecPtr())
		return;

	/*
	 * The insert position may be the start of a page whose header is not written yet,
	 * which XLogFlush refuses: flush to the end of a record of our own instead (a no-op
	 * record, ignored by recovery), which comes after every commit the read saw.
	 */
	XLogBeginInsert();
	end = XLogInsert(RM_XLOG_ID, XLOG_NOOP);
	XLogFlush(end);
}

void
sync_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "chroma_sync worker statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
}

Datum
sync_text_array(List *strings)
{
	int			n = list_length(strings);
	Datum	   *d = palloc_array(Datum, Max(n, 1));
	int			i = 0;
	ListCell   *lc;

	foreach(lc, strings)
		d[i++] = CStringGetTextDatum((char *) lfirst(lc));
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * In the worker, transient errors raised again since its last step that ended well, each
 * retrying the whole step (with the worker's backoff): past TRANSIENT_RETRIES, the error
 * is taken as the rows' own (a function of the row that always raises one, TAP 251), and
 * they fail as any unreadable row does. In a backend (chroma_verify) a row's error is
 * never raised again: the row counts as unreadable, as before.
 */
#define TRANSIENT_RETRIES 8
static int	transient_in_a_row = 0;

void
sync_transient_reset(void)
{
	transient_in_a_row = 0;
}

int
sync_transient_save(void)
{
	int			n = transient_in_a_row;

	transient_in_a_row = 0;
	return n;
}

void
sync_transient_restore(int n)
{
	transient_in_a_row = n;
}

bool
sync_try_subxact(void (*fn) (void *arg), void *arg, MemoryContext errctx, char **error)
{
	int			sqlerrcode;

	return sync_try_subxact_code(fn, arg, errctx, error, &sqlerrcode);
}

/* sync_try_subxact, also giving the error's SQLSTATE (0 on success). */
bool
sync_try_subxact_code(void (*fn) (void *arg), void *arg, MemoryContext errctx, char **error,
					  int *sqlerrcode)
{
	MemoryContext oldctx = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	*sqlerrcode = 0;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldctx);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldctx);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(errctx);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldctx);
		CurrentResourceOwner = oldowner;

		/*
		 * A cancel or a shutdown says nothing of the rows either: raised again. Only a
		 * real one, raised by ProcessInterrupts: a function may raise a class-57 SQLSTATE
		 * itself (postgres_fdw passes a remote statement timeout on), and that is the
		 * row's own failure (red-team TAP 237).
		 */
		if (ProcDiePending ||
			(ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION &&
			 edata->funcname != NULL && strcmp(edata->funcname, "ProcessInterrupts") == 0))
			ReThrowError(edata);
		/*
		 * A deadlock, a serialization failure or a lock not available says nothing of the
		 * rows: raised again, so the whole step is retried later (TAP 201 saw rows put in
		 * chroma_sync.failed for a deadlock with partition DDL).
		 */
		if (chroma_am_background_worker() &&
			(ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK ||
			 edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) &&
			++transient_in_a_row <= TRANSIENT_RETRIES)
			ReThrowError(edata);
		*error = edata->message;
		*sqlerrcode = edata->sqlerrcode;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}
