/*
 * chroma_api.c — Chroma's HTTP API v2: URLs, pre-flight, collections, error classes.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "common/string.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "chroma_api.h"
#include "chroma_sync.h"
#include "encode.h"

/* Pre-flight facts for the server named by url/tenant/database at the time. */
static ChromaServerInfo cached_info;
static char *cached_for = NULL;

char *
chroma_base_url(void)
{
	char	   *u = pstrdup(chroma_url);
	size_t		n = strlen(u);

	while (n > 0 && u[n - 1] == '/')
		u[--n] = '\0';
	return u;
}

char *
chroma_collections_url(void)
{
	return psprintf("%s/api/v2/tenants/%s/databases/%s/collections",
					chroma_base_url(),
					chroma_http_escape(chroma_tenant),
					chroma_http_escape(chroma_database));
}

char *
chroma_records_url(const char *collection_id, const char *op)
{
	return psprintf("%s/%s/%s", chroma_collections_url(), collection_id, op);
}

static ChromaErrorKind
kind_for_status(long status)
{
	if (status >= 200 && status < 300)
		return CHROMA_OK;
	switch (status)
	{
		case 400:
		case 422:
			return CHROMA_REFUSED;
		case 413:
			return CHROMA_TOO_LARGE;
		case 401:
		case 403:
		case 404:
			return CHROMA_FATAL;
		case 409:
			return CHROMA_CONFLICT;
		case 429:
		case 500:
		case 502:
		case 503:
		case 504:
			return CHROMA_TRANSIENT;
		default:
			return CHROMA_OTHER;
	}
}

/* Copies at most n bytes of s, made printable (a response may hold anything). */
static char *
printable_prefix(const char *s, size_t len, size_t n)
{
	StringInfoData b;

	initStringInfo(&b);
	for (size_t i = 0; i < len && i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		appendStringInfoChar(&b, (c < 0x20 || c >= 0x7f) ? '?' : (char) c);
	}
	if (len > n)
		appendStringInfoString(&b, "...");
	return b.data;
}

static bool
is_utf8(const char *data, int len)
{
	return pg_encoding_verifymbstr(PG_UTF8, data, len) == len;
}

void
chroma_check_response_encoding(const char *data, int len, const char *action)
{
	int			valid = pg_encoding_verifymbstr(PG_UTF8, data, len);

	if (valid != len)
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("Chroma sent a response that is not valid UTF-8 while trying to %s", action),
				 errdetail("The byte at offset %d of the response is not part of a valid UTF-8 sequence.",
						   valid)));
}

/*
 * Reads {"error":..., "message":...} when the body is such a JSON object. A message that
 * is not ASCII in a database that is not UTF-8, or not UTF-8 at all, is shown escaped.
 */
static void
parse_error_body(ChromaResponse *resp)
{
	StringInfo	body = &resp->http.body;
	JsonLexContext *lex;
	Jsonb	   *jb;
	JsonbValue *v;

	if (body->len == 0)
		return;
	lex = chroma_json_lexer(body->data, body->len, PG_UTF8, false);
	if (pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS ||
		body->data[0] != '{' || !is_utf8(body->data, body->len) ||
		(GetDatabaseEncoding() != PG_UTF8 && !pg_is_ascii(body->data)))
	{
		resp->message = printable_prefix(body->data, body->len, 300);
		return;
	}
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(body->data)));
	v = chroma_jsonb_get(jb, "error");
	resp->error_name = chroma_jsonb_text(v);
	v = chroma_jsonb_get(jb, "message");
	resp->message = chroma_jsonb_text(v);
	if (resp->message == NULL)
		resp->message = printable_prefix(body->data, body->len, 300);
}

void
chroma_classify(ChromaResponse *resp)
{
	resp->error_name = NULL;
	resp->message = NULL;
	if (resp->http.curl_code != 0)
	{
		resp->kind = CHROMA_TRANSIENT;
		resp->message = resp->http.error;
		return;
	}
	resp->kind = kind_for_status(resp->http.status);
	if (resp->kind != CHROMA_OK)
		parse_error_body(resp);
}

