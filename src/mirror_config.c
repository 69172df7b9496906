/*
 * mirror_config.c — a mirror's configuration (chroma_sync.mirror) and the SQL that
 * reads its rows. Columns are recorded by name, attnum and type and resolved on load
 * (mirror_columns.c); the SQL is generated from the current names, always quoted, and a
 * scalar metadata column's key is its recorded name.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "metadata.h"
#include "mirror_columns.h"
#include "mirror_config.h"

#define MIRROR_COLUMNS \
	"mirror_id, source::oid, collection, collection_id::text, id_columns, " \
	"embedding_column, document_column, metadata_columns, owner, dimension, " \
	"metadata_keys, paused, backfill_done, backfill_after, reconcile, " \
	"system_identifier, database_oid, filter, " \
	/* filter_node came in 0.5: NULL before ALTER EXTENSION UPDATE */ \
	"pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'filter_node'"
/*
 * 0.5 records the columns by name and type (columns 20-22), what the filter refers to (23)
 * and the table's OID when they were recorded (24); an older catalog has none
 */
#define MIRROR_COLUMNS_BY_NAME ", column_names::text[], column_attnums, column_type_names, filter_refs, source_oid"
#define MIRROR_COLUMNS_NONE ", NULL::text[], NULL::int2[], NULL::text[], NULL::text[], NULL::oid"

static AttrNumber *
int2_array(Datum d, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(d);
	Datum	   *elems;
	bool	   *nulls;
	AttrNumber *r;

	deconstruct_array(a, INT2OID, 2, true, TYPALIGN_SHORT, &elems, &nulls, n);
	r = palloc0_array(AttrNumber, Max(*n, 1));
	for (int i = 0; i < *n; i++)
		r[i] = DatumGetInt16(elems[i]);
	return r;
}

static char **
text_array(Datum d, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **r;

	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	r = palloc0_array(char *, Max(*n, 1));
	for (int i = 0; i < *n; i++)
		r[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);
	return r;
}

/*
 * The recorded columns (columns 19-21): keys, embedding, document (a NULL name when
 * there is none), metadata, then the filter's. Left NULL unless the three arrays are there
 * and agree with each other and with the attnum columns.
 */
static void
recorded_columns(MirrorConfig *m, HeapTuple tup, TupleDesc td)
{
	bool		n1,
				n2,
				n3;
	Datum		dn = SPI_getbinval(tup, td, 20, &n1);
	Datum		da = SPI_getbinval(tup, td, 21, &n2);
	Datum		dt = SPI_getbinval(tup, td, 22, &n3);
	char	  **names;
	char	  **types;
	AttrNumber *atts;
	int			nn,
				na,
				nt;
	int			fixed = m->nkeys + 2 + m->nmeta;

	if (n1 || n2 || n3)
		return;
	names = text_array(dn, &nn);
	types = text_array(dt, &nt);
	atts = int2_array(da, &na);
	if (nn != na || nn != nt || nn < fixed)
		return;
	m->ncolumns = nn;
	m->columns = palloc0_array(MirrorColumn, nn);
	m->meta_names = palloc0_array(char *, Max(m->nmeta, 1));
	for (int i = 0; i < nn; i++)
	{
		MirrorColumn *c = &m->columns[i];

		c->role = i < m->nkeys ? MIRROR_COLUMN_KEY :
			i == m->nkeys ? MIRROR_COLUMN_EMBEDDING :
			i == m->nkeys + 1 ? MIRROR_COLUMN_DOCUMENT :
			i < fixed ? MIRROR_COLUMN_METADATA : MIRROR_COLUMN_FILTER;
		c->name = names[i];
		c->attnum = atts[i];
		c->type = types[i];
		if (c->role == MIRROR_COLUMN_METADATA)
			m->meta_names[i - m->nkeys - 2] = c->name;
	}
}

