/*
 * read_filters.c — what restricts a get or a query: ids, "where" and "where_document".
 *
 * where_document is checked here in full, before anything is sent: Chroma answers a
 * malformed one with a bare "Invalid where document clause", which names neither the
 * operator nor where it is. Regular expressions are left to the server (its syntax is
 * Rust's, not PostgreSQL's).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "encode.h"
#include "pgbuf.h"
#include "read_filters.h"

#define DOCUMENT_OPERATORS "$contains, $not_contains, $regex, $not_regex, $and, $or"

char *
read_filter_id_json(const char *id, int len)
{
	char	   *u = pg_server_to_any(id, len, PG_UTF8);
	cs_buf		b;

	pgbuf_init(&b, 32);
	cs_json_string(&b, u, u == id ? (size_t) len : strlen(u));
	return pgbuf_cstring(&b);
}

static int
cmp_json_ids(const void *a, const void *b, void *arg)
{
	char	  **json = (char **) arg;
	int			ia = *(const int *) a;
	int			ib = *(const int *) b;
	int			c = strcmp(json[ia], json[ib]);

	if (c != 0)
		return c;
	return ia < ib ? -1 : (ia > ib ? 1 : 0);
}

List *
read_filter_ids(ArrayType *ids)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	char	  **json;
	int		   *order;
	List	   *out = NIL;

	if (ARR_NDIM(ids) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("ids must be a one-dimensional array")));
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	json = palloc_array(char *, Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		text	   *t;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("id %d is null", i + 1)));
		t = DatumGetTextPP(elems[i]);
		json[i] = read_filter_id_json(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	}
	/* a repeated id would come back once per chunk that names it */
	order = palloc_array(int, Max(n, 1));
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), cmp_json_ids, json);
	for (int k = 1, first = order[0]; k < n; k++)
	{
		/* ties sort by position: the first occurrence stays */
		if (strcmp(json[order[k]], json[first]) == 0)
			json[order[k]] = NULL;
		else
			first = order[k];
	}
	for (int i = 0; i < n; i++)
		if (json[i] != NULL)
			out = lappend(out, json[i]);
	return out;
}

void
read_filter_check_where(Jsonb *where)
{
	if (!JB_ROOT_IS_OBJECT(where) || JB_ROOT_IS_SCALAR(where))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"where\" must be a JSON object"),
				 errhint("For example: '{\"lang\": \"en\"}' or '{\"year\": {\"$gte\": 2020}}'.")));
}

static bool is_key(const JsonbValue *k, const char *name);

/*
 * Where a value is in a filter, for messages: a chain of steps up to the argument, written
 * out only for an ERROR (a string per level would take memory quadratic in the depth).
 */
typedef struct FilterPath
{
	const struct FilterPath *up;	/* NULL: the argument itself, named by key */
	const char *key;			/* an object's key (key_len bytes), or NULL: an element */
	int			key_len;
	int			index;
} FilterPath;

static char *
path_text(const FilterPath *p)
{
	StringInfoData out;
	int			n = 0;
	const FilterPath **steps;

	/* from the argument down (iterative: the path may be thousands of steps long) */
	for (const FilterPath *q = p; q != NULL; q = q->up)
		n++;
	steps = palloc_array(const FilterPath *, n);
	for (const FilterPath *q = p; q != NULL; q = q->up)
		steps[--n] = q;
	initStringInfo(&out);
	for (int i = 0;; i++)
	{
		const FilterPath *q = steps[i];

		if (q->up == NULL)
			appendBinaryStringInfo(&out, q->key, q->key_len);
		else if (q->key != NULL)
			appendStringInfo(&out, " -> %s", quote_literal_cstr(pnstrdup(q->key, q->key_len)));
		else
			appendStringInfo(&out, " -> %d", q->index);
		if (q == p)
			break;
	}
	return out.data;
}

/*
 * For a delete: no part of "where" that Chroma reads as every record (an empty $and or
 * $or list, an empty object in one) nor an empty $in / $nin list. Other operators are
 * Chroma's to check.
 */
