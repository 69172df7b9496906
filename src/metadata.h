/*
 * metadata.h — Chroma metadata from jsonb: validation and rendering as UTF-8 JSON.
 */
#ifndef CHROMA_SYNC_METADATA_H
#define CHROMA_SYNC_METADATA_H

#include "encode.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

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

/*
 * How a metadata number is sent: a whole number within int64 as it is; one beyond int64
 * as a float64 only when that float64's shortest decimal is the number itself (a whole
 * number is never rounded); any other number (written with a fraction) as the nearest
 * float64, rounded as the cast ::float8 rounds. NaN, infinity, and numbers beyond
 * float64's range (also those that underflow to zero) are refused.
 */
typedef enum MetadataNumber
{
	METADATA_NUMBER_INT,		/* sent as written: int64 */
	METADATA_NUMBER_FLOAT,		/* sent as the float64 *as_float */
	METADATA_NUMBER_NOT_FINITE, /* refused: NaN or infinity */
	METADATA_NUMBER_INT_RANGE,	/* refused: whole, beyond int64, no float64 as written */
	METADATA_NUMBER_FLOAT_RANGE /* refused: beyond float64's range */
} MetadataNumber;

/* Classifies num as above; sets *as_float (when not NULL) for METADATA_NUMBER_FLOAT. */
extern MetadataNumber chroma_metadata_number(Numeric num, double *as_float);

/* Appends a numeric as a JSON number Chroma reads as int64 or float64, or raises. */
extern void chroma_json_numeric(cs_buf *out, Numeric num, const char *key, const char *who);

/* The top-level keys of a metadata object (palloc'd, server encoding); NIL for none. */
extern List *chroma_metadata_keys(Jsonb *jb);

/*
 * The exactness rule of upserts (Chroma merges metadata; a null value removes a key):
 * appends "key": null to the object in out (complete, "{}" or "{...}") for each of
 * keys[0..nkeys) (server encoding) that is not in present (a List of C strings).
 * Returns how many were appended.
 */
extern int	chroma_metadata_append_nulls(cs_buf *out, char *const *keys, int nkeys,
										 List *present);

#endif							/* CHROMA_SYNC_METADATA_H */
