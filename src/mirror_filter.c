/*
 * mirror_filter.c — a mirror's row filter: parsed alone as exactly one boolean expression
 * over the table's row, checked (immutable functions only, no subquery, aggregate,
 * window or set-returning function, no parameter, no cast to a domain whose CHECK calls a
 * mutable function) and bound once, as PostgreSQL binds a CHECK constraint: chroma_mirror
 * stores the analyzed tree (filter_node: columns by attnum, functions and operators by
 * OID) next to its deparsed text (filter, for display, dump and chroma_adopt). Generated
 * SQL never embeds the filter: it calls chroma_sync_filter.match(mirror_id, row), which
 * evaluates the stored tree on the row. Renames change nothing; an overload planted later
 * is never chosen. A tree stored in another database or cluster (a restored copy), or
 * none (stored by 0.4), is derived again from the text, as the table owner, with the
 * pinned search_path. The text is written with fixed settings (DateStyle ISO...) and read
 * back with them; what the tree refers to (functions, operators, types, collations by
 * name) is recorded with it (filter_refs), and a text that binds anything else is refused.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_ts_config.h"
#include "catalog/pg_ts_dict.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "commands/extension.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "mirror_columns.h"
#include "mirror_config.h"
#include "pg_compat.h"
#include "trigger.h"

PG_FUNCTION_INFO_V1(chroma_sync_filter_match);

/* A position in an error is one in the filter, not in the caller's statement. */
static void
filter_error_context(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
	errcontext("mirror filter: %s", (const char *) arg);
}

pg_noreturn static void
refuse(const char *filter, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid mirror filter: %s", filter),
			 errdetail_internal("%s", detail),
			 errhint("A filter is one boolean expression over the table's columns, with immutable functions only, e.g. filter => 'published AND lang = ''en'''.")));
}

/* The one expression of `filter`, as parsed alone: nothing but one unnamed target. */
static Node *
parse_one_expression(const char *filter)
{
	List	   *raw = raw_parser(filter, RAW_PARSE_PLPGSQL_EXPR);
	SelectStmt *sel;
	ResTarget  *target;

	/* this mode yields one SELECT (anything else is a syntax error) */
	if (list_length(raw) != 1 || !IsA(((RawStmt *) linitial(raw))->stmt, SelectStmt))
		elog(ERROR, "an expression did not parse as one SELECT");
	sel = (SelectStmt *) ((RawStmt *) linitial(raw))->stmt;
	if (sel->op != SETOP_NONE || list_length(sel->targetList) != 1 ||
		sel->distinctClause != NIL || sel->fromClause != NIL || sel->whereClause != NULL ||
		sel->groupClause != NIL || sel->havingClause != NULL || sel->windowClause != NIL ||
		sel->sortClause != NIL || sel->limitCount != NULL || sel->limitOffset != NULL ||
		sel->lockingClause != NIL || sel->withClause != NULL || sel->intoClause != NULL ||
		sel->valuesLists != NIL)
		refuse(filter, "A filter is exactly one expression, not a list or a clause.");
	target = linitial_node(ResTarget, sel->targetList);
	if (target->name != NULL || target->indirection != NIL)
		refuse(filter, "A filter is exactly one expression, without a column alias.");
	return target->val;
}

static bool
contains_sublink(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink))
		return true;
	return raw_expression_tree_walker(node, contains_sublink, context);
}

