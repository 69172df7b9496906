/*
 * key_redact.c — keeping chroma_sync.api_key out of the server log and pg_stat_activity.
 * PostgreSQL reports a setting changed on reload, or refused, with its value; with
 * log_statement it logs "SET chroma_sync.api_key = '...'" as typed, and errors repeat
 * the statement; pg_stat_activity shows a running statement's text to its role and to
 * pg_read_all_stats. Those lose the text here. What PostgreSQL keeps elsewhere
 * (pg_stat_statements, a client's own history) is out of our reach: README says so.
 */
#include "postgres.h"

#include <string.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "tcop/tcopprot.h"
#include "utils/elog.h"

#include "chroma_sync.h"

static emit_log_hook_type prev_emit_log_hook = NULL;

#define REDACTED_STATEMENT "<a statement that sets chroma_sync.api_key: not shown>"

static bool
mentions_key(const char *s)
{
	return s != NULL && strcasestr(s, "api_key") != NULL;
}

/* A message whose format is one of the statement-logging ones ("statement: %s", ...). */
static bool
is_statement_log(const char *message_id)
{
	return message_id != NULL &&
		(strcmp(message_id, "statement: %s") == 0 ||
		 strcmp(message_id, "duration: %s ms  statement: %s") == 0 ||
		 strcmp(message_id, "execute %s: %s") == 0 ||
		 strcmp(message_id, "duration: %s ms  execute %s: %s") == 0 ||
		 strcmp(message_id, "execute %s%s%s%s: %s") == 0 ||
		 strcmp(message_id, "duration: %s ms  execute %s%s%s%s: %s") == 0);
}

static void
redact_api_key(ErrorData *edata)
{
	if (edata->message_id && edata->message &&
		strstr(edata->message, "\"chroma_sync.api_key\"") != NULL)
	{
		if (strcmp(edata->message_id, "parameter \"%s\" changed to \"%s\"") == 0)
			edata->message = pstrdup("parameter \"chroma_sync.api_key\" changed");
		else if (strcmp(edata->message_id, "invalid value for parameter \"%s\": \"%s\"") == 0)
			edata->message = pstrdup("invalid value for parameter \"chroma_sync.api_key\"");
	}
	if (mentions_key(debug_query_string))
	{
		/* the statement would follow the message ("STATEMENT: ...") */
		edata->hide_stmt = true;
		if (is_statement_log(edata->message_id) && mentions_key(edata->message))
			edata->message = pstrdup("statement: " REDACTED_STATEMENT);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
chroma_redact_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_api_key;
}

/* A session assigns the key: the running statement's text leaves pg_stat_activity. */
void
chroma_redact_activity(void)
{
	if (MyBackendType == B_BACKEND && mentions_key(debug_query_string))
		pgstat_report_activity(STATE_RUNNING, REDACTED_STATEMENT);
}
