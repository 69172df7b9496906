/*
 * mirror.c — SQL functions that manage mirrors: chroma_mirror, chroma_unmirror,
 * chroma_pause, chroma_resume, chroma_flush, chroma_resync, chroma_retry_failed.
 * (chroma_verify lives in verify.c.)
 *
 * Internal tables are read and written with the extension owner's rights after the
 * caller's own rights were checked (ownership of the table for anything that changes
 * a mirror).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parser.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "chroma_api.h"
#include "collection_config.h"
#include "mirror_columns.h"
#include "mirror_config.h"
#include "partition.h"
#include "ownership.h"
#include "shared.h"
#include "sync.h"
#include "trigger.h"

PG_FUNCTION_INFO_V1(chroma_mirror);
PG_FUNCTION_INFO_V1(chroma_unmirror);
PG_FUNCTION_INFO_V1(chroma_adopt);
PG_FUNCTION_INFO_V1(chroma_pause);
PG_FUNCTION_INFO_V1(chroma_resume);
PG_FUNCTION_INFO_V1(chroma_flush);
PG_FUNCTION_INFO_V1(chroma_resync);
PG_FUNCTION_INFO_V1(chroma_retry_failed);

/* Collections to drop when the transaction that unmirrored them commits. */
/* Collections chroma_unmirror(drop_collection => true) drops when the transaction commits. */
typedef struct PendingDrop
{
	char	   *name;
	char	   *id;				/* the mirror's collection (NULL: not known) */
	int			level;			/* subtransaction nest level that asked */
} PendingDrop;

static List *drop_at_commit = NIL;
static bool drop_callback_registered = false;

static bool collection_dropped_at_commit(const char *name);

static void
spi_exec(const char *sql, int nargs, Oid *types, Datum *values, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (rc != expect)
		elog(ERROR, "chroma_sync internal statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
}

static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

static void
check_owner(Oid relid, Oid role)
{
	if (!chroma_class_ownercheck(relid, role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", get_rel_name(relid))));
}

static char *
optional_text(FunctionCallInfo fcinfo, int arg)
{
	return PG_ARGISNULL(arg) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(arg));
}

/* The source argument: not null, and owned by the caller. */
static Oid
owned_source(FunctionCallInfo fcinfo)
{
	Oid			relid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	relid = PG_GETARG_OID(0);
	check_owner(relid, GetUserId());
	return relid;
}

/* The mirror of an owned source (and collection argument coll_arg). */
static MirrorConfig *
owned_mirror(FunctionCallInfo fcinfo, int coll_arg)
{
	Oid			relid = owned_source(fcinfo);
	ChromaSavedUser su;
	MirrorConfig *m;

	chroma_become_extension_owner(&su);
	m = mirror_lookup(relid, optional_text(fcinfo, coll_arg));
	chroma_restore_user(&su);
	return m;
}

static AttrNumber
column_attnum(Oid relid, const char *name, const char *what)
{
	AttrNumber	a = get_attnum(relid, name);

	if (a == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" does not exist in table %s",
						what, name, get_rel_name(relid))));
	if (a < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("%s column \"%s\" is a system column", what, name)));
	if (chroma_column_is_virtual(relid, a))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s column \"%s\" is a virtual generated column", what, name),
				 errdetail("A virtual generated column is computed when it is read and never stored, so the mirror's triggers cannot see its value."),
				 errhint("Declare the column GENERATED ALWAYS AS (...) STORED, or mirror the columns it is computed from.")));
	return a;
}

/* Whether the index's key columns are exactly want[0..n), in any order. */
static bool
index_has_columns(Form_pg_index ind, const AttrNumber *want, int n)
{
	if (ind->indnkeyatts != n)
		return false;
	for (int i = 0; i < n; i++)
	{
		bool		found = false;

		for (int j = 0; j < n && !found; j++)
			found = ind->indkey.values[j] == want[i];
		if (!found)
			return false;
	}
	return true;
}

/*
 * The id columns: the given ones, which must have a unique, non-partial index on
 * exactly them (the id keeps the given order), or else the primary key's columns in its
 * order. Returns how many; fills out[].
 */
static int
choose_id_columns(Relation rel, const AttrNumber *want, int nwant, AttrNumber *out)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index ind = idx->rd_index;
		int			n = ind->indnkeyatts;
		bool		fits;

		if (nwant == 0)
			fits = ind->indisprimary;
		else
			fits = ind->indisunique && ind->indimmediate &&
				heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL) &&
				index_has_columns(ind, want, nwant);
		if (fits)
		{
			for (int i = 0; i < n; i++)
				out[i] = nwant ? want[i] : ind->indkey.values[i];
			index_close(idx, AccessShareLock);
			return n;
		}
		index_close(idx, AccessShareLock);
	}
	if (nwant == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("table %s has no primary key", RelationGetRelationName(rel)),
				 errhint("Add a primary key, or pass id_column (or id_columns) naming columns with a unique index.")));
	if (nwant == 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("id column \"%s\" of table %s has no unique index of its own",
						get_attname(RelationGetRelid(rel), want[0], false),
						RelationGetRelationName(rel)),
				 errdetail("Chroma ids must be unique: the mirror needs a unique, non-partial index on exactly this column.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
			 errmsg("id columns of table %s have no unique index on exactly them",
					RelationGetRelationName(rel)),
			 errdetail("Chroma ids must be unique: the mirror needs a unique, non-partial index whose key columns are exactly the id columns.")));
	return 0;					/* keep compiler quiet */
}