static void
set_search_path(const char *path)
{
	(void) set_config_option("search_path", path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/* A domain, or one it is based on, with a CHECK constraint that calls a mutable function. */
static bool
domain_check_is_mutable(Oid typid)
{
	while (get_typtype(typid) == TYPTYPE_DOMAIN)
	{
		Relation	con = table_open(ConstraintRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;
		bool		mutable = false;

		ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(typid));
		scan = systable_beginscan(con, ConstraintTypidIndexId, true, NULL, 1, &key);
		while (!mutable && HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_constraint c = (Form_pg_constraint) GETSTRUCT(tup);
			bool		isnull;
			Datum		bin;

			if (c->contype != CONSTRAINT_CHECK)
				continue;
			bin = heap_getattr(tup, Anum_pg_constraint_conbin, RelationGetDescr(con), &isnull);
			if (!isnull)
				mutable = contain_mutable_functions(stringToNode(TextDatumGetCString(bin)));
		}
		systable_endscan(scan);
		table_close(con, AccessShareLock);
		if (mutable)
			return true;
		{
			/* one step down: a domain over a domain has the constraints of both */
			HeapTuple	t = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));

			if (!HeapTupleIsValid(t))
				elog(ERROR, "cache lookup failed for type %u", typid);
			typid = ((Form_pg_type) GETSTRUCT(t))->typbasetype;
			ReleaseSysCache(t);
		}
	}
	return false;
}

static bool
mutable_domain_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, CoerceToDomain) && domain_check_is_mutable(((CoerceToDomain *) node)->resulttype))
		return true;
	return expression_tree_walker(node, mutable_domain_walker, context);
}

/*
 * A function called with fewer arguments than it takes gets its DEFAULTs when the tree is
 * planned (at each evaluation): those expressions must be immutable too (TAP 127).
 */
static bool
mutable_default_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) node;
		HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(f->funcid));

		if (HeapTupleIsValid(tup))
		{
			Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
			bool		isnull;
			Datum		defaults;
			bool		mutable = false;

			if (proc->pronargdefaults > 0)
			{
				defaults = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proargdefaults, &isnull);
				mutable = !isnull &&
					contain_mutable_functions(stringToNode(TextDatumGetCString(defaults)));
			}
			ReleaseSysCache(tup);
			if (mutable)
				return true;
		}
	}
	return expression_tree_walker(node, mutable_default_walker, context);
}

static bool
function_missing(Oid funcid, void *context)
{
	return !SearchSysCacheExists1(PROCOID, ObjectIdGetDatum(funcid));
}

typedef struct BoundCheck
{
	Oid			relid;
	const char *problem;		/* set when the tree no longer fits the table */
} BoundCheck;

/* Every Var is a live column of the table, of the type it had; every function exists. */
static bool
bound_walker(Node *node, void *context)
{
	BoundCheck *bc = (BoundCheck *) context;

	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varno != 1 || var->varlevelsup != 0 || var->varattno < 0)
		{
			bc->problem = "It reads something other than a column of the table's row.";
			return true;
		}
		if (var->varattno == 0)
		{
			if (var->vartype != get_rel_type_id(bc->relid))
			{
				bc->problem = "Its whole-row reference is not of the table's row type.";
				return true;
			}
		}
		else
		{
			HeapTuple	tup = SearchSysCacheAttNum(bc->relid, var->varattno);
			bool		ok = false;

			if (HeapTupleIsValid(tup))
			{
				Form_pg_attribute att = (Form_pg_attribute) GETSTRUCT(tup);

				ok = !att->attisdropped && att->atttypid == var->vartype;
				ReleaseSysCache(tup);
			}
			if (!ok)
			{
				bc->problem = psprintf("Column %d of the table, which it reads, was dropped or changed its type.",
									   var->varattno);
				return true;
			}
		}
		return false;
	}
	if (check_functions_in_node(node, function_missing, NULL))
	{
		bc->problem = "A function or operator it calls was dropped.";
		return true;
	}
	return expression_tree_walker(node, bound_walker, context);
}

/*
 * The checks of a filter's tree, at chroma_mirror and at each use: it fits the table as
 * it is now, calls only immutable functions, casts to no domain with a mutable CHECK.
 */