static MirrorConfig *
config_from_tuple(HeapTuple tup, TupleDesc td, const char *sysid)
{
	MirrorConfig *m = palloc0_object(MirrorConfig);
	bool		isnull;
	Datum		d;

	m->mirror_id = DatumGetInt32(SPI_getbinval(tup, td, 1, &isnull));
	m->relid = DatumGetObjectId(SPI_getbinval(tup, td, 2, &isnull));
	m->collection = SPI_getvalue(tup, td, 3);
	m->collection_id = SPI_getvalue(tup, td, 4);
	m->key_attnums = int2_array(SPI_getbinval(tup, td, 5, &isnull), &m->nkeys);
	m->embedding_attnum = DatumGetInt16(SPI_getbinval(tup, td, 6, &isnull));
	d = SPI_getbinval(tup, td, 7, &isnull);
	m->document_attnum = isnull ? 0 : DatumGetInt16(d);
	m->meta_attnums = int2_array(SPI_getbinval(tup, td, 8, &isnull), &m->nmeta);
	m->owner = DatumGetObjectId(SPI_getbinval(tup, td, 9, &isnull));
	d = SPI_getbinval(tup, td, 10, &isnull);
	m->dimension = isnull ? 0 : DatumGetInt32(d);
	{
		ArrayType  *a = DatumGetArrayTypeP(SPI_getbinval(tup, td, 11, &isnull));
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &m->nknown);
		m->known_keys = palloc0_array(char *, Max(m->nknown, 1));
		for (int i = 0; i < m->nknown; i++)
			m->known_keys[i] = TextDatumGetCString(elems[i]);
	}
	m->paused = DatumGetBool(SPI_getbinval(tup, td, 12, &isnull));
	m->backfill_done = DatumGetBool(SPI_getbinval(tup, td, 13, &isnull));
	m->backfill_after = SPI_getvalue(tup, td, 14);
	m->reconcile = DatumGetBool(SPI_getbinval(tup, td, 15, &isnull));
	/* by name: it follows the columns, whose number depends on the catalog's version */
	d = SPI_getbinval(tup, td, SPI_fnumber(td, "backfill_started_at"), &isnull);
	m->backfill_run = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	m->system_identifier = SPI_getvalue(tup, td, 16);
	m->database_oid = DatumGetObjectId(SPI_getbinval(tup, td, 17, &isnull));
	m->filter = SPI_getvalue(tup, td, 18);
	m->filter_node = SPI_getvalue(tup, td, 19);
	m->filter_relname = SPI_getvalue(tup, td, SPI_fnumber(td, "filter_relname"));
	m->paused_reason = SPI_getvalue(tup, td, SPI_fnumber(td, "paused_reason"));
	d = SPI_getbinval(tup, td, SPI_fnumber(td, "configuration"), &isnull);
	if (!isnull)
	{
		Jsonb	   *cfg = DatumGetJsonbPCopy(d);

		m->configuration = JB_ROOT_IS_SCALAR(cfg) ? NULL : cfg;
	}
	{
		char	   *ddl = SPI_getvalue(tup, td, SPI_fnumber(td, "filter_ddl"));

		m->filter_ddl_after_update = ddl != NULL && strcmp(ddl, "true") == 0;
	}
	{
		bool		isnull_refs;
		Datum		refs = SPI_getbinval(tup, td, 23, &isnull_refs);

		/* 0.5: what the tree refers to, recorded when it was bound (NULL: not recorded) */
		if (!isnull_refs)
			m->filter_refs = text_array(refs, &m->nfilter_refs);
	}
	{
		bool		isnull_oid;
		Datum		recorded = SPI_getbinval(tup, td, 24, &isnull_oid);

		/*
		 * Made here: this database of this cluster, and the table it was recorded for (a
		 * pg_restore --clean over the same database gives the table another OID; NULL:
		 * recorded before 0.5, or a restored copy of such a mirror, told by the rest).
		 */
		m->home = m->database_oid == MyDatabaseId && m->system_identifier != NULL &&
			strcmp(m->system_identifier, sysid) == 0 &&
			(isnull_oid || DatumGetObjectId(recorded) == m->relid);
	}
	{
		/* by name too: the types (OIDs) of the keys, embedding, document and metadata */
		Datum		types = SPI_getbinval(tup, td, SPI_fnumber(td, "column_types"), &isnull);

		if (!isnull)
		{
			Datum	   *elems;
			bool	   *nulls;

			deconstruct_array(DatumGetArrayTypeP(types), OIDOID, sizeof(Oid), true, TYPALIGN_INT,
							  &elems, &nulls, &m->ncolumn_types);
			m->column_types = palloc0_array(Oid, Max(m->ncolumn_types, 1));
			for (int i = 0; i < m->ncolumn_types; i++)
				m->column_types[i] = nulls[i] ? InvalidOid : DatumGetObjectId(elems[i]);
		}
	}
	recorded_columns(m, tup, td);
	if (get_rel_name(m->relid) != NULL)
		mirror_columns_resolve(m);
	m->key_types = palloc0_array(Oid, Max(m->nkeys, 1));
	for (int i = 0; i < m->nkeys; i++)
		m->key_types[i] = get_atttype(m->relid, m->key_attnums[i]);
	return m;
}