/* The attnums named by id_column or id_columns (at most one of them given); 0 for none. */
static int
id_column_attnums(FunctionCallInfo fcinfo, Oid relid, AttrNumber *out)
{
	bool		have_list = PG_NARGS() > 9 && !PG_ARGISNULL(9);
	ArrayType  *a;
	Datum	   *names;
	bool	   *nulls;
	int			n;

	if (!PG_ARGISNULL(2) && have_list)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("id_column and id_columns cannot both be given"),
				 errhint("Pass the key's columns in id_columns alone.")));
	if (!PG_ARGISNULL(2))
	{
		out[0] = column_attnum(relid, NameStr(*PG_GETARG_NAME(2)), "id");
		return 1;
	}
	if (!have_list)
		return 0;
	a = PG_GETARG_ARRAYTYPE_P(9);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("id_columns must be a one-dimensional array")));
	deconstruct_array(a, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &names, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("id_columns must name at least one column")));
	if (n > INDEX_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("id_columns names %d columns, more than an index can have (%d)",
						n, INDEX_MAX_KEYS)));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("id_columns must not contain null")));
		out[i] = column_attnum(relid, NameStr(*DatumGetName(names[i])), "id");
		for (int j = 0; j < i; j++)
			if (out[j] == out[i])
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("id column \"%s\" is listed twice",
								NameStr(*DatumGetName(names[i])))));
	}
	return n;
}

/*
 * Ids are the key's text form, computed by the trigger in the writer's session and by
 * the worker in its own: only types whose text form depends on no setting qualify
 * (timestamps, dates, floats and intervals change with TimeZone, DateStyle...).
 */
static void
check_key_type(Oid relid, AttrNumber att)
{
	Oid			t = getBaseType(get_atttype(relid, att));

	switch (t)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case UUIDOID:
		case OIDOID:
			return;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("id column \"%s\" is of type %s, which cannot be a Chroma id",
							get_attname(relid, att, false), format_type_be(get_atttype(relid, att))),
					 errdetail("Ids are the key's text form; the text form of this type depends on settings such as TimeZone or DateStyle."),
					 errhint("Use an integer, numeric, text or uuid key, or pass id_column naming one.")));
	}
}

static void
check_embedding_type(Oid relid, AttrNumber att)
{
	Oid			t = get_atttype(relid, att);
	Oid			target = FLOAT4ARRAYOID;

	if (t != target && !can_coerce_type(1, &t, &target, COERCION_EXPLICIT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("embedding column \"%s\" is of type %s, which cannot be cast to real[]",
						get_attname(relid, att, false), format_type_be(t))));
}

/* The table's name as the collection's: explain what to do when Chroma would refuse it. */
static void
check_default_collection_name(const char *relname)
{
	PG_TRY();
	{
		chroma_check_collection_name(relname);
	}
	PG_CATCH();
	{
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("table name \"%s\" is not a valid Chroma collection name", relname),
				 errhint("Pass collection => 'a_valid_name'.")));
	}
	PG_END_TRY();
}

/*
 * The mirror's collection: created with configuration when missing; when it exists, a
 * key of configuration it disagrees with is refused before anything changes (recorded, for
 * chroma_adopt: only keys no modification may change, TAP 199). A server that made it
 * with another index than asked for is refused too (TAP 197).
 */