static void
check_bound(Oid relid, Node *expr, const char *filter)
{
	BoundCheck	bc = {relid, NULL};

	if (exprType(expr) != BOOLOID)
		refuse(filter, "A filter is a boolean expression.");
	if (bound_walker(expr, &bc))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the mirror filter %s no longer fits its table", filter),
				 errdetail_internal("%s", bc.problem),
				 errhint("Re-create the mirror with chroma_unmirror and chroma_mirror.")));
	if (contain_mutable_functions(expr))
		refuse(filter, "A filter may call only immutable functions (not volatile or stable ones such as now() or current_setting()): a row's place in the collection must depend on the row alone.");
	if (mutable_domain_walker(expr, NULL))
		refuse(filter, "A filter must not cast to a domain whose CHECK constraint calls a function that is not immutable (such as now()).");
	if (mutable_default_walker(expr, NULL))
		refuse(filter, "A filter may call only functions whose DEFAULT arguments are immutable expressions: a row's place in the collection must depend on the row alone.");
}

/*
 * The settings a filter's text is written and read back in: constants render the same in
 * every session and database (a date as 2024-03-04, not 04/03/2024 under 'SQL, DMY'; a
 * timestamptz with its offset; floats exactly; backslashes in strings as they are), and
 * that text reads back identically.
 * Returns the GUC nest level to restore with AtEOXact_GUC(false, level).
 */
static int
fixed_text_settings(void)
{
	static const char *const settings[][2] = {
		{"DateStyle", "ISO, YMD"},
		/* floats exactly (the worker renders them with 1) */
		{"extra_float_digits", "3"},
		/* 'x\ty' is four characters and a backslash, whatever the session reads it as */
		{"standard_conforming_strings", "on"},
		/* '{en,NULL}' holds a NULL, whatever the database reads it as (TAP 113) */
		{"array_nulls", "on"},
		/* names quoted only where needed, so that texts compare equal (TAP 115) */
		{"quote_all_identifiers", "off"},
	};
	int			level = NewGUCNestLevel();

	/* as the worker renders values: TimeZone, IntervalStyle, bytea_output, xml (TAP 117, 132) */
	mirror_fix_render_settings();
	for (size_t i = 0; i < lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1], PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* The text of a tree, names as they are now, in the pinned search_path (qualified outside pg_catalog). */
static char *
deparse(Oid relid, Node *expr)
{
	int			level = fixed_text_settings();
	char	   *text = deparse_expression(expr, deparse_context_for(get_rel_name(relid), relid),
										  false, false);

	AtEOXact_GUC(false, level);

	/* operators and boolean expressions deparse parenthesized, anything else is wrapped */
	if (!IsA(expr, OpExpr) && !IsA(expr, BoolExpr))
		text = psprintf("(%s)", text);
	return text;
}

/*
 * Runs as the table's owner (mirror_become_table_owner): USAGE on schemas is checked for
 * that role. Names resolve in parse_path (NULL: the pinned search_path); the deparsed
 * text qualifies every name the pinned path would not find. *node: the analyzed tree.
 */
static char *
canonical_as_owner(Oid relid, const char *filter, const char *parse_path, bool fixed,
				   const char *alias, char **node)
{
	/* the fixed settings before the scanner runs (standard_conforming_strings) */
	int			level = fixed ? fixed_text_settings() : -1;
	Node	   *raw = parse_one_expression(filter);
	Relation	rel = relation_open(relid, AccessShareLock);
	ParseState *pstate = make_parsestate(NULL);
	ParseNamespaceItem *nsitem;
	Node	   *expr;
	char	   *text;

	if (contains_sublink(raw, NULL))
		refuse(filter, "A filter must not contain a subquery: a change to another table would not re-send the row.");
	pstate->p_sourcetext = filter;
	if (parse_path)
		set_search_path(parse_path);
	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
										   alias ? makeAlias(alias, NIL) : NULL, false, true);
	addNSItemToQuery(pstate, nsitem, true, true, true);
	/* a WHERE clause's rules: no aggregate, window or set-returning function, no $n */
	expr = transformExpr(pstate, raw, EXPR_KIND_WHERE);
	expr = coerce_to_boolean(pstate, expr, "a mirror filter");
	assign_expr_collations(pstate, expr);
	if (pstate->p_hasSubLinks)
		refuse(filter, "A filter must not contain a subquery: a change to another table would not re-send the row.");
	check_bound(relid, expr, filter);
	if (fixed)
		AtEOXact_GUC(false, level);

	if (parse_path)
		set_search_path(MIRROR_OWNER_SEARCH_PATH);
	text = deparse(relid, expr);
	*node = nodeToString(expr);
	free_parsestate(pstate);
	relation_close(rel, AccessShareLock);
	return text;
}