bool
mirror_columns_by_name_exist(void)
{
	Oid			nsp = get_namespace_oid("chroma_sync", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("mirror", nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "column_names") != InvalidAttrNumber;
}

static List *
load_where(const char *where, int nargs, Oid *types, Datum *values)
{
	List	   *result = NIL;
	MemoryContext caller = CurrentMemoryContext;
	char	   *sysid = mirror_system_identifier();
	char	   *sql = psprintf("SELECT " MIRROR_COLUMNS "%s, backfill_started_at, column_types, paused_reason, "
						   /* 0.5: filter_relname, NULL before the update */
						   "pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'filter_relname' AS filter_relname, "
						   /* 0.5: DDL advanced the epoch past the one an unbound 0.4 text was confirmed at */
						   "(m.filter IS NOT NULL AND (pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'filter_node') IS NULL "
						   "AND (pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'filter_confirmed_epoch')::pg_catalog.int8 "
						   "OPERATOR(pg_catalog.<) " MIRROR_DDL_EPOCH ")::pg_catalog.text AS filter_ddl, "
						   /* 0.5: the collection's configuration (JSON null: none, or before the update) */
						   "pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->) 'configuration' AS configuration "
						   "FROM chroma_sync.mirror m %s ORDER BY mirror_id",
						   mirror_columns_by_name_exist() ? MIRROR_COLUMNS_BY_NAME : MIRROR_COLUMNS_NONE,
						   where);

	SPI_connect();
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read chroma_sync.mirror");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		result = lappend(result, config_from_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, sysid));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

List *
mirror_load_all(void)
{
	return load_where("", 0, NULL, NULL);
}

MirrorConfig *
mirror_load(int mirror_id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mirror_id)};
	List	   *l = load_where("WHERE mirror_id = $1", 1, types, values);

	return l ? (MirrorConfig *) linitial(l) : NULL;
}

MirrorConfig *
mirror_lookup(Oid relid, const char *collection)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	List	   *l;

	values[0] = ObjectIdGetDatum(relid);
	if (collection)
	{
		values[1] = CStringGetTextDatum(collection);
		l = load_where("WHERE source = $1::oid AND collection = $2", 2, types, values);
	}
	else
		l = load_where("WHERE source = $1::oid", 1, types, values);

	if (l == NIL)
	{
		if (collection)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("table %s has no mirror into collection \"%s\"",
							get_rel_name(relid), collection)));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not mirrored", get_rel_name(relid)),
				 errhint("Create a mirror with chroma_mirror().")));
	}
	if (list_length(l) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("table %s has %d mirrors", get_rel_name(relid), list_length(l)),
				 errhint("Name the mirror's collection in the last argument.")));
	return (MirrorConfig *) linitial(l);
}

static char *
column_sql(Oid relid, AttrNumber attnum)
{
	char	   *name = get_attname(relid, attnum, true);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %d of table %s used by a mirror no longer exists",
						attnum, get_rel_name(relid))));
	return pstrdup(quote_identifier(name));
}

char *
mirror_present_sql(MirrorConfig *m)
{
	char	   *emb = column_sql(m->relid, m->embedding_attnum);

	const char *filter = mirror_filter_sql(m);

	if (filter)
		return psprintf("(%s IS NOT NULL AND (%s) IS TRUE)", emb, filter);
	return psprintf("%s IS NOT NULL", emb);
}

/*
 * A key type's name for a cast of the id text: bpchar unbounded ("character" alone
 * would mean char(1) and cut the value to its first character).
 */