static void
mirror_collection(const char *collection, Jsonb *configuration, bool recorded,
				  ChromaCollection *coll)
{
	ChromaCollection existing;
	ChromaConfigConflict c;

	if (configuration != NULL &&
		chroma_api_get_collection(collection, &existing, true) &&
		chroma_configuration_conflict(configuration, existing.configuration, recorded, &c))
		ereport(ERROR,
				/* settings for another index: as chroma_create_collection says (TAP 197) */
				(errcode(strcmp(c.key, "index") == 0 ? ERRCODE_FEATURE_NOT_SUPPORTED
						 : ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("collection \"%s\" exists with %s %s, not %s",
						collection, c.key, c.existing, c.given),
				 errdetail("An existing collection keeps its configuration; only the keys the configuration gives are compared."),
				 strcmp(c.key, "index") == 0
				 ? errhint("Give the settings of its index, %s, or mirror into another collection.", c.existing)
				 : c.modifiable
				 ? errhint("Change it with chroma_modify_collection(), leave %s out of the configuration, or mirror into another collection.", c.key)
				 : errhint("Leave %s out of the configuration, or mirror into another collection.", c.key)));
	chroma_api_create_collection(collection, NULL, NULL, configuration, true, coll);
	if (configuration != NULL)
		chroma_check_configuration_made(collection, configuration, coll->configuration);
}

Datum
chroma_mirror(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	char	   *relname;
	char	   *collection;
	char	   *embedding_column = PG_ARGISNULL(3) ? NULL : NameStr(*PG_GETARG_NAME(3));
	char	   *document_column = PG_ARGISNULL(4) ? NULL : NameStr(*PG_GETARG_NAME(4));
	bool		backfill = PG_ARGISNULL(6) ? true : PG_GETARG_BOOL(6);
	bool		reconcile;
	bool		adopt = PG_NARGS() > 7 && !PG_ARGISNULL(7) && PG_GETARG_BOOL(7);
	char	   *filter = (PG_NARGS() > 8 && !PG_ARGISNULL(8)) ? text_to_cstring(PG_GETARG_TEXT_PP(8)) : NULL;
	char	   *filter_node = NULL;
	AttrNumber	id_atts[INDEX_MAX_KEYS];
	int			nid;
	AttrNumber	emb_att;
	AttrNumber	doc_att = 0;
	Datum	   *meta_atts = NULL;
	int			nmeta = 0;
	ChromaCollection coll;
	ChromaSavedUser su;
	int			mirror_id;
	char	   *qname;
	Bitmapset  *filter_atts = NULL;
	/* configuration: a new last argument in 0.5 */
	Jsonb	   *configuration = (PG_NARGS() > 10 && !PG_ARGISNULL(10)) ? PG_GETARG_JSONB_P(10) : NULL;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be null")));
	if (embedding_column == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("embedding_column must not be null")));
	if (configuration != NULL)
		chroma_check_configuration("configuration", configuration, false);
	relid = PG_GETARG_OID(0);
	if (!OidIsValid(get_rel_name(relid) ? relid : InvalidOid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot create a mirror during recovery")));

	rel = relation_open(relid, ShareRowExclusiveLock);
	relname = pstrdup(RelationGetRelationName(rel));
	/*
	 * A partitioned table is mirrored whole (partition.c): every leaf must be a permanent
	 * table the worker can read.
	 */
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		partition_check_leaves(relid, relname);
	else if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot mirror %s: it is not a table", relname)));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot mirror temporary table %s", relname),
				 errdetail("The sync worker cannot read another session's temporary tables.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot mirror unlogged table %s", relname),
				 errdetail("A crash empties an unlogged table without any change reaching the queue, so the collection would keep rows the table lost."),
				 errhint("Make it logged first: ALTER TABLE ... SET LOGGED.")));
	check_owner(relid, GetUserId());

	collection = PG_ARGISNULL(1) ? relname : text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (PG_ARGISNULL(1))
		check_default_collection_name(relname);
	else
		chroma_check_collection_name(collection);
	partition_check_collection(relid, collection);

	nid = id_column_attnums(fcinfo, relid, id_atts);
	nid = choose_id_columns(rel, id_atts, nid, id_atts);
	for (int i = 0; i < nid; i++)
		check_key_type(relid, id_atts[i]);
	emb_att = column_attnum(relid, embedding_column, "embedding");
	check_embedding_type(relid, emb_att);
	if (document_column)
		doc_att = column_attnum(relid, document_column, "document");
	if (!PG_ARGISNULL(5))
	{
		ArrayType  *a = PG_GETARG_ARRAYTYPE_P(5);
		Datum	   *names;
		bool	   *nulls;

		deconstruct_array(a, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &names, &nulls, &nmeta);
		meta_atts = palloc_array(Datum, Max(nmeta, 1));
		for (int i = 0; i < nmeta; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("metadata_columns must not contain null")));
			meta_atts[i] = Int16GetDatum(column_attnum(relid, NameStr(*DatumGetName(names[i])), "metadata"));
			for (int j = 0; j < i; j++)
				if (meta_atts[j] == meta_atts[i])
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("metadata column \"%s\" is listed twice",
									NameStr(*DatumGetName(names[i])))));
		}
	}
	qname = qualified_name(relid);
	relation_close(rel, NoLock);
	/* checked and bound as the table's owner: the tree is what runs, the text is shown */
	if (filter)
	{
		filter = mirror_filter_canonical(relid, filter, &filter_node);
		filter_atts = mirror_filter_attnums(relid, filter, filter_node);
	}

	chroma_become_extension_owner(&su);
	SPI_connect();
	{
		Oid			types[2] = {OIDOID, TEXTOID};
		Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(collection)};

		spi_exec("SELECT 1 FROM chroma_sync.mirror WHERE source = $1::oid AND collection = $2",
				 2, types, values, SPI_OK_SELECT);
		if (SPI_processed > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table %s is already mirrored into collection \"%s\"",
							relname, collection)));
	}

	if (collection_dropped_at_commit(collection))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("collection \"%s\" is dropped when this transaction commits", collection),
				 errdetail("chroma_unmirror(drop_collection => true) was called for it earlier in this transaction."),
				 errhint("Commit first, or mirror into another collection.")));

	/* The collection (network): created if missing, its dimension fixes the mirror's. */
	mirror_collection(collection, configuration, false, &coll);
	ownership_claim(&coll, ownership_tag(mirror_system_identifier(), MyDatabaseId, relid), adopt);

	/*
	 * After the backfill, ids the table lacks are deleted from the collection
	 * (reconciliation): needed only when the collection holds records already.
	 */
	reconcile = backfill && chroma_api_count(coll.id) > 0;

	{
		Oid			types[13] = {OIDOID, TEXTOID, TEXTOID, INT2ARRAYOID, INT2OID, INT2OID,
		INT2ARRAYOID, OIDOID, INT4OID, BOOLOID, TEXTOID, OIDOID, BOOLOID};
		Datum		values[13];
		char		nulls[13];
		Datum		idarr[INDEX_MAX_KEYS];
		bool		isnull;

		memset(nulls, ' ', sizeof(nulls));
		for (int i = 0; i < nid; i++)
			idarr[i] = Int16GetDatum(id_atts[i]);
		values[0] = ObjectIdGetDatum(relid);
		values[1] = CStringGetTextDatum(collection);
		values[2] = CStringGetTextDatum(coll.id);
		values[3] = PointerGetDatum(construct_array(idarr, nid, INT2OID, 2, true, TYPALIGN_SHORT));
		values[4] = Int16GetDatum(emb_att);
		values[5] = Int16GetDatum(doc_att);
		if (doc_att == 0)
			nulls[5] = 'n';
		values[6] = PointerGetDatum(construct_array(meta_atts, nmeta, INT2OID, 2, true, TYPALIGN_SHORT));
		values[7] = ObjectIdGetDatum(su.userid);	/* the worker reads with the creator's rights */
		values[8] = Int32GetDatum(coll.dimension);
		if (coll.dimension == 0)
			nulls[8] = 'n';
		values[9] = BoolGetDatum(backfill);
		values[10] = CStringGetTextDatum(mirror_system_identifier());
		values[11] = ObjectIdGetDatum(MyDatabaseId);
		values[12] = BoolGetDatum(reconcile);
		if (SPI_execute_with_args("INSERT INTO chroma_sync.mirror (source, collection, collection_id, "
								  "id_columns, embedding_column, document_column, metadata_columns, "
								  "owner, dimension, backfill_done, reconcile, system_identifier, "
								  "database_oid) VALUES ($1::oid::regclass, $2, $3::uuid, $4, $5, $6, "
								  "$7, $8, $9, NOT $10, $13, $11, $12) RETURNING mirror_id",
								  13, types, values, nulls, false, 1) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not record the mirror");
		mirror_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
	}

	{
		Oid			types[3] = {TEXTOID, TEXTOID, TEXTARRAYOID};
		Datum		values[3];
		char		nulls[3] = {filter ? ' ' : 'n', filter ? ' ' : 'n', filter ? ' ' : 'n'};

		/* the text for display, dump and chroma_adopt; the bound tree for every use */
		values[0] = filter ? CStringGetTextDatum(filter) : (Datum) 0;
		values[1] = filter ? CStringGetTextDatum(filter_node) : (Datum) 0;
		/* what it refers to, by name: chroma_adopt refuses a text that binds anything else */
		values[2] = filter ? mirror_filter_refs_datum(filter_node) : (Datum) 0;
		/* (a 0.4 catalog, before ALTER EXTENSION UPDATE, has no filter_node: the text alone) */
		if (SPI_execute_with_args(psprintf("UPDATE chroma_sync.mirror m SET column_types = "
										   "chroma_sync.mirror_column_types(m), filter = $1%s "
										   "WHERE mirror_id = %d",
										   mirror_filter_binds() ? ", filter_node = $2, filter_refs = $3" : "",
										   mirror_id),
								  3, types, values, nulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the mirror's column types");
	}
	/* requests of an earlier mirror of the collection that may still be applied */
	sync_unknown_adopt_collection(mirror_id);
	if (configuration != NULL)
	{
		Oid			types[2] = {INT4OID, JSONBOID};
		Datum		values[2] = {Int32GetDatum(mirror_id), JsonbPGetDatum(configuration)};

		/* what a collection created again for the mirror is created with */
		spi_exec("UPDATE chroma_sync.mirror SET configuration = $2 WHERE mirror_id = $1",
				 2, types, values, SPI_OK_UPDATE);
	}
	{
		AttrNumber *meta = palloc_array(AttrNumber, Max(1, nmeta));

		for (int i = 0; i < nmeta; i++)
			meta[i] = DatumGetInt16(meta_atts[i]);
		mirror_columns_record(mirror_id, relid, nid, id_atts, emb_att, doc_att, nmeta, meta, filter_atts);
	}

	/* Triggers fire also for logical replication apply: ENABLE ALWAYS. */
	spi_exec(psprintf("CREATE TRIGGER chroma_sync_%d AFTER INSERT OR UPDATE OR DELETE ON %s "
					  "FOR EACH ROW EXECUTE FUNCTION chroma_sync.capture('%d')",
					  mirror_id, qname, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
	spi_exec(psprintf("CREATE TRIGGER chroma_sync_%d_truncate AFTER TRUNCATE ON %s "
					  "FOR EACH STATEMENT EXECUTE FUNCTION chroma_sync.capture('%d')",
					  mirror_id, qname, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
	spi_exec(psprintf("CREATE TRIGGER chroma_sync_%d_flush AFTER INSERT OR UPDATE OR DELETE ON %s "
					  "FOR EACH STATEMENT EXECUTE FUNCTION chroma_sync.capture('%d')",
					  mirror_id, qname, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
	spi_exec(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER chroma_sync_%d, "
					  "ENABLE ALWAYS TRIGGER chroma_sync_%d_truncate, "
					  "ENABLE ALWAYS TRIGGER chroma_sync_%d_flush",
					  qname, mirror_id, mirror_id, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		/*
		 * The row triggers are cloned to the partitions; TRUNCATE of one partition takes
		 * its rows out (its own BEFORE trigger), unless the whole table's TRUNCATE is
		 * running (noted by this BEFORE trigger): the barrier clears everything.
		 */
		spi_exec(psprintf("CREATE TRIGGER chroma_sync_%d_truncate_begin BEFORE TRUNCATE ON %s "
						  "FOR EACH STATEMENT EXECUTE FUNCTION chroma_sync.capture('%d')",
						  mirror_id, qname, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
		spi_exec(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER chroma_sync_%d_truncate_begin",
						  qname, mirror_id), 0, NULL, NULL, SPI_OK_UTILITY);
		partition_leaf_triggers(mirror_id, relid, true);
	}
	/* DROP FUNCTION of what the filter calls is refused, as for a CHECK constraint */
	if (filter != NULL && mirror_filter_binds())
		mirror_filter_record_depends(relid, mirror_id, filter_node);
	SPI_finish();
	chroma_restore_user(&su);

	chroma_bump_config();
	chroma_check_worker_slot(MyDatabaseId);
	chroma_wake_at_commit();
	PG_RETURN_DATUM(DirectFunctionCall1(uuid_in, CStringGetDatum(coll.id)));
}

/*
 * The transaction has committed: failures can only be reported. Only the mirror's own
 * collection is dropped: the name may have been given to another collection since (a
 * rename), which may be another role's (red-team TAP 297).
 */
static void
drop_one_collection(const char *name, const char *id)
{
	MemoryContext ctx = CurrentMemoryContext;

	PG_TRY();
	{
		ChromaCollection coll;

		if (id == NULL)
			chroma_api_delete_collection(name, true);
		else if (chroma_api_get_collection_id(name, &coll, true))
		{
			if (pg_strcasecmp(coll.id, id) == 0)
				chroma_api_delete_collection(name, true);
			else
				ereport(WARNING,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("Chroma collection \"%s\" was not dropped: it is not the mirror's collection", name),
						 errdetail("The mirror wrote collection %s; the name now names collection %s (renamed?).",
								   id, coll.id),
						 errhint("Drop the mirror's collection under its new name with chroma_delete_collection().")));
		}
		else if (chroma_api_collection_id_exists(id))
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("Chroma collection \"%s\" was not dropped: it has another name now", name),
					 errdetail("The mirror wrote collection %s, which no collection named \"%s\" is any more (renamed?).",
							   id, name),
					 errhint("Drop it under its new name with chroma_delete_collection().")));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("could not drop Chroma collection \"%s\": %s", name, edata->message)));
	}
	PG_END_TRY();
}

static void
drop_collections_at_commit(XactEvent event, void *arg)
{
	List	   *drops;
	ListCell   *lc;

	if (drop_at_commit == NIL)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that drops a Chroma collection"),
				 errdetail("chroma_unmirror(drop_collection => true) drops the collection when its transaction commits, which a prepared transaction does in another session."),
				 errhint("Unmirror with drop_collection => false, and drop the collection with chroma_delete_collection() after COMMIT PREPARED.")));
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE)
	{
		drop_at_commit = NIL;
		return;
	}
	if (event != XACT_EVENT_COMMIT)
		return;
	drops = drop_at_commit;
	drop_at_commit = NIL;
	foreach(lc, drops)
		drop_one_collection(((PendingDrop *) lfirst(lc))->name, ((PendingDrop *) lfirst(lc))->id);
}

/* A rolled-back savepoint takes back its drops; a released one hands them to its parent. */
static void
drop_collections_at_subxact_end(SubXactEvent event, SubTransactionId mySubid,
								SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	List	   *kept = NIL;
	ListCell   *lc;
	MemoryContext old;

	if (drop_at_commit == NIL ||
		(event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB))
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	foreach(lc, drop_at_commit)
	{
		PendingDrop *d = (PendingDrop *) lfirst(lc);

		if (d->level < level)
			kept = lappend(kept, d);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			d->level = level - 1;
			kept = lappend(kept, d);
		}
	}
	MemoryContextSwitchTo(old);
	drop_at_commit = kept;
}

