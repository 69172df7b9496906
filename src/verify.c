/*
 * verify.c — chroma_verify: compares a mirrored table with its collection over the API
 * (ids, float32 bytes, documents, metadata), without changing anything.
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
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"
#include "access/xact.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "mirror_config.h"
#include "response.h"
#include "sync_batch.h"
#include "trigger.h"

PG_FUNCTION_INFO_V1(chroma_verify);

#define KEY_BYTES (NAMEDATALEN * 4)

typedef struct Expected
{
	char		key[KEY_BYTES];	/* hash key: the id, cut to KEY_BYTES - 1 bytes */
	char	   *id;				/* the whole id */
	float	   *embedding;
	int			dim;
	char	   *document;
	Jsonb	   *metadata;		/* NULL when the row has none */
	bool		seen;
} Expected;

/*
 * Chroma parses float64 metadata with a parser that may land one unit in the last place
 * away from the decimal it was sent (large exponents): such numbers count as equal.
 */
static bool
numbers_close(Numeric a, Numeric b)
{
	double		x;
	double		y;

	if (DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(a), NumericGetDatum(b))))
		return true;
	x = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(a)));
	y = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, NumericGetDatum(b)));
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

static Expected *
enter_expected(HTAB *table, MemoryContext hcxt, const char *id)
{
	char		key[KEY_BYTES];
	bool		found;
	Expected   *e;
	MemoryContext old = MemoryContextSwitchTo(hcxt);

	memset(key, 0, sizeof(key));
	strlcpy(key, id, sizeof(key));
	e = hash_search(table, key, HASH_ENTER, &found);
	e->id = pstrdup(id);
	e->seen = false;
	e->embedding = NULL;
	e->dim = 0;
	e->document = NULL;
	e->metadata = NULL;
	MemoryContextSwitchTo(old);
	return e;
}

/* A row that cannot be read cannot be in the collection as it is: never equal. */
static void
add_unreadable(HTAB *table, MemoryContext hcxt, const char *id, int64 *nrows)
{
	Expected   *e = enter_expected(table, hcxt, id);

	e->dim = -1;
	(*nrows)++;
}

typedef struct ReadExpectedArgs
{
	MirrorConfig *m;
	const char *sql;
	int			nargs;
	Datum	   *values;
	HTAB	   *table;
	MemoryContext hcxt;
	int64	   *nrows;
} ReadExpectedArgs;

