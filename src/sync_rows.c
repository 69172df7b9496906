/*
 * sync_rows.c — reading the current rows of a batch's keys with the mirror owner's
 * rights, and turning each into a record (embedding, document, metadata with every key
 * the mirror has sent before); rows that cannot be read or converted fail alone.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "chroma_sync.h"
#include "http.h"
#include "metadata.h"
#include "pgbuf.h"
#include "sync_batch.h"

/* Renders the row's metadata plus every known key it lacks as null. */
static char *
render_metadata(MirrorConfig *m, Jsonb *jb, Batch *b, size_t *len)
{
	cs_buf		out;
	List	   *row_keys = NIL;
	int			nmissing = 0;

	pgbuf_init(&out, 128);
	if (jb != NULL)
	{
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

		chroma_metadata_render(jb, chroma_server(false)->supports_metadata_arrays, &out, "row");
		if (JB_ROOT_IS_OBJECT(jb))
		{
			it = JsonbIteratorInit(&jb->root);
			while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
				if (tok == WJB_KEY)
					row_keys = lappend(row_keys, pnstrdup(v.val.string.val, v.val.string.len));
		}
	}
	else
		cs_buf_puts(&out, "{}");

	/* keys this row lacks but an earlier row had: null removes them in Chroma */
	nmissing = chroma_metadata_append_nulls(&out, m->known_keys, m->nknown, row_keys);
	/* keys never sent before are remembered before anything is sent */
	{
		ListCell   *lc;

		foreach(lc, row_keys)
		{
			char	   *k = (char *) lfirst(lc);
			bool		known = false;
			ListCell   *lc2;

			for (int i = 0; i < m->nknown && !known; i++)
				known = strcmp(m->known_keys[i], k) == 0;
			foreach(lc2, b->new_keys)
				if (strcmp((char *) lfirst(lc2), k) == 0)
					known = true;
			if (!known)
				b->new_keys = lappend(b->new_keys, k);
		}
	}
	if (out.len == 2 && nmissing == 0)
		return NULL;			/* no metadata at all */
	*len = out.len;
	return pgbuf_cstring(&out);
}

/* A backfill row's key (its query selects rows whose key is not NULL). */
static char *
row_key(HeapTuple tup, TupleDesc td)
{
	char	   *key = SPI_getvalue(tup, td, 1);

	if (key == NULL)
		elog(ERROR, "a row read by the mirror has a NULL key");
	return key;
}

/* Fills r from one row of mirror_select_sql's result; problems go to r->error. */
static void
fill_record(MirrorConfig *m, Batch *b, SyncRecord *r, HeapTuple tup, TupleDesc td,
			MemoryContext batch_ctx)
{
	bool		isnull;
	Datum		d;
	ArrayType  *emb;
	int			dim;
	MemoryContext old = MemoryContextSwitchTo(batch_ctx);
	char	   *id_utf8 = pg_server_to_any(r->key, strlen(r->key), PG_UTF8);

	r->rec.id = id_utf8;
	r->rec.id_len = strlen(id_utf8);
	d = SPI_getbinval(tup, td, 2, &isnull);
	if (isnull)
	{
		r->upsert = false;		/* no embedding: not in the collection */
		MemoryContextSwitchTo(old);
		return;
	}
	r->upsert = true;
	emb = DatumGetArrayTypePCopy(d);
	dim = ARR_NDIM(emb) == 1 ? ARR_DIMS(emb)[0] : 0;
	if (ARR_NDIM(emb) > 1)
		r->error = psprintf("embedding is a %d-dimensional array", ARR_NDIM(emb));
	else if (ARR_HASNULL(emb))
		r->error = pstrdup("embedding contains a null");
	else if (dim == 0)
		r->error = pstrdup("embedding is empty");
	else if (cs_first_nonfinite(float4_array_data(emb), dim) >= 0)
		r->error = psprintf("embedding has a non-finite value (NaN or infinity) at position %d",
							(int) cs_first_nonfinite(float4_array_data(emb), dim) + 1);
	else if (b->dim != 0 && dim != b->dim)
		r->error = psprintf("embedding has %d dimensions; the collection has %d", dim, b->dim);
	if (r->error)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	b->dim = dim;
	r->rec.embedding = float4_array_data(emb);

	d = SPI_getbinval(tup, td, 3, &isnull);
	if (isnull)
		r->clear_document = (m->document_attnum > 0);
	else
	{
		char	   *doc = TextDatumGetCString(d);
		char	   *u = pg_server_to_any(doc, strlen(doc), PG_UTF8);

		r->rec.document = u;
		r->rec.document_len = strlen(u);
	}

	d = SPI_getbinval(tup, td, 4, &isnull);
	{
		MemoryContext here = CurrentMemoryContext;
		List	   *keys_before = list_copy(b->new_keys);

		/* rendering only allocates memory: safe to catch without a subtransaction */
		PG_TRY();
		{
			size_t		len = 0;

			r->rec.metadata = render_metadata(m, isnull ? NULL : DatumGetJsonbPCopy(d), b, &len);
			r->rec.metadata_len = len;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(here);
			edata = CopyErrorData();
			FlushErrorState();
			r->error = edata->message;
			r->rec.metadata = NULL;
			b->new_keys = keys_before;
		}
		PG_END_TRY();
	}
	MemoryContextSwitchTo(old);
}

