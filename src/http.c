/*
 * http.c — libcurl inside a backend.
 *
 * One multi handle per process holds the connection cache, so connections stay alive
 * across calls; a small pool of easy handles lets several requests be in flight (one
 * connection each) while the next is prepared. libcurl allocates with malloc, never
 * palloc, and our callbacks never raise errors: nothing longjmps through libcurl.
 * Waiting checks for interrupts, so a query cancel, statement_timeout or SIGTERM stops a
 * transfer promptly, also while DNS does not answer (CURLOPT_QUICK_EXIT). Nothing in
 * the server's environment steers a request: no proxy unless chroma_sync.proxy names
 * one, no TLS key log.
 */
#include "postgres.h"

#include <curl/curl.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/pmsignal.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "chroma_sync.h"
#include "http.h"

/* How often waiting wakes to check for interrupts. */
#define POLL_INTERVAL_MS 50

struct ChromaHttpRequest
{
	CURL	   *easy;
	struct curl_slist *headers;
	bool		in_use;
	bool		done;
	CURLcode	code;
	int			nest_level;		/* transaction nesting level that started it */
	char	   *resp;			/* malloc'd response body */
	size_t		resp_len;
	size_t		resp_cap;
	size_t		resp_limit;		/* chroma_sync.max_response_size when it started */
	bool		resp_overflow;
	bool		settled;		/* its whole answer came (not a 500, 502, 504), or it
								 * never left */
	TimestampTz apply_deadline; /* begin + chroma_sync.timeout: the latest a server may
								 * still apply it, if its outcome stays unknown */
	char		errbuf[CURL_ERROR_SIZE];
	uint64		seq;			/* the order it began in (chroma_http_abort_since) */
};

static CURLM *multi = NULL;
static ChromaHttpRequest slots[CHROMA_HTTP_MAX_INFLIGHT];
static bool callbacks_registered = false;
static uint64 requests_begun = 0;

/* The latest apply_deadline of a request released unsettled (0: none). */
static TimestampTz unsettled_until = 0;

chroma_http_unsettled_hook_type chroma_http_unsettled_hook = NULL;
chroma_http_wait_hook_type chroma_http_wait_hook = NULL;

static void release_slot(ChromaHttpRequest *req);

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	ChromaHttpRequest *req = (ChromaHttpRequest *) userdata;
	size_t		n = size * nmemb;

	if (n > req->resp_limit - req->resp_len)
	{
		req->resp_overflow = true;
		return 0;				/* CURLE_WRITE_ERROR */
	}
	if (req->resp_len + n + 1 > req->resp_cap)
	{
		size_t		cap = req->resp_cap ? req->resp_cap : 4096;
		char	   *p;

		while (cap < req->resp_len + n + 1)
			cap *= 2;
		if (cap > req->resp_limit + 1)
			cap = req->resp_limit + 1;
		p = realloc(req->resp, cap);
		if (p == NULL)
			return 0;
		req->resp = p;
		req->resp_cap = cap;
	}
	memcpy(req->resp + req->resp_len, ptr, n);
	req->resp_len += n;
	req->resp[req->resp_len] = '\0';
	return n;
}

/* Called by libcurl while a handle transfers (chroma_http_pump may run outside a wait). */
static int
progress_cb(void *clientp, curl_off_t dltotal, curl_off_t dlnow,
			curl_off_t ultotal, curl_off_t ulnow)
{
	if (InterruptPending && (QueryCancelPending || ProcDiePending))
		return 1;				/* abort: CURLE_ABORTED_BY_CALLBACK */
	return 0;
}

/*
 * A transaction's abort releases the requests begun in it. Requests begun outside any
 * transaction (the worker's requests in flight, nest level 0) outlive the short
 * transactions the worker runs meanwhile, whose failure may be caught and survived (TAP
 * 243): their owner releases them (the worker's error path, chroma_http_abort_all).
 */
static void
http_xact_callback(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		if (slots[i].in_use && slots[i].nest_level >= 1)
			release_slot(&slots[i]);
}

static void
http_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			level;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	level = GetCurrentTransactionNestLevel();
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		if (slots[i].in_use && slots[i].nest_level >= level)
			release_slot(&slots[i]);
}

