/*
 * recordset.c — validated record sets and the pipelined sender.
 *
 * A RecordSet holds records in the caller's order, already converted to UTF-8 and
 * checked against Chroma's rules. The sender cuts it into requests of at most
 * batch_size records and CHROMA_MAX_BODY_BYTES bytes, keeps up to max_inflight of them
 * in flight and builds the next one meanwhile. Every record of a set has distinct ids;
 * ids of different sets may repeat, and no id is ever in two requests in flight: a
 * request holding an id of one in flight starts once that one is acknowledged.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "metadata.h"
#include "pgbuf.h"
#include "records.h"

void
record_set_init(RecordSet *rs, int cap)
{
	memset(rs, 0, sizeof(*rs));
	rs->cap = Max(cap, 8);
	rs->recs = palloc0_array(cs_record, rs->cap);
	rs->names = palloc0_array(char *, rs->cap);
	rs->positions = palloc0_array(int64, rs->cap);
}

void
record_set_add(RecordSet *rs, const char *id_server, int id_len, int64 position)
{
	cs_record  *r;
	char	   *utf8;

	if (rs->n == rs->cap)
	{
		rs->cap *= 2;
		rs->recs = repalloc_array(rs->recs, cs_record, rs->cap);
		rs->names = repalloc_array(rs->names, char *, rs->cap);
		rs->positions = repalloc_array(rs->positions, int64, rs->cap);
	}
	rs->names[rs->n] = pnstrdup(id_server, id_len);
	rs->positions[rs->n] = position;
	if (id_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("id of record %lld is empty", (long long) position),
				 errdetail("Chroma ids are non-empty strings.")));
	utf8 = pg_server_to_any(id_server, id_len, PG_UTF8);
	r = &rs->recs[rs->n];
	memset(r, 0, sizeof(*r));
	r->id = utf8;
	r->id_len = (utf8 == id_server) ? (size_t) id_len : strlen(utf8);
	rs->n++;
}

char *
record_describe(const RecordSet *rs, int i)
{
	const char *name = rs->names[i];

	if (strlen(name) > 64)
		return psprintf("record %lld (id \"%.64s...\")", (long long) rs->positions[i], name);
	return psprintf("record %lld (id \"%s\")", (long long) rs->positions[i], name);
}

void
record_check_embedding(RecordSet *rs, int i, const float *v, int dim)
{
	ptrdiff_t	bad;

	if (dim == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("embedding of %s is empty", record_describe(rs, i))));
	bad = cs_first_nonfinite(v, dim);
	if (bad >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("embedding of %s has a non-finite value at position %d",
						record_describe(rs, i), (int) bad + 1),
				 errdetail("Chroma cannot store NaN or infinity.")));
	if (rs->dim == 0)
		rs->dim = dim;
	else if (rs->dim != dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("embedding of %s has %d dimensions, expected %d",
						record_describe(rs, i), dim, rs->dim)));
	rs->recs[i].embedding = v;
}

void
record_set_document(RecordSet *rs, int i, const char *doc, int len)
{
	char	   *u = pg_server_to_any(doc, len, PG_UTF8);

	rs->recs[i].document = u;
	rs->recs[i].document_len = (u == doc) ? (size_t) len : strlen(u);
}

void
record_set_metadata(RecordSet *rs, int i, Jsonb *jb, bool allow_arrays)
{
	cs_buf		b;
	char	   *who = record_describe(rs, i);

	pgbuf_init(&b, 64 + VARSIZE_ANY(jb));
	chroma_metadata_render(jb, allow_arrays, &b, who);
	rs->recs[i].metadata = pgbuf_cstring(&b);
	rs->recs[i].metadata_len = b.len;
}

static int
cmp_ids(const void *a, const void *b, void *arg)
{
	const cs_record *recs = (const cs_record *) arg;
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;
	const cs_record *ra = &recs[ia];
	const cs_record *rb = &recs[ib];
	size_t		n = Min(ra->id_len, rb->id_len);
	int			c = memcmp(ra->id, rb->id, n);

	if (c != 0)
		return c;
	if (ra->id_len != rb->id_len)
		return ra->id_len < rb->id_len ? -1 : 1;
	return ia < ib ? -1 : (ia > ib ? 1 : 0);
}

/* Duplicate ids: the last occurrence wins; order of the survivors is kept. */
void
record_set_dedupe(RecordSet *rs)
{
	int		   *order;
	bool	   *drop;
	int			k = 0;

	if (rs->n < 2)
		return;
	order = palloc_array(int, rs->n);
	drop = palloc0_array(bool, rs->n);
	for (int i = 0; i < rs->n; i++)
		order[i] = i;
	qsort_arg(order, rs->n, sizeof(int), cmp_ids, rs->recs);
	for (int i = 0; i + 1 < rs->n; i++)
	{
		const cs_record *a = &rs->recs[order[i]];
		const cs_record *b = &rs->recs[order[i + 1]];

		if (a->id_len == b->id_len && memcmp(a->id, b->id, a->id_len) == 0)
			drop[order[i]] = true;	/* a later one has the same id */
	}
	for (int i = 0; i < rs->n; i++)
	{
		if (drop[i])
			continue;
		rs->recs[k] = rs->recs[i];
		rs->names[k] = rs->names[i];
		rs->positions[k] = rs->positions[i];
		k++;
	}
	rs->n = k;
	pfree(order);
	pfree(drop);
}

