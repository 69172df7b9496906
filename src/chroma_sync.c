/*
 * chroma_sync.c — module load: settings, and (later) shared memory and the worker.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "chroma_sync.h"
#include "http.h"
#include "shared.h"
#include "sync.h"
#include "partition.h"
#include "trigger.h"
#include "worker.h"

PG_MODULE_MAGIC;

char	   *chroma_url = NULL;
char	   *chroma_tenant = NULL;
char	   *chroma_database = NULL;
char	   *chroma_api_key = NULL;
char	   *chroma_api_key_file = NULL;
bool		chroma_tls_verify = true;
char	   *chroma_ca_file = NULL;
int			chroma_batch_size = 500;
int			chroma_timeout_ms = 30000;
int			chroma_connect_timeout_ms = 5000;
int			chroma_embedding_encoding = CHROMA_ENCODING_AUTO;
int			chroma_max_concurrent_requests = 4;
char	   *chroma_proxy = NULL;
int			chroma_max_response_kb = 512 * 1024;

static const struct config_enum_entry encoding_options[] = {
	{"auto", CHROMA_ENCODING_AUTO, false},
	{"base64", CHROMA_ENCODING_BASE64, false},
	{"json", CHROMA_ENCODING_JSON, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/* The key would be readable by everyone in pg_db_role_setting: refuse ALTER ROLE/DATABASE SET. */
static bool
check_api_key(char **newval, void **extra, GucSource source)
{
	const char *p;

	if (*newval && **newval &&
		(source == PGC_S_TEST || source == PGC_S_DATABASE ||
		 source == PGC_S_USER || source == PGC_S_DATABASE_USER))
	{
		GUC_check_errcode(ERRCODE_INSUFFICIENT_PRIVILEGE);
		GUC_check_errmsg("chroma_sync.api_key cannot be stored per role or per database");
		GUC_check_errdetail("Such settings are readable by every user in pg_db_role_setting.");
		GUC_check_errhint("Set it in postgresql.conf or ALTER SYSTEM, or use chroma_sync.api_key_file.");
		return false;
	}
	for (p = *newval ? *newval : ""; *p; p++)
	{
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
		{
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errmsg("chroma_sync.api_key must not contain control characters");
			return false;
		}
	}
	if (source >= PGC_S_INTERACTIVE)
		chroma_redact_activity();
	return true;
}

/* Nobody, superusers included, reads the key back. */
static const char *
show_api_key(void)
{
	return (chroma_api_key && *chroma_api_key) ? "********" : "";
}

/* The host part must exist, and hold no user:password (SHOW and errors display the URL). */
static bool
check_url_authority(const char *authority)
{
	size_t		len = strcspn(authority, "/?#");

	if (len == 0)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("chroma_sync.url has no host");
		return false;
	}
	if (memchr(authority, '@', len) != NULL)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("chroma_sync.url must not contain credentials");
		GUC_check_errdetail("The URL is shown by SHOW and in error messages.");
		GUC_check_errhint("Use chroma_sync.api_key or chroma_sync.api_key_file.");
		return false;
	}
	return true;
}

static bool
check_url(char **newval, void **extra, GucSource source)
{
	const char *u = *newval;

	if (u == NULL || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0))
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("chroma_sync.url must start with http:// or https://");
		return false;
	}
	for (; *u; u++)
	{
		if ((unsigned char) *u <= 0x20 || *u == 0x7f)
		{
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errmsg("chroma_sync.url must not contain spaces or control characters");
			return false;
		}
	}
	return check_url_authority(strstr(*newval, "://") + 3);
}