/*
 * At process exit the handles are left to the kernel: libcurl 8's cleanup of a multi
 * handle joins a resolver thread that still waits for DNS (CURLOPT_QUICK_EXIT covers the
 * easy handle only), which made pg_terminate_backend and a fast shutdown wait for the
 * resolver's own timeout (TAP 044 on PostgreSQL 18's root, libcurl 8). The sockets close
 * with the process; nothing is written after this point.
 */
static void
http_exit_callback(int code, Datum arg)
{
	multi = NULL;
}

/*
 * libcurl reads SSLKEYLOGFILE once, in curl_global_init, and would then write every TLS
 * session's secrets to that file: hide the variable from it for that moment.
 */
static CURLcode
global_init_without_keylog(void)
{
	const char *keylog = getenv("SSLKEYLOGFILE");
	char	   *saved = keylog ? strdup(keylog) : NULL;
	CURLcode	rc;

	if (keylog)
		unsetenv("SSLKEYLOGFILE");
	rc = curl_global_init(CURL_GLOBAL_ALL);
	if (saved)
	{
		setenv("SSLKEYLOGFILE", saved, 1);
		free(saved);
	}
	return rc;
}

static void
http_init(void)
{
	static bool curl_initialized = false;

	if (multi != NULL)
		return;
	if (!curl_initialized && global_init_without_keylog() != CURLE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not initialize libcurl")));
	curl_initialized = true;
	multi = curl_multi_init();
	if (multi == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not create a libcurl multi handle")));
	/* Keep one connection per concurrent request alive between calls. */
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) CHROMA_HTTP_MAX_INFLIGHT + 1);
	if (!callbacks_registered)
	{
		RegisterXactCallback(http_xact_callback, NULL);
		RegisterSubXactCallback(http_subxact_callback, NULL);
		before_shmem_exit(http_exit_callback, (Datum) 0);
		callbacks_registered = true;
	}
}

TimestampTz
chroma_http_unsettled_until(void)
{
	TimestampTz until = unsettled_until;

	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		if (slots[i].in_use && !slots[i].settled && slots[i].apply_deadline > until)
			until = slots[i].apply_deadline;
	if (until != 0 && until <= GetCurrentTimestamp())
		until = unsettled_until = 0;
	return until;
}

static void
call_unsettled_hook(void)
{
	if (chroma_http_unsettled_hook)
		chroma_http_unsettled_hook(chroma_http_unsettled_until());
}

static void
release_slot(ChromaHttpRequest *req)
{
	if (!req->in_use)
		return;
	if (!req->settled)
	{
		/*
		 * Its outcome is unknown from now: one chroma_sync.timeout more, the bound the
		 * worker's chroma_sync.resend keys wait for too (TAP 255)
		 */
		TimestampTz until = Max(req->apply_deadline,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(), chroma_timeout_ms));

		if (until > unsettled_until)
			unsettled_until = until;
	}
	if (multi && req->easy)
		curl_multi_remove_handle(multi, req->easy);
	if (req->headers)
		curl_slist_free_all(req->headers);
	req->headers = NULL;
	free(req->resp);
	req->resp = NULL;
	req->resp_len = req->resp_cap = 0;
	req->in_use = false;
	req->done = false;
	call_unsettled_hook();
}

void
chroma_http_abort_all(void)
{
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		release_slot(&slots[i]);
}

uint64
chroma_http_mark(void)
{
	return requests_begun;
}

void
chroma_http_abort_since(uint64 mark)
{
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		if (slots[i].in_use && slots[i].seq > mark)
			release_slot(&slots[i]);
}

static void
collect_finished(void)
{
	CURLMsg    *msg;
	int			left;

	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		if (msg->msg != CURLMSG_DONE)
			continue;
		for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
		{
			if (slots[i].in_use && slots[i].easy == msg->easy_handle)
			{
				slots[i].done = true;
				slots[i].code = msg->data.result;
			}
		}
	}
}

void
chroma_http_pump(void)
{
	int			running;

	if (multi == NULL)
		return;
	curl_multi_perform(multi, &running);
	collect_finished();
}

/*
 * Called for each row a loop converts while requests may be in flight: every 16th call,
 * when a request is unanswered, lets the transfers progress (their bodies go out and
 * their answers come in while the next batch is read, not only when it is sent).
 */
