/*
 * collections.c — SQL functions about the server and its collections.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "collection_config.h"
#include "sync.h"

PG_FUNCTION_INFO_V1(chroma_server_info);
PG_FUNCTION_INFO_V1(chroma_heartbeat);
PG_FUNCTION_INFO_V1(chroma_create_collection);
PG_FUNCTION_INFO_V1(chroma_delete_collection);
PG_FUNCTION_INFO_V1(chroma_list_collections);
PG_FUNCTION_INFO_V1(chroma_modify_collection);
PG_FUNCTION_INFO_V1(chroma_collection);

static Datum
uuid_datum(const char *s)
{
	return DirectFunctionCall1(uuid_in, CStringGetDatum(s));
}

Datum
chroma_server_info(PG_FUNCTION_ARGS)
{
	const ChromaServerInfo *info;
	StringInfoData s;

	chroma_forget_server();
	info = chroma_server(true);
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"url\":");
	escape_json(&s, chroma_url);
	appendStringInfoString(&s, ",\"tenant\":");
	escape_json(&s, chroma_tenant);
	appendStringInfoString(&s, ",\"database\":");
	escape_json(&s, chroma_database);
	appendStringInfo(&s, ",\"reachable\":%s", info->reachable ? "true" : "false");
	if (info->reachable)
		appendStringInfo(&s, ",\"max_batch_size\":%d,\"supports_base64_encoding\":%s,"
						 "\"supports_metadata_arrays\":%s",
						 info->max_batch_size,
						 info->supports_base64 ? "true" : "false",
						 info->supports_metadata_arrays ? "true" : "false");
	appendStringInfoChar(&s, '}');
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

Datum
chroma_heartbeat(PG_FUNCTION_ARGS)
{
	ChromaResponse resp;
	Jsonb	   *jb;
	JsonbValue *v;

	chroma_call_or_raise("GET", psprintf("%s/api/v2/heartbeat", chroma_base_url()),
						 NULL, 0, &resp, "check the heartbeat");
	jb = chroma_parse_body(&resp, "check the heartbeat");
	v = chroma_jsonb_get(jb, "nanosecond heartbeat");
	if (v == NULL || v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("unexpected heartbeat response from Chroma")));
	PG_RETURN_DATUM(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
}

Datum
chroma_create_collection(PG_FUNCTION_ARGS)
{
	char	   *name;
	Jsonb	   *metadata = NULL;
	Jsonb	   *configuration = NULL;
	char	   *space = NULL;
	bool		get_or_create = PG_ARGISNULL(3) ? true : PG_GETARG_BOOL(3);
	ChromaCollection coll;
	bool		existed = false;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	chroma_check_collection_name(name);
	if (!PG_ARGISNULL(1))
	{
		metadata = PG_GETARG_JSONB_P(1);
		if (!JB_ROOT_IS_OBJECT(metadata) || JB_ROOT_IS_SCALAR(metadata))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("collection metadata must be a JSON object")));
	}
	if (!PG_ARGISNULL(2))
	{
		space = text_to_cstring(PG_GETARG_TEXT_PP(2));
		if (strcmp(space, "l2") != 0 && strcmp(space, "cosine") != 0 &&
			strcmp(space, "ip") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown distance space \"%s\"", space),
					 errhint("Use \"l2\", \"cosine\" or \"ip\".")));
	}
	/* configuration: a new last argument in 0.5 */
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
	{
		char	   *cspace;

		configuration = PG_GETARG_JSONB_P(4);
		chroma_check_configuration("configuration", configuration, false);
		cspace = chroma_configuration_space(configuration);
		if (space != NULL && (cspace == NULL || strcmp(cspace, space) != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("space \"%s\" is not the space of the configuration", space),
					 errhint("Give the space in the configuration alone, e.g. {\"hnsw\": {\"space\": \"%s\"}}.",
							 space)));
	}
	if (configuration != NULL && get_or_create &&
		chroma_api_get_collection(name, &coll, true))
	{
		/* an existing collection: its index must be the one the configuration is for */
		chroma_check_configuration_index("configuration", configuration, name, coll.configuration);
		existed = true;
	}
	chroma_api_create_collection(name, metadata, space, configuration, get_or_create, &coll);
	if (!existed)
		chroma_check_configuration_made(name, configuration, coll.configuration);
	PG_RETURN_DATUM(uuid_datum(coll.id));
}

/* The object arguments of chroma_modify_collection: NULL, or a JSON object. */
static Jsonb *
object_arg(FunctionCallInfo fcinfo, int n, const char *name)
{
	Jsonb	   *j;

	if (PG_ARGISNULL(n))
		return NULL;
	j = PG_GETARG_JSONB_P(n);
	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON object", name)));
	return j;
}

Datum
chroma_modify_collection(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *new_name = NULL;
	Jsonb	   *new_metadata = object_arg(fcinfo, 2, "new_metadata");
	Jsonb	   *new_configuration = object_arg(fcinfo, 3, "new_configuration");
	ChromaCollection coll;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	chroma_check_collection_name(name);
	if (!PG_ARGISNULL(1))
	{
		new_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
		chroma_check_collection_name(new_name);
	}
	if (new_configuration)
		chroma_check_configuration("new_configuration", new_configuration, true);
	if (new_name == NULL && new_metadata == NULL && new_configuration == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("nothing to modify in collection \"%s\"", name),
				 errhint("Give new_name, new_metadata or new_configuration.")));
	chroma_api_get_collection(name, &coll, false);
	if (new_configuration)
		chroma_check_configuration_index("new_configuration", new_configuration, name, coll.configuration);
	if (new_name != NULL && strcmp(new_name, name) != 0)
	{
		ChromaCollection other;

		/* the server answers a taken name with a 500 */
		if (chroma_api_get_collection(new_name, &other, true))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("Chroma collection \"%s\" already exists", new_name),
					 errhint("Choose another new_name.")));
	}
	chroma_api_modify_collection(coll.id, new_name, new_metadata, new_configuration);
	PG_RETURN_VOID();
}