/* Whether this transaction is to drop the collection of that name when it commits. */
static bool
collection_dropped_at_commit(const char *name)
{
	ListCell   *lc;

	foreach(lc, drop_at_commit)
		if (strcmp(((PendingDrop *) lfirst(lc))->name, name) == 0)
			return true;
	return false;
}

/*
 * Waits until the worker has left the mirror (no step of it under way), with a request of
 * this call that it leave it (see shared.h). Called before any lock on the table or the
 * mirror row is taken: the worker finishing its batch needs both, so waiting while
 * holding them would only wait out the timeout.
 */
static void
wait_for_inflight(int mirror_id)
{
	for (int i = 0; i < 600; i++)
	{
		bool		busy = false;

		LWLockAcquire(chroma_shared->lock, LW_SHARED);
		for (int s = 0; s < CHROMA_MAX_DATABASES; s++)
			if (chroma_shared->slots[s].dboid == MyDatabaseId &&
				(chroma_shared->slots[s].busy_mirror == mirror_id ||
				 chroma_shared->slots[s].lent_from == mirror_id))
				busy = true;
		LWLockRelease(chroma_shared->lock);
		if (!busy)
			break;
		ConditionVariableTimedSleep(&chroma_shared->progress_cv, 100, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();
}

Datum
chroma_unmirror(PG_FUNCTION_ARGS)
{
	Oid			relid;
	bool		drop_collection;
	MirrorConfig *m;
	ChromaSavedUser su;
	Oid			types[1] = {INT4OID};
	Datum		values[1];
	int			stop;

	relid = owned_source(fcinfo);

	/* the worker leaves the mirror first, while we hold no lock it could wait for */
	chroma_become_extension_owner(&su);
	m = mirror_lookup(relid, optional_text(fcinfo, 2));
	chroma_restore_user(&su);

	/*
	 * The table first, then the mirror row: a worker's transaction reads the table and
	 * then updates the mirror row, so the other order could deadlock with it. Once the
	 * table's lock is held, the worker skips the mirror until it is released (this
	 * transaction or the savepoint that took it ends): the request can go.
	 */
	stop = chroma_stop_request(m->mirror_id);
	PG_TRY();
	{
		wait_for_inflight(m->mirror_id);
		LockRelationOid(relid, AccessExclusiveLock);
	}
	PG_FINALLY();
	{
		chroma_stop_release(stop);
	}
	PG_END_TRY();
	/* read after PG_TRY: nothing set before it is used after it (longjmp) */
	drop_collection = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	chroma_become_extension_owner(&su);
	m = mirror_lookup(relid, optional_text(fcinfo, 2));
	values[0] = Int32GetDatum(m->mirror_id);
	SPI_connect();
	spi_exec("SELECT 1 FROM chroma_sync.mirror WHERE mirror_id = $1 FOR UPDATE",
			 1, types, values, SPI_OK_SELECT);
	spi_exec(psprintf("DROP TRIGGER IF EXISTS chroma_sync_%d ON %s",
					  m->mirror_id, qualified_name(relid)), 0, NULL, NULL, SPI_OK_UTILITY);
	spi_exec(psprintf("DROP TRIGGER IF EXISTS chroma_sync_%d_truncate ON %s",
					  m->mirror_id, qualified_name(relid)), 0, NULL, NULL, SPI_OK_UTILITY);
	spi_exec(psprintf("DROP TRIGGER IF EXISTS chroma_sync_%d_flush ON %s",
					  m->mirror_id, qualified_name(relid)), 0, NULL, NULL, SPI_OK_UTILITY);
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
	{
		spi_exec(psprintf("DROP TRIGGER IF EXISTS chroma_sync_%d_truncate_begin ON %s",
						  m->mirror_id, qualified_name(relid)), 0, NULL, NULL, SPI_OK_UTILITY);
		partition_leaf_triggers(m->mirror_id, relid, false);
	}
	spi_exec("DELETE FROM chroma_sync.queue WHERE mirror_id = $1", 1, types, values, SPI_OK_DELETE);
	spi_exec("DELETE FROM chroma_sync.failed WHERE mirror_id = $1", 1, types, values, SPI_OK_DELETE);
	/*
	 * Kept for the collection even when it is to be dropped: the drop at commit may fail
	 * (a WARNING), and the collection lives on (red-team TAP 294). Keys kept for a
	 * collection that is gone are dropped by the worker (sync_unknown_collect).
	 */
	sync_unknown_forget_mirror(m->mirror_id, true);
	spi_exec("DELETE FROM chroma_sync.mirror WHERE mirror_id = $1", 1, types, values, SPI_OK_DELETE);
	SPI_finish();
	chroma_restore_user(&su);
	chroma_bump_config();

	if (drop_collection)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		PendingDrop *d;

		if (!drop_callback_registered)
		{
			RegisterXactCallback(drop_collections_at_commit, NULL);
			RegisterSubXactCallback(drop_collections_at_subxact_end, NULL);
			drop_callback_registered = true;
		}
		d = palloc(sizeof(PendingDrop));
		d->name = pstrdup(m->collection);
		d->id = m->collection_id ? pstrdup(m->collection_id) : NULL;
		d->level = GetCurrentTransactionNestLevel();
		drop_at_commit = lappend(drop_at_commit, d);
		MemoryContextSwitchTo(old);
	}
	PG_RETURN_VOID();
}

/* the keys of the DDL epoch's advisory lock, as in the update script's event trigger */
#define DDL_EPOCH_LOCK_KEY1 "1668505459"
#define DDL_EPOCH_LOCK_KEY2 "1701867363"

/*
 * Confirming a 0.4 text at the current DDL epoch: no DDL that advanced it may still be
 * uncommitted (its effects would show only after the confirmation, TAP 190). Each DDL
 * statement holds a shared advisory lock on the epoch until its transaction ends; this
 * one's own DDL does not conflict with it. Called inside SPI.
 */
static void
confirm_no_open_ddl(void)
{
	bool		isnull;

	/* taken and given back at once: no DDL waits for this transaction */
	if (SPI_execute("SELECT CASE WHEN pg_catalog.pg_try_advisory_lock(" DDL_EPOCH_LOCK_KEY1 ", " DDL_EPOCH_LOCK_KEY2 ") "
					"THEN pg_catalog.pg_advisory_unlock(" DDL_EPOCH_LOCK_KEY1 ", " DDL_EPOCH_LOCK_KEY2 ") ELSE false END",
					false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not lock the DDL epoch");
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		char	   *pids = NULL;

		if (SPI_execute("SELECT pg_catalog.string_agg(l.pid::pg_catalog.text, ', ' ORDER BY l.pid) "
						"FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' "
						"AND l.database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database "
						"WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
						"AND l.classid OPERATOR(pg_catalog.=) " DDL_EPOCH_LOCK_KEY1 "::pg_catalog.oid "
						"AND l.objid OPERATOR(pg_catalog.=) " DDL_EPOCH_LOCK_KEY2 "::pg_catalog.oid "
						"AND l.objsubid OPERATOR(pg_catalog.=) 2 AND l.granted "
						"AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()",
						true, 1) == SPI_OK_SELECT && SPI_processed == 1)
			pids = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("DDL of another transaction is still open: the filter of this mirror, stored by chroma_sync 0.4, cannot be confirmed now"),
				 errdetail("Resuming the mirror confirms that the filter's names still mean what they did; DDL not yet committed (by the process%s %s) may change that once it commits.",
						   pids != NULL && strchr(pids, ',') != NULL ? "es" : "", pids != NULL ? pids : "?"),
				 errhint("Wait for that transaction to commit or roll back, check the filter's names, then run chroma_resume() again.")));
	}
}