void
chroma_call(const char *method, const char *url, const char *body, size_t body_len,
			ChromaResponse *resp)
{
	memset(resp, 0, sizeof(*resp));
	chroma_http_request(method, url, body, body_len, &resp->http);
	chroma_classify(resp);
}

void
chroma_raise(const ChromaResponse *resp, const char *action)
{
	const char *msg = resp->message ? resp->message : "";
	const char *name = resp->error_name ? resp->error_name : "";
	long		status = resp->http.status;

	if (resp->http.too_large)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the response from Chroma is larger than chroma_sync.max_response_size while trying to %s",
						action),
				 errdetail("The limit is %d kB.", chroma_max_response_kb),
				 errhint("Ask for fewer records at once (limit, or fewer ids), or have a superuser raise chroma_sync.max_response_size.")));
	if (resp->http.curl_code != 0)
	{
		if (resp->http.connect_failed)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to Chroma at \"%s\" while trying to %s",
							chroma_base_url(), action),
					 errdetail("%s", msg),
					 resp->http.tls_failed
					 ? errhint("Check chroma_sync.ca_file (the CA that signed the server's certificate) and that the certificate names the host of chroma_sync.url.")
					 : errhint("Check that the server is running and chroma_sync.url is right.")));
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("request to Chroma at \"%s\" failed while trying to %s",
						chroma_base_url(), action),
				 errdetail("%s. The server may or may not have applied the request.", msg)));
	}

	switch (resp->kind)
	{
		case CHROMA_REFUSED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("Chroma refused the request to %s", action),
					 errdetail("HTTP %ld %s: %s", status, name, msg)));
			break;
		case CHROMA_TOO_LARGE:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Chroma refused the request to %s as too large", action),
					 errdetail("HTTP %ld: %s", status, msg),
					 errhint("Lower chroma_sync.batch_size.")));
			break;
		case CHROMA_FATAL:
			if (status == 404)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("Chroma could not find what was needed to %s", action),
						 errdetail("HTTP %ld %s: %s", status, name, msg)));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
					 errmsg("Chroma denied the request to %s", action),
					 errdetail("HTTP %ld %s: %s", status, name, msg),
					 errhint("Check chroma_sync.api_key, chroma_sync.tenant and chroma_sync.database.")));
			break;
		case CHROMA_CONFLICT:
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("Chroma reported a conflict while trying to %s", action),
					 errdetail("HTTP %ld %s: %s", status, name, msg)));
			break;
		case CHROMA_TRANSIENT:
			ereport(ERROR,
					(errcode(status == 500 ? ERRCODE_EXTERNAL_ROUTINE_EXCEPTION
							 : ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("Chroma could not %s now", action),
					 errdetail("HTTP %ld %s: %s", status, name, msg),
					 resp->http.retry_after_s > 0
					 ? errhint("The server is overloaded or unavailable; it asked to be called again in %ld s (Retry-After).",
							   resp->http.retry_after_s)
					 : errhint("The server is overloaded or unavailable; try again later.")));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("unexpected answer from Chroma while trying to %s", action),
					 errdetail("HTTP %ld %s: %s", status, name, msg)));
	}
	pg_unreachable();
}

void
chroma_call_or_raise(const char *method, const char *url, const char *body,
					 size_t body_len, ChromaResponse *resp, const char *action)
{
	chroma_call(method, url, body, body_len, resp);
	if (resp->kind != CHROMA_OK)
		chroma_raise(resp, action);
}

Jsonb *
chroma_parse_body(const ChromaResponse *resp, const char *action)
{
	const StringInfoData *body = &resp->http.body;
	JsonLexContext *lex;

	lex = chroma_json_lexer(body->data, body->len, PG_UTF8, false);
	if (body->len == 0 || pg_parse_json(lex, &nullSemAction) != JSON_SUCCESS ||
		strlen(body->data) != (size_t) body->len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("Chroma sent a response that is not valid JSON while trying to %s", action),
				 errdetail("Response begins: %s", printable_prefix(body->data, body->len, 120))));
	chroma_check_response_encoding(body->data, body->len, action);
	if (GetDatabaseEncoding() != PG_UTF8)
	{
		char	   *conv = pg_any_to_server(body->data, body->len, PG_UTF8);

		return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(conv)));
	}
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(body->data)));
}

