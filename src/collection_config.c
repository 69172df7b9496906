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

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "chroma_api.h"
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
	int32		max;			/* a count's largest value */
} ConfigKey;

/*
 * max_neighbors is HNSW's M: the index caps it at 10,000, and a larger one makes a
 * collection that takes no record (its links per element overflow).
 */
static const ConfigKey hnsw_keys[] = {
	{"space", CFG_SPACE, false, 0},
	{"ef_construction", CFG_COUNT, false, PG_INT32_MAX},
	{"ef_search", CFG_COUNT, true, PG_INT32_MAX},
	{"max_neighbors", CFG_COUNT, true, 10000},
	{"num_threads", CFG_COUNT, true, PG_INT32_MAX},
	{"resize_factor", CFG_FACTOR, true, 0},
	{"sync_threshold", CFG_COUNT, true, PG_INT32_MAX},
	{"batch_size", CFG_COUNT, true, PG_INT32_MAX},
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

/* A JSON number as Chroma reads it: the nearest float64 (0 when NaN, infinite or out of range). */
static double
numeric_float64(Numeric n)
{
	double		d;

	if (numeric_is_nan(n) || numeric_is_inf(n))
		return 0;
	errno = 0;
	d = strtod(DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n))), NULL);
	return errno == ERANGE || !isfinite(d) ? 0 : d;
}

static void
check_value(const char *arg, const char *index, const char *key, ConfigKind kind, int32 max,
			JsonbValue *v)
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

		/* no digits after the point: Chroma reads 25.0 as a float, and refuses it (422) */
		whole = !numeric_is_nan(n) && !numeric_is_inf(n) &&
			DatumGetInt32(DirectFunctionCall1(numeric_scale, NumericGetDatum(n))) == 0;
		if (!whole ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
											  NumericGetDatum(int64_to_numeric(1)))) < 0 ||
			DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
											  NumericGetDatum(int64_to_numeric(max)))) > 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s.%s must be a whole number from 1 to %d", arg, index, key, max),
					 errdetail("It is %s.", DatumGetCString(DirectFunctionCall1(numeric_out,
																				NumericGetDatum(n))))));
	}
	else
	{
		Numeric		n = v->val.numeric;

		/* as Chroma reads it: the nearest float64, which must be finite and above 0 */
		if (!(numeric_float64(n) > 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s.%s.%s must be a number greater than 0", arg, index, key),
					 !numeric_is_nan(n) && !numeric_is_inf(n) &&
					 DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(n),
													   NumericGetDatum(int64_to_numeric(0)))) > 0
					 ? errdetail("It is %s, whose nearest float64 (as Chroma reads it) is 0 or infinite.",
								 DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n))))
					 : 0));
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
		check_value(arg, "hnsw", key, found->kind, found->max, &v);
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
		check_value(arg, "spann", key, strcmp(key, "space") == 0 ? CFG_SPACE : CFG_FACTOR, 0, &v);
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

/* The index a configuration (given, or a collection's as the server has it) is for. */
const char *
chroma_configuration_index(Jsonb *cfg)
{
	for (int i = 0; i < 2; i++)
	{
		const char *index = i == 0 ? "hnsw" : "spann";
		JsonbValue *v = chroma_jsonb_get(cfg, index);

		if (v != NULL && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
			return index;
	}
	return NULL;
}

/* Whether cfg is for another index than other has (each named, when known). */
static bool
index_differs(Jsonb *cfg, Jsonb *other, const char **asked, const char **has)
{
	*asked = chroma_configuration_index(cfg);
	*has = chroma_configuration_index(other);
	return *asked != NULL && *has != NULL && strcmp(*asked, *has) != 0;
}

void
chroma_check_configuration_index(const char *arg, Jsonb *cfg, const char *collection,
								 Jsonb *collection_cfg)
{
	const char *given;
	const char *has;

	if (index_differs(cfg, collection_cfg, &given, &has))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("collection \"%s\" has an index of kind \"%s\": %s settings for \"%s\" do not apply to it",
						collection, has, arg, given),
				 errdetail("The server would ignore them."),
				 errhint("Give %s as {\"%s\": {...}}: single-node Chroma indexes with \"hnsw\", Chroma Cloud with \"spann\".",
						 arg, has)));
}