/*
 * An upper bound of the length of s as a JSON string body: 6 bytes for a byte written
 * as a \u escape, 2 for '"' and '\\'. Short strings take the worst case without looking.
 */
static size_t
json_string_bound(const char *s, size_t len)
{
	size_t		sz = len;

	if (len <= 4096)
		return len * 6;
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c < 0x20 || c == 0x7f)
			sz += 5;
		else if (c == '"' || c == '\\')
			sz += 1;
	}
	return sz;
}

/* An upper bound of the bytes one record adds to a body. */
static size_t
record_size_bound(const RecordSet *rs, int i, bool base64)
{
	const cs_record *r = &rs->recs[i];
	size_t		sz = 8 + r->id_len * 6;

	if (rs->with_embeddings)
		sz += base64 ? cs_base64_len((size_t) rs->dim * 4) + 3
			: (size_t) rs->dim * (CS_FLOAT_MAXLEN + 1) + 2;
	if (rs->with_documents && r->document != NULL)
		sz += 8 + json_string_bound(r->document, r->document_len);
	else if (rs->with_documents)
		sz += 8;
	if (rs->with_metadatas)
		sz += 8 + r->metadata_len;
	return sz;
}

void
record_sender_init(RecordSender *s, const char *collection, const char *op)
{
	ChromaCollection coll;

	memset(s, 0, sizeof(*s));
	s->collection = collection;
	s->op = op;
	chroma_api_get_collection_id(collection, &coll, false);
	s->collection_id = coll.id;
	s->url = chroma_records_url(coll.id, op);
	s->dim = coll.dimension;
	s->base64 = chroma_use_base64();
	s->batch_size = chroma_effective_batch_size();
	s->max_inflight = 1;
	s->mcxt = CurrentMemoryContext;
}

void
record_sender_set_concurrency(RecordSender *s, int n)
{
	Assert(s->ninflight == 0);
	s->max_inflight = Max(1, Min(n, CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT));
}

static int
cmp_sender_ids(const void *a, const void *b)
{
	const SenderId *x = (const SenderId *) a;
	const SenderId *y = (const SenderId *) b;
	int			c = memcmp(x->id, y->id, Min(x->len, y->len));

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : (x->len > y->len ? 1 : 0);
}

/* Whether request r in flight holds the id; true when r kept no ids (it may hold any). */
static bool
request_holds(const SenderRequest *r, const char *id, size_t len)
{
	SenderId	key;

	if (r->nids == 0)
		return true;
	key.id = id;
	key.len = len;
	return bsearch(&key, r->ids, r->nids, sizeof(SenderId), cmp_sender_ids) != NULL;
}