/*
 * alias: the name the filter's text calls the table by, when it is no longer the table's
 * (a 0.4 text filter, whose table was renamed since the update recorded its columns)
 */
static char *
canonical(Oid relid, const char *filter, const char *parse_path, bool fixed, const char *alias,
		  char **node)
{
	MirrorSavedUser su;
	ErrorContextCallback cb;
	char	   *text;

	cb.callback = filter_error_context;
	cb.arg = (void *) filter;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	mirror_become_table_owner(relid, &su);
	text = canonical_as_owner(relid, filter, parse_path, fixed, alias, node);
	mirror_restore_user(&su);
	error_context_stack = cb.previous;
	return text;
}

char *
mirror_filter_canonical(Oid relid, const char *filter, char **node)
{
	/* the names the caller wrote, as the caller's search_path finds them */
	return canonical(relid, filter, pstrdup(namespace_search_path), false, NULL, node);
}

/*
 * An object a bound tree refers to (mirror_filter_objects), by name as pg_dump would write
 * it: functions (regprocedure), operators (regoperator), types and collations,
 * schema-qualified.
 */
static char *
ref_name(const ObjectAddress *a)
{
	switch (a->classId)
	{
		case ProcedureRelationId:
			return psprintf("function %s", format_procedure_qualified(a->objectId));
		case OperatorRelationId:
			return psprintf("operator %s", format_operator_qualified(a->objectId));
		case TypeRelationId:
			return psprintf("type %s", format_type_extended(a->objectId, -1, FORMAT_TYPE_FORCE_QUALIFY));
		case CollationRelationId:
			{
				HeapTuple	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(a->objectId));
				Form_pg_collation c;
				char	   *name;

				if (!HeapTupleIsValid(tup))
					elog(ERROR, "cache lookup failed for collation %u", a->objectId);
				c = (Form_pg_collation) GETSTRUCT(tup);
				name = psprintf("collation %s",
								quote_qualified_identifier(get_namespace_name(c->collnamespace),
														   NameStr(c->collname)));
				ReleaseSysCache(tup);
				return name;
			}
		case RelationRelationId:
			/* a relation of a regclass constant, or the field of a composite a filter reads */
			return psprintf("%s %s", a->objectSubId != 0 ? "column" : "relation",
							getObjectIdentity(a, false));
		case TSConfigRelationId:
			return psprintf("text search configuration %s", getObjectIdentity(a, false));
		case TSDictionaryRelationId:
			return psprintf("text search dictionary %s", getObjectIdentity(a, false));
		case NamespaceRelationId:
			return psprintf("schema %s", getObjectIdentity(a, false));
		case OperatorFamilyRelationId:
			return psprintf("operator family %s", getObjectIdentity(a, false));
		default:
			elog(ERROR, "unexpected object class %u in a filter's references", a->classId);
	}
	return NULL;				/* keep the compiler quiet */
}