static char *
value_text(JsonbValue *v)
{
	Jsonb	   *j = JsonbValueToJsonb(v);

	return JsonbToCString(NULL, &j->root, VARSIZE(j));
}

static bool
values_equal(JsonbValue *a, JsonbValue *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case jbvString:
			return a->val.string.len == b->val.string.len &&
				memcmp(a->val.string.val, b->val.string.val, a->val.string.len) == 0;
		case jbvNumeric:
			/* as Chroma reads them: 1.00000000000000001 is 1.0 (TAP 200) */
			return numeric_float64(a->val.numeric) == numeric_float64(b->val.numeric);
		case jbvBool:
			return a->val.boolean == b->val.boolean;
		case jbvNull:
			return true;
		default:
			return strcmp(value_text(a), value_text(b)) == 0;
	}
}

bool
chroma_configuration_conflict(Jsonb *given, Jsonb *existing, bool fixed_only,
							  ChromaConfigConflict *out)
{
	JsonbIterator *it = JsonbIteratorInit(&given->root);
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	const char *asked;
	const char *has;

	/* settings for another index than the collection has: the server ignores them (TAP 197) */
	if (index_differs(given, existing, &asked, &has))
	{
		out->key = "index";
		out->given = psprintf("\"%s\"", asked);
		out->existing = psprintf("\"%s\"", has);
		out->modifiable = false;
		return true;
	}

	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *index;
		JsonbValue *theirs;
		Jsonb	   *mine;
		Jsonb	   *their_obj;
		JsonbIterator *kit;
		JsonbValue	kk;
		JsonbValue	kv;

		if (tok != WJB_KEY)
			continue;
		index = pnstrdup(k.val.string.val, k.val.string.len);
		(void) JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvBinary)
			continue;			/* "hnsw": null gives nothing to compare */
		mine = JsonbValueToJsonb(&v);
		theirs = chroma_jsonb_get(existing, index);
		their_obj = theirs != NULL && theirs->type == jbvBinary ? JsonbValueToJsonb(theirs) : NULL;
		kit = JsonbIteratorInit(&mine->root);
		while ((tok = JsonbIteratorNext(&kit, &kk, true)) != WJB_DONE)
		{
			char	   *key;
			JsonbValue *ev;

			if (tok != WJB_KEY)
				continue;
			key = pnstrdup(kk.val.string.val, kk.val.string.len);
			(void) JsonbIteratorNext(&kit, &kv, true);
			ev = chroma_jsonb_get(their_obj, key);
			/* not shown by the server (num_threads, batch_size): it cannot be compared */
			if (ev == NULL || values_equal(&kv, ev))
				continue;
			out->key = psprintf("%s.%s", index, key);
			out->given = value_text(&kv);
			out->existing = value_text(ev);
			out->modifiable = false;
			if (strcmp(index, "hnsw") == 0)
				for (size_t i = 0; i < lengthof(hnsw_keys); i++)
					if (strcmp(hnsw_keys[i].name, key) == 0)
						out->modifiable = hnsw_keys[i].modifiable;
			/* a recorded configuration: chroma_modify_collection may have changed it since */
			if (fixed_only && out->modifiable)
				continue;
			return true;
		}
	}
	return false;
}

void
chroma_check_configuration_made(const char *collection, Jsonb *cfg, Jsonb *made)
{
	const char *asked;
	const char *has;

	/*
	 * Not deleted here: by name, it could be another session's collection by then, with its
	 * records (TAP 198). The caller is told, and decides.
	 */
	if (index_differs(cfg, made, &asked, &has))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this Chroma server made collection \"%s\" with an index of kind \"%s\", not \"%s\"",
						collection, has, asked),
				 errdetail("The server ignored the \"%s\" settings; the collection exists, with its defaults.", asked),
				 errhint("Delete it with chroma_delete_collection('%s') if it is not wanted, and give the configuration as {\"%s\": {...}}: single-node Chroma indexes with \"hnsw\", Chroma Cloud with \"spann\".",
						 collection, has)));
}