JsonbValue *
chroma_jsonb_get(Jsonb *obj, const char *key)
{
	JsonbValue	k;

	if (obj == NULL || !JB_ROOT_IS_OBJECT(obj))
		return NULL;
	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	return findJsonbValueFromContainer(&obj->root, JB_FOBJECT, &k);
}

char *
chroma_jsonb_text(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static int
jsonb_int(JsonbValue *v, int dflt)
{
	if (v == NULL || v->type != jbvNumeric)
		return dflt;
	return DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));
}

static bool
body_mentions(const StringInfoData *body, const char *needle)
{
	return body->len > 0 && strstr(body->data, needle) != NULL;
}

/*
 * Whether the OpenAPI document in body names `needle` inside the object of schema
 * `schema` ("Name": {...}): its braces are matched, skipping strings.
 */
static bool
schema_mentions(const StringInfoData *body, const char *schema, const char *needle)
{
	char	   *key = psprintf("\"%s\":", schema);
	const char *start = body->len > 0 ? strstr(body->data, key) : NULL;
	const char *p;
	int			depth = 0;
	bool		found = false;

	if (start == NULL)
		return false;
	p = start + strlen(key);
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	if (*p != '{')
		return false;
	for (const char *q = p; *q; q++)
	{
		if (*q == '"')
		{
			if (strncmp(q, needle, strlen(needle)) == 0)
				found = true;
			for (q++; *q && *q != '"'; q++)
				if (*q == '\\' && q[1])
					q++;
			if (!*q)
				break;
		}
		else if (*q == '{')
			depth++;
		else if (*q == '}' && --depth == 0)
			return found;
	}
	return false;
}

void
chroma_forget_server(void)
{
	if (cached_for)
		pfree(cached_for);
	cached_for = NULL;
}

const ChromaServerInfo *
chroma_server(bool quiet)
{
	char	   *key = psprintf("%s|%s|%s", chroma_url, chroma_tenant, chroma_database);
	ChromaResponse resp;
	ChromaServerInfo info;
	Jsonb	   *jb;
	JsonbValue *v;

	if (cached_for && strcmp(cached_for, key) == 0)
		return &cached_info;

	memset(&info, 0, sizeof(info));
	chroma_call("GET", psprintf("%s/api/v2/pre-flight-checks", chroma_base_url()),
				NULL, 0, &resp);
	if (resp.kind != CHROMA_OK)
	{
		if (quiet)
		{
			static ChromaServerInfo unreachable;

			memset(&unreachable, 0, sizeof(unreachable));
			return &unreachable;
		}
		chroma_raise(&resp, "read the server's pre-flight checks");
	}
	jb = chroma_parse_body(&resp, "read the server's pre-flight checks");
	info.reachable = true;
	info.max_batch_size = jsonb_int(chroma_jsonb_get(jb, "max_batch_size"), 0);
	v = chroma_jsonb_get(jb, "supports_base64_encoding");
	info.supports_base64 = (v != NULL && v->type == jbvBool && v->val.boolean);

	/*
	 * Array metadata values are not announced in pre-flight; servers that accept them
	 * describe list value types in their OpenAPI schema.
	 */
	chroma_call("GET", psprintf("%s/openapi.json", chroma_base_url()), NULL, 0, &resp);
	info.supports_metadata_arrays = (resp.kind == CHROMA_OK &&
									 body_mentions(&resp.http.body, "ListValueType"));
	/* servers that answer a delete with {"deleted": N} describe it there too */
	info.supports_delete_count = (resp.kind == CHROMA_OK &&
								  schema_mentions(&resp.http.body,
												  "DeleteCollectionRecordsResponse",
												  "\"deleted\""));

	cached_info = info;
	if (cached_for)
		pfree(cached_for);
	cached_for = MemoryContextStrdup(TopMemoryContext, key);
	return &cached_info;
}

bool
chroma_use_base64(void)
{
	switch (chroma_embedding_encoding)
	{
		case CHROMA_ENCODING_BASE64:
			return true;
		case CHROMA_ENCODING_JSON:
			return false;
		default:
			return chroma_server(false)->supports_base64;
	}
}

