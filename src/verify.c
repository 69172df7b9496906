/*
 * verify.c — chroma_verify: compares a mirrored table with its collection over the API
 * (ids, float32 bytes, documents, metadata), without changing anything.
 *
 * Memory is bounded by a page, not by the table. The table is read in key order a page
 * at a time (keyset: each page starts after the last key of the one before), at most
 * VERIFY_PAGE_ROWS rows and about VERIFY_PAGE_BYTES of values, and each page is compared
 * with the records Chroma holds under its ids (a get by ids, paged). Then the
 * collection's ids alone are read page by page, and each page's ids are looked up in the
 * table: those it lacks are extra. Ids are compared whole.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"
#include "access/xact.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "get_pages.h"
#include "metadata.h"
#include "mirror_config.h"
#include "pgbuf.h"
#include "response.h"
#include "sync_batch.h"
#include "trigger.h"

PG_FUNCTION_INFO_V1(chroma_verify);

/* Rows per table page: one get by ids per page (Chroma Cloud returns 300 records a get). */
#define VERIFY_PAGE_ROWS GET_PAGE_MAX_RECORDS
/* A page ends once its rows hold this many bytes of embeddings, documents and metadata. */
#define VERIFY_PAGE_BYTES ((size_t) 8 * 1024 * 1024)

/* A row of the table as the collection should hold it. */
typedef struct Expected
{
	char	   *id;				/* the id as sent (server encoding) */
	float	   *embedding;
	int			dim;			/* -1: the row cannot be read, never equal */
	char	   *document;
	Jsonb	   *metadata;		/* NULL when the row has none */
	bool		seen;
} Expected;

/* One page of the table, in key order until compare_page sorts it by id. */
typedef struct TablePage
{
	Expected   *rows;
	int			n;
	size_t		bytes;			/* of the rows' values */
	char	   *last_key;		/* the id the next page starts after; NULL: none read */
	bool		more;			/* rows may follow last_key */
} TablePage;

typedef struct VerifyCounts
{
	int64		rows;
	int64		missing;
	int64		extra;
	int64		different;
} VerifyCounts;

/*
 * The number Chroma holds for `expected`, compared as it was sent: a whole number within
 * int64 exactly; any other number as the float64 it was sent as (rounded like ::float8),
 * within two float64 steps, since Chroma parses float64 metadata with a parser that may
 * land one unit in the last place away from the decimal it was sent. A number that is
 * never sent (refused) equals nothing.
 */
static bool
numbers_close(Numeric expected, Numeric actual)
{
	double		x;
	double		y;

	switch (chroma_metadata_number(expected, &x))
	{
		case METADATA_NUMBER_INT:
			return DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(expected),
													NumericGetDatum(actual)));
		case METADATA_NUMBER_FLOAT:
			break;
		default:
			return false;
	}
	if (numeric_is_nan(actual) || numeric_is_inf(actual))
		return false;
	y = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(actual)));
	return x == y || nextafter(x, y) == y || nextafter(nextafter(x, y), y) == y;
}

static bool
values_close(JsonbValue *a, JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvNull:
			return true;
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		case jbvString:
			return a->val.string.len == b->val.string.len &&
				memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
		case jbvNumeric:
			return numbers_close(a->val.numeric, b->val.numeric);
		default:
			return false;
	}
}

/* Same keys; scalars and arrays of scalars equal, numbers within two float64 steps. */
static bool
metadata_close(Jsonb *expected, Jsonb *actual)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(expected) || !JB_ROOT_IS_OBJECT(actual) ||
		JB_ROOT_COUNT(expected) != JB_ROOT_COUNT(actual))
		return false;
	it = JsonbIteratorInit(&expected->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue	k;
		JsonbValue *other;

		if (tok != WJB_KEY)
			continue;
		k = v;
		tok = JsonbIteratorNext(&it, &v, true);
		other = findJsonbValueFromContainer(&actual->root, JB_FOBJECT, &k);
		if (other == NULL)
			return false;
		if (v.type == jbvBinary || other->type == jbvBinary)
		{
			/* arrays: element by element */
			JsonbIterator *ia;
			JsonbIterator *ib;
			JsonbValue	ea;
			JsonbValue	eb;
			JsonbIteratorToken ta;
			JsonbIteratorToken tb;

			if (v.type != jbvBinary || other->type != jbvBinary)
				return false;
			ia = JsonbIteratorInit(v.val.binary.data);
			ib = JsonbIteratorInit(other->val.binary.data);
			for (;;)
			{
				ta = JsonbIteratorNext(&ia, &ea, true);
				tb = JsonbIteratorNext(&ib, &eb, true);
				if (ta != tb)
					return false;
				if (ta == WJB_DONE)
					break;
				if (ta == WJB_ELEM && !values_close(&ea, &eb))
					return false;
			}
		}
		else if (!values_close(&v, other))
			return false;
	}
	return true;
}