static void
check_where_object_for_delete(JsonbContainer *c, const FilterPath *path)
{
	JsonbIterator *it;
	JsonbValue	key;
	JsonbValue	value;
	JsonbIteratorToken tok;

	check_stack_depth();
	if (JsonContainerSize(c) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chroma_delete_where refuses an empty filter inside \"where\""),
				 errdetail("%s is an empty object, which Chroma reads as every record.", path_text(path)),
				 errhint("Give every filter at least one condition.")));
	it = JsonbIteratorInit(c);
	while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE)
	{
		FilterPath	key_path;

		if (tok != WJB_KEY)
			continue;
		if (JsonbIteratorNext(&it, &value, true) != WJB_VALUE)
			elog(ERROR, "a jsonb object key without its value");
		key_path = (FilterPath) {path, key.val.string.val, key.val.string.len, 0};
		if (is_key(&key, "$and") || is_key(&key, "$or") || is_key(&key, "$in") || is_key(&key, "$nin"))
		{
			JsonbIterator *elems;
			JsonbValue	e;

			if (value.type != jbvBinary || !JsonContainerIsArray(value.val.binary.data) ||
				JsonContainerIsScalar(value.val.binary.data))
				continue;		/* Chroma refuses it */
			if (JsonContainerSize(value.val.binary.data) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("chroma_delete_where refuses an empty list in \"where\""),
						 errdetail("%s is an empty array%s.", path_text(&key_path),
								   (is_key(&key, "$in") ? "" : ", which Chroma reads as every record")),
						 errhint("Give it at least one element, or leave it out.")));
			if (is_key(&key, "$in") || is_key(&key, "$nin"))
				continue;
			elems = JsonbIteratorInit(value.val.binary.data);
			for (int i = 0; (tok = JsonbIteratorNext(&elems, &e, true)) != WJB_DONE;)
				if (tok == WJB_ELEM)
				{
					FilterPath	elem_path = {&key_path, NULL, 0, i++};

					if (e.type == jbvBinary && JsonContainerIsObject(e.val.binary.data))
						check_where_object_for_delete(e.val.binary.data, &elem_path);
				}
		}
		else if (value.type == jbvBinary && JsonContainerIsObject(value.val.binary.data))
			check_where_object_for_delete(value.val.binary.data, &key_path);
	}
}

void
read_filter_check_where_for_delete(Jsonb *where)
{
	read_filter_check_where(where);
	if (JB_ROOT_COUNT(where) > 0)
	{
		FilterPath	root = {NULL, "where", 5, 0};

		check_where_object_for_delete(&where->root, &root);
	}
}

/* "an object", "a string"...: what a JSON value is, for messages. */
static const char *
json_kind(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsObject(v->val.binary.data) ? "an object" : "an array";
		default:
			return "a JSON value";
	}
}

static bool
is_key(const JsonbValue *k, const char *name)
{
	return k->val.string.len == (int) strlen(name) &&
		memcmp(k->val.string.val, name, k->val.string.len) == 0;
}

static void check_document_object(JsonbContainer *c, const FilterPath *path, bool nonempty);

/* The list of $and or $or: a non-empty array of filters. */
static void
check_document_list(const JsonbValue *list, const char *op, const FilterPath *path, bool nonempty)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			i = 0;

	if (list->type != jbvBinary || !JsonContainerIsArray(list->val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the value of %s in where_document must be an array of filters", op),
				 errdetail("%s is %s.", path_text(path), json_kind(list)),
				 errhint("For example: '{\"%s\": [{\"$contains\": \"a\"}, {\"$contains\": \"b\"}]}'.", op)));
	if (JsonContainerSize(list->val.binary.data) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the list of %s in where_document must not be empty", op),
				 errdetail("%s is an empty array.", path_text(path)),
				 errhint("Give %s at least one filter, or leave it out.", op)));
	it = JsonbIteratorInit(list->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		FilterPath	elem_path = {path, NULL, 0, i};

		if (tok != WJB_ELEM)
			continue;
		i++;
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("each filter in the list of %s in where_document must be a JSON object", op),
					 errdetail("%s is %s.", path_text(&elem_path), json_kind(&v)),
					 errhint("For example: '{\"%s\": [{\"$contains\": \"a\"}, {\"$contains\": \"b\"}]}'.", op)));
		check_document_object(v.val.binary.data, &elem_path, nonempty);
	}
}