int
chroma_effective_batch_size(void)
{
	int			max = chroma_server(false)->max_batch_size;

	if (max > 0 && max < chroma_batch_size)
		return max;
	return chroma_batch_size;
}

void
chroma_check_collection_name(const char *name)
{
	size_t		n;
	int			dots = 0;
	bool		digits_and_dots = true;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("collection name must not be null")));
	n = strlen(name);
	if (n < 3 || n > 512)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid collection name \"%s\"", name),
				 errdetail("A collection name has 3 to 512 characters.")));
	for (size_t i = 0; i < n; i++)
	{
		char		c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid collection name \"%s\"", name),
					 errdetail("A collection name may contain only letters a-z and A-Z, digits, '.', '_' and '-'.")));
		if (c == '.')
			dots++;
		else if (!(c >= '0' && c <= '9'))
			digits_and_dots = false;
	}
	if (!isalnum((unsigned char) name[0]) || !isalnum((unsigned char) name[n - 1]))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid collection name \"%s\"", name),
				 errdetail("A collection name starts and ends with a letter or a digit.")));
	if (strstr(name, "..") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid collection name \"%s\"", name),
				 errdetail("A collection name must not contain \"..\".")));
	if (digits_and_dots && dots == 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid collection name \"%s\"", name),
				 errdetail("A collection name must not be an IP address.")));
}

void
chroma_parse_collection(Jsonb *obj, ChromaCollection *out)
{
	JsonbValue *v;

	memset(out, 0, sizeof(*out));
	out->id = chroma_jsonb_text(chroma_jsonb_get(obj, "id"));
	out->name = chroma_jsonb_text(chroma_jsonb_get(obj, "name"));
	out->dimension = jsonb_int(chroma_jsonb_get(obj, "dimension"), 0);
	v = chroma_jsonb_get(obj, "metadata");
	if (v != NULL && v->type == jbvBinary)
		out->metadata = JsonbValueToJsonb(v);
	v = chroma_jsonb_get(obj, "configuration_json");
	if (v != NULL && v->type == jbvBinary)
		out->configuration = JsonbValueToJsonb(v);
	if (out->id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("Chroma sent a collection without an id")));
}

/*
 * GET of the collection named name into resp: false when it does not exist and
 * missing_ok, an error when it does not exist otherwise or the request failed.
 */
static bool
fetch_collection(const char *name, ChromaResponse *resp, bool missing_ok)
{
	chroma_check_collection_name(name);
	chroma_call("GET", psprintf("%s/%s", chroma_collections_url(), name), NULL, 0, resp);
	if (resp->kind == CHROMA_FATAL && resp->http.status == 404)
	{
		if (missing_ok)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("Chroma collection \"%s\" does not exist", name),
				 errhint("Create it with chroma_create_collection().")));
	}
	if (resp->kind != CHROMA_OK)
		chroma_raise(resp, psprintf("get collection \"%s\"", name));
	return true;
}

bool
chroma_api_get_collection(const char *name, ChromaCollection *out, bool missing_ok)
{
	ChromaResponse resp;

	if (!fetch_collection(name, &resp, missing_ok))
		return false;
	chroma_parse_collection(chroma_parse_body(&resp, "get a collection"), out);
	return true;
}

/*
 * The top-level "id" and "dimension" of a collection object in UTF-8 text, read without
 * converting anything: the rest (metadata, configuration) may hold characters the
 * database encoding lacks (red-team TAP 178).
 */
typedef struct CollectionFields
{
	int			depth;
	bool		want_id;
	bool		want_dimension;
	char	   *id;
	char	   *dimension;
} CollectionFields;

static void
fields_nest(void *state)
{
	((CollectionFields *) state)->depth++;
}

static void
fields_unnest(void *state)
{
	((CollectionFields *) state)->depth--;
}

static void
fields_field_start(void *state, char *fname, bool isnull)
{
	CollectionFields *f = (CollectionFields *) state;

	if (f->depth != 1)
		return;
	f->want_id = strcmp(fname, "id") == 0;
	f->want_dimension = strcmp(fname, "dimension") == 0;
}