static int
cmp_ref(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

char	  **
mirror_filter_refs(const char *node, int *n)
{
	int			len;
	ObjectAddress *objs = mirror_filter_objects(node, &len);
	char	  **r = palloc0_array(char *, Max(len, 1));
	int			k = 0;
	int			level = mirror_plain_names();

	for (int i = 0; i < len; i++)
		r[i] = ref_name(&objs[i]);
	AtEOXact_GUC(false, level);
	qsort(r, len, sizeof(char *), cmp_ref);
	/* sorted and each once: a set */
	for (int i = 0; i < len; i++)
		if (k == 0 || strcmp(r[k - 1], r[i]) != 0)
			r[k++] = r[i];
	*n = k;
	return r;
}

Datum
mirror_filter_refs_datum(const char *node)
{
	int			n;
	char	  **r = mirror_filter_refs(node, &n);
	Datum	   *d = palloc_array(Datum, Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(r[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static bool
ref_in(const char *ref, char **refs, int n)
{
	for (int i = 0; i < n; i++)
		if (refs[i] != NULL && strcmp(refs[i], ref) == 0)
			return true;
	return false;
}

bool		mirror_filter_in_worker = false;

/*
 * A filter stored by 0.4 as text is bound by its sync worker only, in its own database:
 * the worker reads it with the settings 0.4's worker read it with (its role's and
 * database's, the server's command line, the configuration as last loaded), which no
 * other session can know (TAP 111, 118, 128, 129, 134, 137). Its columns are those
 * recorded by the update (by attnum): text that now binds a column not recorded (a name
 * swapped by renames since) is refused, not bound to it (TAP 099).
 */
/* The mirror's table as chroma_resume's argument in advice: a literal of its qualified name. */
static char *
resume_argument(MirrorConfig *m)
{
	return quote_literal_cstr(quote_qualified_identifier(get_namespace_name(get_rel_namespace(m->relid)),
														 get_rel_name(m->relid)));
}

static void
check_04_ready(MirrorConfig *m, MirrorConfig *now)
{
	if (!m->home || !mirror_filter_in_worker)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter of mirror %d, stored by chroma_sync 0.4, is not bound yet", m->mirror_id),
				 errdetail("After ALTER EXTENSION chroma_sync UPDATE, the sync worker of the mirror's database binds the filter \"%s\" the first time it loads the mirror, with the settings the worker of 0.4 read it with.",
						   m->filter),
				 !m->home ? errhint("Unmirror the table and mirror it again: the original database did not bind the filter before it was dumped.")
				 : (now != NULL && now->filter_ddl_after_update)
				 ? errhint("DDL ran after the update, so the worker binds it only once confirmed: check that its names still mean what they did, run chroma_resume(%s) to have the worker bind it as they read now, then this again.",
						   resume_argument(m))
				 : errhint("Wait for the worker (chroma_sync.worker_databases must include this database), or unmirror the table and mirror it again.")));
	/*
	 * DDL since the update may have changed what the text's names mean, in ways no record
	 * of columns can tell (a function or a type's field swapped by renames, an overload
	 * created or dropped, a column renamed to the table's name: TAP 160-169). The user
	 * confirms the text with chroma_resume(). Checked before the text is read at all.
	 */
	if (now != NULL && now->filter_ddl_after_update)
	{
		m->filter_needs_confirmation = true;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(MIRROR_FILTER_DDL_REASON " \"%s\", stored by chroma_sync 0.4 as text", m->filter),
				 errdetail("Its names may now mean other columns, functions or types than they did."),
				 errhint("Check that they still mean what they did, then run chroma_resume(%s) to bind it so; or unmirror the table and mirror it again.",
						 resume_argument(m))));
	}
}

/*
 * The columns a 0.4 text binds: those recorded by the update, as the catalog records them
 * now (now), not in the configuration the worker loaded: the update (and renames in its
 * transaction) may have committed since (TAP 140). None recorded: the update could not
 * record them (TAP 146).
 */
static void
check_04_columns(MirrorConfig *m, MirrorConfig *now, const char *node)
{
	Bitmapset  *bound;
	Bitmapset  *recorded = NULL;

	if (now == NULL || now->columns == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter of mirror %d, stored by chroma_sync 0.4, cannot be bound: the mirror's columns were not recorded",
						m->mirror_id),
				 errdetail("ALTER EXTENSION chroma_sync UPDATE records the columns a filter stored as text reads, by name; it could not for this mirror."),
				 errhint("Unmirror the table and mirror it again.")));
	for (int i = 0; i < now->ncolumns; i++)
	{
		MirrorColumn *c = &now->columns[i];
		char	   *name = get_attname(m->relid, c->attnum, true);

		/* recorded, and called now as it was then */
		if (c->role == MIRROR_COLUMN_FILTER && name != NULL && c->name != NULL && strcmp(name, c->name) == 0)
			recorded = bms_add_member(recorded, c->attnum);
	}
	bound = mirror_filter_attnums(m->relid, NULL, node);
	/*
	 * Each column the text binds now was recorded by the update, and is still called as it
	 * was then (mirror_columns_resolve pauses the mirror otherwise): so the text read it
	 * then too. One it binds that was not recorded may have taken its name since.
	 */
	if (!bms_is_subset(bound, recorded))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the filter of mirror %d, stored by chroma_sync 0.4, now reads other columns than it did", m->mirror_id),
				 errdetail("Its text \"%s\" names columns of table %s that were renamed since ALTER EXTENSION chroma_sync UPDATE recorded them.",
						   m->filter, get_rel_name(m->relid)),
				 errhint("Undo the renames, or unmirror the table and mirror it again.")));
}

