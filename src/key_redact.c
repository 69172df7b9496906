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

#include <ctype.h>

#include "commands/prepare.h"
#include "common/hashfn.h"
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
	static const char *const formats[] = {
		"statement: %s",
		"duration: %s ms  statement: %s",
		"duration: %s ms  parse %s: %s",
		"duration: %s ms  bind %s%s%s: %s",
		"%s %s%s%s: %s",		/* execute of the extended protocol */
		"duration: %s ms  %s %s%s%s: %s",
	};

	for (int i = 0; message_id != NULL && i < (int) lengthof(formats); i++)
		if (strcmp(message_id, formats[i]) == 0)
			return true;
	return false;
}

/*
 * The statement during which a session assigned the key (see chroma_redact_activity):
 * its address, length and hash (the next statement's text may land at the same address).
 */
static const char *keyed_query = NULL;
static size_t keyed_len = 0;
static uint32 keyed_hash = 0;

static bool
is_keyed_query(const char *q)
{
	size_t		len;

	if (q == NULL || q != keyed_query)
		return false;
	len = strlen(q);
	return len == keyed_len && hash_bytes((const unsigned char *) q, (int) len) == keyed_hash;
}

/* "EXECUTE name ..." of a prepared statement whose text mentions the key. */
static bool
executes_keyed_statement(const char *query)
{
	const char *p = query;
	char		name[NAMEDATALEN];
	int			n = 0;
	PreparedStatement *ps;

	if (p == NULL)
		return false;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (pg_strncasecmp(p, "execute", 7) != 0 || !(p[7] == ' ' || p[7] == '\t' || p[7] == '\n'))
		return false;
	for (p += 7; *p == ' ' || *p == '\t' || *p == '\n'; p++)
		;
	while (n < NAMEDATALEN - 1 && (isalnum((unsigned char) *p) || *p == '_' || (unsigned char) *p >= 0x80))
		name[n++] = pg_tolower((unsigned char) *p++);
	name[n] = '\0';
	if (n == 0)
		return false;
	ps = FetchPreparedStatement(name, false);
	return ps != NULL && mentions_key(ps->plansource->query_string);
}

static void
redact_api_key(ErrorData *edata)
{
	bool		keyed;

	if (edata->message_id && edata->message &&
		strstr(edata->message, "\"chroma_sync.api_key\"") != NULL)
	{
		if (strcmp(edata->message_id, "parameter \"%s\" changed to \"%s\"") == 0)
			edata->message = pstrdup("parameter \"chroma_sync.api_key\" changed");
		else if (strcmp(edata->message_id, "invalid value for parameter \"%s\": \"%s\"") == 0)
			edata->message = pstrdup("invalid value for parameter \"chroma_sync.api_key\"");
	}
	keyed = mentions_key(debug_query_string) ||
		is_keyed_query(debug_query_string) ||
		executes_keyed_statement(debug_query_string);
	if (keyed || (is_statement_log(edata->message_id) &&
				  (mentions_key(edata->message) || mentions_key(edata->detail))))
	{
		/* the statement would follow the message ("STATEMENT: ..."), with its parameters */
		edata->hide_stmt = true;
		if (is_statement_log(edata->message_id))
		{
			edata->message = pstrdup("statement: " REDACTED_STATEMENT);
			edata->detail = NULL;
			edata->detail_log = NULL;
		}
	}
	/* PL/pgSQL and SPI repeat the statement that failed in the context */
	if (mentions_key(edata->context) || (keyed && edata->context != NULL))
		edata->context = pstrdup(REDACTED_STATEMENT);
	if (mentions_key(edata->internalquery))
		edata->internalquery = NULL;
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

void
chroma_redact_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_api_key;
}

/*
 * A session assigns the key: the running statement's text leaves pg_stat_activity, and
 * its later log lines (a duration, an error) lose it too, whatever the text says
 * (EXECUTE of a prepared statement, a parameter, a function's SET clause).
 */
void
chroma_redact_activity(void)
{
	if (MyBackendType != B_BACKEND)
		return;
	keyed_query = debug_query_string;
	if (keyed_query != NULL)
	{
		keyed_len = strlen(keyed_query);
		keyed_hash = hash_bytes((const unsigned char *) keyed_query, (int) keyed_len);
	}
	pgstat_report_activity(STATE_RUNNING, REDACTED_STATEMENT);
}