/* Runs the mirror's SELECT as its owner, adding its rows to the table. */
static void
read_expected(void *arg)
{
	ReadExpectedArgs *a = (ReadExpectedArgs *) arg;
	MirrorSavedUser su;
	Oid			types[1] = {TEXTOID};

	mirror_become_owner(a->m, &su);
	mirror_fix_render_settings();
	if (SPI_execute_with_args(a->sql, a->nargs, types, a->values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the mirrored table");
	mirror_restore_user(&su);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;
		char	   *id = SPI_getvalue(tup, td, 1);
		Expected   *e;
		MemoryContext old;

		/* no id, or no embedding (a cast may yield NULL): the worker sends no record */
		d = SPI_getbinval(tup, td, 2, &isnull);
		if (id == NULL || isnull)
			continue;
		e = enter_expected(a->table, a->hcxt, id);
		old = MemoryContextSwitchTo(a->hcxt);
		{
			ArrayType  *arr = DatumGetArrayTypePCopy(d);

			e->dim = ARR_NDIM(arr) == 1 ? ARR_DIMS(arr)[0] : 0;
			e->embedding = float4_array_data(arr);
		}
		d = SPI_getbinval(tup, td, 3, &isnull);
		e->document = isnull ? NULL : TextDatumGetCString(d);
		d = SPI_getbinval(tup, td, 4, &isnull);
		e->metadata = isnull ? NULL : DatumGetJsonbPCopy(d);
		if (e->metadata && JB_ROOT_COUNT(e->metadata) == 0)
			e->metadata = NULL;
		MemoryContextSwitchTo(old);
		(*a->nrows)++;
	}
}

/*
 * Runs sql (the mirror's SELECT) with the mirror owner's rights and the worker's render
 * settings, in a subtransaction, adding its rows to table. False, with the error's text,
 * when the SELECT failed.
 */
static bool
try_read_expected(MirrorConfig *m, const char *sql, int nargs, Datum *values, HTAB *table,
				  MemoryContext hcxt, int64 *nrows, char **error)
{
	ReadExpectedArgs a = {m, sql, nargs, values, table, hcxt, nrows};

	return sync_try_subxact(read_expected, &a, CurrentMemoryContext, error);
}

Datum
chroma_verify(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MirrorConfig *m;
	ChromaSavedUser su;
	HTAB	   *table;
	HASHCTL		ctl;
	int64		nrows = 0;
	int64		missing = 0;
	int64		extra = 0;
	int64		different = 0;
	int			offset = 0;
	const int	page = 1000;
	HASH_SEQ_STATUS seq;
	Expected   *e;

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

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(char *);
	ctl.entrysize = sizeof(Expected);
	ctl.hcxt = CurrentMemoryContext;
	/* ids longer than the key buffer share a prefix bucket; e->id tells them apart */
	ctl.keysize = KEY_BYTES;
	table = hash_create("chroma_verify", 1024, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	/* the table, read with its owner's rights like the worker (locked: the owner stays) */
	LockRelationOid(m->relid, AccessShareLock);
	SPI_connect();
	{
		char	   *where = psprintf("WHERE %s AND %s",
									 mirror_present_sql(m), mirror_key_not_null_sql(m));
		char	   *error = NULL;

		if (!try_read_expected(m, mirror_select_sql(m, where), 0, NULL, table, ctl.hcxt,
							   &nrows, &error))
		{
			/* a row that cannot be read (it is in chroma_sync.failed): row by row */
			char	   *keys_sql = psprintf("SELECT %s FROM %s %s", mirror_key_sql(m),
											mirror_table_sql(m), where);
			MirrorSavedUser ou;

			/* the filter again: the table owner's code, run with that role's rights */
			mirror_become_owner(m, &ou);
			if (SPI_execute(keys_sql, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "could not read the mirrored table");
			mirror_restore_user(&ou);
			{
				SPITupleTable *keys = SPI_tuptable;
				uint64		nkeys = SPI_processed;
				char	   *one = mirror_select_sql(m, psprintf("WHERE %s", mirror_key_eq_sql(m, "$1")));

				for (uint64 i = 0; i < nkeys; i++)
				{
					char	   *id = SPI_getvalue(keys->vals[i], keys->tupdesc, 1);
					Datum		values[1];

					if (id == NULL)
						continue;	/* its key is NULL: never sent */
					values[0] = CStringGetTextDatum(id);

					if (!try_read_expected(m, one, 1, values, table, ctl.hcxt, &nrows, &error))
						add_unreadable(table, ctl.hcxt, id, &nrows);
				}
			}
		}
	}
	SPI_finish();

	/* the collection, page by page */
	for (;;)
	{
		ChromaResponse resp;
		ChromaRows	rows;
		char	   *get = psprintf("{\"limit\":%d,\"offset\":%d,"
								   "\"include\":[\"embeddings\",\"documents\",\"metadatas\"]}",
								   page, offset);

		CHECK_FOR_INTERRUPTS();
		chroma_call_or_raise("POST", chroma_records_url(m->collection_id, "get"),
							 get, strlen(get), &resp, "read the collection");
		chroma_parse_rows(&resp.http.body, false, &rows);
		for (int i = 0; i < rows.n; i++)
		{
			char		key[KEY_BYTES];
			bool		same;

			memset(key, 0, sizeof(key));
			strlcpy(key, rows.ids[i], sizeof(key));
			e = hash_search(table, key, HASH_FIND, NULL);
			if (e == NULL || strcmp(e->id, rows.ids[i]) != 0 || e->seen)
			{
				extra++;
				continue;
			}
			e->seen = true;
			same = rows.has_embeddings && rows.embeddings[i] != NULL &&
				rows.dims[i] == e->dim &&
				memcmp(rows.embeddings[i], e->embedding, sizeof(float) * e->dim) == 0;
			if (same)
			{
				const char *doc = rows.has_documents ? rows.documents[i] : NULL;

				same = (doc == NULL) == (e->document == NULL) &&
					(doc == NULL || strcmp(doc, e->document) == 0);
			}
			if (same)
				same = metadata_equal(e->metadata, rows.has_metadatas ? rows.metadatas[i] : NULL);
			if (!same)
				different++;
		}
		if (rows.n < page)
			break;
		offset += rows.n;
	}

	hash_seq_init(&seq, table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (!e->seen)
			missing++;

	{
		Datum		values[4] = {Int64GetDatum(nrows), Int64GetDatum(missing),
		Int64GetDatum(extra), Int64GetDatum(different)};
		bool		nulls[4] = {false, false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