char *
mirror_filter_derive(MirrorConfig *m)
{
	char	   *node;
	char	  **now;
	int			n;
	char	   *alias = NULL;
	MirrorConfig *fresh = NULL;

	/*
	 * A 0.4 text names the table as it was called when the update recorded the columns the
	 * text reads (e.m = 'happy', TAP 153): bound under that name, as the update parsed it,
	 * if the table was renamed since.
	 */
	if (m->filter_refs == NULL && m->filter_node == NULL)
	{
		char	   *rel = get_rel_name(m->relid);

		/* as the catalog has it now: the update may have committed since m was loaded (TAP 166) */
		fresh = mirror_load(m->mirror_id);
		check_04_ready(m, fresh);
		if (fresh != NULL && fresh->filter_relname != NULL && rel != NULL &&
			strcmp(rel, fresh->filter_relname) != 0)
			alias = fresh->filter_relname;
	}
	/* text recorded with its references was written with the fixed settings: read it so */
	(void) canonical(m->relid, m->filter, NULL, m->filter_refs != NULL, alias, &node);
	if (m->filter_refs == NULL)
	{
		/* stored by 0.4 (or bound before references were recorded): the text alone */
		if (m->filter_node == NULL)
		{
			check_04_columns(m, fresh, node);
			/*
			 * Checked again once bound: DDL whose effects the binding read committed after
			 * advancing the epoch (its event trigger runs before its commit), so it shows
			 * now if it did not before (the epoch is read outside any snapshot).
			 */
			check_04_ready(m, mirror_load(m->mirror_id));
		}
		return node;
	}
	now = mirror_filter_refs(node, &n);
	for (int i = 0; i < n; i++)
		if (!ref_in(now[i], m->filter_refs, m->nfilter_refs))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the filter of mirror %d binds to other objects here than where it was stored",
							m->mirror_id),
					 errdetail("Bound again from its text \"%s\", it now refers to %s, which it did not when it was stored.",
							   m->filter, now[i]),
					 errhint("Drop or rename what was created since (an overload in a schema the filter names, for instance), or re-create the mirror with chroma_unmirror and chroma_mirror.")));
	for (int i = 0; i < m->nfilter_refs; i++)
		if (!ref_in(m->filter_refs[i], now, n))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the filter of mirror %d binds to other objects here than where it was stored",
							m->mirror_id),
					 errdetail("Bound again from its text \"%s\", it no longer refers to %s, as it did when it was stored.",
							   m->filter, m->filter_refs[i]),
					 errhint("Create what is missing, or re-create the mirror with chroma_unmirror and chroma_mirror.")));
	return node;
}

Node *
mirror_filter_bound(MirrorConfig *m)
{
	Node	   *expr;

	if (m->filter == NULL)
		return NULL;
	if (m->filter_node != NULL && m->home)
		expr = stringToNode(m->filter_node);
	else
	{
		/* stored by 0.4, or restored: bound again from the text (stored by the worker, chroma_adopt) */
		m->filter_node_derived = MemoryContextStrdup(GetMemoryChunkContext(m),
													 mirror_filter_derive(m));
		expr = stringToNode(m->filter_node_derived);
	}
	check_bound(m->relid, expr, m->filter);
	return expr;
}

