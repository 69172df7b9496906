/*
 * collection_config.h — a collection's index configuration, checked before it is sent.
 */
#ifndef CHROMA_SYNC_COLLECTION_CONFIG_H
#define CHROMA_SYNC_COLLECTION_CONFIG_H

#include "utils/jsonb.h"

/*
 * Raises a clear error unless cfg is {"hnsw": {...}} or {"spann": {...}} with known HNSW
 * keys and sound values; modify: only what a modification may change. arg names the
 * argument in messages ("configuration").
 */
extern void chroma_check_configuration(const char *arg, Jsonb *cfg, bool modify);

/* The "space" the configuration names (in hnsw or spann), or NULL. */
extern char *chroma_configuration_space(Jsonb *cfg);

/* "hnsw" or "spann": the index cfg sets (a collection's: has), or NULL. */
extern const char *chroma_configuration_index(Jsonb *cfg);

/*
 * ERROR (0A000) when cfg is for another index than the collection has (collection_cfg, the
 * server's configuration of it): the server ignores such settings without a word.
 */
extern void chroma_check_configuration_index(const char *arg, Jsonb *cfg, const char *collection,
											 Jsonb *collection_cfg);

/* A key where a given configuration and a collection's disagree (values as JSON text). */
typedef struct ChromaConfigConflict
{
	char	   *key;			/* "hnsw.space" */
	char	   *given;
	char	   *existing;
	bool		modifiable;		/* chroma_modify_collection may change it */
} ChromaConfigConflict;

/*
 * Whether the existing collection's configuration (configuration_json; may be NULL)
 * disagrees with a checked configuration on a key that configuration gives: fills *out
 * with the first such key. Keys the caller leaves out, and keys the server does not show
 * (num_threads, batch_size), are not compared; fixed_only: nor keys a modification may
 * change (a recorded configuration, which chroma_modify_collection does not update).
 */
extern bool chroma_configuration_conflict(Jsonb *given, Jsonb *existing, bool fixed_only,
										  ChromaConfigConflict *out);

/*
 * ERROR (0A000) when the server made a collection with another index than cfg asked for
 * (made: the configuration it answered with): it ignored cfg. The collection is not
 * deleted (by name, it may be another session's by then).
 */
extern void chroma_check_configuration_made(const char *collection, Jsonb *cfg, Jsonb *made);

#endif