/* One filter: an object with exactly one operator; nonempty: no empty string either. */
static void
check_document_object(JsonbContainer *c, const FilterPath *path, bool nonempty)
{
	JsonbIterator *it;
	JsonbValue	key;
	JsonbValue	value;
	char	   *op;
	FilterPath	value_path;

	check_stack_depth();
	if (JsonContainerSize(c) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a where_document filter must hold exactly one operator"),
				 JsonContainerSize(c) == 0
				 ? errdetail("%s is an empty object.", path_text(path))
				 : errdetail("%s has %d keys.", path_text(path), (int) JsonContainerSize(c)),
				 errhint("Combine conditions with $and or $or: '{\"$and\": [{\"$contains\": \"a\"}, {\"$not_contains\": \"b\"}]}'.")));
	it = JsonbIteratorInit(c);
	(void) JsonbIteratorNext(&it, &key, true);	/* WJB_BEGIN_OBJECT */
	if (JsonbIteratorNext(&it, &key, true) != WJB_KEY ||
		JsonbIteratorNext(&it, &value, true) != WJB_VALUE)
		elog(ERROR, "a jsonb object of one key without its key and value");
	op = pnstrdup(key.val.string.val, key.val.string.len);
	value_path = (FilterPath) {path, key.val.string.val, key.val.string.len, 0};

	if (is_key(&key, "$and") || is_key(&key, "$or"))
		check_document_list(&value, op, &value_path, nonempty);
	else if (is_key(&key, "$contains") || is_key(&key, "$not_contains") ||
			 is_key(&key, "$regex") || is_key(&key, "$not_regex"))
	{
		if (value.type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of %s in where_document must be a string", op),
					 errdetail("%s is %s.", path_text(&value_path), json_kind(&value)),
					 errhint("For example: '{\"%s\": \"text\"}'.", op)));
		if (nonempty && value.val.string.len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the value of %s in where_document must not be an empty string", op),
					 errdetail("%s is an empty string: every document contains it, and it matches every document as a regular expression.",
							   path_text(&value_path)),
					 errhint("Give the text to look for.")));
	}
	else if (op[0] != '$')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown where_document operator \"%s\"", op),
				 errdetail("At %s.", path_text(path)),
				 errhint("where_document filters on the document's text with " DOCUMENT_OPERATORS "; filter on metadata with \"where\".")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown where_document operator \"%s\"", op),
				 errdetail("At %s.", path_text(path)),
				 errhint("Use one of " DOCUMENT_OPERATORS ".")));
}

void
read_filter_check_document(Jsonb *where_document, bool nonempty)
{
	if (!JB_ROOT_IS_OBJECT(where_document) || JB_ROOT_IS_SCALAR(where_document))
	{
		JsonbValue	v;

		v.type = jbvBinary;
		v.val.binary.data = &where_document->root;
		v.val.binary.len = 0;
		if (JB_ROOT_IS_SCALAR(where_document))
			(void) JsonbExtractScalar(&where_document->root, &v);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("where_document must be a JSON object"),
				 errdetail("where_document is %s.", json_kind(&v)),
				 errhint("For example: '{\"$contains\": \"text\"}' or '{\"$or\": [{\"$contains\": \"a\"}, {\"$regex\": \"b+\"}]}'.")));
	}
	if (JB_ROOT_COUNT(where_document) == 0)
		return;					/* {}: no filter, as for "where" */
	{
		FilterPath	root = {NULL, "where_document", 14, 0};

		check_document_object(&where_document->root, &root, nonempty);
	}
}

/* Appends ,"key":<jsonb as UTF-8 JSON> */
static void
append_jsonb_field(cs_buf *b, const char *key, Jsonb *jb)
{
	char	   *txt = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	char	   *u = pg_server_to_any(txt, strlen(txt), PG_UTF8);

	cs_buf_putc(b, ',');
	cs_json_string(b, key, strlen(key));
	cs_buf_putc(b, ':');
	cs_buf_puts(b, u);
}

void
read_filters_append(cs_buf *b, Jsonb *where, Jsonb *where_document)
{
	if (where != NULL && JB_ROOT_COUNT(where) > 0)
		append_jsonb_field(b, "where", where);
	if (where_document != NULL && JB_ROOT_COUNT(where_document) > 0)
		append_jsonb_field(b, "where_document", where_document);
}