char *
mirror_filter_text_of(Oid relid, const char *node)
{
	MirrorSavedUser su;
	char	   *text;

	mirror_become_table_owner(relid, &su);
	text = deparse(relid, stringToNode(node));
	mirror_restore_user(&su);
	return text;
}

char *
mirror_filter_text_now(MirrorConfig *m)
{
	/* (a function dropped with CASCADE: the mirror pauses, its trigger gone) */
	if (m->filter == NULL || m->filter_node == NULL || !m->home ||
		!mirror_filter_refs_exist(m->filter_node))
		return NULL;
	return mirror_filter_text_of(m->relid, m->filter_node);
}

void
mirror_filter_store_bound(MirrorConfig *m, const char *node)
{
	char	   *text = mirror_filter_text_of(m->relid, node);
	Oid			types[4] = {INT4OID, TEXTOID, TEXTARRAYOID, TEXTOID};
	Datum		values[4] = {Int32GetDatum(m->mirror_id), CStringGetTextDatum(node),
		mirror_filter_refs_datum(node), CStringGetTextDatum(text)};
	MemoryContext mcxt = GetMemoryChunkContext(m);

	/*
	 * The tree is what every later use evaluates, with what it refers to (checked by
	 * chroma_adopt), its text written again with the fixed settings (read back with them)
	 * and its dependencies recorded.
	 */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET filter_node = $2, filter_refs = $3, filter = $4, filter_relname = NULL "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1 AND filter_node IS NULL",
							  4, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the filter of mirror %d", m->mirror_id);
	SPI_finish();
	mirror_filter_record_depends(m->relid, m->mirror_id, node);
	m->filter_node = MemoryContextStrdup(mcxt, node);
	m->filter = MemoryContextStrdup(mcxt, text);
}

void
mirror_filter_follow_names(MirrorConfig *m)
{
	char	   *text = mirror_filter_text_now(m);
	Oid			types[3] = {INT4OID, TEXTOID, TEXTARRAYOID};
	Datum		values[3];

	if (text == NULL)
		return;
	values[0] = Int32GetDatum(m->mirror_id);
	values[1] = CStringGetTextDatum(text);
	/*
	 * The references, by their names now too: chroma_adopt checks the text against them.
	 * A rename can change them and not the text (a composite type whose field the filter
	 * reads, TAP 123).
	 */
	values[2] = mirror_filter_refs_datum(m->filter_node);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE chroma_sync.mirror SET filter = $2, filter_refs = $3 "
							  "WHERE mirror_id OPERATOR(pg_catalog.=) $1 AND (filter IS DISTINCT FROM $2 "
							  "OR filter_refs IS DISTINCT FROM $3)",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the filter of mirror %d", m->mirror_id);
	SPI_finish();
	m->filter = MemoryContextStrdup(GetMemoryChunkContext(m), text);
}

/* Where chroma_sync_filter.match exists (0.5; before ALTER EXTENSION UPDATE it does not). */
#define FILTER_SCHEMA "chroma_sync_filter"

bool
mirror_filter_binds(void)
{
	Oid			nsp = get_namespace_oid(FILTER_SCHEMA, true);

	/* the extension's own schema, not one of that name someone created before the update */
	return OidIsValid(nsp) &&
		getExtensionOfObject(NamespaceRelationId, nsp) == get_extension_oid("chroma_sync", true);
}