static char *
key_type_sql(Oid type)
{
	return format_type_extended(type, -1, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
}

/* Key column i's text: its output function, as the trigger's (::text trims a char(n)). */
static char *
key_text_sql(MirrorConfig *m, int i)
{
	Oid			outfn;
	bool		isvarlena;

	getTypeOutputInfo(m->key_types[i], &outfn, &isvarlena);
	return psprintf("pg_catalog.textin(%s(%s))",
					quote_qualified_identifier(get_namespace_name(get_func_namespace(outfn)),
											   get_func_name(outfn)),
					column_sql(m->relid, m->key_attnums[i]));
}

/* The id's text from the key columns (composite keys): see mirror_id_encode. */
static char *
key_id_sql(MirrorConfig *m)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '(');
	for (int i = 0; i < m->nkeys; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, " OPERATOR(pg_catalog.||) ',' OPERATOR(pg_catalog.||) ");
		appendStringInfo(&s, "pg_catalog.replace(pg_catalog.replace(%s, '%%', '%%25'), ',', '%%2C')",
						 key_text_sql(m, i));
	}
	appendStringInfoChar(&s, ')');
	return s.data;
}

/*
 * Part i (from 1) of the id text `id`, as the key column's base type: a domain's check
 * is no part of finding a row (one added NOT VALID rejects the key of a row the table
 * has, red-team TAP 285; a key no row can have finds none, TAP 295), and the comparison
 * is the base type's either way.
 */
static char *
key_part_sql(MirrorConfig *m, const char *id, int i)
{
	return psprintf("pg_catalog.replace(pg_catalog.replace((pg_catalog.string_to_array(%s, ','))[%d], "
					"'%%2C', ','), '%%25', '%%')::%s",
					id, i + 1, key_type_sql(getBaseType(m->key_types[i])));
}

/* The key column's base type, for a parameter compared with it (see key_part_sql). */
static char *
key_param_type_sql(MirrorConfig *m)
{
	return key_type_sql(getBaseType(m->key_types[0]));
}

static char *
key_columns_sql(MirrorConfig *m)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < m->nkeys; i++)
		appendStringInfo(&s, "%s%s", i > 0 ? ", " : "", column_sql(m->relid, m->key_attnums[i]));
	return s.data;
}

/* The decoded parts of the id text `id`, as a row (id text parts in key order). */
static char *
key_parts_sql(MirrorConfig *m, const char *id)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < m->nkeys; i++)
		appendStringInfo(&s, "%s%s", i > 0 ? ", " : "", key_part_sql(m, id, i));
	return s.data;
}

char *
mirror_key_sql(MirrorConfig *m)
{
	if (m->nkeys == 1)
		return column_sql(m->relid, m->key_attnums[0]);
	return key_id_sql(m);
}

char *
mirror_id_text_sql(MirrorConfig *m)
{
	if (m->nkeys == 1)
		return key_text_sql(m, 0);
	return key_id_sql(m);
}

char *
mirror_key_in_sql(MirrorConfig *m, const char *param)
{
	if (m->nkeys == 1)
		return psprintf("%s = ANY (%s::%s[])", column_sql(m->relid, m->key_attnums[0]), param,
						key_param_type_sql(m));
	return psprintf("(%s) IN (SELECT %s FROM pg_catalog.unnest(%s::pg_catalog.text[]) AS chroma_sync_ids(id))",
					key_columns_sql(m), key_parts_sql(m, "chroma_sync_ids.id"), param);
}

char *
mirror_key_cast_sql(MirrorConfig *m, const char *param)
{
	if (m->nkeys == 1)
		return psprintf("%s::pg_catalog.text::%s", param, key_param_type_sql(m));
	return key_parts_sql(m, psprintf("%s::pg_catalog.text", param));
}

char *
mirror_key_eq_sql(MirrorConfig *m, const char *param)
{
	char	   *id = psprintf("%s::pg_catalog.text", param);

	if (m->nkeys == 1)
		return psprintf("%s = %s::%s", column_sql(m->relid, m->key_attnums[0]), param,
						key_param_type_sql(m));
	return psprintf("(%s) = (%s)", key_columns_sql(m), key_parts_sql(m, id));
}

char *
mirror_key_after_sql(MirrorConfig *m, const char *param)
{
	char	   *id = psprintf("%s::pg_catalog.text", param);

	if (m->nkeys == 1)
		return psprintf("%s > %s::%s", column_sql(m->relid, m->key_attnums[0]), param,
						key_param_type_sql(m));
	return psprintf("(%s) > (%s)", key_columns_sql(m), key_parts_sql(m, id));
}

char *
mirror_key_not_null_sql(MirrorConfig *m)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < m->nkeys; i++)
		appendStringInfo(&s, "%s%s IS NOT NULL", i > 0 ? " AND " : "",
						 column_sql(m->relid, m->key_attnums[i]));
	return s.data;
}

