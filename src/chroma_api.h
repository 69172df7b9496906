/*
 * chroma_api.h — Chroma's HTTP API v2: endpoints, response parsing, error classes.
 */
#ifndef CHROMA_SYNC_CHROMA_API_H
#define CHROMA_SYNC_CHROMA_API_H

#include "http.h"
#include "pg_compat.h"
#include "utils/jsonb.h"

/* What a caller should do about a failed call (CHROMA_API.md, "Errors and retries"). */
typedef enum ChromaErrorKind
{
	CHROMA_OK = 0,
	CHROMA_TRANSIENT,			/* connection error, timeout, 429, 500, 503, 504: retry */
	CHROMA_REFUSED,				/* 400, 422: the data is refused */
	CHROMA_TOO_LARGE,			/* 413: split and resend */
	CHROMA_FATAL,				/* 401, 403, 404: no row is at fault; stop */
	CHROMA_CONFLICT,			/* 409 */
	CHROMA_OTHER				/* anything else */
} ChromaErrorKind;

typedef struct ChromaResponse
{
	ChromaHttpResult http;
	ChromaErrorKind kind;
	char	   *error_name;		/* Chroma's "error" field, or NULL */
	char	   *message;		/* readable reason (Chroma's message or the transport error) */
} ChromaResponse;

typedef struct ChromaServerInfo
{
	bool		reachable;
	int			max_batch_size;
	bool		supports_base64;
	bool		supports_metadata_arrays;
	bool		supports_delete_count;	/* delete answers {"deleted": N} and takes limit */
} ChromaServerInfo;

typedef struct ChromaCollection
{
	char	   *id;				/* uuid text */
	char	   *name;
	int			dimension;		/* 0 until the first write */
	Jsonb	   *metadata;		/* NULL when none */
	Jsonb	   *configuration;	/* the server's configuration_json; NULL when none */
} ChromaCollection;

/* Base URL of the server, without a trailing slash (palloc'd). */
extern char *chroma_base_url(void);
/* {base}/api/v2/tenants/{t}/databases/{d}/collections (palloc'd) */
extern char *chroma_collections_url(void);
/* {collections}/{uuid}/{op} */
extern char *chroma_records_url(const char *collection_id, const char *op);

/* Sends a request and classifies the outcome; never raises for HTTP or transport errors. */
extern void chroma_call(const char *method, const char *url,
						const char *body, size_t body_len, ChromaResponse *resp);
/* Classifies a finished HTTP exchange (used after chroma_http_finish). */
extern void chroma_classify(ChromaResponse *resp);
/* Raises the ERROR that fits resp (SQLSTATE by class, Chroma's message in errdetail). */
pg_noreturn extern void chroma_raise(const ChromaResponse *resp, const char *action);
/* chroma_call, then chroma_raise unless the call succeeded. */
extern void chroma_call_or_raise(const char *method, const char *url,
								 const char *body, size_t body_len,
								 ChromaResponse *resp, const char *action);

/* 22021 unless the response body is valid UTF-8 (checked before anything is built from it). */
extern void chroma_check_response_encoding(const char *data, int len, const char *action);

/* Parses a response body as JSON (Postgres' parser); a clear ERROR when it is not. */
extern Jsonb *chroma_parse_body(const ChromaResponse *resp, const char *action);

/* Pre-flight facts, cached per backend and server; raises if unreachable unless quiet. */
extern const ChromaServerInfo *chroma_server(bool quiet);
extern void chroma_forget_server(void);
/* Whether embeddings go out as base64 (embedding_encoding and the server). */
extern bool chroma_use_base64(void);
/* Records per request: batch_size capped by the server's max_batch_size. */
extern int	chroma_effective_batch_size(void);

/* Collection names: Chroma's rules, checked before anything is sent. */
extern void chroma_check_collection_name(const char *name);

extern bool chroma_api_get_collection(const char *name, ChromaCollection *out, bool missing_ok);
/* The same, with the id, name and dimension only (metadata, configuration NULL). */
extern bool chroma_api_get_collection_id(const char *name, ChromaCollection *out, bool missing_ok);
/* Whether Chroma has a collection of that id, has none, or cannot tell now. */
typedef enum ChromaIdState
{
	CHROMA_ID_EXISTS,
	CHROMA_ID_GONE,
	CHROMA_ID_UNKNOWN
} ChromaIdState;
extern ChromaIdState chroma_api_collection_id_state(const char *collection_id);
/* Whether Chroma has a collection of that id (false also when it cannot tell). */
extern bool chroma_api_collection_id_exists(const char *collection_id);
extern void chroma_api_modify_collection(const char *id, const char *new_name, Jsonb *new_metadata,
										 Jsonb *new_configuration);
/* configuration (checked by chroma_check_configuration) wins over space; both may be NULL */
extern void chroma_api_create_collection(const char *name, Jsonb *metadata, const char *space,
										 Jsonb *configuration, bool get_or_create,
										 ChromaCollection *out);
extern int64 chroma_api_count(const char *collection_id);
extern bool chroma_api_delete_collection(const char *name, bool missing_ok);
/* Replaces the collection's metadata (Chroma's update replaces, it does not merge). */
extern void chroma_api_set_collection_metadata(const char *collection_id, Jsonb *metadata);
extern void chroma_parse_collection(Jsonb *obj, ChromaCollection *out);

/* Helpers for reading parsed responses. */
extern JsonbValue *chroma_jsonb_get(Jsonb *obj, const char *key);
extern char *chroma_jsonb_text(JsonbValue *v);	/* string value or NULL */

#endif							/* CHROMA_SYNC_CHROMA_API_H */