static bool
metadata_equal(Jsonb *expected, const char *actual_text)
{
	Jsonb	   *actual;

	if (actual_text == NULL)
		return expected == NULL;
	actual = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(actual_text)));
	if (expected == NULL)
		return JB_ROOT_COUNT(actual) == 0;
	if (DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(expected),
										 JsonbPGetDatum(actual))))
		return true;
	return metadata_close(expected, actual);
}

static int
compare_expected(const void *a, const void *b)
{
	return strcmp(((const Expected *) a)->id, ((const Expected *) b)->id);
}

static int
compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * WHERE of the rows the collection should hold (present: a non-NULL embedding and the
 * filter; else every row with a key), after the id $1 when `after`.
 */
static char *
rows_where_sql(MirrorConfig *m, bool present, bool after)
{
	return psprintf("WHERE %s%s%s%s%s", mirror_key_not_null_sql(m),
					present ? " AND " : "", present ? mirror_present_sql(m) : "",
					after ? " AND " : "", after ? mirror_key_after_sql(m, "$1") : "");
}

/* SELECT <key> FROM <table> <tail>: ids only, no column but the key's is read. */
static char *
keys_sql(MirrorConfig *m, const char *tail)
{
	return psprintf("SELECT %s FROM %s %s", mirror_key_sql(m), mirror_table_sql(m), tail);
}

static char *
page_tail_sql(MirrorConfig *m, const char *where, int limit)
{
	return psprintf("%s ORDER BY %s LIMIT %d", where, mirror_key_order_sql(m), limit);
}

/* The next page's row limit: about VERIFY_PAGE_BYTES of rows like these. */
static int
next_page_rows(size_t bytes, int n)
{
	size_t		per_row = Max(bytes / (size_t) n, 1);

	return (int) Max(1, Min((size_t) VERIFY_PAGE_ROWS, VERIFY_PAGE_BYTES / per_row));
}

/*
 * Adds one row of mirror_select_sql's result to the page, in the current memory context.
 * A row whose embedding reads as NULL (a filter that changed its mind) is not one the
 * collection should hold.
 */
static void
add_row(TablePage *page, HeapTuple tup, TupleDesc td)
{
	char	   *id = SPI_getvalue(tup, td, 1);
	Expected   *e;
	bool		isnull;
	Datum		d;

	if (id == NULL)
		return;
	page->last_key = id;
	d = SPI_getbinval(tup, td, 2, &isnull);
	if (isnull)
		return;
	e = &page->rows[page->n++];
	memset(e, 0, sizeof(*e));
	e->id = id;
	{
		ArrayType  *arr = DatumGetArrayTypePCopy(d);

		/* what the worker refuses (nulls, other shapes) cannot be in the collection as it is */
		if (ARR_NDIM(arr) == 1 && !ARR_HASNULL(arr))
		{
			e->dim = ARR_DIMS(arr)[0];
			e->embedding = float4_array_data(arr);
		}
		else
			e->dim = -1;
	}
	d = SPI_getbinval(tup, td, 3, &isnull);
	e->document = isnull ? NULL : TextDatumGetCString(d);
	d = SPI_getbinval(tup, td, 4, &isnull);
	e->metadata = isnull ? NULL : DatumGetJsonbPCopy(d);
	if (e->metadata && JB_ROOT_COUNT(e->metadata) == 0)
		e->metadata = NULL;
	page->bytes += strlen(id) + sizeof(float) * Max(e->dim, 0) +
		(e->document ? strlen(e->document) : 0) + (e->metadata ? VARSIZE(e->metadata) : 0);
}

/* A row that cannot be read cannot be in the collection as it is: never equal. */
static void
add_unreadable(TablePage *page, const char *id)
{
	Expected   *e = &page->rows[page->n++];

	memset(e, 0, sizeof(*e));
	e->id = pstrdup(id);
	e->dim = -1;
	page->last_key = e->id;
}