static void
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	MirrorConfig *m;
	ChromaSavedUser su;
	Oid			types[2] = {INT4OID, BOOLOID};
	Datum		values[2];

	m = owned_mirror(fcinfo, 1);
	chroma_become_extension_owner(&su);
	values[0] = Int32GetDatum(m->mirror_id);
	values[1] = BoolGetDatum(paused);
	SPI_connect();
	if (paused)
		spi_exec("UPDATE chroma_sync.mirror SET paused = true, "
				 "paused_reason = 'paused by chroma_pause()' WHERE mirror_id = $1 AND $2",
				 2, types, values, SPI_OK_UPDATE);
	else
	{
		spi_exec("UPDATE chroma_sync.mirror SET paused = false, paused_reason = NULL, "
				 "in_error = false, last_error = NULL, last_error_at = NULL "
				 "WHERE mirror_id = $1 AND NOT $2",
				 2, types, values, SPI_OK_UPDATE);
		/*
		 * DDL ran before the worker bound a 0.4 filter: resuming the mirror is the user's
		 * word that the text's names mean what they did (TAP 160), which the pause reason
		 * asks for; said again here, as the mirror may have been paused for another reason
		 * (TAP 145).
		 */
		if (m->filter_ddl_after_update && m->filter_node == NULL)
		{
			confirm_no_open_ddl();
			spi_exec("UPDATE chroma_sync.mirror SET filter_confirmed_epoch = " MIRROR_DDL_EPOCH " "
					 "WHERE mirror_id = $1 AND NOT $2",
					 2, types, values, SPI_OK_UPDATE);
			ereport(NOTICE,
					(errmsg("the sync worker binds the filter \"%s\" of this mirror, stored by chroma_sync 0.4, as its names read now",
							m->filter),
					 errdetail("DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the worker bound it; resuming the mirror confirms that its names still mean what they did.")));
		}
	}
	SPI_finish();
	chroma_restore_user(&su);
	chroma_bump_config();
	chroma_wake_at_commit();
}