Datum
chroma_collection(PG_FUNCTION_ARGS)
{
	ChromaCollection coll;
	StringInfoData s;

	/* not STRICT: a call with NULL is refused to whoever may not call it (TAP 047) */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name must not be null")));
	chroma_api_get_collection(text_to_cstring(PG_GETARG_TEXT_PP(0)), &coll, false);
	/* as text, then jsonb_in: the same on every major (pushJsonbValue changed in 19) */
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"id\":");
	escape_json(&s, coll.id);
	appendStringInfoString(&s, ",\"name\":");
	escape_json(&s, coll.name ? coll.name : "");
	if (coll.dimension > 0)
		appendStringInfo(&s, ",\"dimension\":%d", coll.dimension);
	else
		appendStringInfoString(&s, ",\"dimension\":null");
	appendStringInfoString(&s, ",\"metadata\":");
	appendStringInfoString(&s, coll.metadata
						   ? JsonbToCString(NULL, &coll.metadata->root, VARSIZE(coll.metadata))
						   : "null");
	appendStringInfoString(&s, ",\"configuration\":");
	appendStringInfoString(&s, coll.configuration
						   ? JsonbToCString(NULL, &coll.configuration->root, VARSIZE(coll.configuration))
						   : "null");
	appendStringInfoChar(&s, '}');
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

Datum
chroma_delete_collection(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name must not be null")));
	{
		char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
		bool		missing_ok = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
		ChromaCollection coll = {0};
		bool		deleted;

		/*
		 * Keys kept for it (an earlier mirror's late requests) cannot land once it is
		 * gone: they are dropped, by its id (the name may name a collection of another
		 * tenant or server for this session). Not in a read-only transaction (a standby):
		 * a mirror created into the name later drops them.
		 */
		if (!XactReadOnly && sync_unknown_kept_for_name(name))
			(void) chroma_api_get_collection_id(name, &coll, true);
		deleted = chroma_api_delete_collection(name, missing_ok);
		if (deleted && coll.id != NULL)
			sync_unknown_forget_collection(coll.id);
		PG_RETURN_BOOL(deleted);
	}
}

/* More pages than this is a server that never ends its list (a million collections). */
#define MAX_COLLECTION_PAGES 10000

/*
 * Pages through the list. A server that ignores offset repeats its first page, one that
 * never ends is stopped by MAX_COLLECTION_PAGES and by max_response_size over all pages.
 */
Datum
chroma_list_collections(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const int	page = 100;
	int			offset = 0;
	size_t		total_bytes = 0;
	char		prev_first[64] = "";
	MemoryContext page_cxt;
	MemoryContext old_cxt;

	InitMaterializedSRF(fcinfo, 0);
	/* what one page allocates is freed before the next (the tuplestore keeps copies) */
	page_cxt = AllocSetContextCreate(CurrentMemoryContext, "chroma_list_collections page",
									 ALLOCSET_DEFAULT_SIZES);
	old_cxt = MemoryContextSwitchTo(page_cxt);
	for (int pageno = 0;; pageno++)
	{
		ChromaResponse resp;
		Jsonb	   *arr;
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		int			n = 0;
		char	   *first = NULL;

		if (pageno >= MAX_COLLECTION_PAGES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Chroma listed more than %d collections", MAX_COLLECTION_PAGES * page),
					 errhint("Check that chroma_sync.url names a Chroma server.")));
		chroma_call_or_raise("GET", psprintf("%s?limit=%d&offset=%d",
											 chroma_collections_url(), page, offset),
							 NULL, 0, &resp, "list collections");
		total_bytes += resp.http.body.len;
		if (total_bytes > chroma_max_response_bytes())
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the list of collections from Chroma is larger than chroma_sync.max_response_size"),
					 errdetail("The limit is %d kB, for all pages of the list together; %d pages were read.",
							   chroma_max_response_kb, pageno + 1),
					 errhint("Have a superuser raise chroma_sync.max_response_size, or check that chroma_sync.url names a Chroma server.")));
		arr = chroma_parse_body(&resp, "list collections");
		if (!JB_ROOT_IS_ARRAY(arr) || JB_ROOT_IS_SCALAR(arr))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_JSON_TEXT),
					 errmsg("unexpected response from Chroma to a collection list")));
		it = JsonbIteratorInit(&arr->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			ChromaCollection coll;
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			if (tok != WJB_ELEM || v.type != jbvBinary)
				continue;
			chroma_parse_collection(JsonbValueToJsonb(&v), &coll);
			if (first == NULL)
				first = coll.id;
			values[0] = uuid_datum(coll.id);
			values[1] = CStringGetTextDatum(coll.name ? coll.name : "");
			values[2] = Int32GetDatum(coll.dimension);
			nulls[2] = coll.dimension == 0;
			values[3] = coll.metadata ? JsonbPGetDatum(coll.metadata) : (Datum) 0;
			nulls[3] = coll.metadata == NULL;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			n++;
		}
		if (n < page)
			break;
		if (first != NULL && strcmp(first, prev_first) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("Chroma sent the same page of collections twice while listing collections"),
					 errdetail("The page at offset %d begins with the same collection (%s) as the page before: the server ignores offset, and the list would never end.",
							   offset, first)));
		strlcpy(prev_first, first ? first : "", sizeof(prev_first));
		offset += page;
		MemoryContextReset(page_cxt);
	}
	MemoryContextSwitchTo(old_cxt);
	MemoryContextDelete(page_cxt);
	return (Datum) 0;
}