char *
mirror_key_order_sql(MirrorConfig *m)
{
	return key_columns_sql(m);
}

char *
mirror_table_sql(MirrorConfig *m)
{
	char	   *nsp = get_namespace_name(get_rel_namespace(m->relid));
	char	   *rel = get_rel_name(m->relid);

	if (nsp == NULL || rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table of mirror %d no longer exists", m->mirror_id)));
	/*
	 * ONLY: an inheritance child's rows are not the mirror's (its triggers do not see
	 * them); a partitioned table's partitions are (its row triggers are cloned to them)
	 */
	return psprintf("%s%s.%s", get_rel_relkind(m->relid) == RELKIND_PARTITIONED_TABLE ? "" : "ONLY ",
					quote_identifier(nsp), quote_identifier(rel));
}

/*
 * The backfill page after the key $1 (when 'after'), in key order: its keys only, or
 * (rows) its rows as mirror_select_sql reads them.
 */
char *
mirror_backfill_page_sql(MirrorConfig *m, bool after, int limit, bool rows)
{
	char	   *tail = psprintf("WHERE %s%s%s ORDER BY %s LIMIT %d",
								mirror_key_not_null_sql(m), after ? " AND " : "",
								after ? mirror_key_after_sql(m, "$1") : "",
								mirror_key_order_sql(m), limit);

	if (rows)
		return mirror_select_sql(m, tail);
	return psprintf("SELECT %s FROM %s %s", mirror_key_sql(m), mirror_table_sql(m), tail);
}

/*
 * A number of a float or numeric column as jsonb: floats keep a fractional part (3.0,
 * not 3, so Chroma stores a float whatever the value), and NaN or infinity becomes an
 * object {"chroma:not_finite": ...} that the metadata check refuses with that reason
 * (to_jsonb would turn it into a string).
 */
static char *
number_sql(const char *x, Oid type)
{
	if (type == NUMERICOID)
		return psprintf("CASE WHEN %s OPERATOR(pg_catalog.=) ANY ('{NaN,Infinity,-Infinity}'::pg_catalog.numeric[]) "
						"THEN pg_catalog.jsonb_build_object('" METADATA_NOT_FINITE "', (%s)::pg_catalog.text) "
						"ELSE pg_catalog.to_jsonb(%s) END", x, x, x);
	return psprintf("CASE WHEN (%s)::pg_catalog.float8 OPERATOR(pg_catalog.=) ANY ('{NaN,Infinity,-Infinity}'::pg_catalog.float8[]) "
					"THEN pg_catalog.jsonb_build_object('" METADATA_NOT_FINITE "', (%s)::pg_catalog.text) "
					"ELSE pg_catalog.to_jsonb((%s)::pg_catalog.text::pg_catalog.numeric OPERATOR(pg_catalog.+) 0.0) END",
					x, x, x);
}

/* A metadata column's value as jsonb (to_jsonb, except for the numbers above). */
static char *
metadata_value_sql(char *col, Oid type)
{
	Oid			base = getBaseType(type);
	Oid			elem = get_element_type(base);

	if (base == FLOAT4OID || base == FLOAT8OID || base == NUMERICOID)
		return number_sql(col, base);
	if (OidIsValid(elem))
	{
		elem = getBaseType(elem);
		if (elem == FLOAT4OID || elem == FLOAT8OID || elem == NUMERICOID)
			/* element by element; empty and multidimensional arrays as they are (refused) */
			return psprintf("CASE WHEN pg_catalog.array_ndims(%s) = 1 THEN "
							"(SELECT pg_catalog.jsonb_agg(%s ORDER BY chroma_sync_e.o) "
							"FROM pg_catalog.unnest(%s) WITH ORDINALITY AS chroma_sync_e(x, o)) "
							"ELSE pg_catalog.to_jsonb(%s) END",
							col, number_sql("chroma_sync_e.x", elem), col, col);
	}
	return col;
}

char *
mirror_select_sql(MirrorConfig *m, const char *tail)
{
	StringInfoData s;
	char	   *table = mirror_table_sql(m);
	const char *filter = mirror_filter_sql(m);

	/* never read other columns than the mirrored ones: check them in the reading transaction */
	mirror_columns_resolve(m);
	mirror_columns_require(m, "read");
	initStringInfo(&s);
	if (filter)
		appendStringInfo(&s, "SELECT %s, CASE WHEN (%s) THEN (%s)::pg_catalog.float4[] END, ",
						 mirror_key_sql(m), filter, column_sql(m->relid, m->embedding_attnum));
	else
		appendStringInfo(&s, "SELECT %s, (%s)::pg_catalog.float4[], ",
						 mirror_key_sql(m), column_sql(m->relid, m->embedding_attnum));
	if (m->document_attnum > 0)
		appendStringInfo(&s, "(%s)::pg_catalog.text, ", column_sql(m->relid, m->document_attnum));
	else
		appendStringInfoString(&s, "NULL::pg_catalog.text, ");
	if (m->nmeta == 0)
		appendStringInfoString(&s, "NULL::pg_catalog.jsonb");
	else
	{
		appendStringInfoString(&s, "pg_catalog.jsonb_strip_nulls('{}'::pg_catalog.jsonb");
		for (int i = 0; i < m->nmeta; i++)
		{
			AttrNumber a = m->meta_attnums[i];
			/* the key is the name recorded when mirrored, whatever the column is called now */
			char	   *name = m->meta_names ? m->meta_names[i] : get_attname(m->relid, a, true);
			char	   *col = column_sql(m->relid, a);

			if (get_atttype(m->relid, a) == JSONBOID)
				appendStringInfo(&s, " OPERATOR(pg_catalog.||) COALESCE(%s, '{}'::pg_catalog.jsonb)", col);
			else
				appendStringInfo(&s, " OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(%s, %s)",
								 quote_literal_cstr(name),
								 metadata_value_sql(col, get_atttype(m->relid, a)));
		}
		appendStringInfoChar(&s, ')');
	}
	appendStringInfo(&s, " FROM %s %s", table, tail ? tail : "");
	return s.data;
}

char *
mirror_key_text(Oid key_type, Datum value)
{
	Oid			outfn;
	bool		isvarlena;

	getTypeOutputInfo(key_type, &outfn, &isvarlena);
	return OidOutputFunctionCall(outfn, value);
}

char *
mirror_id_encode(int n, char **parts)
{
	StringInfoData s;

	if (n == 1)
		return pstrdup(parts[0]);
	initStringInfo(&s);
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&s, MIRROR_ID_SEPARATOR);
		for (const char *p = parts[i]; *p; p++)
		{
			if (*p == '%')
				appendStringInfoString(&s, "%25");
			else if (*p == MIRROR_ID_SEPARATOR)
				appendStringInfoString(&s, "%2C");
			else
				appendStringInfoChar(&s, *p);
		}
	}
	return s.data;
}

