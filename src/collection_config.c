/*
 * collection_config.c — a collection's index configuration, as chroma_create_collection
 * and chroma_modify_collection take it: checked before anything is sent.
 *
 * {"hnsw": {...}} (single-node Chroma) or {"spann": {...}} (Chroma Cloud). The HNSW keys
 * are known (space, ef_construction, ef_search, max_neighbors, num_threads,
 * resize_factor, sync_threshold, batch_size; a modification may change all but space and
 * ef_construction) and checked one by one. SPANN's keys differ between Chroma versions:
 * their values are checked (positive numbers, space a known name), their names are left
 * to the server, which names the ones it knows when it refuses one.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "collection_config.h"

typedef enum
{
	CFG_SPACE,					/* "l2", "cosine" or "ip" */
	CFG_COUNT,					/* a whole number >= 1 */
	CFG_FACTOR					/* a number > 0 */
} ConfigKind;

typedef struct ConfigKey
{
	const char *name;
	ConfigKind	kind;
	bool		modifiable;		/* chroma_modify_collection may change it */
} ConfigKey;

static const ConfigKey hnsw_keys[] = {
	{"space", CFG_SPACE, false},
	{"ef_construction", CFG_COUNT, false},
	{"ef_search", CFG_COUNT, true},
	{"max_neighbors", CFG_COUNT, true},
	{"num_threads", CFG_COUNT, true},
	{"resize_factor", CFG_FACTOR, true},
	{"sync_threshold", CFG_COUNT, true},
	{"batch_size", CFG_COUNT, true},
};

static const char *
hnsw_key_list(bool modify)
{
	StringInfoData s;

	initStringInfo(&s);
	for (size_t i = 0; i < lengthof(hnsw_keys); i++)
		if (!modify || hnsw_keys[i].modifiable)
			appendStringInfo(&s, "%s%s", s.len ? ", " : "", hnsw_keys[i].name);
	return s.data;
}

static const char *
jsonb_type_name(JsonbValue *v)
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
		default:
			return "an object or array";
	}
}

static void
check_value(const char *arg, const char *index, const char *key, ConfigKind kind, JsonbValue *v)
{
	if (kind == CFG_SPACE)
	{
		char	   *s;

		if (v->type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s.%s must be a string, not %s", arg, index, key, jsonb_type_name(v)),
					 errhint("Use \"l2\", \"cosine\" or \"ip\".")));
		s = pnstrdup(v->val.string.val, v->val.string.len);
		if (strcmp(s, "l2") != 0 && strcmp(s, "cosine") != 0 && strcmp(s, "ip") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown distance space \"%s\" in %s.%s.%s", s, arg, index, key),
					 errhint("Use \"l2\", \"cosine\" or \"ip\".")));
		return;
	}
	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s.%s.%s must be a number, not %s", arg, index, key, jsonb_type_name(v))));
	if (kind == CFG_COUNT)
	{
		Numeric		n = v->val.numeric;
		bool		whole;

		whole = !numeric_is_nan(n) && !numeric_is_inf(n) &&
			DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(n),
											 DirectFunctionCall2(numeric_trunc, NumericGetDatum(n),
																 Int32GetDatum(0))));
		if (!whole ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
											  NumericGetDatum(int64_to_numeric(1)))) < 0 ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
											  NumericGetDatum(int64_to_numeric(PG_INT32_MAX)))) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s.%s must be a whole number from 1 to %d", arg, index, key, PG_INT32_MAX),
					 errdetail("It is %s.", DatumGetCString(DirectFunctionCall1(numeric_out,
																				NumericGetDatum(n))))));
	}
	else
	{
		Numeric		n = v->val.numeric;

		if (numeric_is_nan(n) || numeric_is_inf(n) ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
											  NumericGetDatum(int64_to_numeric(0)))) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s.%s must be a number greater than 0", arg, index, key)));
	}
}

static void
check_hnsw(const char *arg, Jsonb *obj, bool modify)
{
	JsonbIterator *it = JsonbIteratorInit(&obj->root);
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;
		const ConfigKey *found = NULL;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		(void) JsonbIteratorNext(&it, &v, true);
		for (size_t i = 0; i < lengthof(hnsw_keys); i++)
			if (strcmp(hnsw_keys[i].name, key) == 0)
				found = &hnsw_keys[i];
		if (found == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown key \"%s\" in %s.hnsw", key, arg),
					 errhint("HNSW takes %s.", hnsw_key_list(modify))));
		if (modify && !found->modifiable)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the %s of a collection cannot be changed", key),
					 errdetail("Chroma builds the index with it when the collection is created."),
					 errhint("A modification may change %s; create a new collection for another %s.",
							 hnsw_key_list(true), key)));
		check_value(arg, "hnsw", key, found->kind, &v);
	}
}

static void
check_spann(const char *arg, Jsonb *obj)
{
	JsonbIterator *it = JsonbIteratorInit(&obj->root);
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		(void) JsonbIteratorNext(&it, &v, true);
		check_value(arg, "spann", key, strcmp(key, "space") == 0 ? CFG_SPACE : CFG_FACTOR, &v);
	}
}

void
chroma_check_configuration(const char *arg, Jsonb *cfg, bool modify)
{
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			indexes = 0;

	if (!JB_ROOT_IS_OBJECT(cfg) || JB_ROOT_IS_SCALAR(cfg))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", arg),
				 errhint("For example {\"hnsw\": {\"space\": \"cosine\", \"ef_search\": 100}}.")));
	it = JsonbIteratorInit(&cfg->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		(void) JsonbIteratorNext(&it, &v, true);
		if (strcmp(key, "hnsw") != 0 && strcmp(key, "spann") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown key \"%s\" in %s", key, arg),
					 errhint("A configuration has \"hnsw\" (single-node Chroma) or \"spann\" (Chroma Cloud).")));
		if (v.type == jbvNull)
			continue;
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s must be a JSON object", arg, key)));
		indexes++;
		if (strcmp(key, "hnsw") == 0)
			check_hnsw(arg, JsonbValueToJsonb(&v), modify);
		else
			check_spann(arg, JsonbValueToJsonb(&v));
	}
	if (indexes > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has both \"hnsw\" and \"spann\"", arg),
				 errhint("A collection has one index: \"hnsw\" on single-node Chroma, \"spann\" on Chroma Cloud.")));
}

/* The configuration's space, or NULL when it names none. */
char *
chroma_configuration_space(Jsonb *cfg)
{
	JsonbIterator *it = JsonbIteratorInit(&cfg->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			depth = 0;
	bool		next_is_space = false;

	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT)
			depth++;
		else if (tok == WJB_END_OBJECT)
			depth--;
		else if (tok == WJB_KEY)
			next_is_space = depth == 2 && v.val.string.len == 5 &&
				memcmp(v.val.string.val, "space", 5) == 0;
		else if (tok == WJB_VALUE && next_is_space && v.type == jbvString)
			return pnstrdup(v.val.string.val, v.val.string.len);
	}
	return NULL;
}