typedef struct ReadArgs
{
	MirrorConfig *m;
	const char *sql;
	int			nargs;			/* 0, or 1: $1 */
	Oid			type;			/* of $1 */
	Datum		value;			/* $1 */
	TablePage  *page;			/* read_rows: where the rows go */
	MemoryContext cxt;			/* where what is read goes */
	uint64		nread;			/* rows the SELECT returned */
	char	  **keys;			/* read_keys: the first column of each row */
} ReadArgs;

/* Runs a->sql as the mirror's owner with the worker's render settings. */
static void
select_as_owner(ReadArgs *a)
{
	MirrorSavedUser su;

	mirror_become_owner(a->m, &su);
	mirror_fix_render_settings();
	if (SPI_execute_with_args(a->sql, a->nargs, &a->type, &a->value, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the mirrored table");
	mirror_restore_user(&su);
	a->nread = SPI_processed;
}

/* a->sql is a mirror_select_sql: its rows go to a->page until the page's byte budget. */
static void
read_rows(void *arg)
{
	ReadArgs   *a = (ReadArgs *) arg;
	MemoryContext old;

	select_as_owner(a);
	old = MemoryContextSwitchTo(a->cxt);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		if (a->page->n > 0 && a->page->bytes >= VERIFY_PAGE_BYTES)
		{
			a->page->more = true;	/* the next page starts after the last row kept */
			break;
		}
		add_row(a->page, SPI_tuptable->vals[r], SPI_tuptable->tupdesc);
	}
	SPI_freetuptable(SPI_tuptable);
	MemoryContextSwitchTo(old);
}

/* a->sql selects ids: they go to a->keys. */
static void
read_keys(void *arg)
{
	ReadArgs   *a = (ReadArgs *) arg;
	MemoryContext old;

	select_as_owner(a);
	old = MemoryContextSwitchTo(a->cxt);
	a->keys = palloc_array(char *, Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
		a->keys[r] = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);
	SPI_freetuptable(SPI_tuptable);
	MemoryContextSwitchTo(old);
}

static bool
try_read(void (*fn) (void *arg), ReadArgs *a)
{
	char	   *error = NULL;

	return sync_try_subxact(fn, a, a->cxt, &error);
}

/*
 * The page after `after`, row by row: for a page whose SELECT failed (a row that cannot be
 * read, in chroma_sync.failed), so that only the bad rows count as unreadable. Its ids come
 * from the rows that belong in the collection, or, when that fails too (a filter that
 * fails on a row), from every row with a key.
 */
static void
read_page_by_row(MirrorConfig *m, TablePage *page, const char *after, int limit, MemoryContext cxt)
{
	ReadArgs	a = {m, NULL, after ? 1 : 0, TEXTOID, after ? CStringGetTextDatum(after) : (Datum) 0,
	page, cxt, 0, NULL};
	char	   *one = mirror_select_sql(m, psprintf("WHERE %s AND %s", mirror_present_sql(m),
												   mirror_key_eq_sql(m, "$1")));

	a.sql = keys_sql(m, page_tail_sql(m, rows_where_sql(m, true, after != NULL), limit));
	if (!try_read(read_keys, &a))
	{
		a.sql = keys_sql(m, page_tail_sql(m, rows_where_sql(m, false, after != NULL), limit));
		read_keys(&a);
	}
	{
		char	  **keys = a.keys;
		uint64		nkeys = a.nread;

		page->more = (nkeys == (uint64) limit);
		for (uint64 i = 0; i < nkeys; i++)
		{
			ReadArgs	r = {m, one, 1, TEXTOID, CStringGetTextDatum(keys[i]), page, cxt, 0, NULL};

			if (page->n > 0 && page->bytes >= VERIFY_PAGE_BYTES)
			{
				page->more = true;
				break;
			}
			if (!try_read(read_rows, &r))
			{
				MemoryContext old = MemoryContextSwitchTo(cxt);

				add_unreadable(page, keys[i]);
				MemoryContextSwitchTo(old);
			}
			page->last_key = keys[i];
		}
	}
}

/*
 * Reads the table's page after the id `after` (NULL: the first), at most `limit` rows in
 * key order and about VERIFY_PAGE_BYTES of values, into page (zeroed by the caller; its
 * rows allocated in cxt).
 */
static void
read_table_page(MirrorConfig *m, TablePage *page, const char *after, int limit, MemoryContext cxt)
{
	ReadArgs	a = {m, NULL, after ? 1 : 0, TEXTOID, after ? CStringGetTextDatum(after) : (Datum) 0,
	page, cxt, 0, NULL};

	page->rows = MemoryContextAllocZero(cxt, sizeof(Expected) * limit);
	a.sql = mirror_select_sql(m, page_tail_sql(m, rows_where_sql(m, true, after != NULL), limit));
	if (try_read(read_rows, &a))
	{
		if (a.nread == (uint64) limit)
			page->more = true;
		return;
	}
	page->n = 0;
	page->bytes = 0;
	page->last_key = NULL;
	page->more = false;
	read_page_by_row(m, page, after, limit, cxt);
}

/* Whether record i of rows is the expected row, bit for bit. */
static bool
record_equal(Expected *e, ChromaRows *rows, int i)
{
	const char *doc = rows->has_documents ? rows->documents[i] : NULL;

	if (e->dim < 0 || !rows->has_embeddings || rows->embeddings[i] == NULL ||
		rows->dims[i] != e->dim ||
		memcmp(rows->embeddings[i], e->embedding, sizeof(float) * e->dim) != 0)
		return false;
	if ((doc == NULL) != (e->document == NULL) || (doc != NULL && strcmp(doc, e->document) != 0))
		return false;
	return metadata_equal(e->metadata, rows->has_metadatas ? rows->metadatas[i] : NULL);
}

/*
 * Compares a page of the table with the records Chroma holds under its ids (one get by
 * ids, paged; each response in resp_cxt, reset after it): counts the page's missing and
 * different rows.
 */
static void
compare_page(MirrorConfig *m, TablePage *page, VerifyCounts *c, MemoryContext resp_cxt)
{
	cs_buf		fields;
	GetPager	pager;
	ChromaRows	rows;
	MemoryContext old;

	if (page->n == 0)
		return;
	qsort(page->rows, page->n, sizeof(Expected), compare_expected);
	pgbuf_init(&fields, 64 + (size_t) page->n * 16);
	cs_buf_puts(&fields, "\"include\":[\"embeddings\",\"documents\",\"metadatas\"],\"ids\":[");
	for (int i = 0; i < page->n; i++)
	{
		char	   *u = pg_server_to_any(page->rows[i].id, strlen(page->rows[i].id), PG_UTF8);

		if (i > 0)
			cs_buf_putc(&fields, ',');
		cs_json_string(&fields, u, strlen(u));
	}
	cs_buf_putc(&fields, ']');
	get_pager_init(&pager, m->collection_id, pgbuf_cstring(&fields), 0, -1, "read the collection");

	old = MemoryContextSwitchTo(resp_cxt);
	while (get_pager_next(&pager, &rows))
	{
		for (int i = 0; i < rows.n; i++)
		{
			Expected	key = {.id = rows.ids[i]};
			Expected   *e = bsearch(&key, page->rows, page->n, sizeof(Expected), compare_expected);

			/* an id not asked for is left to the pass over the collection's ids */
			if (e == NULL || e->seen)
				continue;
			e->seen = true;
			if (!record_equal(e, &rows, i))
				c->different++;
		}
		MemoryContextReset(resp_cxt);
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(resp_cxt);
	for (int i = 0; i < page->n; i++)
		if (!page->rows[i].seen)
			c->missing++;
}

/*
 * Whether the Chroma id `id` is a row of the table the collection should hold. A row that
 * cannot be read (its filter fails) counts as one: the pass over the table counted it.
 */
static bool
id_in_table(MirrorConfig *m, const char *id, MemoryContext cxt)
{
	char	   *where = psprintf("WHERE %s AND %s", mirror_key_not_null_sql(m), mirror_key_eq_sql(m, "$1"));
	ReadArgs	a = {m, keys_sql(m, where), 1, TEXTOID, CStringGetTextDatum(id), NULL, cxt, 0, NULL};

	/* an id whose text is no value of the key's type is no key of the table */
	if (!try_read(read_keys, &a) || a.nread == 0 || strcmp(a.keys[0], id) != 0)
		return false;
	a.sql = keys_sql(m, psprintf("%s AND %s", where, mirror_present_sql(m)));
	if (!try_read(read_keys, &a))
		return true;
	return a.nread > 0;
}

/*
 * Counts the ids of one page of the collection that are no row of the table the collection
 * should hold: one SELECT of those ids (by the key's index), or one id at a time when it
 * fails (an id that does not convert to the key's type, a filter that fails on a row).
 */
static int64
count_extra(MirrorConfig *m, ChromaRows *rows, MemoryContext cxt)
{
	Datum	   *ids = palloc_array(Datum, Max(rows->n, 1));
	ReadArgs	a = {m, NULL, 1, TEXTARRAYOID, (Datum) 0, NULL, cxt, 0, NULL};
	int64		extra = 0;

	for (int i = 0; i < rows->n; i++)
		ids[i] = CStringGetTextDatum(rows->ids[i]);
	a.value = PointerGetDatum(construct_array(ids, rows->n, TEXTOID, -1, false, TYPALIGN_INT));
	a.sql = keys_sql(m, psprintf("WHERE %s AND %s AND %s", mirror_key_not_null_sql(m),
								 mirror_present_sql(m), mirror_key_in_sql(m, "$1")));
	if (try_read(read_keys, &a))
	{
		qsort(a.keys, a.nread, sizeof(char *), compare_strings);
		for (int i = 0; i < rows->n; i++)
			if (bsearch(&rows->ids[i], a.keys, a.nread, sizeof(char *), compare_strings) == NULL)
				extra++;
		return extra;
	}
	for (int i = 0; i < rows->n; i++)
		if (!id_in_table(m, rows->ids[i], cxt))
			extra++;
	return extra;
}

Datum
chroma_verify(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MirrorConfig *m;
	ChromaSavedUser su;
	VerifyCounts counts = {0, 0, 0, 0};
	MemoryContext verify_cxt;
	MemoryContext page_cxt;
	MemoryContext resp_cxt;
	char	   *after = NULL;
	int			limit = VERIFY_PAGE_ROWS;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	/* it reads the table with the mirror owner's rights: only its owner may ask */
	if (!chroma_class_ownercheck(PG_GETARG_OID(0), GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", get_rel_name(PG_GETARG_OID(0)))));
	InitMaterializedSRF(fcinfo, 0);

	chroma_become_extension_owner(&su);
	m = mirror_lookup(PG_GETARG_OID(0), PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	chroma_restore_user(&su);
	if (m->collection_id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mirror of %s has no collection yet", get_rel_name(m->relid))));

	verify_cxt = AllocSetContextCreate(CurrentMemoryContext, "chroma_verify", ALLOCSET_DEFAULT_SIZES);
	page_cxt = AllocSetContextCreate(verify_cxt, "chroma_verify page", ALLOCSET_DEFAULT_SIZES);
	resp_cxt = AllocSetContextCreate(verify_cxt, "chroma_verify response", ALLOCSET_DEFAULT_SIZES);
	/* locked for the whole walk: the owner whose rights read it stays the owner */
	LockRelationOid(m->relid, AccessShareLock);
	SPI_connect();

	/* the table in key order, a page at a time, read with the table owner's rights */
	for (;;)
	{
		TablePage	page;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(page_cxt);
		old = MemoryContextSwitchTo(page_cxt);
		memset(&page, 0, sizeof(page));
		read_table_page(m, &page, after, limit, page_cxt);
		counts.rows += page.n;
		compare_page(m, &page, &counts, resp_cxt);
		MemoryContextSwitchTo(old);
		if (!page.more || page.last_key == NULL)
			break;
		if (after)
			pfree(after);
		after = MemoryContextStrdup(verify_cxt, page.last_key);
		if (page.n > 0)
			limit = next_page_rows(page.bytes, page.n);
	}
	MemoryContextReset(page_cxt);

	/* the collection's ids, a page at a time: those the table lacks are extra */
	{
		GetPager	pager;
		ChromaRows	rows;
		MemoryContext old = MemoryContextSwitchTo(verify_cxt);

		get_pager_init(&pager, m->collection_id, "\"include\":[]", 0, -1, "read the collection");
		MemoryContextSwitchTo(resp_cxt);
		while (get_pager_next(&pager, &rows))
		{
			counts.extra += count_extra(m, &rows, resp_cxt);
			MemoryContextReset(resp_cxt);
			CHECK_FOR_INTERRUPTS();
		}
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	MemoryContextDelete(verify_cxt);

	{
		Datum		values[4] = {Int64GetDatum(counts.rows), Int64GetDatum(counts.missing),
		Int64GetDatum(counts.extra), Int64GetDatum(counts.different)};
		bool		nulls[4] = {false, false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
