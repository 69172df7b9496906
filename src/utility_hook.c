/*
 * utility_hook.c — statements that need a database without other sessions (DROP
 * DATABASE, ALTER DATABASE ... RENAME or SET TABLESPACE, CREATE DATABASE ... TEMPLATE)
 * must not fail because our worker is connected to it: its worker is stopped first, and
 * started again a few seconds later if the database is still there. Only for a caller
 * who passes the statement's own permission check: anyone else could stop any database's
 * worker by trying.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/syscache.h"

#include "partition.h"
#include "pg_compat.h"
#include "shared.h"
#include "worker.h"

static ProcessUtility_hook_type prev_process_utility = NULL;

static bool
owns_database(Oid dboid)
{
	return chroma_database_ownercheck(dboid, GetUserId());
}

static bool
is_template(Oid dboid)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	bool		result = false;

	if (HeapTupleIsValid(tup))
	{
		result = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	return result;
}

/* The database whose worker must go for this statement to run, or InvalidOid. */
static Oid
database_to_free(Node *stmt)
{
	Oid			dboid = InvalidOid;
	ListCell   *lc;

	if (IsA(stmt, DropdbStmt))
	{
		dboid = get_database_oid(((DropdbStmt *) stmt)->dbname, true);
		if (OidIsValid(dboid) && !owns_database(dboid))
			dboid = InvalidOid;
	}
	else if (IsA(stmt, RenameStmt) && ((RenameStmt *) stmt)->renameType == OBJECT_DATABASE)
	{
		dboid = get_database_oid(((RenameStmt *) stmt)->subname, true);
		if (OidIsValid(dboid) && !(owns_database(dboid) && have_createdb_privilege()))
			dboid = InvalidOid;
	}
	else if (IsA(stmt, AlterDatabaseStmt))
	{
		AlterDatabaseStmt *s = (AlterDatabaseStmt *) stmt;

		foreach(lc, s->options)
			if (strcmp(((DefElem *) lfirst(lc))->defname, "tablespace") == 0)
				dboid = get_database_oid(s->dbname, true);
		if (OidIsValid(dboid) && !owns_database(dboid))
			dboid = InvalidOid;
	}
	else if (IsA(stmt, CreatedbStmt))
	{
		foreach(lc, ((CreatedbStmt *) stmt)->options)
		{
			DefElem    *d = (DefElem *) lfirst(lc);

			if (strcmp(d->defname, "template") == 0 && d->arg != NULL)
				dboid = get_database_oid(defGetString(d), true);
		}
		if (OidIsValid(dboid) &&
			!(have_createdb_privilege() && (is_template(dboid) || owns_database(dboid))))
			dboid = InvalidOid;
	}
	return dboid == MyDatabaseId ? InvalidOid : dboid;
}

static void
chroma_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					   ProcessUtilityContext context, ParamListInfo params,
					   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Oid			dboid = database_to_free(pstmt->utilityStmt);

	int			saved;
	void	   *partitions;

	if (OidIsValid(dboid))
		chroma_stop_worker_for_drop(dboid);
	partitions = partition_utility_before(pstmt->utilityStmt, &saved);
	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
								 queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
		/* partitions attached, created or detached (partition.c) */
		partition_utility_after(pstmt->utilityStmt, partitions);
	}
	PG_FINALLY();
	{
		partition_utility_done(saved, partitions);
	}
	PG_END_TRY();

	/*
	 * COMMIT PREPARED commits changes queued by the session that prepared them (which
	 * never committed, so never woke the worker): wake it now.
	 */
	if (IsA(pstmt->utilityStmt, TransactionStmt) &&
		((TransactionStmt *) pstmt->utilityStmt)->kind == TRANS_STMT_COMMIT_PREPARED &&
		OidIsValid(get_extension_oid("chroma_sync", true)))
		chroma_wake_worker(MyDatabaseId);	/* a dormant one too: it may have prepared a mirror */
}

void
chroma_utility_hook_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = chroma_process_utility;
}