/* Whether two requests share an id (both lists sorted); true when either kept none. */
static bool
requests_overlap(const SenderRequest *a, const SenderRequest *b)
{
	int			i = 0;
	int			j = 0;

	if (a->nids == 0 || b->nids == 0)
		return true;
	while (i < a->nids && j < b->nids)
	{
		int			c = cmp_sender_ids(&a->ids[i], &b->ids[j]);

		if (c == 0)
			return true;
		if (c < 0)
			i++;
		else
			j++;
	}
	return false;
}

/* Completes request r: counts its records when acknowledged, else keeps its failure. */
static void
finish_request(RecordSender *s, SenderRequest *r)
{
	ChromaResponse *resp = palloc0_object(ChromaResponse);
	ChromaHttpRequest *req = r->req;

	/* out of the set first: an interrupt while waiting releases the transfer itself */
	r->req = NULL;
	s->ninflight--;
	chroma_http_finish(req, &resp->http);
	chroma_classify(resp);
	if (resp->kind == CHROMA_OK)
	{
		s->sent += r->n;
		pfree(resp);
	}
	else if (s->failure == NULL || r->seq < s->failure_seq)
	{
		s->failure = resp;
		s->failure_seq = r->seq;
	}
}

/* Completes one request in flight: one already answered if any, else the oldest. */
static void
finish_one(RecordSender *s)
{
	SenderRequest *oldest = NULL;
	SenderRequest *answered = NULL;

	chroma_http_pump();
	for (int i = 0; i <= s->max_inflight; i++)
	{
		SenderRequest *r = &s->slots[i];

		if (r->req == NULL)
			continue;
		if (oldest == NULL || r->seq < oldest->seq)
			oldest = r;
		if (chroma_http_done(r->req) && (answered == NULL || r->seq < answered->seq))
			answered = r;
	}
	if (answered != NULL)
		finish_request(s, answered);
	else if (oldest != NULL)
		finish_request(s, oldest);
	else
		elog(ERROR, "the record sender counts %d requests in flight but holds none",
			 s->ninflight);
}

/*
 * After a failure: every other request in flight is completed (what they carried is
 * counted), then the failure of the earliest started request that failed is raised.
 */
static void
raise_if_failed(RecordSender *s)
{
	if (s->failure == NULL)
		return;
	while (s->ninflight > 0)
		finish_one(s);
	chroma_raise(s->failure,
				 psprintf("%s records in collection \"%s\" (Chroma acknowledged %llu records of this call)",
						  s->op, s->collection, (unsigned long long) s->sent));
}

void
record_sender_wait(RecordSender *s)
{
	while (s->ninflight > 0)
	{
		finish_one(s);
		raise_if_failed(s);
	}
}

void
record_sender_wait_for(RecordSender *s, const RecordSet *rs)
{
	for (int i = 0; i <= s->max_inflight; i++)
	{
		SenderRequest *r = &s->slots[i];

		for (int k = 0; r->req != NULL && k < rs->n; k++)
		{
			if (request_holds(r, rs->recs[k].id, rs->recs[k].id_len))
			{
				finish_request(s, r);
				raise_if_failed(s);
			}
		}
	}
}

void
record_sender_settle(RecordSender *s)
{
	while (s->ninflight > 0)
		finish_one(s);
	s->failure = NULL;
}

/* A slot not in flight (there are max_inflight + 1), its context reset. */
static SenderRequest *
free_slot(RecordSender *s)
{
	for (int i = 0; i <= s->max_inflight; i++)
	{
		SenderRequest *r = &s->slots[i];

		if (r->req != NULL)
			continue;
		if (r->ctx == NULL)
			r->ctx = AllocSetContextCreate(s->mcxt, "chroma_sync body", ALLOCSET_DEFAULT_SIZES);
		else
			MemoryContextReset(r->ctx);
		r->nids = 0;
		r->ids = NULL;
		return r;
	}
	elog(ERROR, "no free request slot in the record sender");
	pg_unreachable();
}