/* Empty (no proxy), or a proxy URL libcurl understands; never anything else. */
static bool
check_proxy(char **newval, void **extra, GucSource source)
{
	static const char *const schemes[] = {"http://", "https://", "socks4://", "socks4a://",
	"socks5://", "socks5h://"};
	const char *u = *newval ? *newval : "";
	bool		known = (*u == '\0');

	for (size_t i = 0; i < lengthof(schemes) && !known; i++)
		known = strncmp(u, schemes[i], strlen(schemes[i])) == 0;
	if (!known)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("chroma_sync.proxy must start with http://, https://, socks4://, socks4a://, socks5:// or socks5h://");
		return false;
	}
	for (; *u; u++)
	{
		if ((unsigned char) *u <= 0x20 || *u == 0x7f)
		{
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errmsg("chroma_sync.proxy must not contain spaces or control characters");
			return false;
		}
	}
	return true;
}

static bool
check_name_setting(char **newval, void **extra, GucSource source)
{
	const char *p;

	if (*newval == NULL || **newval == '\0')
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("value must not be empty");
		return false;
	}
	/* libcurl would resolve "." and ".." path segments away: another endpoint. */
	if (strcmp(*newval, ".") == 0 || strcmp(*newval, "..") == 0)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errmsg("value must not be \".\" or \"..\"");
		return false;
	}
	for (p = *newval; *p; p++)
	{
		if ((unsigned char) *p < 0x20 || *p == 0x7f)
		{
			GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
			GUC_check_errmsg("value must not contain control characters");
			return false;
		}
	}
	return true;
}

/*
 * The key from chroma_sync.api_key, else the first line of chroma_sync.api_key_file.
 * The file is read on each call (it may be rotated); errors never show its content.
 */
const char *
chroma_effective_api_key(void)
{
	static char *file_key = NULL;
	int			fd;
	struct stat st;
	char		line[4097];
	size_t		len = 0;
	ssize_t		r = 0;
	char	   *nl;
	size_t		n;

	if (chroma_api_key && *chroma_api_key)
		return chroma_api_key;
	if (chroma_api_key_file == NULL || *chroma_api_key_file == '\0')
		return NULL;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer, beyond cancel and terminate */
	fd = OpenTransientFile(chroma_api_key_file, O_RDONLY | O_NONBLOCK | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open chroma_sync.api_key_file \"%s\": %m",
						chroma_api_key_file)));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
	{
		CloseTransientFile(fd);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chroma_sync.api_key_file \"%s\" is not a regular file",
						chroma_api_key_file),
				 errhint("Name a file whose first line is the key.")));
	}
	/* The first line, and one byte more to tell a line that is too long. */
	while (len < sizeof(line) - 1 &&
		   (r = read(fd, line + len, sizeof(line) - 1 - len)) > 0)
		len += r;
	CloseTransientFile(fd);
	if (r < 0)
	{
		explicit_bzero(line, sizeof(line));
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read chroma_sync.api_key_file \"%s\": %m",
						chroma_api_key_file)));
	}
	line[len] = '\0';
	nl = memchr(line, '\n', len);
	n = nl ? (size_t) (nl - line) : len;
	/* A longer key would be cut short silently and sent wrong. */
	if (n > sizeof(line) - 2 && line[sizeof(line) - 2] != '\r')
	{
		explicit_bzero(line, sizeof(line));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the first line of chroma_sync.api_key_file \"%s\" is longer than %d bytes",
						chroma_api_key_file, (int) sizeof(line) - 2)));
	}
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n] = '\0';
	n = strlen(line);			/* a NUL ends the key, as it did */
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
		line[--n] = '\0';
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chroma_sync.api_key_file \"%s\" is empty", chroma_api_key_file)));
	for (size_t i = 0; i < n; i++)
		if ((unsigned char) line[i] < 0x20 || line[i] == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("chroma_sync.api_key_file \"%s\" contains control characters",
							chroma_api_key_file)));
	if (file_key)
	{
		explicit_bzero(file_key, strlen(file_key));
		pfree(file_key);
	}
	file_key = MemoryContextStrdup(TopMemoryContext, line);
	explicit_bzero(line, sizeof(line));
	return file_key;
}