/* Persists newly seen metadata keys and a newly fixed dimension (before sending). */
void
sync_remember_keys_and_dimension(MirrorConfig *m, Batch *b, MemoryContext keep)
{
	if (b->new_keys != NIL || (m->dimension == 0 && b->dim > 0))
	{
		/* durable before anything is sent (the worker commits asynchronously otherwise) */
		(void) set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	}
	if (b->new_keys != NIL)
	{
		Oid			types[2] = {INT4OID, TEXTARRAYOID};
		Datum		values[2] = {Int32GetDatum(m->mirror_id), sync_text_array(b->new_keys)};
		MemoryContext old = MemoryContextSwitchTo(keep);
		ListCell   *lc;
		int			n = m->nknown;

		sync_exec("UPDATE chroma_sync.mirror SET metadata_keys = metadata_keys || $2 WHERE mirror_id = $1",
			 2, types, values, NULL, SPI_OK_UPDATE);
		/* explicitly in keep: SPI leaves its own context current, which SPI_finish frees */
		m->known_keys = repalloc(m->known_keys, sizeof(char *) * (n + list_length(b->new_keys) + 1));
		foreach(lc, b->new_keys)
			m->known_keys[n++] = MemoryContextStrdup(keep, (char *) lfirst(lc));
		m->nknown = n;
		MemoryContextSwitchTo(old);
	}
	if (m->dimension == 0 && b->dim > 0)
	{
		Oid			types[2] = {INT4OID, INT4OID};
		Datum		values[2] = {Int32GetDatum(m->mirror_id), Int32GetDatum(b->dim)};

		sync_exec("UPDATE chroma_sync.mirror SET dimension = $2 WHERE mirror_id = $1 AND dimension IS NULL",
			 2, types, values, NULL, SPI_OK_UPDATE);
		m->dimension = b->dim;
	}
}

/* Runs the mirror's SELECT as the mirror's owner. */
void
sync_select_as_owner(MirrorConfig *m, const char *sql, int nargs, Oid *types, Datum *values)
{
	MirrorSavedUser su;

	mirror_become_owner(m, &su);
	sync_exec(sql, nargs, types, values, NULL, SPI_OK_SELECT);
	mirror_restore_user(&su);
}

