/*
 * sync_send.c — sending a batch of the worker's records: encoding, the rate limit,
 * bisection of refused requests, the error classes of a send, and clearing a collection.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "pgbuf.h"
#include "response.h"
#include "sync.h"
#include "sync_batch.h"

SendOutcome
sync_classify(ChromaResponse *resp, SendResult *res)
{
	switch (resp->kind)
	{
		case CHROMA_OK:
			return SEND_OK;
		case CHROMA_FATAL:
			res->outcome = SEND_STOP;
			res->collection_gone = (resp->http.status == 404);
			res->message = psprintf("HTTP %ld %s: %s", resp->http.status,
									resp->error_name ? resp->error_name : "",
									resp->message ? resp->message : "");
			return SEND_STOP;
		case CHROMA_REFUSED:
		case CHROMA_TOO_LARGE:
			return (SendOutcome) -1;	/* caller bisects */
		default:
			res->outcome = SEND_RETRY;
			/* a proxy's 502/504, or a 500, may come while Chroma goes on with the request */
			res->outcome_unknown |= resp->http.outcome_unknown ||
				resp->http.status == 500 || resp->http.status == 502 || resp->http.status == 504;
			res->message = resp->http.curl_code != 0
				? psprintf("%s: %s", chroma_base_url(), resp->message ? resp->message : "transport error")
				: psprintf("HTTP %ld %s: %s", resp->http.status,
						   resp->error_name ? resp->error_name : "",
						   resp->message ? resp->message : "");
			res->throttled |= resp->http.status == 429 || resp->http.status == 503;
			/* the longest a server asked for, over the requests of one attempt */
			if (resp->http.retry_after_s > res->retry_after_s)
				res->retry_after_s = resp->http.retry_after_s;
			if (res->retry_after_s > 0)
				res->message = psprintf("%s (Retry-After: %ld s)", res->message, res->retry_after_s);
			return SEND_RETRY;
	}
}

/*
 * chroma_sync.max_records_per_second: a per-worker budget (Chroma Cloud quotas). Each
 * request of n records moves the earliest time of the next one by n / rate seconds.
 */
static TimestampTz rate_next_at = 0;