void
chroma_http_progress(void)
{
	static unsigned int calls = 0;

	if (multi == NULL || (++calls & 15) != 0)
		return;
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
	{
		if (slots[i].in_use && !slots[i].done)
		{
			chroma_http_pump();
			return;
		}
	}
}

/* GET, or a POST to one of Chroma's read endpoints (get, query, count) */
static bool
is_read_request(const char *method, const char *url)
{
	const char *q = strchr(url, '?');
	size_t		len = q ? (size_t) (q - url) : strlen(url);
	static const char *const reads[] = {"/get", "/query", "/count"};

	if (strcmp(method, "GET") == 0)
		return true;
	for (size_t i = 0; i < lengthof(reads); i++)
	{
		size_t		n = strlen(reads[i]);

		if (len >= n && strncmp(url + len - n, reads[i], n) == 0)
			return true;
	}
	return false;
}

ChromaHttpRequest *
chroma_http_begin(const char *method, const char *url, const char *body, size_t body_len)
{
	ChromaHttpRequest *req = NULL;
	const char *key;
	CURL	   *h;

	http_init();
	for (int i = 0; i < CHROMA_HTTP_MAX_INFLIGHT; i++)
	{
		if (!slots[i].in_use)
		{
			req = &slots[i];
			break;
		}
	}
	if (req == NULL)
		elog(ERROR, "too many concurrent Chroma requests");

	if (req->easy == NULL)
	{
		req->easy = curl_easy_init();
		if (req->easy == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("could not create a libcurl handle")));
	}
	else
		curl_easy_reset(req->easy);
	h = req->easy;

	/* Read the key before taking the slot: it may raise an error. */
	key = chroma_effective_api_key();

	req->in_use = true;
	req->done = false;
	req->code = CURLE_OK;
	req->nest_level = IsTransactionState() ? GetCurrentTransactionNestLevel() : 0;
	req->seq = ++requests_begun;
	req->resp = NULL;
	req->resp_len = req->resp_cap = 0;
	req->resp_limit = chroma_max_response_bytes();
	req->resp_overflow = false;
	req->errbuf[0] = '\0';

	req->headers = curl_slist_append(NULL, "Content-Type: application/json");
	req->headers = curl_slist_append(req->headers, "Accept: application/json");
	req->headers = curl_slist_append(req->headers, "Expect:");	/* no 100-continue round trip */
	if (key != NULL)
	{
		char	   *hdr = psprintf("x-chroma-token: %s", key);

		req->headers = curl_slist_append(req->headers, hdr);
		explicit_bzero(hdr, strlen(hdr));
		pfree(hdr);
	}
	if (req->headers == NULL)
	{
		req->in_use = false;
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}

	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, req->errbuf);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, req->headers);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "chroma_sync/" "0.1");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) chroma_timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long) chroma_connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, req);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) req->resp_limit);
#if LIBCURL_VERSION_NUM >= 0x075700
	/* A resolver thread still waiting for DNS is abandoned, not joined, when we give up. */
	curl_easy_setopt(h, CURLOPT_QUICK_EXIT, 1L);
#endif
	/* "" disables the proxies named by http_proxy, https_proxy and ALL_PROXY. */
	if (chroma_proxy && *chroma_proxy)
	{
		curl_easy_setopt(h, CURLOPT_PROXY, chroma_proxy);
		curl_easy_setopt(h, CURLOPT_NOPROXY, "");	/* and no_proxy exempts nothing */
	}
	else
		curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, chroma_tls_verify ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, chroma_tls_verify ? 2L : 0L);
	if (chroma_ca_file && *chroma_ca_file)
	{
		/* that CA only: the system's CA directory is no longer trusted */
		curl_easy_setopt(h, CURLOPT_CAINFO, chroma_ca_file);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}

	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") == 0)
	{
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) (body ? body_len : 0));
	}
	else
	{
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		if (body)
		{
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) body_len);
		}
	}

	/* a read changes nothing, whenever the server runs it */
	req->settled = is_read_request(method, url);
	req->apply_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), chroma_timeout_ms);
	if (curl_multi_add_handle(multi, h) != CURLM_OK)
	{
		req->settled = true;
		release_slot(req);
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not start an HTTP request")));
	}
	call_unsettled_hook();
	chroma_http_pump();
	return req;
}