static void
fields_scalar(void *state, char *token, JsonTokenType tokentype)
{
	CollectionFields *f = (CollectionFields *) state;

	if (f->depth != 1)
		return;
	if (f->want_id && tokentype == JSON_TOKEN_STRING)
		f->id = pstrdup(token);
	if (f->want_dimension && tokentype == JSON_TOKEN_NUMBER)
		f->dimension = pstrdup(token);
	f->want_id = f->want_dimension = false;
}

static void
parse_collection_fields(const ChromaResponse *resp, const char *name, ChromaCollection *out)
{
	const StringInfoData *body = &resp->http.body;
	CollectionFields f;
	ChromaJsonSem sem;
	JsonLexContext *lex;

	memset(&f, 0, sizeof(f));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &f;
	sem.object_start = fields_nest;
	sem.object_end = fields_unnest;
	sem.array_start = fields_nest;
	sem.array_end = fields_unnest;
	sem.object_field_start = fields_field_start;
	sem.scalar = fields_scalar;
	chroma_check_response_encoding(body->data, body->len, "get a collection");
	lex = chroma_json_lexer(body->data, body->len, PG_UTF8, true);
	if (body->len == 0 || body->data[0] != '{' || strlen(body->data) != (size_t) body->len ||
		chroma_parse_json(lex, &sem) != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("Chroma sent a response that is not valid JSON while trying to get a collection"),
				 errdetail("Response begins: %s", printable_prefix(body->data, body->len, 120))));
	if (f.id == NULL || f.id[0] == '\0' || strspn(f.id, "0123456789abcdefABCDEF-") != strlen(f.id))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("Chroma sent collection \"%s\" without a valid id", name)));
	memset(out, 0, sizeof(*out));
	out->id = f.id;
	out->name = pstrdup(name);
	if (f.dimension != NULL)
		out->dimension = pg_strtoint32(f.dimension);
}

/*
 * chroma_api_get_collection for the record functions: its id, name and dimension only
 * (metadata and configuration NULL), so that a database whose encoding lacks a character
 * of the collection's metadata can still read and write its records.
 */
bool
chroma_api_get_collection_id(const char *name, ChromaCollection *out, bool missing_ok)
{
	ChromaResponse resp;

	if (!fetch_collection(name, &resp, missing_ok))
		return false;
	if (GetDatabaseEncoding() == PG_UTF8)
	{
		chroma_parse_collection(chroma_parse_body(&resp, "get a collection"), out);
		out->metadata = NULL;
		out->configuration = NULL;
	}
	else
		parse_collection_fields(&resp, name, out);
	return true;
}

/*
 * Whether Chroma has a collection of that id: a count of its records answered, or a 404
 * that says so (not a proxy's page for a wrong URL); anything else cannot tell.
 */
ChromaIdState
chroma_api_collection_id_state(const char *collection_id)
{
	ChromaResponse resp;

	chroma_call("GET", chroma_records_url(collection_id, "count"), NULL, 0, &resp);
	if (resp.kind == CHROMA_OK)
		return CHROMA_ID_EXISTS;
	if (resp.kind == CHROMA_FATAL && resp.http.status == 404 && resp.http.body.len > 0 &&
		(strstr(resp.http.body.data, "NotFound") != NULL ||
		 strstr(resp.http.body.data, "does not exist") != NULL))
		return CHROMA_ID_GONE;
	return CHROMA_ID_UNKNOWN;
}

/* Whether Chroma has a collection of that id (false also when it cannot tell). */
bool
chroma_api_collection_id_exists(const char *collection_id)
{
	return chroma_api_collection_id_state(collection_id) == CHROMA_ID_EXISTS;
}

/* A jsonb argument as JSON text in UTF-8, for a request body. */
static void
append_jsonb_utf8(StringInfo s, Jsonb *j)
{
	char	   *t = JsonbToCString(NULL, &j->root, VARSIZE(j));

	appendStringInfoString(s, pg_server_to_any(t, strlen(t), PG_UTF8));
}