const char *
mirror_filter_sql(MirrorConfig *m)
{
	if (m->filter == NULL)
		return NULL;
	if (m->filter_sql == NULL)
	{
		char	   *text;
		MemoryContext mcxt = GetMemoryChunkContext(m);

		/* a filter that no longer passes pauses the worker's mirror (worker.c) */
		m->filter_invalid = true;
		if (mirror_filter_binds())
		{
			char	   *nsp = get_namespace_name(get_rel_namespace(m->relid));
			char	   *rel = get_rel_name(m->relid);

			(void) mirror_filter_bound(m);
			if (nsp == NULL || rel == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("table of mirror %d no longer exists", m->mirror_id)));
			/* the row of the FROM item ONLY nsp.rel (mirror_table_sql), whole */
			text = psprintf(FILTER_SCHEMA ".match(%d, %s.%s.*)", m->mirror_id,
							quote_identifier(nsp), quote_identifier(rel));
		}
		else
		{
			char	   *node;

			/* the extension is not updated to 0.5 yet: the checked text, as 0.4 did */
			text = canonical(m->relid, m->filter, NULL, false, NULL, &node);
		}
		m->filter_sql = MemoryContextStrdup(mcxt, text);
		m->filter_invalid = false;
	}
	return m->filter_sql;
}

/* What chroma_sync_filter.match keeps for one call site, for one statement. */
typedef struct FilterMatchCache
{
	int			mirror_id;
	Oid			reltype;
	TupleTableSlot *slot;
	ExprContext *econtext;
	ExprState  *state;
} FilterMatchCache;

static FilterMatchCache *
filter_match_prepare(FunctionCallInfo fcinfo, int mirror_id)
{
	MemoryContext old;
	ChromaSavedUser su;
	MirrorConfig *m;
	Node	   *expr;
	FilterMatchCache *c;

	/* the mirror's row, not readable by the table owner: as the extension's owner */
	chroma_become_extension_owner(&su);
	m = mirror_load(mirror_id);
	chroma_restore_user(&su);
	if (m == NULL || m->filter == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("mirror %d has no filter", mirror_id)));
	/* the row is one the caller reads: never an oracle on a filter over a table she cannot */
	if (pg_class_aclcheck(m->relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(m->relid))));
	expr = mirror_filter_bound(m);

	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	c = palloc0_object(FilterMatchCache);
	c->mirror_id = mirror_id;
	c->reltype = get_rel_type_id(m->relid);
	if (!OidIsValid(c->reltype))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table of mirror %d no longer exists", mirror_id)));
	c->slot = MakeSingleTupleTableSlot(lookup_rowtype_tupdesc_copy(c->reltype, -1),
									   &TTSOpsHeapTuple);
	c->econtext = CreateStandaloneExprContext();
	/*
	 * Planned as a CHECK constraint's stored tree is before it runs: the planner removes
	 * what only the parser produces (a COLLATE clause's CollateExpr, TAP 121) and sets
	 * the operators' functions. EXECUTE on each function is checked here, for the current
	 * user (the table owner).
	 */
	c->state = ExecInitExpr(expression_planner((Expr *) copyObject(expr)), NULL);
	MemoryContextSwitchTo(old);
	return c;
}

/*
 * chroma_sync_filter.match(mirror_id integer, row record) returns boolean: the mirror's
 * stored filter on the row (a row of the mirror's table), NULL read as false. Only ever a
 * stored, checked filter: no expression comes from the caller, who has the row already.
 */
Datum
chroma_sync_filter_match(PG_FUNCTION_ARGS)
{
	int			mirror_id = PG_GETARG_INT32(0);
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(1);
	FilterMatchCache *c = (FilterMatchCache *) fcinfo->flinfo->fn_extra;
	HeapTupleData tuple;
	Datum		result;
	bool		isnull;

	if (c == NULL || c->mirror_id != mirror_id)
	{
		c = filter_match_prepare(fcinfo, mirror_id);
		fcinfo->flinfo->fn_extra = c;
	}
	if (HeapTupleHeaderGetTypeId(row) != c->reltype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the row is not one of the table of mirror %d", mirror_id)));
	tuple.t_len = HeapTupleHeaderGetDatumLength(row);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = row;
	ExecStoreHeapTuple(&tuple, c->slot, false);
	c->econtext->ecxt_scantuple = c->slot;
	ResetExprContext(c->econtext);
	result = ExecEvalExprSwitchContext(c->state, c->econtext, &isnull);
	ExecClearTuple(c->slot);
	PG_RETURN_BOOL(!isnull && DatumGetBool(result));
}