Datum
chroma_pause(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
chroma_resume(PG_FUNCTION_ARGS)
{
	set_paused(fcinfo, false);
	PG_RETURN_VOID();
}

/* Mirror ids chosen by (source, collection); all mirrors when source is NULL. */
static ArrayType *
chosen_mirrors(FunctionCallInfo fcinfo, int src_arg, int coll_arg, Oid must_own, int *n)
{
	Datum	   *ids;

	if (PG_ARGISNULL(src_arg))
	{
		List	   *all = mirror_load_all();
		ListCell   *lc;
		int			k = 0;

		ids = palloc_array(Datum, Max(list_length(all), 1));
		foreach(lc, all)
		{
			MirrorConfig *m = (MirrorConfig *) lfirst(lc);

			if (OidIsValid(must_own) && !chroma_class_ownercheck(m->relid, must_own))
				continue;
			ids[k++] = Int32GetDatum(m->mirror_id);
		}
		*n = k;
	}
	else
	{
		Oid			relid = PG_GETARG_OID(src_arg);
		MirrorConfig *m;

		if (OidIsValid(must_own))
			check_owner(relid, must_own);
		m = mirror_lookup(relid, optional_text(fcinfo, coll_arg));
		ids = palloc_array(Datum, 1);
		ids[0] = Int32GetDatum(m->mirror_id);
		*n = 1;
	}
	return construct_array(ids, *n, INT4OID, 4, true, TYPALIGN_INT);
}

Datum
chroma_flush(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	int			n;
	ChromaSavedUser su;
	Interval   *timeout = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	int64		timeout_ms = 60000;
	TimestampTz deadline;
	int64		target;
	bool		done = false;
	Oid			types[2] = {INT4ARRAYOID, INT8OID};
	Datum		values[2];
	bool		isnull;
	bool		has_resend;
	bool		resend_seen = false;

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("chroma_flush() requires the READ COMMITTED isolation level"),
				 errdetail("It must see changes committed while it waits.")));
	if (timeout)
		timeout_ms = (int64) (timeout->time / 1000) +
			(int64) (timeout->day) * 86400000 + (int64) timeout->month * 30 * 86400000;
	if (timeout_ms < 0)
		timeout_ms = 0;

	chroma_become_extension_owner(&su);
	ids = chosen_mirrors(fcinfo, 0, 2, InvalidOid, &n);
	for (int i = 0; i < n; i++)
	{
		if (chroma_xact_wrote_mirror(((int32 *) ARR_DATA_PTR(ids))[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
					 errmsg("chroma_flush() cannot wait for changes of its own transaction"),
					 errhint("Commit the transaction that changed the table, then call chroma_flush().")));
	}
	values[0] = PointerGetDatum(ids);
	/* chroma_sync.resend came in 0.5 (before, unknown keys waited in the worker's memory) */
	has_resend = OidIsValid(get_relname_relid("resend", get_namespace_oid("chroma_sync", false)));
	SPI_connect();
	spi_exec("SELECT COALESCE(pg_catalog.max(qid), 0) FROM chroma_sync.queue "
			 "WHERE mirror_id = ANY ($1)", 1, types, values, SPI_OK_SELECT);
	target = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	values[1] = Int64GetDatum(target);

	chroma_wake_worker(MyDatabaseId);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	ConditionVariablePrepareToSleep(&chroma_shared->progress_cv);
	for (;;)
	{
		long		left;
		bool		parked;

		/*
		 * Keys parked in chroma_sync.resend (a request whose outcome is unknown may still
		 * be applied late) are queued again, with new queue ids, once the request timeout
		 * has passed: until then a change committed before this call may be in Chroma
		 * only in a stale state. Wait for them to leave resend, then for the entries they
		 * became (the worker moves them in one statement: a snapshot that no longer sees
		 * them in resend sees them queued).
		 */
		spi_exec(has_resend ?
				 "SELECT NOT EXISTS (SELECT 1 FROM chroma_sync.queue WHERE mirror_id = ANY ($1) "
				 "AND qid <= $2) AND NOT EXISTS (SELECT 1 FROM chroma_sync.mirror "
				 "WHERE mirror_id = ANY ($1) AND NOT backfill_done), "
				 "EXISTS (SELECT 1 FROM chroma_sync.resend WHERE mirror_id = ANY ($1)), "
				 "(SELECT COALESCE(pg_catalog.max(qid), 0) FROM chroma_sync.queue WHERE mirror_id = ANY ($1))" :
				 "SELECT NOT EXISTS (SELECT 1 FROM chroma_sync.queue WHERE mirror_id = ANY ($1) "
				 "AND qid <= $2) AND NOT EXISTS (SELECT 1 FROM chroma_sync.mirror "
				 "WHERE mirror_id = ANY ($1) AND NOT backfill_done), false, 0::bigint",
				 2, types, values, SPI_OK_SELECT);
		done = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		parked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		if (parked)
		{
			done = false;
			resend_seen = true;
		}
		else if (resend_seen)
		{
			/* they are queued now: wait for those entries too */
			int64		now_max = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc, 3, &isnull));

			resend_seen = false;
			if (now_max > target)
			{
				target = now_max;
				values[1] = Int64GetDatum(target);
				SPI_freetuptable(SPI_tuptable);
				continue;
			}
		}
		SPI_freetuptable(SPI_tuptable);
		if (done)
			break;
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (left <= 0)
			break;
		/* progress is announced on the condition variable; recheck at least every second */
		ConditionVariableTimedSleep(&chroma_shared->progress_cv, Min(left, 1000),
									PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	SPI_finish();
	chroma_restore_user(&su);
	PG_RETURN_BOOL(done);
}