void
chroma_api_create_collection(const char *name, Jsonb *metadata, const char *space,
							 Jsonb *configuration, bool get_or_create, ChromaCollection *out)
{
	StringInfoData s;
	ChromaResponse resp;

	chroma_check_collection_name(name);
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"name\":");
	escape_json(&s, name);
	appendStringInfoString(&s, ",\"metadata\":");
	if (metadata)
		append_jsonb_utf8(&s, metadata);
	else
		appendStringInfoString(&s, "null");
	if (configuration)
	{
		appendStringInfoString(&s, ",\"configuration\":");
		append_jsonb_utf8(&s, configuration);
	}
	else if (space)
	{
		appendStringInfoString(&s, ",\"configuration\":{\"hnsw\":{\"space\":");
		escape_json(&s, space);
		appendStringInfoString(&s, "}}");
	}
	appendStringInfo(&s, ",\"get_or_create\":%s}", get_or_create ? "true" : "false");

	chroma_call("POST", chroma_collections_url(), s.data, s.len, &resp);
	if (resp.kind == CHROMA_CONFLICT)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("Chroma collection \"%s\" already exists", name),
				 errhint("Pass get_or_create => true to use the existing collection.")));
	if (resp.kind != CHROMA_OK)
		chroma_raise(&resp, psprintf("create collection \"%s\"", name));
	chroma_parse_collection(chroma_parse_body(&resp, "create a collection"), out);
}

void
chroma_api_modify_collection(const char *id, const char *new_name, Jsonb *new_metadata,
							 Jsonb *new_configuration)
{
	StringInfoData s;
	ChromaResponse resp;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	if (new_name)
	{
		appendStringInfoString(&s, "\"new_name\":");
		escape_json(&s, new_name);
	}
	if (new_metadata)
	{
		appendStringInfoString(&s, s.len > 1 ? ",\"new_metadata\":" : "\"new_metadata\":");
		append_jsonb_utf8(&s, new_metadata);
	}
	if (new_configuration)
	{
		appendStringInfoString(&s, s.len > 1 ? ",\"new_configuration\":" : "\"new_configuration\":");
		append_jsonb_utf8(&s, new_configuration);
	}
	appendStringInfoChar(&s, '}');
	chroma_call("PUT", psprintf("%s/%s", chroma_collections_url(), id), s.data, s.len, &resp);
	if (resp.kind == CHROMA_CONFLICT)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("Chroma collection \"%s\" already exists", new_name ? new_name : ""),
				 errhint("Choose another new_name.")));
	if (resp.kind != CHROMA_OK)
		chroma_raise(&resp, "modify a collection");
}

/* The number of records in a collection (by id). */
int64
chroma_api_count(const char *collection_id)
{
	ChromaResponse resp;
	char	   *end;
	long long	n;

	chroma_call_or_raise("GET", chroma_records_url(collection_id, "count"), NULL, 0, &resp,
						 "count records");
	errno = 0;
	n = strtoll(resp.http.body.data, &end, 10);
	while (*end == ' ' || *end == '\n' || *end == '\r')
		end++;
	if (resp.http.body.len == 0 || *end != '\0' || errno != 0 || n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("unexpected response from Chroma to a count"),
				 errdetail("Expected a whole number.")));
	return (int64) n;
}

bool
chroma_api_delete_collection(const char *name, bool missing_ok)
{
	ChromaResponse resp;

	chroma_check_collection_name(name);
	chroma_call("DELETE", psprintf("%s/%s", chroma_collections_url(), name), NULL, 0, &resp);
	if (resp.kind == CHROMA_FATAL && resp.http.status == 404)
	{
		if (missing_ok)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("Chroma collection \"%s\" does not exist", name)));
	}
	if (resp.kind != CHROMA_OK)
		chroma_raise(&resp, psprintf("delete collection \"%s\"", name));
	return true;
}

void
chroma_api_set_collection_metadata(const char *collection_id, Jsonb *metadata)
{
	StringInfoData s;
	ChromaResponse resp;

	initStringInfo(&s);
	appendStringInfoString(&s, "{\"new_metadata\":");
	append_jsonb_utf8(&s, metadata);
	appendStringInfoChar(&s, '}');
	chroma_call_or_raise("PUT", psprintf("%s/%s", chroma_collections_url(), collection_id),
						 s.data, s.len, &resp, "update collection metadata");
}
