/*
 * where_document.c — Chroma's full-text filter on documents (where_document), checked
 * before anything is sent, so that a typo is a clear ERROR here rather than Chroma's
 * "Invalid where document clause" (or, worse, a filter that matches more than meant).
 *
 * Chroma's grammar: {"$contains": "text"}, {"$not_contains": "text"}, {"$regex": "re"},
 * {"$not_regex": "re"}, {"$and": [expr, ...]}, {"$or": [expr, ...]}; one operator per
 * object. An empty string or an empty $and/$or is refused: Chroma reads an empty $and as
 * "every record".
 */
#include "postgres.h"

#include "miscadmin.h"

#include "where_document.h"

static const char *const text_operators[] = {"$contains", "$not_contains", "$regex", "$not_regex"};

static bool
is_text_operator(const char *op)
{
	for (int i = 0; i < (int) lengthof(text_operators); i++)
		if (strcmp(op, text_operators[i]) == 0)
			return true;
	return false;
}

static void
check_expression(JsonbContainer *c, const char *argname)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *op;

	check_stack_depth();
	if (!JsonContainerIsObject(c) || JsonContainerIsScalar(c))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", argname),
				 errhint("For example: '{\"$contains\": \"apple\"}' or '{\"$or\": [{\"$contains\": \"apple\"}, {\"$regex\": \"pears?\"}]}'.")));
	if (JsonContainerSize(c) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("each %s expression must have exactly one operator, found %d",
						argname, (int) JsonContainerSize(c)),
				 errhint("Combine several with \"$and\" or \"$or\".")));

	it = JsonbIteratorInit(c);
	(void) JsonbIteratorNext(&it, &v, true);	/* WJB_BEGIN_OBJECT */
	(void) JsonbIteratorNext(&it, &v, true);	/* WJB_KEY */
	op = pnstrdup(v.val.string.val, v.val.string.len);
	(void) JsonbIteratorNext(&it, &v, true);	/* WJB_VALUE; containers as jbvBinary */

	if (is_text_operator(op))
	{
		if (v.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of %s operator \"%s\" must be a string", argname, op)));
		if (v.val.string.len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of %s operator \"%s\" must not be an empty string",
							argname, op)));
	}
	else if (strcmp(op, "$and") == 0 || strcmp(op, "$or") == 0)
	{
		JsonbIterator *elems;
		JsonbValue	e;
		JsonbIteratorToken tok;

		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data) ||
			JsonContainerIsScalar(v.val.binary.data) ||
			JsonContainerSize(v.val.binary.data) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of %s operator \"%s\" must be a non-empty array of %s expressions",
							argname, op, argname)));
		elems = JsonbIteratorInit(v.val.binary.data);
		while ((tok = JsonbIteratorNext(&elems, &e, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (e.type != jbvBinary)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("the elements of %s operator \"%s\" must be %s expressions (JSON objects)",
								argname, op, argname)));
			check_expression(e.val.binary.data, argname);
		}
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown %s operator \"%s\"", argname, op),
				 errdetail("Chroma's operators are $contains, $not_contains, $regex, $not_regex, $and and $or.")));
	pfree(op);
}

void
chroma_check_where_document(Jsonb *doc, const char *argname)
{
	check_expression(&doc->root, argname);
}