static void
define_settings(void)
{
	DefineCustomStringVariable("chroma_sync.url",
							   "Base URL of the Chroma server.",
							   NULL, &chroma_url, "http://localhost:8000",
							   PGC_SUSET, 0, check_url, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.tenant",
							   "Chroma tenant.",
							   NULL, &chroma_tenant, "default_tenant",
							   PGC_SUSET, 0, check_name_setting, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.database",
							   "Chroma database.",
							   NULL, &chroma_database, "default_database",
							   PGC_SUSET, 0, check_name_setting, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.api_key",
							   "API key sent as the x-chroma-token header (never displayed).",
							   NULL, &chroma_api_key, "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_api_key, NULL, show_api_key);
	DefineCustomStringVariable("chroma_sync.api_key_file",
							   "File whose first line is the API key, used when chroma_sync.api_key is empty.",
							   NULL, &chroma_api_key_file, "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	DefineCustomBoolVariable("chroma_sync.tls_verify",
							 "Verify the Chroma server's TLS certificate and host name.",
							 NULL, &chroma_tls_verify, true,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.ca_file",
							   "CA bundle used to verify the Chroma server (empty: the system's).",
							   NULL, &chroma_ca_file, "",
							   PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.batch_size",
							"Records per request (capped by the server's max_batch_size).",
							NULL, &chroma_batch_size, 500, 1, 100000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.timeout",
							"Total time allowed for one HTTP request.",
							NULL, &chroma_timeout_ms, 30000, 100, 3600000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.connect_timeout",
							"Time allowed to connect to the Chroma server.",
							NULL, &chroma_connect_timeout_ms, 5000, 10, 600000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.proxy",
							   "Proxy for requests to Chroma (empty: none, whatever the server's environment names).",
							   NULL, &chroma_proxy, "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY, check_proxy, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.max_response_size",
							"Largest response accepted from Chroma (a collection list counts all its pages).",
							NULL, &chroma_max_response_kb, 512 * 1024, 64, 1024 * 1024 - 1,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.max_concurrent_requests",
							"Requests chroma_upsert_query, and the sync worker for each mirror, keep in flight at once, each with its own records.",
							NULL, &chroma_max_concurrent_requests, 4, 1, CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("chroma_sync.embedding_encoding",
							 "How embeddings are sent: auto (base64 when the server supports it), base64 or json.",
							 NULL, &chroma_embedding_encoding, CHROMA_ENCODING_AUTO,
							 encoding_options, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("chroma_sync.worker_databases",
							   "Databases that get a sync worker: * (every database with a mirror), a comma-separated list, or empty for none.",
							   NULL, &chroma_worker_databases, "*",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.retry_max_delay",
							"Longest wait between retries while Chroma is unavailable.",
							NULL, &chroma_retry_max_delay_ms, 60000, 100, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.max_records_per_second",
							"Records per second a worker sends at most, backfill and changes together (0: no limit).",
							NULL, &chroma_max_records_per_second, 0, 0, 1000000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("chroma_sync.test_stall",
							"Testing only: the worker waits this long between reading a batch and sending it.",
							NULL, &chroma_test_stall_ms, 0, 0, 600000,
							PGC_SIGHUP, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	MarkGUCPrefixReserved("chroma_sync");
}

void
_PG_init(void)
{
	/*
	 * Loaded later (CREATE EXTENSION, a function call, LOAD), the settings would be undefined
	 * in other backends: ALTER ROLE ... SET chroma_sync.api_key would store the key unchecked.
	 */
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("chroma_sync must be loaded via shared_preload_libraries"),
				 errdetail("Without it chroma_sync.* settings are not checked in every session, and ALTER ROLE ... SET would store chroma_sync.api_key where every user can read it."),
				 errhint("Add chroma_sync to shared_preload_libraries in postgresql.conf and restart the server.")));
	define_settings();
	chroma_trigger_init();
	chroma_redact_init();
	chroma_utility_hook_init();
	chroma_partition_init();
	if (process_shared_preload_libraries_in_progress)
	{
		chroma_shmem_install_hooks();
		chroma_register_launcher();
	}
}