/*
 * chroma_resync in the mirror's own database: the columns it reads (by attnum) are
 * recorded again with their names and types as they are now, so a rename or retype the
 * user intends becomes the mirror's (every row is sent again after it). Elsewhere (a
 * restored copy) the recorded columns must match.
 */
static void
record_columns_as_they_are(MirrorConfig *m)
{
	ChromaSavedUser su;
	Bitmapset  *filter_atts;

	/* a dropped column or a filter's column cannot be recorded again */
	if (!m->home || (m->column_problem != NULL && m->column_problem_fix != MIRROR_FIX_RESYNC))
	{
		mirror_columns_require(m, "resync");
		return;
	}
	for (int i = 0; i < m->nkeys; i++)
		check_key_type(m->relid, m->key_attnums[i]);
	check_embedding_type(m->relid, m->embedding_attnum);
	/* the filter as the caller reads it (a column it names that was renamed: an error here) */
	filter_atts = m->filter ? mirror_filter_attnums(m->relid, m->filter, m->filter_node) : NULL;
	chroma_become_extension_owner(&su);
	mirror_columns_record(m->mirror_id, m->relid, m->nkeys, m->key_attnums, m->embedding_attnum,
						  m->document_attnum, m->nmeta, m->meta_attnums, filter_atts);
	chroma_restore_user(&su);
}