char *
mirror_system_identifier(void)
{
	return psprintf(UINT64_FORMAT, GetSystemIdentifier());
}

void
mirror_fix_render_settings(void)
{
	static const char *const settings[][2] = {
		{"TimeZone", "UTC"},
		{"IntervalStyle", "postgres"},
		{"extra_float_digits", "1"},
		/* byteaout is immutable and obeys it: a filter over b::text (TAP 117) */
		{"bytea_output", "hex"},
		/* xmlelement renders bytea by it; xml input is read by xmloption (TAP 132) */
		{"xmlbinary", "base64"},
		{"xmloption", "content"},
	};

	for (size_t i = 0; i < lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1], PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * Names rendered the same in every session: what is recorded by name (column types, a
 * filter's references) is compared as text later, in other sessions (TAP 115).
 * Returns the GUC nest level to restore with AtEOXact_GUC(false, level).
 */
int
mirror_plain_names(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("quote_all_identifiers", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* The table's owner now; the table was dropped when there is none. */
static Oid
table_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("mirrored table with OID %u no longer exists", relid)));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

void
mirror_become_table_owner(Oid relid, MirrorSavedUser *s)
{
	Oid			owner = table_owner(relid);

	GetUserIdAndSecContext(&s->userid, &s->sec);
	s->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", MIRROR_OWNER_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(owner,
						   s->sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
}

void
mirror_become_owner(MirrorConfig *m, MirrorSavedUser *s)
{
	mirror_become_table_owner(m->relid, s);
}

/* Errors restore the user and settings at (sub)transaction abort. */
void
mirror_restore_user(MirrorSavedUser *s)
{
	SetUserIdAndSecContext(s->userid, s->sec);
	AtEOXact_GUC(false, s->guc_level);
}
