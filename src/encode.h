/*
 * encode.h — the Chroma column body, built in plain C.
 *
 * No Postgres headers here: this file, encode.c and base64.c are unit-tested, fuzzed
 * and benchmarked standalone. Memory comes from a caller-supplied grow callback so the
 * extension can use palloc and standalone programs can use realloc.
 */
#ifndef CHROMA_SYNC_ENCODE_H
#define CHROMA_SYNC_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_buf cs_buf;

/* Ensure b->cap >= b->len + need (plus one spare byte for a NUL); may not return on failure. */
typedef void (*cs_grow_fn) (cs_buf *b, size_t need);

struct cs_buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	cs_grow_fn	grow;
	void	   *ctx;			/* for the grow callback */
};

/* A realloc-based buffer for standalone programs (aborts on out-of-memory). */
void		cs_buf_init_malloc(cs_buf *b, size_t initial);
void		cs_buf_free_malloc(cs_buf *b);

static inline void
cs_buf_reserve(cs_buf *b, size_t need)
{
	if (b->len + need + 1 > b->cap)
		b->grow(b, need);
}

static inline void
cs_buf_putc(cs_buf *b, char c)
{
	cs_buf_reserve(b, 1);
	b->data[b->len++] = c;
}

void		cs_buf_append(cs_buf *b, const char *s, size_t n);
void		cs_buf_puts(cs_buf *b, const char *s);

/* ---- base64 (RFC 4648 standard alphabet, '=' padded; base64.c) ---- */
static inline size_t
cs_base64_len(size_t nbytes)
{
	return ((nbytes + 2) / 3) * 4;
}

/* Writes cs_base64_len(n) bytes to dst (no NUL); returns that length. */
size_t		cs_base64_encode(const unsigned char *src, size_t n, char *dst);
/* Portable reference implementation, always scalar (tests compare against it). */
size_t		cs_base64_encode_scalar(const unsigned char *src, size_t n, char *dst);
/* Name of the implementation cs_base64_encode dispatches to ("avx2", "scalar", ...). */
const char *cs_base64_impl(void);

/*
 * The encoder named impl ("scalar", "avx2", "avx512vbmi") when this build and CPU can
 * run it, else NULL: lets tests and benchmarks reach every implementation. The
 * dispatch picks the fastest; CHROMA_SYNC_BASE64=avx2 or =scalar caps it.
 */
typedef size_t (*cs_base64_fn) (const unsigned char *src, size_t n, char *dst);
cs_base64_fn cs_base64_encoder(const char *impl);

/* ---- JSON ---- */

/* Appends s as a quoted JSON string; escapes '"', '\\' and every byte < 0x20 (and 0x7f). */
void		cs_json_string(cs_buf *b, const char *s, size_t n);

/* Longest text cs_format_float can produce, without NUL. */
#define CS_FLOAT_MAXLEN 24

/*
 * Shortest decimal text that strtof() reads back to exactly the same float (bit for
 * bit, -0.0 included, written "-0.0"). f must be finite. Returns the length written.
 */
size_t		cs_format_float(float f, char *dst);

/* Appends the floats as a JSON array "[a,b,...]". */
void		cs_json_float_array(cs_buf *b, const float *v, size_t n);

/* Appends "<base64 of v as little-endian float32>" (quoted). */
void		cs_embedding_base64(cs_buf *b, const float *v, size_t n);

/* Index of the first NaN or +-Infinity in v, or -1 when all are finite. */
ptrdiff_t	cs_first_nonfinite(const float *v, size_t n);

/* ---- the record ("column") body ---- */

typedef enum cs_float_encoding
{
	CS_ENCODING_JSON,
	CS_ENCODING_BASE64
} cs_float_encoding;

typedef struct cs_record
{
	const char *id;				/* UTF-8, not NUL-terminated necessarily */
	size_t		id_len;
	const float *embedding;		/* NULL: no embedding for this record */
	const char *document;		/* NULL: JSON null */
	size_t		document_len;
	const char *metadata;		/* a complete JSON object text, or NULL: JSON null */
	size_t		metadata_len;
} cs_record;

typedef struct cs_body_options
{
	size_t		dim;			/* floats per embedding */
	cs_float_encoding encoding;
	bool		with_embeddings;	/* emit "embeddings" */
	bool		with_documents; /* emit "documents" */
	bool		with_metadatas; /* emit "metadatas" */
} cs_body_options;

/*
 * Appends {"ids":[...],"embeddings":[...],"documents":[...],"metadatas":[...]} for
 * recs[0..n-1]. Columns not requested are omitted. A record whose embedding is NULL
 * while embeddings are emitted gets JSON null in that slot. Metadata texts are copied
 * verbatim (the caller built them as valid JSON).
 */
void		cs_encode_records(cs_buf *b, const cs_record *recs, size_t n,
							  const cs_body_options *opt);

/* Appends {"ids":[...]} (a delete body). */
void		cs_encode_ids(cs_buf *b, const cs_record *recs, size_t n);

#endif							/* CHROMA_SYNC_ENCODE_H */
