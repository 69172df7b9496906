/*
 * chroma_sync.h — settings and declarations shared across the extension.
 */
#ifndef CHROMA_SYNC_H
#define CHROMA_SYNC_H

#include "postgres.h"

#include "utils/array.h"

/* embedding_encoding values */
typedef enum ChromaEncodingSetting
{
	CHROMA_ENCODING_AUTO,
	CHROMA_ENCODING_BASE64,
	CHROMA_ENCODING_JSON
} ChromaEncodingSetting;

/* Settings (GUCs); defined in chroma_sync.c */
extern char *chroma_url;
extern char *chroma_tenant;
extern char *chroma_database;
extern char *chroma_api_key;
extern char *chroma_api_key_file;
extern bool chroma_tls_verify;
extern char *chroma_ca_file;
extern int	chroma_batch_size;
extern int	chroma_timeout_ms;
extern int	chroma_connect_timeout_ms;
extern int	chroma_embedding_encoding;
extern int	chroma_max_concurrent_requests;

/* chroma_sync.max_concurrent_requests at most: Chroma Cloud's concurrent writes per collection */
#define CHROMA_MAX_CONCURRENT_REQUESTS_LIMIT 10

/* Largest request body we build (Chroma's default limit is 40 MiB). */
#define CHROMA_MAX_BODY_BYTES (32 * 1024 * 1024)

/* The API key in effect (setting, else the key file's first line); NULL if none. */
extern const char *chroma_effective_api_key(void);

/* Keeping the key out of the log and pg_stat_activity (key_redact.c). */
extern void chroma_redact_init(void);
extern void chroma_redact_activity(void);

/* The float4 elements of a real[] without nulls (float4 is a C float). */
static inline float *
float4_array_data(ArrayType *a)
{
	return (float *) (void *) ARR_DATA_PTR(a);
}

#endif							/* CHROMA_SYNC_H */
