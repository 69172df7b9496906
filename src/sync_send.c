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
			res->outcome_unknown |= resp->http.outcome_unknown;
			res->message = resp->http.curl_code != 0
				? psprintf("%s: %s", chroma_base_url(), resp->message ? resp->message : "transport error")
				: psprintf("HTTP %ld %s: %s", resp->http.status,
						   resp->error_name ? resp->error_name : "",
						   resp->message ? resp->message : "");
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

/*
 * Sends recs[0..n) as one request, bisecting on refusal; records refused rows' reasons
 * in recs[i].error. Stops at the first transient or fatal failure.
 */
static void
send_bisect(MirrorConfig *m, const char *op, SyncRecord **recs, int n, int dim,
			bool base64, SendResult *res)
{
	cs_buf		body;
	cs_record  *crecs;
	cs_body_options opt;
	ChromaResponse resp;
	SendOutcome o;

	if (n == 0 || res->outcome != SEND_OK)
		return;
	crecs = palloc_array(cs_record, n);
	for (int i = 0; i < n; i++)
		crecs[i] = recs[i]->rec;
	pgbuf_init(&body, 1024);
	if (strcmp(op, "delete") == 0)
		cs_encode_ids(&body, crecs, n);
	else
	{
		opt.dim = dim;
		opt.encoding = base64 ? CS_ENCODING_BASE64 : CS_ENCODING_JSON;
		opt.with_embeddings = true;
		opt.with_documents = m->document_attnum > 0;
		opt.with_metadatas = true;
		cs_encode_records(&body, crecs, n, &opt);
	}
	rate_limit(n);
	sync_post(chroma_records_url(m->collection_id, op), &body, &resp);
	pfree(body.data);
	pfree(crecs);

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

/* Deletes (and clears documents) then upserts the batch's records. */
void
sync_send_batch(MirrorConfig *m, Batch *b, SendResult *res)
{
	SyncRecord **dels = palloc_array(SyncRecord *, Max(b->n, 1));
	SyncRecord **ups = palloc_array(SyncRecord *, Max(b->n, 1));
	int			nd = 0;
	int			nu = 0;
	bool		base64 = chroma_use_base64();
	int			batch = chroma_effective_batch_size();

	if (chroma_max_records_per_second > 0 && batch > chroma_max_records_per_second)
		batch = chroma_max_records_per_second;

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
	{
		res->acknowledged = 0;
		for (int i = 0; i < b->n; i++)
			if (b->recs[i].error == NULL)
				res->acknowledged++;
	}
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
		sync_post(chroma_records_url(m->collection_id, "delete"), &body, &resp);
		if (sync_classify(&resp, res) != SEND_OK)
		{
			if (res->outcome == SEND_OK)
				res->outcome = SEND_RETRY;
			return false;
		}
		res->acknowledged += rows.n;
	}
}
