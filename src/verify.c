/*
 * verify.c — chroma_verify: compares a mirrored table with its collection over the API
 * (ids, float32 bytes, documents, metadata), without changing anything.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "chroma_api.h"
#include "mirror_config.h"
#include "response.h"
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

static bool
metadata_equal(Jsonb *expected, const char *actual_text)
{
	Jsonb	   *actual;

	if (actual_text == NULL)
		return expected == NULL;
	actual = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(actual_text)));
	if (expected == NULL)
		return JB_ROOT_COUNT(actual) == 0;
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(expected),
											JsonbPGetDatum(actual)));
}

Datum
chroma_verify(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MirrorConfig *m;
	Oid			save_user;
	int			save_sec;
	HTAB	   *table;
	HASHCTL		ctl;
	int64		nrows = 0;
	int			guc_level;
	int64		missing = 0;
	int64		extra = 0;
	int64		different = 0;
	int			offset = 0;
	const int	page = 1000;
	HASH_SEQ_STATUS seq;
	Expected   *e;
	char	   *emb;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	InitMaterializedSRF(fcinfo, 0);

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(chroma_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	m = mirror_lookup(PG_GETARG_OID(0), PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)));
	SetUserIdAndSecContext(save_user, save_sec);
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

	/* the table, read with the mirror owner's rights like the worker */
	emb = get_attname(m->relid, m->embedding_attnum, false);
	SPI_connect();
	/* metadata rendered as the worker renders it, whatever this session's settings */
	guc_level = NewGUCNestLevel();
	mirror_fix_render_settings();
	SetUserIdAndSecContext(m->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	/* a row whose id is NULL (a nullable unique id_column) is not in the collection */
	if (SPI_execute(mirror_select_sql(m, psprintf("WHERE %s IS NOT NULL AND %s IS NOT NULL",
												  quote_identifier(emb), mirror_key_sql(m))),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the mirrored table");
	SetUserIdAndSecContext(save_user, save_sec);
	AtEOXact_GUC(true, guc_level);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		char	   *id = SPI_getvalue(tup, td, 1);
		char		key[KEY_BYTES];
		bool		found;
		bool		isnull;
		Datum		d;
		MemoryContext old = MemoryContextSwitchTo(ctl.hcxt);

		memset(key, 0, sizeof(key));
		strlcpy(key, id, sizeof(key));
		e = hash_search(table, key, HASH_ENTER, &found);
		e->id = pstrdup(id);
		e->seen = false;
		d = SPI_getbinval(tup, td, 2, &isnull);
		{
			ArrayType  *a = DatumGetArrayTypePCopy(d);

			e->dim = ARR_NDIM(a) == 1 ? ARR_DIMS(a)[0] : 0;
			e->embedding = (float *) ARR_DATA_PTR(a);
		}
		d = SPI_getbinval(tup, td, 3, &isnull);
		e->document = isnull ? NULL : TextDatumGetCString(d);
		d = SPI_getbinval(tup, td, 4, &isnull);
		e->metadata = isnull ? NULL : DatumGetJsonbPCopy(d);
		if (e->metadata && JB_ROOT_COUNT(e->metadata) == 0)
			e->metadata = NULL;
		MemoryContextSwitchTo(old);
		nrows++;
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
