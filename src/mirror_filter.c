/*
 * mirror_filter.c — a mirror's row filter: parsed alone as exactly one boolean expression
 * over the table's row, checked (immutable functions only, no subquery, aggregate,
 * window or set-returning function, no parameter) and deparsed with every name that
 * pg_catalog does not hold schema-qualified. chroma_mirror resolves the names in the
 * caller's search_path and stores the deparsed form; generated SQL embeds only the stored
 * form, checked again (names resolved in the pinned search_path) when a mirror is loaded:
 * filters stored by 0.4 were raw text.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "mirror_config.h"
#include "pg_compat.h"

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

/*
 * Runs as the table's owner (mirror_become_table_owner): USAGE on schemas is checked for
 * that role. Names resolve in parse_path (NULL: the pinned search_path, as when the
 * filter runs); the deparsed text qualifies every name the pinned path would not find.
 */
static char *
canonical_as_owner(Oid relid, const char *filter, const char *parse_path)
{
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
	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock, NULL, false, true);
	addNSItemToQuery(pstate, nsitem, true, true, true);
	/* a WHERE clause's rules: no aggregate, window or set-returning function, no $n */
	expr = transformExpr(pstate, raw, EXPR_KIND_WHERE);
	expr = coerce_to_boolean(pstate, expr, "a mirror filter");
	assign_expr_collations(pstate, expr);
	if (pstate->p_hasSubLinks)
		refuse(filter, "A filter must not contain a subquery: a change to another table would not re-send the row.");
	if (contain_mutable_functions(expr))
		refuse(filter, "A filter may call only immutable functions (not volatile or stable ones such as now() or current_setting()): a row's place in the collection must depend on the row alone.");

	if (parse_path)
		set_search_path(MIRROR_OWNER_SEARCH_PATH);
	text = deparse_expression(expr, deparse_context_for(RelationGetRelationName(rel), relid),
							  false, false);
	/* operators and boolean expressions deparse parenthesized, anything else is wrapped */
	if (!IsA(expr, OpExpr) && !IsA(expr, BoolExpr))
		text = psprintf("(%s)", text);
	free_parsestate(pstate);
	relation_close(rel, AccessShareLock);
	return text;
}

static char *
canonical(Oid relid, const char *filter, const char *parse_path)
{
	MirrorSavedUser su;
	ErrorContextCallback cb;
	char	   *text;

	cb.callback = filter_error_context;
	cb.arg = (void *) filter;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	mirror_become_table_owner(relid, &su);
	text = canonical_as_owner(relid, filter, parse_path);
	mirror_restore_user(&su);
	error_context_stack = cb.previous;
	return text;
}

char *
mirror_filter_canonical(Oid relid, const char *filter)
{
	/* the names the caller wrote, as the caller's search_path finds them */
	return canonical(relid, filter, pstrdup(namespace_search_path));
}

const char *
mirror_filter_sql(MirrorConfig *m)
{
	if (m->filter == NULL)
		return NULL;
	if (m->filter_sql == NULL)
	{
		char	   *text;

		/* a filter that no longer passes pauses the worker's mirror (worker.c) */
		m->filter_invalid = true;
		text = canonical(m->relid, m->filter, NULL);
		m->filter_sql = MemoryContextStrdup(GetMemoryChunkContext(m), text);
		m->filter_invalid = false;
	}
	return m->filter_sql;
}
