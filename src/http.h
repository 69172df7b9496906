/*
 * http.h — libcurl inside a backend: kept-alive connections, timeouts, cancellation.
 *
 * A request is started with chroma_http_begin and completed with chroma_http_finish,
 * so a caller can prepare the next request while one is in flight (chroma_http_pump
 * keeps the transfer moving). chroma_http_request does both in one call.
 */
#ifndef CHROMA_SYNC_HTTP_H
#define CHROMA_SYNC_HTTP_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

typedef struct ChromaHttpResult
{
	long		status;			/* HTTP status; 0 when no response arrived */
	int			curl_code;		/* CURLcode; 0 on a complete exchange */
	bool		outcome_unknown;	/* failed after the request may have reached the server */
	bool		connect_failed; /* never connected: the server did not get the request */
	bool		tls_failed;		/* the TLS handshake or the certificate check failed */
	bool		too_large;		/* the response exceeded chroma_sync.max_response_size */
	char	   *error;			/* transport error text (palloc'd), or NULL */
	StringInfoData body;		/* response body (palloc'd) */
	double		seconds;		/* total transfer time */
	long		retry_after_s;	/* the answer's Retry-After, in seconds (at most
								 * CHROMA_RETRY_AFTER_MAX_S); 0: none */
} ChromaHttpResult;

/* The longest Retry-After honoured, in seconds (a longer one is taken as this). */
#define CHROMA_RETRY_AFTER_MAX_S 3600

typedef struct ChromaHttpRequest ChromaHttpRequest;

/* Settings of the client (defined in chroma_sync.c) */
extern char *chroma_proxy;		/* proxy URL; empty: none, whatever the environment says */
extern int	chroma_max_response_kb;	/* largest response body accepted, in kB */

/* chroma_sync.max_response_size in bytes */
static inline size_t
chroma_max_response_bytes(void)
{
	return (size_t) chroma_max_response_kb * 1024;
}

/*
 * Starts a request. body is copied only by reference: it must stay valid until
 * chroma_http_finish. At most CHROMA_HTTP_MAX_INFLIGHT requests at once: a record
 * sender's CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT, and a get or a delete beside them.
 */
#define CHROMA_HTTP_MAX_INFLIGHT 12
extern ChromaHttpRequest *chroma_http_begin(const char *method, const char *url,
											const char *body, size_t body_len);

/* Lets in-flight transfers progress without blocking. */
extern void chroma_http_pump(void);

/* Each row of a conversion loop: pumps now and then while a request is unanswered. */
extern void chroma_http_progress(void);

/* Whether the request has completed (after chroma_http_pump); never waits. */
extern bool chroma_http_done(ChromaHttpRequest *req);

/* Waits for the request to complete (its response is kept for chroma_http_finish). */
extern void chroma_http_wait(ChromaHttpRequest *req);

/*
 * Called while a request begun and waited for outside a transaction is waited for
 * (after each poll of at most 50 ms): the worker serves other mirrors meanwhile (sync.c,
 * "lending a step's waits"). NULL in a backend.
 */
typedef void (*chroma_http_wait_hook_type) (ChromaHttpRequest *req);
extern chroma_http_wait_hook_type chroma_http_wait_hook;

/*
 * A mark of the requests begun so far; chroma_http_abort_since(mark) releases the
 * requests begun after it (a lent step's error leaves the waiting step's requests alone).
 */
extern uint64 chroma_http_mark(void);
extern void chroma_http_abort_since(uint64 mark);

/* Waits for the request to complete, fills *res, releases the request. */
extern void chroma_http_finish(ChromaHttpRequest *req, ChromaHttpResult *res);

/* begin + finish */
extern void chroma_http_request(const char *method, const char *url,
								const char *body, size_t body_len,
								ChromaHttpResult *res);

/*
 * The latest time a request of this process that is not settled (no whole answer came,
 * or a 500, 502 or 504, yet it may have reached the server: in flight, timed out,
 * abandoned, or a proxy gave up) may
 * still be applied by the server, taken as its start plus chroma_sync.timeout; 0 when
 * there is none. The hook, when set (the sync worker), is called with it whenever a
 * request starts or is released.
 */
extern TimestampTz chroma_http_unsettled_until(void);
typedef void (*chroma_http_unsettled_hook_type) (TimestampTz until);
extern chroma_http_unsettled_hook_type chroma_http_unsettled_hook;

/* Abandons every in-flight request (error cleanup). */
extern void chroma_http_abort_all(void);

/* Percent-encodes one path segment (palloc'd). */
extern char *chroma_http_escape(const char *s);

#endif							/* CHROMA_SYNC_HTTP_H */