static void
rate_limit(int nrecords)
{
	TimestampTz now;

	if (chroma_max_records_per_second <= 0 || nrecords <= 0)
		return;
	for (;;)
	{
		long		wait_ms;

		now = GetCurrentTimestamp();
		wait_ms = rate_next_at > now ? TimestampDifferenceMilliseconds(now, rate_next_at) : 0;
		if (wait_ms <= 0)
			break;
		(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, Min(wait_ms, 200),
						 PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	if (rate_next_at < now)
		rate_next_at = now;
	rate_next_at += (TimestampTz) ((double) nrecords * USECS_PER_SEC / chroma_max_records_per_second);
}

void
sync_post(const char *url, cs_buf *body, ChromaResponse *resp)
{
	memset(resp, 0, sizeof(*resp));
	chroma_http_request("POST", url, body->data, body->len, &resp->http);
	chroma_classify(resp);
}

/* The body of one upsert or delete request of recs[0..n). */
static void
encode_body(MirrorConfig *m, const char *op, SyncRecord **recs, int n, int dim,
			bool base64, cs_buf *body)
{
	cs_record  *crecs = palloc_array(cs_record, Max(n, 1));
	cs_body_options opt;

	for (int i = 0; i < n; i++)
		crecs[i] = recs[i]->rec;
	pgbuf_init(body, 1024);
	if (strcmp(op, "delete") == 0)
		cs_encode_ids(body, crecs, n);
	else
	{
		opt.dim = dim;
		opt.encoding = base64 ? CS_ENCODING_BASE64 : CS_ENCODING_JSON;
		opt.with_embeddings = true;
		opt.with_documents = m->document_attnum > 0;
		opt.with_metadatas = true;
		cs_encode_records(body, crecs, n, &opt);
	}
	pfree(crecs);
}

/*
 * The keys of the synchronous write being waited for. An error meanwhile (a cancel, a
 * shutdown) leaves its outcome unknown: sync_abandon takes them (sync_send_take_writing)
 * and they are sent again after the request timeout, like a timed-out request's.
 */
static SyncRecord **writing_recs = NULL;
static int	writing_nrecs = 0;
static char **writing_ids = NULL;
static int	writing_nids = 0;

typedef struct SavedWriting
{
	SyncRecord **recs;
	int			nrecs;
	char	  **ids;
	int			nids;
} SavedWriting;

void *
sync_send_save_writing(void)
{
	SavedWriting *w = palloc_object(SavedWriting);

	w->recs = writing_recs;
	w->nrecs = writing_nrecs;
	w->ids = writing_ids;
	w->nids = writing_nids;
	writing_recs = NULL;
	writing_nrecs = 0;
	writing_ids = NULL;
	writing_nids = 0;
	return w;
}

void
sync_send_restore_writing(void *saved)
{
	SavedWriting *w = (SavedWriting *) saved;

	writing_recs = w->recs;
	writing_nrecs = w->nrecs;
	writing_ids = w->ids;
	writing_nids = w->nids;
	pfree(w);
}

bool
sync_send_take_writing(MirrorState *st)
{
	bool		any = writing_nrecs > 0 || writing_nids > 0;

	for (int i = 0; i < writing_nrecs; i++)
		sync_unknown_add(st, writing_recs[i]->key);
	for (int i = 0; i < writing_nids; i++)
		sync_unknown_add(st, writing_ids[i]);
	writing_recs = NULL;
	writing_nrecs = 0;
	writing_ids = NULL;
	writing_nids = 0;
	return any;
}

/*
 * Sends recs[0..n) as one request, bisecting on refusal; records refused rows' reasons
 * in recs[i].error. Stops at the first transient or fatal failure.
 */
static void
send_bisect(MirrorConfig *m, const char *op, SyncRecord **recs, int n, int dim,
			bool base64, SendResult *res)
{
	cs_buf		body;
	ChromaResponse resp;
	SendOutcome o;

	if (n == 0 || res->outcome != SEND_OK)
		return;
	encode_body(m, op, recs, n, dim, base64, &body);
	rate_limit(n);
	writing_recs = recs;
	writing_nrecs = n;
	sync_post(chroma_records_url(m->collection_id, op), &body, &resp);
	writing_recs = NULL;
	writing_nrecs = 0;
	pfree(body.data);

	o = sync_classify(&resp, res);
	if (o == SEND_OK)
	{
		res->acknowledged += n;
		return;
	}
	if (o != (SendOutcome) -1)
		return;
	if (n == 1)
	{
		recs[0]->error = psprintf("Chroma refused the row: HTTP %ld %s: %s",
								  resp.http.status, resp.error_name ? resp.error_name : "",
								  resp.message ? resp.message : "");
		return;
	}
	send_bisect(m, op, recs, n / 2, dim, base64, res);
	send_bisect(m, op, recs + n / 2, n - n / 2, dim, base64, res);
}

/* The largest request the worker sends: batch_size, the server's limit, the rate limit. */
static int
request_records(void)
{
	int			batch = chroma_effective_batch_size();

	if (chroma_max_records_per_second > 0 && batch > chroma_max_records_per_second)
		batch = chroma_max_records_per_second;
	return batch;
}

/* Counts the records of b that did not fail: what "synced" counts (keys, not requests). */
static uint64
records_sent(Batch *b)
{
	uint64		n = 0;

	for (int i = 0; i < b->n; i++)
		if (b->recs[i].error == NULL)
			n++;
	return n;
}

bool
sync_flight_prepare(MirrorConfig *m, Batch *b, SyncFlight *f)
{
	int			nup = 0;
	int			ndel = 0;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < b->n; i++)
	{
		SyncRecord *r = &b->recs[i];

		if (r->error)
			continue;
		if (r->clear_document)
			return false;
		if (r->upsert)
			nup++;
		else
			ndel++;
	}
	if ((nup > 0 && ndel > 0) || nup + ndel > request_records())
		return false;
	f->op = nup > 0 ? "upsert" : "delete";
	f->base64 = chroma_use_base64();
	f->recs = palloc_array(SyncRecord *, Max(nup + ndel, 1));
	for (int i = 0; i < b->n; i++)
		if (b->recs[i].error == NULL)
			f->recs[f->n++] = &b->recs[i];
	if (f->n > 0)
		encode_body(m, f->op, f->recs, f->n, b->dim, f->base64, &f->body);
	return true;
}

void
sync_flight_begin(MirrorConfig *m, SyncFlight *f)
{
	if (f->n == 0)
		return;
	rate_limit(f->n);
	f->req = chroma_http_begin("POST", chroma_records_url(m->collection_id, f->op),
							   f->body.data, f->body.len);
}

void
sync_flight_wait(SyncFlight *f)
{
	if (f->req != NULL)
		chroma_http_wait(f->req);
}

void
sync_flight_finish(MirrorConfig *m, Batch *b, SyncFlight *f, SendResult *res)
{
	ChromaResponse resp;
	SendOutcome o;

	memset(res, 0, sizeof(*res));
	res->outcome = SEND_OK;
	if (f->req == NULL)
		return;
	memset(&resp, 0, sizeof(resp));
	chroma_http_finish(f->req, &resp.http);
	f->req = NULL;
	chroma_classify(&resp);
	pfree(f->body.data);
	f->body.data = NULL;
	o = sync_classify(&resp, res);
	if (o == (SendOutcome) -1)
	{
		/* refused or too large: bisect, so only the bad rows fail */
		if (f->n == 1)
			f->recs[0]->error = psprintf("Chroma refused the row: HTTP %ld %s: %s",
										 resp.http.status, resp.error_name ? resp.error_name : "",
										 resp.message ? resp.message : "");
		else
		{
			send_bisect(m, f->op, f->recs, f->n / 2, b->dim, f->base64, res);
			send_bisect(m, f->op, f->recs + f->n / 2, f->n - f->n / 2, b->dim, f->base64, res);
		}
	}
	if (res->outcome == SEND_OK)
		res->acknowledged = records_sent(b);
}

/* Deletes (and clears documents) then upserts the batch's records. */
void
sync_send_batch(MirrorConfig *m, Batch *b, SendResult *res)
{
	SyncRecord **dels = palloc_array(SyncRecord *, Max(b->n, 1));
	SyncRecord **ups = palloc_array(SyncRecord *, Max(b->n, 1));
	int			nd = 0;
	int			nu = 0;
	bool		base64 = chroma_use_base64();
	int			batch = request_records();

	memset(res, 0, sizeof(*res));
	res->outcome = SEND_OK;
	for (int i = 0; i < b->n; i++)
	{
		SyncRecord *r = &b->recs[i];

		if (r->error)
			continue;
		if (!r->upsert || r->clear_document)
			dels[nd++] = r;
		if (r->upsert)
			ups[nu++] = r;
	}
	for (int i = 0; i < nd && res->outcome == SEND_OK; i += batch)
		send_bisect(m, "delete", dels + i, Min(batch, nd - i), 0, false, res);
	for (int i = 0; i < nu && res->outcome == SEND_OK; i += batch)
		send_bisect(m, "upsert", ups + i, Min(batch, nu - i), b->dim, base64, res);
	/* synced counts records (keys), not requests */
	if (res->outcome == SEND_OK)
		res->acknowledged = records_sent(b);
}

/* Deletes every record of the collection, page by page (TRUNCATE barrier). */
bool
sync_clear_collection(MirrorConfig *m, SendResult *res)
{
	for (;;)
	{
		ChromaResponse resp;
		ChromaRows	rows;
		cs_buf		body;
		const char *get = "{\"limit\":1000,\"include\":[]}";

		memset(res, 0, sizeof(*res));
		res->outcome = SEND_OK;
		memset(&resp, 0, sizeof(resp));
		chroma_http_request("POST", chroma_records_url(m->collection_id, "get"), get,
							strlen(get), &resp.http);
		chroma_classify(&resp);
		if (sync_classify(&resp, res) != SEND_OK)
		{
			if (res->outcome == SEND_OK)
				res->outcome = SEND_RETRY;
			return false;
		}
		chroma_parse_rows(&resp.http.body, false, &rows);
		if (rows.n == 0)
			return true;
		pgbuf_init(&body, 1024);
		cs_buf_puts(&body, "{\"ids\":[");
		for (int i = 0; i < rows.n; i++)
		{
			char	   *u = pg_server_to_any(rows.ids[i], strlen(rows.ids[i]), PG_UTF8);

			if (i > 0)
				cs_buf_putc(&body, ',');
			cs_json_string(&body, u, strlen(u));
		}
		cs_buf_puts(&body, "]}");
		writing_ids = rows.ids;
		writing_nids = rows.n;
		sync_post(chroma_records_url(m->collection_id, "delete"), &body, &resp);
		writing_ids = NULL;
		writing_nids = 0;
		if (sync_classify(&resp, res) != SEND_OK)
		{
			if (res->outcome == SEND_OK)
				res->outcome = SEND_RETRY;
			/* applied late, this delete could remove rows written after the TRUNCATE */
			for (int i = 0; i < rows.n && res->outcome_unknown; i++)
				res->unknown_ids = lappend(res->unknown_ids, rows.ids[i]);
			return false;
		}
		res->acknowledged += rows.n;
	}
}