static bool
is_connect_failure(CURLcode code, CURL *h)
{
	curl_off_t	pretransfer = 0;
	long		request_size = -1;

	switch (code)
	{
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
		case CURLE_COULDNT_CONNECT:
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_ISSUER_ERROR:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
			return true;
		default:
			break;
	}
	/*
	 * A timeout before the request was sent: before the transfer began, or with not one
	 * byte of the request issued (libcurl 8 sets the pre-transfer time even when the
	 * connect phase timed out).
	 */
	if (curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer) == CURLE_OK &&
		pretransfer == 0)
		return true;
	if (curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size) == CURLE_OK &&
		request_size == 0)
		return true;
	return false;
}

bool
chroma_http_done(ChromaHttpRequest *req)
{
	return req->done;
}

void
chroma_http_wait(ChromaHttpRequest *req)
{
	PG_TRY();
	{
		while (!req->done)
		{
			int			numfds;

			CHECK_FOR_INTERRUPTS();
			if (!PostmasterIsAlive())
				proc_exit(1);
			pgstat_report_wait_start(PG_WAIT_EXTENSION);
			curl_multi_poll(multi, NULL, 0, POLL_INTERVAL_MS, &numfds);
			pgstat_report_wait_end();
			chroma_http_pump();
			/*
			 * The worker's other work meanwhile: only for a request begun outside a
			 * transaction and waited for outside one, which no abort releases
			 */
			if (!req->done && chroma_http_wait_hook != NULL && req->nest_level == 0 &&
				!IsTransactionState())
				chroma_http_wait_hook(req);
		}
		/* An abort by our progress callback means an interrupt is pending. */
		if (req->code == CURLE_ABORTED_BY_CALLBACK)
			CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		release_slot(req);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

void
chroma_http_finish(ChromaHttpRequest *req, ChromaHttpResult *res)
{
	CURL	   *h = req->easy;

	chroma_http_wait(req);

	memset(res, 0, sizeof(*res));
	res->curl_code = (int) req->code;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
	curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &res->seconds);
	{
		/* seconds, or an HTTP date made a number of seconds from now; 0 without one */
		curl_off_t	after = 0;

		if (req->code == CURLE_OK &&
			curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
			res->retry_after_s = (long) Min(after, (curl_off_t) CHROMA_RETRY_AFTER_MAX_S);
	}
	initStringInfo(&res->body);
	if (req->resp_len > 0)
		appendBinaryStringInfo(&res->body, req->resp, req->resp_len);
	if (req->code != CURLE_OK)
	{
		const char *msg = req->errbuf[0] ? req->errbuf : curl_easy_strerror(req->code);

		res->too_large = req->resp_overflow || req->code == CURLE_FILESIZE_EXCEEDED;
		if (res->too_large)
			msg = psprintf("the response is larger than chroma_sync.max_response_size (%d kB)",
						   chroma_max_response_kb);
		res->error = pstrdup(msg);
		res->connect_failed = is_connect_failure(req->code, h);
		res->outcome_unknown = !res->connect_failed;
		res->tls_failed = req->code == CURLE_PEER_FAILED_VERIFICATION ||
			req->code == CURLE_SSL_CONNECT_ERROR || req->code == CURLE_SSL_CERTPROBLEM ||
			req->code == CURLE_SSL_CACERT_BADFILE || req->code == CURLE_SSL_ISSUER_ERROR;
		res->status = 0;
	}
	/*
	 * An answer came, or it never left; not a 500, 502 or 504, which may come from a
	 * proxy that gave up while the server goes on (the worker keeps their keys in
	 * chroma_sync.resend, but may exit before they are there: TAP 250).
	 */
	req->settled = res->connect_failed ||
		(req->code == CURLE_OK && res->status != 500 && res->status != 502 && res->status != 504);
	release_slot(req);
}

void
chroma_http_request(const char *method, const char *url, const char *body,
					size_t body_len, ChromaHttpResult *res)
{
	ChromaHttpRequest *req = chroma_http_begin(method, url, body, body_len);

	chroma_http_finish(req, res);
}

char *
chroma_http_escape(const char *s)
{
	char	   *e;
	char	   *r;

	http_init();
	e = curl_easy_escape(NULL, s, (int) strlen(s));
	if (e == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	r = pstrdup(e);
	curl_free(e);
	return r;
}
