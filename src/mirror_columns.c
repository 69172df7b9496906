/*
 * mirror_columns.c — a mirror's columns by name and type.
 *
 * A mirror records each column it reads (keys, embedding, document, metadata, and the
 * columns its filter names) by name, attnum and type with its typmod. pg_dump leaves
 * dropped columns out, so a restored table's attnums can differ: in a restored copy the
 * columns are found again by name, and chroma_adopt refuses a copy whose columns no
 * longer match. In the mirror's own database a column is its attnum; DDL that changes
 * what would be sent (a scalar metadata column renamed: its name is the key; a type or
 * typmod changed: char(4) -> char(6) pads every id) pauses the mirror, a rename that
 * changes nothing sent is followed.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/nodeFuncs.h"
#include "nodes/readfuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "mirror_columns.h"
#include "pg_compat.h"

static const char *
role_name(MirrorColumnRole role)
{
	switch (role)
	{
		case MIRROR_COLUMN_KEY:
			return "id";
		case MIRROR_COLUMN_EMBEDDING:
			return "embedding";
		case MIRROR_COLUMN_DOCUMENT:
			return "document";
		case MIRROR_COLUMN_METADATA:
			return "metadata";
		case MIRROR_COLUMN_FILTER:
			return "filter";
	}
	return "mirrored";
}

/* The column's type as recorded: qualified (stable across search_path), with its typmod. */
static char *
column_type(Oid relid, AttrNumber attnum)
{
	HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
	Form_pg_attribute att;
	char	   *r = NULL;

	if (!HeapTupleIsValid(tup))
		return NULL;
	att = (Form_pg_attribute) GETSTRUCT(tup);
	if (!att->attisdropped)
	{
		int			level = mirror_plain_names();

		r = format_type_extended(att->atttypid, att->atttypmod,
								 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
		AtEOXact_GUC(false, level);
	}
	ReleaseSysCache(tup);
	return r;
}

/* The column's name now, or NULL when it was dropped (get_attname names dropped ones too). */
static char *
current_name(Oid relid, AttrNumber attnum)
{
	HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
	Form_pg_attribute att;
	char	   *r = NULL;

	if (!HeapTupleIsValid(tup))
		return NULL;
	att = (Form_pg_attribute) GETSTRUCT(tup);
	if (!att->attisdropped)
		r = pstrdup(NameStr(att->attname));
	ReleaseSysCache(tup);
	return r;
}

/* Whether a rename of this column changes nothing that is sent. */
static bool
rename_is_harmless(MirrorConfig *m, MirrorColumn *c)
{
	switch (c->role)
	{
		case MIRROR_COLUMN_KEY:
		case MIRROR_COLUMN_EMBEDDING:
		case MIRROR_COLUMN_DOCUMENT:
			return true;
		case MIRROR_COLUMN_METADATA:
			/* a jsonb column contributes its keys; any other is key = its name */
			return get_atttype(m->relid, c->attnum) == JSONBOID;
		case MIRROR_COLUMN_FILTER:
			/* a bound filter (0.5) refers to it by attnum; a 0.4 text names it */
			return m->filter_node != NULL;
	}
	return false;
}

static void
set_problem(MirrorConfig *m, MirrorColumn *c, int code, MirrorColumnFix fix, char *message)
{
	/*
	 * The first one is reported, unless a later one needs more than it: chroma_resync
	 * does not fix a filter's renamed column (TAP 157).
	 */
	if (m->column_problem != NULL && fix <= m->column_problem_fix)
		return;
	m->column_problem = message;
	m->column_problem_name = c->name;
	m->column_problem_code = code;
	m->column_problem_fix = fix;
}

/* In the status of a mirror paused for a change chroma_resync records. */
#define RESYNC_ADVICE "if the change is intended, run chroma_resync()"

void
mirror_columns_resolve(MirrorConfig *m)
{
	char	   *rel = get_rel_name(m->relid);

	m->column_problem = NULL;
	m->columns_renamed = false;
	if (rel == NULL)
		return;
	if (m->columns == NULL)
	{
		/* before 0.5: attnums only, which only mean something where they were taken */
		if (!m->home)
		{
			m->column_problem = psprintf("the mirror's columns were recorded by attnum only (a dump of chroma_sync before 0.5), "
										 "and a restored table's attnums need not be the original's");
			m->column_problem_name = "";
			m->column_problem_code = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
			m->column_problem_fix = MIRROR_FIX_REMIRROR;
		}
		return;
	}
	for (int i = 0, k = -1; i < m->ncolumns; i++)
	{
		MirrorColumn *c = &m->columns[i];
		AttrNumber	att;
		char	   *type;
		bool		filter = c->role == MIRROR_COLUMN_FILTER;

		if (!filter)
			k++;				/* its place in column_types */

		if (c->name == NULL)
			continue;			/* no document column */
		if (m->home)
		{
			char	   *now = current_name(m->relid, c->attnum);

			att = c->attnum;
			if (now == NULL)
			{
				set_problem(m, c, ERRCODE_UNDEFINED_COLUMN, MIRROR_FIX_REMIRROR,
							filter ? psprintf("column \"%s\" named by the mirror's filter was dropped", c->name)
							: psprintf("mirrored column \"%s\" (the %s column) was dropped", c->name, role_name(c->role)));
				continue;
			}
			if (strcmp(now, c->name) != 0)
			{
				if (rename_is_harmless(m, c))
					m->columns_renamed = true;
				else if (filter)
					set_problem(m, c, ERRCODE_UNDEFINED_COLUMN, MIRROR_FIX_UNDO,
								psprintf("column \"%s\" named by the mirror's filter was renamed to \"%s\"",
										 c->name, now));
				else
					set_problem(m, c, ERRCODE_UNDEFINED_COLUMN, MIRROR_FIX_RESYNC,
								psprintf("metadata column \"%s\" was renamed to \"%s\": its name is the metadata key "
										 "in Chroma, which would change for changed rows only", c->name, now));
			}
		}
		else
		{
			att = get_attnum(m->relid, c->name);
			if (att <= 0)
			{
				set_problem(m, c, ERRCODE_UNDEFINED_COLUMN, MIRROR_FIX_UNDO,
							psprintf("column \"%s\" (%s) does not exist in table %s",
									 c->name, filter ? "named by the mirror's filter"
									 : psprintf("the %s column", role_name(c->role)), rel));
				continue;
			}
		}
		type = column_type(m->relid, att);
		/*
		 * In its own database a column is also its type's OID: a type swapped by renames
		 * (ALTER TYPE ... CASCADE on a typed table, the new type renamed to the old name in
		 * one transaction) renders the same and is another type (TAP 135).
		 */
		if (type != NULL && m->home && !filter && m->column_types != NULL && k < m->ncolumn_types &&
			OidIsValid(m->column_types[k]) && get_atttype(m->relid, att) != m->column_types[k])
			type = psprintf(strcmp(type, c->type) == 0 ? "%s (another type of that name)" : "%s (another type)", type);
		if (type == NULL || strcmp(type, c->type) != 0)
		{
			set_problem(m, c, ERRCODE_DATATYPE_MISMATCH, filter ? MIRROR_FIX_UNDO : MIRROR_FIX_RESYNC,
						psprintf("the type of a %s changed: \"%s\" was %s, is now %s",
								 filter ? "column named by the mirror's filter" : "mirrored column",
								 c->name, c->type, type ? type : "(none)"));
			continue;
		}
		c->attnum = att;
		/* the recorded columns are in the order of the attnum columns (recorded_columns) */
		switch (c->role)
		{
			case MIRROR_COLUMN_KEY:
				m->key_attnums[i] = att;
				break;
			case MIRROR_COLUMN_EMBEDDING:
				m->embedding_attnum = att;
				break;
			case MIRROR_COLUMN_DOCUMENT:
				m->document_attnum = att;
				break;
			case MIRROR_COLUMN_METADATA:
				m->meta_attnums[i - m->nkeys - 2] = att;
				break;
			case MIRROR_COLUMN_FILTER:
				break;
		}
	}
}

char *
mirror_columns_status(MirrorConfig *m)
{
	switch (m->column_problem_fix)
	{
		case MIRROR_FIX_RESYNC:
			return psprintf("%s; " RESYNC_ADVICE " to record the columns as they are now "
							"and send every row again, then chroma_resume(); else undo it and run chroma_resume()",
							m->column_problem);
		case MIRROR_FIX_UNDO:
			return psprintf("%s; undo the change and run chroma_resume(), or unmirror and mirror the table again",
							m->column_problem);
		case MIRROR_FIX_REMIRROR:
			break;
	}
	return psprintf("%s; unmirror and mirror the table again", m->column_problem);
}

void
mirror_columns_require(MirrorConfig *m, const char *action)
{
	if (m->column_problem == NULL)
		return;
	ereport(ERROR,
			(errcode(m->column_problem_code),
			 errmsg("cannot %s the mirror of table %s into collection \"%s\": its columns changed",
					action, get_rel_name(m->relid), m->collection),
			 errdetail("In table %s, %s.", get_rel_name(m->relid), m->column_problem),
			 !m->home ? errhint("Make the table's columns match the mirror's (names and types as when it was mirrored), or unmirror it and mirror it again.")
			 : m->column_problem_fix == MIRROR_FIX_RESYNC ? errhint("Run chroma_resync() if the change is intended, or undo it.")
			 : m->column_problem_fix == MIRROR_FIX_UNDO ? errhint("Undo the change, or unmirror and mirror the table again.")
			 : errhint("Unmirror and mirror the table again.")));
}

typedef struct TextColumns
{
	Oid			relid;
	const char *db;
	const char *nsp;
	const char *rel;
	Bitmapset  *atts;
} TextColumns;

static bool
field_is(List *f, int i, const char *name)
{
	return list_length(f) > i && IsA(list_nth(f, i), String) && strcmp(strVal(list_nth(f, i)), name) == 0;
}

/*
 * The column a raw ColumnRef names: db.nsp.rel.col, nsp.rel.col, rel.col or col (then
 * maybe fields); every column for rel.* or * (ROW(rel.*) reads them all).
 */
static bool
text_columns_walker(Node *node, TextColumns *t)
{
	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
	{
		List	   *f = ((ColumnRef *) node)->fields;
		int			k = 0;
		Node	   *col;

		if (list_length(f) >= 4 && field_is(f, 0, t->db) && field_is(f, 1, t->nsp) && field_is(f, 2, t->rel))
			k = 3;
		else if (list_length(f) >= 3 && field_is(f, 0, t->nsp) && field_is(f, 1, t->rel))
			k = 2;
		else if (list_length(f) >= 2 && field_is(f, 0, t->rel))
			k = 1;				/* the table's name first, as the parser takes it */
		col = list_nth(f, k);
		if (IsA(col, A_Star))
		{
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(t->relid));
			int			natts = 0;

			if (HeapTupleIsValid(tup))
			{
				natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
				ReleaseSysCache(tup);
			}
			for (AttrNumber a = 1; a <= natts; a++)
				if (current_name(t->relid, a) != NULL)
					t->atts = bms_add_member(t->atts, a);
		}
		else if (IsA(col, String))
		{
			AttrNumber	a = get_attnum(t->relid, strVal(col));

			if (a > 0)
				t->atts = bms_add_member(t->atts, a);
		}
		return false;
	}
	return raw_expression_tree_walker(node, text_columns_walker, (void *) t);
}

