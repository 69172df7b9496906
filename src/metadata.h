/*
 * metadata.h — Chroma metadata from jsonb: validation and rendering as UTF-8 JSON.
 */
#ifndef CHROMA_SYNC_METADATA_H
#define CHROMA_SYNC_METADATA_H

#include "encode.h"
#include "utils/jsonb.h"

/*
 * Checks that jb is a metadata object Chroma accepts (scalar values; homogeneous scalar
 * arrays when allow_arrays; no empty, '#'/'$'-prefixed or "chroma:" keys; numbers in
 * range) and appends it as compact UTF-8 JSON. `who` names the record in errors.
 * Returns the number of keys.
 */
extern int	chroma_metadata_render(Jsonb *jb, bool allow_arrays, cs_buf *out,
								   const char *who);

/*
 * A nested object with this single key stands for a number that is not finite (NaN,
 * infinity) in a mirror's metadata: refused with that reason.
 */
#define METADATA_NOT_FINITE "chroma:not_finite"

/* Checks one key; raises an ERROR naming `who` when Chroma would refuse it. */
extern void chroma_metadata_check_key(const char *key, int len, const char *who);

/* Appends a server-encoded string as a JSON string in UTF-8. */
extern void chroma_json_server_string(cs_buf *out, const char *s, int len);

/* Appends a numeric as a JSON number Chroma reads as int64 or float64, or raises. */
extern void chroma_json_numeric(cs_buf *out, Numeric num, const char *key, const char *who);

#endif							/* CHROMA_SYNC_METADATA_H */