int
sync_compare_keys(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

int
sync_compare_records(const void *a, const void *b)
{
	return strcmp(((const SyncRecord *) a)->key, ((const SyncRecord *) b)->key);
}

/* The bytes a filled record holds (its embedding, document and metadata). */
static size_t
record_bytes(Batch *b, SyncRecord *r)
{
	return r->rec.document_len + r->rec.metadata_len + (size_t) Max(b->dim, 0) * sizeof(float);
}

/* Whether the batch's byte budget is spent (never before its first record). */
static bool
budget_spent(Batch *b)
{
	return b->bytes >= (b->budget > 0 ? b->budget : SYNC_BATCH_BYTES);
}

typedef struct ReadRowsArgs
{
	MirrorConfig *m;
	Batch	   *b;
	SyncRecord *recs;
	char	  **keys;
	int			nkeys;
	MemoryContext batch_ctx;
} ReadRowsArgs;

/* One SELECT of the current rows of a->keys, filling the matching a->recs. */
static void
read_rows_once(void *arg)
{
	ReadRowsArgs *a = (ReadRowsArgs *) arg;
	Datum	   *kd = palloc_array(Datum, a->nkeys);
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1];
	char	   *sql;

	for (int i = 0; i < a->nkeys; i++)
		kd[i] = CStringGetTextDatum(a->keys[i]);
	values[0] = PointerGetDatum(construct_array(kd, a->nkeys, TEXTOID, -1, false, TYPALIGN_INT));
	sql = mirror_select_sql(a->m, psprintf("WHERE %s", mirror_key_in_sql(a->m, "$1")));
	sync_select_as_owner(a->m, sql, 1, types, values);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		char	   *key = SPI_getvalue(tup, SPI_tuptable->tupdesc, 1);
		char	  **hit = key ? bsearch(&key, a->keys, a->nkeys, sizeof(char *), sync_compare_keys) : NULL;

		chroma_http_progress();

		if (hit == NULL)
			continue;			/* the text form did not round-trip: treated as deleted */
		if (budget_spent(a->b))
		{
			/* the row exists but waits for the next batch */
			a->recs[hit - a->keys].deferred = true;
			continue;
		}
		a->recs[hit - a->keys].upsert = true;
		fill_record(a->m, a->b, &a->recs[hit - a->keys], tup, SPI_tuptable->tupdesc, a->batch_ctx);
		a->b->bytes += record_bytes(a->b, &a->recs[hit - a->keys]);
	}
}

/*
 * One SELECT of the current rows of keys[0..n) (sorted with sync_compare_keys), filling the
 * matching b->recs. Runs in a subtransaction: false, with the error's text, when the
 * SELECT failed (a value that cannot be converted, say).
 */
static bool
try_read_rows(MirrorConfig *m, Batch *b, SyncRecord *recs, char **keys, int nkeys,
			  MemoryContext batch_ctx, char **error)
{
	ReadRowsArgs a = {m, b, recs, keys, nkeys, batch_ctx};

	return sync_try_subxact(read_rows_once, &a, batch_ctx, error);
}

typedef struct ReadPageArgs
{
	MirrorConfig *m;
	Batch	   *b;
	const char *after;
	int			limit;
	MemoryContext batch_ctx;
} ReadPageArgs;

/* One SELECT of the backfill page's rows, in key order, into a->b. */
static void
read_page_once(void *arg)
{
	ReadPageArgs *a = (ReadPageArgs *) arg;
	Batch	   *b = a->b;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	uint64		n;

	values[0] = a->after ? CStringGetTextDatum(a->after) : (Datum) 0;
	sync_select_as_owner(a->m, mirror_backfill_page_sql(a->m, a->after != NULL, a->limit, true),
						 a->after ? 1 : 0, types, values);
	n = SPI_processed;
	b->recs = MemoryContextAllocZero(a->batch_ctx, sizeof(SyncRecord) * Max(n, 1));
	for (uint64 r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		SyncRecord *rec = &b->recs[r];

		chroma_http_progress();

		if (budget_spent(b))
		{
			b->budget_cut = true;	/* the next page starts after the last row read */
			break;
		}
		rec->key = MemoryContextStrdup(a->batch_ctx, row_key(tup, SPI_tuptable->tupdesc));
		rec->upsert = true;
		fill_record(a->m, b, rec, tup, SPI_tuptable->tupdesc, a->batch_ctx);
		b->bytes += record_bytes(b, rec);
		b->n = (int) r + 1;
	}
	if (b->n > 0)
		b->last_key = b->recs[b->n - 1].key;
}

/*
 * Reads the backfill page after the key 'after' (NULL: the first page) with its rows into
 * b (empty on entry), in key order; b->last_key is the next watermark. One SELECT; when
 * it fails (a row that cannot be read), the page's keys are read alone and then their rows
 * with sync_read_rows, so only the bad rows fail. Returns the number of keys the page had.
 */