static void
sender_post(RecordSender *s, RecordSet *rs, int from, int to)
{
	MemoryContext old;
	cs_buf		b;
	cs_body_options opt;
	SenderRequest *next = free_slot(s);

	old = MemoryContextSwitchTo(next->ctx);
	opt.dim = rs->dim;
	opt.encoding = s->base64 ? CS_ENCODING_BASE64 : CS_ENCODING_JSON;
	opt.with_embeddings = rs->with_embeddings;
	opt.with_documents = rs->with_documents;
	opt.with_metadatas = rs->with_metadatas;
	pgbuf_init(&b, 1024);
	if (strcmp(s->op, "delete") == 0)
		cs_encode_ids(&b, rs->recs + from, to - from);
	else
		cs_encode_records(&b, rs->recs + from, to - from, &opt);
	if (s->max_inflight > 1)
	{
		/* its ids, for the overlap check of the requests after it */
		next->nids = to - from;
		next->ids = palloc_array(SenderId, next->nids);
		for (int i = from; i < to; i++)
		{
			char	   *copy = palloc(rs->recs[i].id_len);

			memcpy(copy, rs->recs[i].id, rs->recs[i].id_len);
			next->ids[i - from].id = copy;
			next->ids[i - from].len = rs->recs[i].id_len;
		}
		qsort(next->ids, next->nids, sizeof(SenderId), cmp_sender_ids);
	}
	MemoryContextSwitchTo(old);

	/* built while the others were in flight; an id in one of them: that one lands first */
	for (int i = 0; i <= s->max_inflight; i++)
	{
		SenderRequest *r = &s->slots[i];

		if (r->req != NULL && requests_overlap(r, next))
		{
			finish_request(s, r);
			raise_if_failed(s);
		}
	}
	while (s->ninflight >= s->max_inflight)
	{
		finish_one(s);
		raise_if_failed(s);
	}
	next->req = chroma_http_begin("POST", s->url, b.data, b.len);
	next->seq = s->next_seq++;
	next->n = to - from;
	s->ninflight++;
}

/* Checks every record against the collection and the request size; their sizes (palloc'd). */
static size_t *
check_records(RecordSender *s, RecordSet *rs)
{
	size_t	   *sizes;

	if (rs->with_embeddings)
	{
		if (s->dim == 0)
			s->dim = rs->dim;
		else if (rs->dim != s->dim)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("embeddings have %d dimensions, but collection \"%s\" has %d",
							rs->dim, s->collection, s->dim),
					 errdetail("First mismatching record: %s.", record_describe(rs, 0))));
	}
	/* Every record must fit in a request on its own: checked before sending any. */
	sizes = palloc_array(size_t, rs->n);
	for (int i = 0; i < rs->n; i++)
	{
		sizes[i] = record_size_bound(rs, i, s->base64);
		if (sizes[i] + 64 > CHROMA_MAX_BODY_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("%s is too large to send", record_describe(rs, i)),
					 errdetail("A request body may hold at most %d MiB.",
							   CHROMA_MAX_BODY_BYTES / (1024 * 1024))));
	}
	return sizes;
}

void
record_sender_check(RecordSender *s, RecordSet *rs)
{
	if (rs->n > 0)
		pfree(check_records(s, rs));
}

void
record_sender_send(RecordSender *s, RecordSet *rs)
{
	int			from = 0;
	size_t		bytes = 64;
	size_t	   *sizes;

	if (rs->n == 0)
		return;
	sizes = check_records(s, rs);
	for (int i = 0; i < rs->n; i++)
	{
		size_t		sz = sizes[i];

		if (i > from && (i - from >= s->batch_size || bytes + sz > CHROMA_MAX_BODY_BYTES))
		{
			sender_post(s, rs, from, i);
			from = i;
			bytes = 64;
		}
		bytes += sz;
	}
	sender_post(s, rs, from, rs->n);
	pfree(sizes);
}

uint64
record_sender_finish(RecordSender *s)
{
	record_sender_wait(s);
	return s->sent;
}