Bitmapset *
mirror_filter_attnums(Oid relid, const char *filter, const char *filter_node)
{
	Bitmapset  *vars = NULL;
	Bitmapset  *r = NULL;
	int			x = -1;

	if (filter_node == NULL)
	{
		/*
		 * A filter stored by 0.4 as text: the columns its names name, from the raw parse
		 * tree, whose constants are not read (a date that this session's DateStyle
		 * refuses, TAP 143). The scanner reads backslashes by standard_conforming_strings,
		 * which the worker may have otherwise than this session: the text is parsed both
		 * ways and the columns of either are taken (TAP 155). More than it reads is safe:
		 * the worker binds the text only to columns recorded here, none of them renamed
		 * since (mirror_filter.c).
		 */
		TextColumns t = {relid, get_database_name(MyDatabaseId), get_namespace_name(get_rel_namespace(relid)),
		get_rel_name(relid), NULL};
		/* on a line of its own: a filter may end in a -- comment (TAP 154) */
		char	   *sql = psprintf("SELECT 1 FROM ONLY %s WHERE (%s\n)",
								   quote_qualified_identifier(t.nsp, t.rel), filter);
		bool		parsed = false;

		for (int scs = 0; scs < 2; scs++)
		{
			MemoryContext mcxt = CurrentMemoryContext;
			ResourceOwner owner = CurrentResourceOwner;
			int			level = NewGUCNestLevel();

			(void) set_config_option("standard_conforming_strings", scs ? "on" : "off", PGC_USERSET,
									 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
			BeginInternalSubTransaction(NULL);
			PG_TRY();
			{
				List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
				RawStmt    *stmt;

				if (list_length(raw) == 1 && IsA((stmt = linitial_node(RawStmt, raw))->stmt, SelectStmt))
				{
					(void) text_columns_walker(((SelectStmt *) stmt->stmt)->whereClause, &t);
					parsed = true;
				}
				ReleaseCurrentSubTransaction();
			}
			PG_CATCH();
			{
				MemoryContextSwitchTo(mcxt);
				FlushErrorState();
				RollbackAndReleaseCurrentSubTransaction();
			}
			PG_END_TRY();
			MemoryContextSwitchTo(mcxt);
			CurrentResourceOwner = owner;
			AtEOXact_GUC(false, level);
		}
		if (!parsed)
			elog(ERROR, "could not parse the filter of a mirror");
		return t.atts;
	}
	/* the bound tree (0.5): its columns by attnum, whatever they are called now */
	pull_varattnos(stringToNode(filter_node), 1, &vars);
	while ((x = bms_next_member(vars, x)) >= 0)
	{
		AttrNumber	a = x + FirstLowInvalidHeapAttributeNumber;

		if (a > 0)
			r = bms_add_member(r, a);
		else if (a == 0)
		{
			/* the whole row (t.*, or a name that no longer names a column: TAP 160) */
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
			int			natts = 0;

			if (HeapTupleIsValid(tup))
			{
				natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
				ReleaseSysCache(tup);
			}
			for (AttrNumber c = 1; c <= natts; c++)
				if (current_name(relid, c) != NULL)
					r = bms_add_member(r, c);
		}
	}
	return r;
}

/* Writes names/attnums/types (and the attnum columns) of mirror_id. */
static void
store(int mirror_id, int n, MirrorColumn *cols, int nkeys, int nmeta)
{
	Datum	   *names = palloc0_array(Datum, Max(n, 1));
	Datum	   *atts = palloc0_array(Datum, Max(n, 1));
	Datum	   *types = palloc0_array(Datum, Max(n, 1));
	bool	   *nulls = palloc0_array(bool, Max(n, 1));
	Datum	   *keys = palloc0_array(Datum, Max(nkeys, 1));
	Datum	   *meta = palloc0_array(Datum, Max(nmeta, 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Oid			argtypes[8] = {INT4OID, TEXTARRAYOID, INT2ARRAYOID, TEXTARRAYOID,
	INT2ARRAYOID, INT2OID, INT2OID, INT2ARRAYOID};
	Datum		values[8];
	char		argnulls[8];
	AttrNumber	emb = 0;
	AttrNumber	doc = 0;
	int			k = 0;
	int			mm = 0;

	if (!mirror_columns_by_name_exist())
		return;					/* a catalog before 0.5: columns are kept by attnum only */
	memset(argnulls, ' ', sizeof(argnulls));
	for (int i = 0; i < n; i++)
	{
		nulls[i] = cols[i].name == NULL;
		names[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum(cols[i].name);
		atts[i] = Int16GetDatum(cols[i].attnum);
		types[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum(cols[i].type);
		if (cols[i].role == MIRROR_COLUMN_KEY && k < nkeys)
			keys[k++] = Int16GetDatum(cols[i].attnum);
		else if (cols[i].role == MIRROR_COLUMN_EMBEDDING)
			emb = cols[i].attnum;
		else if (cols[i].role == MIRROR_COLUMN_DOCUMENT)
			doc = cols[i].attnum;
		else if (cols[i].role == MIRROR_COLUMN_METADATA && mm < nmeta)
			meta[mm++] = Int16GetDatum(cols[i].attnum);
	}
	values[0] = Int32GetDatum(mirror_id);
	values[1] = PointerGetDatum(construct_md_array(names, nulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	/* a missing document column keeps attnum 0 in column_attnums, as a placeholder */
	values[2] = PointerGetDatum(construct_md_array(atts, NULL, 1, dims, lbs, INT2OID, 2, true, TYPALIGN_SHORT));
	values[3] = PointerGetDatum(construct_md_array(types, nulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	values[4] = PointerGetDatum(construct_array(keys, k, INT2OID, 2, true, TYPALIGN_SHORT));
	values[5] = Int16GetDatum(emb);
	values[6] = Int16GetDatum(doc);
	if (doc == 0)
		argnulls[6] = 'n';
	values[7] = PointerGetDatum(construct_array(meta, mm, INT2OID, 2, true, TYPALIGN_SHORT));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET column_names = $2::pg_catalog.name[], "
							  "column_attnums = $3, column_type_names = $4, id_columns = $5, "
							  "embedding_column = $6, document_column = $7, metadata_columns = $8, "
							  "source_oid = source::pg_catalog.oid "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1", 8, argtypes, values, argnulls, false, 0) != SPI_OK_UPDATE ||
		SPI_execute_with_args("UPDATE chroma_sync.mirror m SET column_types = chroma_sync.mirror_column_types(m) "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1", 1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the columns of mirror %d", mirror_id);
	SPI_finish();
}

static void
set_column(MirrorColumn *c, MirrorColumnRole role, Oid relid, AttrNumber att)
{
	c->role = role;
	c->attnum = att;
	if (att == 0)
		return;					/* no document column */
	c->name = current_name(relid, att);
	c->type = column_type(relid, att);
	/* dropped under 0.4 (the update records a mirror made before it: TAP 146) */
	if (c->name == NULL || c->type == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %d of table %s, %s, no longer exists",
						att, get_rel_name(relid),
						role == MIRROR_COLUMN_FILTER ? "named by the mirror's filter"
						: psprintf("the mirror's %s column", role_name(role))),
				 errhint("Unmirror the table and mirror it again.")));
}

void
mirror_columns_record(int mirror_id, Oid relid, int nkeys, const AttrNumber *keys,
					  AttrNumber embedding, AttrNumber document, int nmeta,
					  const AttrNumber *meta, const Bitmapset *fatts)
{
	int			n = nkeys + 2 + nmeta + bms_num_members(fatts);
	MirrorColumn *cols = palloc0_array(MirrorColumn, n);
	int			i = 0;
	int			x = -1;

	for (int k = 0; k < nkeys; k++)
		set_column(&cols[i++], MIRROR_COLUMN_KEY, relid, keys[k]);
	set_column(&cols[i++], MIRROR_COLUMN_EMBEDDING, relid, embedding);
	set_column(&cols[i++], MIRROR_COLUMN_DOCUMENT, relid, document);
	for (int k = 0; k < nmeta; k++)
		set_column(&cols[i++], MIRROR_COLUMN_METADATA, relid, meta[k]);
	while ((x = bms_next_member(fatts, x)) >= 0)
		set_column(&cols[i++], MIRROR_COLUMN_FILTER, relid, (AttrNumber) x);
	store(mirror_id, n, cols, nkeys, nmeta);
}

void
mirror_columns_store(MirrorConfig *m)
{
	if (m->columns == NULL)
		return;
	store(m->mirror_id, m->ncolumns, m->columns, m->nkeys, m->nmeta);
}

bool
mirror_columns_apply(MirrorConfig *m)
{
	if (!m->home || m->columns == NULL)
		return false;
	mirror_columns_resolve(m);
	if (m->column_problem != NULL && m->paused)
	{
		/*
		 * Checked again by chroma_resume. Paused for a change chroma_resync records, and
		 * now one it does not: the reason names that one (TAP 157).
		 */
		if (m->column_problem_fix != MIRROR_FIX_RESYNC)
		{
			Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
			Datum		values[3] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(mirror_columns_status(m)),
			CStringGetTextDatum(RESYNC_ADVICE)};

			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET paused_reason = $2, last_error = $2, "
									  "last_error_at = pg_catalog.now() WHERE mirror_id OPERATOR(pg_catalog.=) $1 "
									  "AND pg_catalog.strpos(paused_reason, $3) OPERATOR(pg_catalog.>) 0",
									  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not record why mirror %d is paused", m->mirror_id);
			SPI_finish();
		}
		return false;
	}
	if (m->column_problem != NULL)
	{
		char	   *status = mirror_columns_status(m);
		Oid			types[2] = {INT4OID, TEXTOID};
		Datum		values[2] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(status)};

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET paused = true, paused_reason = $2, "
								  "in_error = true, last_error = $2, last_error_at = pg_catalog.now() "
								  "WHERE mirror_id OPERATOR(pg_catalog.=) $1", 2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not pause mirror %d", m->mirror_id);
		SPI_finish();
		m->paused = true;
		return true;
	}
	if (m->columns_renamed)
	{
		/* the new names, so that a dump of the mirror names the columns as they are */
		for (int i = 0; i < m->ncolumns; i++)
			if (m->columns[i].name != NULL)
				m->columns[i].name = current_name(m->relid, m->columns[i].attnum);
		mirror_columns_store(m);
		m->columns_renamed = false;
	}
	return false;
}

/* The type and typmod the bound filter read column attnum with (its Var), if it reads it. */
static bool
filter_var_type(MirrorConfig *m, AttrNumber attnum, Oid *type, int32 *typmod)
{
	List	   *vars;
	ListCell   *lc;

	if (m->filter_node == NULL)
		return false;
	vars = pull_var_clause(stringToNode(m->filter_node), PVC_RECURSE_PLACEHOLDERS);
	foreach(lc, vars)
	{
		Var		   *v = (Var *) lfirst(lc);

		if (v->varattno == attnum)
		{
			*type = v->vartype;
			*typmod = v->vartypmod;
			return true;
		}
	}
	return false;
}

/*
 * The type a recorded type name names now (a shell type too: never an error, this runs
 * in the event trigger of unrelated DDL, TAP 142); InvalidOid when none.
 */
static Oid
named_type(const char *name)
{
	TypeName   *tn = chroma_type_string_to_name(name);
	Type		tup = LookupTypeName(NULL, tn, NULL, true);
	Oid			r = InvalidOid;

	if (tup != NULL)
	{
		r = typeTypeId(tup);
		ReleaseSysCache(tup);
	}
	return r;
}

bool
mirror_columns_follow_type_renames(MirrorConfig *m, bool rowtypes_only)
{
	Datum		types_datum;
	bool		isnull;
	Datum	   *types = NULL;
	bool	   *nulls = NULL;
	int			ntypes = 0;
	int			k = 0;
	bool		changed = false;
	bool		typed;

	if (!m->home || m->columns == NULL)
		return false;
	/* most DDL renames nothing a mirror records: no catalog read then */
	for (int i = 0; i < m->ncolumns && !changed; i++)
	{
		char	   *now = m->columns[i].name == NULL ? NULL : column_type(m->relid, m->columns[i].attnum);

		changed = now != NULL && strcmp(now, m->columns[i].type) != 0;
	}
	if (!changed)
		return false;
	changed = false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * ALTER TYPE ... ALTER ATTRIBUTE ... CASCADE changes the column types of a typed table
	 * and of the tables that inherit from it
	 */
	if (SPI_execute_with_args("WITH RECURSIVE up(r) AS (SELECT $1 UNION SELECT i.inhparent "
							  "FROM pg_catalog.pg_inherits i, up WHERE i.inhrelid OPERATOR(pg_catalog.=) up.r) "
							  "SELECT pg_catalog.bool_or(c.reloftype OPERATOR(pg_catalog.<>) 0::pg_catalog.oid) "
							  "FROM up, pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) up.r",
							  1, (Oid[]) {OIDOID}, (Datum[]) {ObjectIdGetDatum(m->relid)}, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read the ancestors of table %u", m->relid);
	typed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) && !isnull;

	/* the type OIDs recorded for the keys, embedding, document and metadata, in that order */
	if (SPI_execute_with_args("SELECT column_types FROM chroma_sync.mirror WHERE mirror_id OPERATOR(pg_catalog.=) $1",
							  1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(m->mirror_id)}, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the column types of mirror %d", m->mirror_id);
	types_datum = (Datum) 0;
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			types_datum = SPI_datumTransfer(d, false, -1);
	}
	SPI_finish();
	if (types_datum != (Datum) 0)
		deconstruct_array(DatumGetArrayTypeP(types_datum), OIDOID, sizeof(Oid), true, TYPALIGN_INT,
						  &types, &nulls, &ntypes);

	for (int i = 0; i < m->ncolumns; i++)
	{
		MirrorColumn *c = &m->columns[i];
		bool		filter = c->role == MIRROR_COLUMN_FILTER;
		Oid			was = InvalidOid;
		int32		was_typmod = -1;
		Oid			now;
		int32		now_typmod;
		char	   *type;

		if (!filter)
		{
			if (k < ntypes && !nulls[k])
				was = DatumGetObjectId(types[k]);
			k++;
		}
		if (c->name == NULL || current_name(m->relid, c->attnum) == NULL)
			continue;
		type = column_type(m->relid, c->attnum);
		if (type == NULL || strcmp(type, c->type) == 0)
			continue;
		get_atttypetypmodcoll(m->relid, c->attnum, &now, &now_typmod, &(Oid) {0});
		if (rowtypes_only && !OidIsValid(get_typ_typrelid(now)))
			continue;
		if (filter && m->filter_node == NULL)
		{
			/*
			 * A 0.4 text, not bound yet, has no Var to compare with. DDL on other objects
			 * changes no column type of a table with no typed ancestor: a new name of the
			 * column's type is a rename (TAP 152).
			 */
			if (rowtypes_only || typed || named_type(c->type) == now)
				continue;
			c->type = type;
			changed = true;
			continue;
		}
		if (filter)
		{
			/* the bound filter's Var: the same type and typmod, renamed */
			if (!filter_var_type(m, c->attnum, &was, &was_typmod) || was_typmod != now_typmod)
				continue;
		}
		else if (typed && named_type(c->type) == now)
		{
			/*
			 * The recorded name still names the column's type: ALTER TYPE ... ALTER
			 * ATTRIBUTE ... CASCADE changed its typmod, no rename (each command is seen
			 * by itself: a rename and a typmod change never come in one). The mirror
			 * pauses (mirror_columns_resolve).
			 */
			continue;
		}
		if (was != now)
			continue;			/* another type: the mirror pauses (mirror_columns_resolve) */
		c->type = type;
		changed = true;
	}
	if (changed)
		mirror_columns_store(m);
	return changed;
}

bool
mirror_columns_filter_intact(MirrorConfig *m)
{
	if (!m->home || m->columns == NULL)
		return m->column_problem == NULL;
	for (int i = 0; i < m->ncolumns; i++)
		if (m->columns[i].role == MIRROR_COLUMN_FILTER &&
			current_name(m->relid, m->columns[i].attnum) == NULL)
			return false;
	return true;
}