uint64
sync_read_page(MirrorConfig *m, Batch *b, const char *after, int limit, MemoryContext batch_ctx)
{
	ReadPageArgs a = {m, b, after, limit, batch_ctx};
	int			dim = b->dim;
	char	   *error;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	uint64		n;

	if (sync_try_subxact(read_page_once, &a, batch_ctx, &error))
		return b->budget_cut ? (uint64) limit : (uint64) b->n;
	b->last_key = NULL;
	b->new_keys = NIL;
	b->dim = dim;
	b->bytes = 0;
	b->budget_cut = false;
	b->n = 0;

	values[0] = after ? CStringGetTextDatum(after) : (Datum) 0;
	sync_select_as_owner(m, mirror_backfill_page_sql(m, after != NULL, limit, false),
						 after ? 1 : 0, types, values);
	n = SPI_processed;
	b->recs = MemoryContextAllocZero(batch_ctx, sizeof(SyncRecord) * Max(n, 1));
	for (uint64 r = 0; r < n; r++)
		b->recs[r].key = MemoryContextStrdup(batch_ctx,
											 row_key(SPI_tuptable->vals[r], SPI_tuptable->tupdesc));
	b->n = (int) n;
	if (n > 0)
		b->last_key = b->recs[n - 1].key;
	qsort(b->recs, b->n, sizeof(SyncRecord), sync_compare_records);
	chroma_http_pump();
	sync_read_rows(m, b, batch_ctx);
	if (b->budget_cut)
	{
		/* rows left for later: the page ends at the last one read, in key order */
		int			k = 0;

		b->last_key = NULL;
		for (int i = 0; i < b->n; i++)
			if (!b->recs[i].deferred)
				b->recs[k++] = b->recs[i];
		b->n = k;
		return (uint64) limit;
	}
	return n;
}

typedef struct KeyCastArgs
{
	MirrorConfig *m;
	const char *key;
} KeyCastArgs;

static void
key_cast_once(void *arg)
{
	KeyCastArgs *a = (KeyCastArgs *) arg;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(a->key)};

	sync_select_as_owner(a->m, psprintf("SELECT %s", mirror_key_cast_sql(a->m, "$1")),
						 1, types, values);
}

/*
 * Whether key can be a key of the mirror's table at all: a key handed over by an earlier
 * mirror of the collection (chroma_sync.resend_collection) may be another table's. Only a
 * data exception of the base type's input says no (keys are compared as base types, so a
 * domain's check never fails a read); anything else (a missing privilege) says nothing of
 * the key, and the row fails instead of being deleted (red-team TAP 285, 288).
 */
static bool
key_castable(MirrorConfig *m, const char *key, MemoryContext ctx)
{
	KeyCastArgs a = {m, key};
	char	   *error = NULL;
	int			sqlerrcode;

	if (sync_try_subxact_code(key_cast_once, &a, ctx, &error, &sqlerrcode))
		return true;
	return ERRCODE_TO_CATEGORY(sqlerrcode) != ERRCODE_DATA_EXCEPTION;
}

/*
 * Reads the current state of b->recs[0..b->n) (keys sorted with sync_compare_keys). A failing
 * SELECT is retried key by key, so only the rows that cannot be read fail, with the
 * database's error as their reason; the others go on.
 */
void
sync_read_rows(MirrorConfig *m, Batch *b, MemoryContext batch_ctx)
{
	char	  **keys = palloc_array(char *, Max(b->n, 1));
	char	   *error = NULL;

	for (int i = 0; i < b->n; i++)
		keys[i] = b->recs[i].key;
	if (!try_read_rows(m, b, b->recs, keys, b->n, batch_ctx, &error))
	{
		b->bytes = 0;
		for (int i = 0; i < b->n; i++)
		{
			SyncRecord *r = &b->recs[i];

			memset(&r->rec, 0, sizeof(r->rec));
			r->upsert = false;
			r->error = NULL;
			r->deferred = false;
			if (budget_spent(b))
			{
				r->deferred = true;
				continue;
			}
			if (!try_read_rows(m, b, r, &keys[i], 1, batch_ctx, &error))
			{
				if (!key_castable(m, r->key, batch_ctx))
				{
					/* no row of this table can have it: its id is deleted (TAP 258) */
					elog(DEBUG1, "chroma_sync: mirror %d: \"%s\" is no key of the table: deleted",
						 m->mirror_id, r->key);
					memset(&r->rec, 0, sizeof(r->rec));
					continue;
				}
				r->upsert = true;
				r->error = MemoryContextStrdup(batch_ctx,
											   psprintf("could not read the row: %s", error));
			}
		}
	}
	for (int i = 0; i < b->n; i++)
	{
		SyncRecord *r = &b->recs[i];

		if (r->deferred)
		{
			b->budget_cut = true;
			continue;
		}
		if (r->rec.id == NULL)
		{
			char	   *u = MemoryContextStrdup(batch_ctx,
												pg_server_to_any(r->key, strlen(r->key), PG_UTF8));

			r->rec.id = u;
			r->rec.id_len = strlen(u);
		}
	}
}