Datum
chroma_resync(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MirrorConfig *m;
	ChromaSavedUser su;
	int64		rows;
	bool		isnull;

	m = owned_mirror(fcinfo, 1);
	relid = m->relid;
	record_columns_as_they_are(m);

	SPI_connect();
	/* the filter is the table owner's code: it runs with that role's rights, not the caller's */
	LockRelationOid(relid, AccessShareLock);
	{
		char	   *sql = psprintf("SELECT pg_catalog.count(*) FROM %s WHERE %s",
								   mirror_table_sql(m), mirror_present_sql(m));
		MirrorSavedUser ou;

		mirror_become_owner(m, &ou);
		spi_exec(sql, 0, NULL, NULL, SPI_OK_SELECT);
		mirror_restore_user(&ou);
	}
	rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	chroma_become_extension_owner(&su);
	{
		Oid			types[2] = {INT4OID, INT8OID};
		Datum		values[2] = {Int32GetDatum(m->mirror_id), Int64GetDatum(rows)};

		/* a new backfill_started_at: a page of the backfill under way no longer counts */
		spi_exec("UPDATE chroma_sync.mirror SET backfill_done = false, backfill_after = NULL, "
				 "backfill_sent = 0, backfill_total = $2, reconcile = true, "
				 "backfill_started_at = pg_catalog.clock_timestamp() WHERE mirror_id = $1",
				 2, types, values, SPI_OK_UPDATE);
	}
	SPI_finish();
	chroma_restore_user(&su);
	chroma_bump_config();
	chroma_wake_at_commit();
	PG_RETURN_INT64(rows);
}

Datum
chroma_retry_failed(PG_FUNCTION_ARGS)
{
	ArrayType  *ids;
	int			n;
	ChromaSavedUser su;
	int64		count;
	Oid			types[1] = {INT4ARRAYOID};
	Datum		values[1];

	chroma_become_extension_owner(&su);
	ids = chosen_mirrors(fcinfo, 0, 1, su.userid, &n);
	values[0] = PointerGetDatum(ids);
	SPI_connect();
	spi_exec("WITH f AS (DELETE FROM chroma_sync.failed WHERE mirror_id = ANY ($1) "
			 "RETURNING mirror_id, id) "
			 "INSERT INTO chroma_sync.queue (mirror_id, key) SELECT mirror_id, id FROM f",
			 1, types, values, SPI_OK_INSERT);
	count = (int64) SPI_processed;
	SPI_finish();
	chroma_restore_user(&su);
	chroma_wake_at_commit();
	PG_RETURN_INT64(count);
}

Datum
chroma_adopt(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MirrorConfig *m;
	ChromaSavedUser su;
	ChromaCollection coll;
	char	   *sysid = mirror_system_identifier();
	char	   *filter_node;

	m = owned_mirror(fcinfo, 1);
	relid = m->relid;
	/* found again by name in a restored copy; a mismatch is refused before Chroma is touched */
	mirror_columns_require(m, "adopt");

	/*
	 * A restored tree holds OIDs of another database: bound again here, as the table owner,
	 * refused when it binds other functions, operators or types than those recorded.
	 */
	filter_node = m->filter && mirror_filter_binds() ? mirror_filter_derive(m) : NULL;

	mirror_collection(m->collection, m->configuration, true, &coll);
	ownership_claim(&coll, ownership_tag(sysid, MyDatabaseId, relid), true);

	chroma_become_extension_owner(&su);
	SPI_connect();
	{
		Oid			types[5] = {INT4OID, TEXTOID, OIDOID, TEXTOID, TEXTOID};
		Datum		values[5] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(sysid),
			ObjectIdGetDatum(MyDatabaseId), CStringGetTextDatum(coll.id),
		filter_node ? CStringGetTextDatum(filter_node) : (Datum) 0};
		char		nulls[5] = {' ', ' ', ' ', ' ', filter_node ? ' ' : 'n'};

		/* this database now writes the collection: send everything, delete strays */
		if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET system_identifier = $2, database_oid = $3, "
								  "collection_id = $4::uuid, paused = false, paused_reason = NULL, in_error = false, "
								  "last_error = NULL, last_error_at = NULL, backfill_done = false, "
								  "backfill_after = NULL, backfill_sent = 0, reconcile = true, "
								  "backfill_started_at = pg_catalog.clock_timestamp() "
								  "WHERE mirror_id = $1",
								  4, types, values, nulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the adopted mirror");
		if (mirror_filter_binds() &&
			SPI_execute_with_args("UPDATE chroma_sync.mirror SET filter_node = $5 WHERE mirror_id = $1",
								  5, types, values, nulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the adopted mirror");
		/* keys queued with the attnums of another table (a restored copy): the backfill sends all */
		spi_exec("DELETE FROM chroma_sync.queue WHERE mirror_id = $1", 1, types, values, SPI_OK_DELETE);
	}
	/* the late requests of the mirrors it takes the collection from (red-team TAP 293) */
	sync_unknown_adopt_collection(m->mirror_id);
	mirror_columns_store(m);	/* the attnums of this table */
	/* pg_depend is not dumped: the copy's trigger depends on what this binding refers to */
	if (filter_node != NULL)
		mirror_filter_record_depends(relid, m->mirror_id, filter_node);
	SPI_finish();
	chroma_restore_user(&su);
	chroma_bump_config();
	chroma_wake_at_commit();
	PG_RETURN_VOID();
}
