/*
 * fuzz_response.c — libFuzzer target for the get/query response parser (src/response.c),
 * run standalone on PostgreSQL's own JSON parser with the backend shim of pg_shim.c.
 *
 * Byte 0 of the input picks the mode; bit 0 = query shape (nested), else get shape.
 *   bit 1 clear: "raw" — the rest of the input is the response body as is. A parse
 *     error is a clean outcome when it carries one of the SQLSTATEs below; an error
 *     without one (XX000), a crash, a leak, UB or a stack overflow is a finding. A
 *     success must hand back consistent rows (every array readable to n, metadata a
 *     complete JSON object, strings valid UTF-8, floats finite); memory stays within
 *     128 x the body.
 *     With bit 2 also set ("repeat"), a unit of the input is repeated up to 64 kB:
 *     nesting deep enough for the stack-depth check, long arrays, huge strings.
 *     With bit 3 set, every per-query list is read (chroma_parse_query_results, the
 *     parser of chroma_query_batch): records come back grouped by query, in order.
 *   bit 1 set: "structured" — the bytes describe records; a valid response in the
 *     server's shape is printed from them (key order, whitespace, float spellings,
 *     escapes, unknown keys, null columns and extra per-query lists vary) and the
 *     parsed rows must equal the records exactly: ids, documents and metadata text
 *     byte for byte, embeddings and distances bit for bit. Any error is a finding.
 */
#include "pg_shim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog/pg_type_d.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "response.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/* a smaller quarantine than the default 256 MB keeps the target off the page-fault path */
const char *
__asan_default_options(void)
{
	return "quarantine_size_mb=64";
}

static void
fail(const char *what)
{
	fprintf(stderr, "fuzz_response: %s\n", what);
	abort();
}

#define REQUIRE(cond) do { if (!(cond)) fail(#cond); } while (0)

static uint32_t
float_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	return u;
}

/* ------------------------------------------------------------ parse, guarded */

/*
 * Runs chroma_parse_rows, or chroma_parse_query_results when all_lists; false (with
 * shim_error set) when it raised an ERROR.
 */
static bool
parse_guarded(const char *text, size_t len, bool nested, bool all_lists, ChromaRows *rows)
{
	sigjmp_buf	jb;
	StringInfoData body;
	bool		ok;

	/* like the HTTP layer's StringInfo: exactly len bytes plus a NUL */
	body.data = palloc(len + 1);
	memcpy(body.data, text, len);
	body.data[len] = '\0';
	body.len = (int) len;
	body.maxlen = (int) len + 1;
	body.cursor = 0;

	if (sigsetjmp(jb, 0) == 0)
	{
		PG_exception_stack = &jb;
		if (all_lists)
			chroma_parse_query_results(&body, rows);
		else
			chroma_parse_rows(&body, nested, rows);
		ok = true;
	}
	else
		ok = false;
	PG_exception_stack = NULL;
	return ok;
}

/* The SQLSTATEs a refused response may raise: all say what is wrong with the input. */
static void
check_error(void)
{
	switch (shim_error.sqlerrcode)
	{
		case ERRCODE_INVALID_JSON_TEXT:
		case ERRCODE_UNTRANSLATABLE_CHARACTER:
		case ERRCODE_CHARACTER_NOT_IN_REPERTOIRE:
		case ERRCODE_STATEMENT_TOO_COMPLEX:
			break;
		default:
			fprintf(stderr, "fuzz_response: ERROR with SQLSTATE %s: %s (%s) at %s:%d\n",
					unpack_sql_state(shim_error.sqlerrcode), shim_error.message,
					shim_error.detail, shim_error.filename ? shim_error.filename : "?",
					shim_error.lineno);
			abort();
	}
	REQUIRE(shim_error.elevel == ERROR);
	REQUIRE(shim_error.message[0] != '\0');
}

/* True when text is one complete JSON value (PostgreSQL's parser, no actions). */
static bool
valid_json(const char *text)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen(unconstify(char *, text),
													   (int) strlen(text), PG_UTF8, true);
	JsonSemAction sem;

	memset(&sem, 0, sizeof(sem));
	return pg_parse_json(lex, &sem) == JSON_SUCCESS;
}

static bool
valid_utf8(const char *s)
{
	int			len = (int) strlen(s);

	return pg_encoding_verifymbstr(PG_UTF8, s, len) == len;
}

/* The real[] chroma_rows_embedding builds in front of the floats is one the backend reads. */
static void
check_embedding_array(ChromaRows *rows, int i)
{
	int			n = rows->dims[i];
	ArrayType  *a = chroma_rows_embedding(rows, i);

	REQUIRE(a->elemtype == FLOAT4OID && !ARR_HASNULL(a));
	if (n == 0)
	{
		REQUIRE(ARR_NDIM(a) == 0 && VARSIZE(a) == sizeof(ArrayType));
		return;
	}
	REQUIRE(ARR_NDIM(a) == 1 && ARR_DIMS(a)[0] == n && ARR_LBOUND(a)[0] == 1);
	REQUIRE((float *) ARR_DATA_PTR(a) == rows->embeddings[i]);
	REQUIRE(VARSIZE(a) == (size_t) ARR_DATA_OFFSET(a) + sizeof(float) * n);
}

/* What every caller of chroma_parse_rows relies on after a success. */
static void
check_rows(ChromaRows *rows)
{
	int			i;
	int			j;

	REQUIRE(rows->n >= 0);
	REQUIRE(rows->ids != NULL && rows->embeddings != NULL && rows->dims != NULL &&
			rows->documents != NULL && rows->metadatas != NULL && rows->distances != NULL);
	for (i = 0; i < rows->n; i++)
	{
		REQUIRE(rows->ids[i] != NULL);
		REQUIRE(valid_utf8(rows->ids[i]));
		if (rows->has_embeddings && rows->embeddings[i] != NULL)
		{
			REQUIRE(rows->dims[i] >= 0);
			for (j = 0; j < rows->dims[i]; j++)
				REQUIRE(isfinite(rows->embeddings[i][j]));	/* no NaN or Infinity in a real[] */
			check_embedding_array(rows, i);
		}
		if (rows->has_documents && rows->documents[i] != NULL)
			REQUIRE(valid_utf8(rows->documents[i]));
		if (rows->has_metadatas && rows->metadatas[i] != NULL)
		{
			const char *m = rows->metadatas[i];
			size_t		len = strlen(m);

			REQUIRE(len >= 2 && m[0] == '{' && m[len - 1] == '}');
			REQUIRE(valid_utf8(m));
			REQUIRE(valid_json(m));
		}
		if (rows->has_distances)
			REQUIRE(!isinf(rows->distances[i]));	/* NaN only for null */
	}
	/* the arrays hold n + 1 entries (callers may look one past the end for a NULL) */
	REQUIRE(rows->ids[rows->n] == NULL);
	/* chroma_parse_query_results: records grouped by query, in the order of the lists */
	if (rows->query != NULL)
	{
		REQUIRE(rows->nqueries >= 0);
		for (i = 0; i < rows->n; i++)
			REQUIRE(rows->query[i] >= 0 && rows->query[i] < rows->nqueries &&
					(i == 0 || rows->query[i] >= rows->query[i - 1]));
	}
	else
		REQUIRE(rows->nqueries == 0);
}

/* --------------------------------------------------------- structured mode */

typedef struct reader
{
	const uint8_t *p;
	size_t		left;
} reader;

static uint8_t
rd(reader *r)
{
	if (r->left == 0)
		return 0;
	r->left--;
	return *r->p++;
}

/* Output buffer (malloc'd; the shim's memory is reset per input). */
typedef struct obuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} obuf;

static void
put(obuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap)
	{
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap ? b->cap * 2 : 256;
		b->data = realloc(b->data, b->cap);
		REQUIRE(b->data != NULL);
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void
puts_(obuf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* JSON whitespace between tokens, chosen by the style byte. */
static void
ws(obuf *b, reader *r, uint8_t style)
{
	static const char *const spaces[] = {" ", "\n", "\t", "\r\n  ", "  "};

	if ((style & 3) == 0)
		return;
	if ((style & 3) == 1 && (rd(r) & 1) == 0)
		return;
	puts_(b, spaces[rd(r) % 5]);
}

static size_t
utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80)
	{
		out[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		out[0] = (char) (0xC0 | cp >> 6);
		out[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		out[0] = (char) (0xE0 | cp >> 12);
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char) (0xF0 | cp >> 18);
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

/*
 * A string of up to max code points (never U+0000, which PostgreSQL's JSON parser
 * refuses); its JSON spelling goes to b, its UTF-8 value to val.
 */
static void
gen_string(obuf *b, obuf *val, reader *r, size_t max)
{
	size_t		n = rd(r) % (max + 1);
	size_t		i;
	char		u8[4];
	char		esc[16];

	val->len = 0;
	put(val, "", 0);
	puts_(b, "\"");
	for (i = 0; i < n; i++)
	{
		uint8_t		kind = rd(r);
		uint8_t		lo = rd(r);
		uint32_t	cp;
		size_t		k;

		switch (kind % 6)
		{
			case 0:				/* printable ASCII, quote and backslash included */
				cp = 0x20 + lo % 95;
				break;
			case 1:				/* control characters */
				cp = 1 + lo % 31;
				break;
			case 2:				/* two-byte sequences */
				cp = 0x80 + ((uint32_t) lo << 3 | (kind >> 5)) % 0x780;
				break;
			case 3:				/* three-byte, surrogates skipped */
				cp = 0x800 + ((uint32_t) lo << 8 | rd(r)) % 0xF800;
				if (cp >= 0xD800 && cp < 0xE000)
					cp += 0x800;
				break;
			case 4:				/* four-byte */
				cp = 0x10000 + (((uint32_t) lo << 8 | rd(r)) << 4 | (kind >> 4)) % 0x100000;
				break;
			default:			/* JSON's own structure characters */
				cp = (uint32_t) "{}[]:,\"\\/"[lo % 9];
				break;
		}
		k = utf8_encode(cp, u8);
		put(val, u8, k);
		/* spelling: raw, short escape, or \u escape (surrogate pair above U+FFFF) */
		if ((kind & 8) || cp < 0x20 || cp == '"' || cp == '\\')
		{
			if (cp == '"' && !(kind & 16))
				puts_(b, "\\\"");
			else if (cp == '\\' && !(kind & 16))
				puts_(b, "\\\\");
			else if (cp == '\n' && !(kind & 16))
				puts_(b, "\\n");
			else if (cp == '/' && !(kind & 16))
				puts_(b, "\\/");
			else if (cp >= 0x10000)
			{
				uint32_t	v = cp - 0x10000;

				snprintf(esc, sizeof(esc), (kind & 32) ? "\\u%04X\\u%04X" : "\\u%04x\\u%04x",
						 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
				puts_(b, esc);
			}
			else
			{
				snprintf(esc, sizeof(esc), (kind & 32) ? "\\u%04X" : "\\u%04x", cp);
				puts_(b, esc);
			}
		}
		else
			put(b, u8, k);
	}
	puts_(b, "\"");
}

/* f in one of the spellings servers use (Rust writes "0.1", "1e30" or "1e+30"...). */
static void
spell_float(obuf *b, float f, uint8_t style)
{
	char		tmp[64];

	switch (style % 5)
	{
		case 0:
			snprintf(tmp, sizeof(tmp), "%.9g", (double) f);
			break;
		case 1:
			snprintf(tmp, sizeof(tmp), "%.9e", (double) f);
			break;
		case 2:					/* the exact double: still reads back to f */
			snprintf(tmp, sizeof(tmp), "%.17g", (double) f);
			break;
		case 3:
			if (f == truncf(f) && fabsf(f) < 1e15f)
				snprintf(tmp, sizeof(tmp), "%.0f", (double) f);
			else
				snprintf(tmp, sizeof(tmp), "%.9E", (double) f);
			break;
		default:				/* a trailing ".0" as serde writes whole floats */
			if (f == truncf(f) && fabsf(f) < 1e15f)
				snprintf(tmp, sizeof(tmp), "%.1f", (double) f);
			else
				snprintf(tmp, sizeof(tmp), "%.12g", (double) f);
			break;
	}
	puts_(b, tmp);
}

/* A finite float from 4 bytes. */
static float
gen_float_value(reader *r)
{
	uint32_t	u = 0;
	uint8_t		shape = rd(r);
	float		f;
	int			k;

	for (k = 0; k < 4; k++)
		u = u << 8 | rd(r);
	if ((u & 0x7f800000) == 0x7f800000)
		u &= ~UINT32_C(0x00800000);
	if (shape & 1)
		u &= 0xFFFF0000;		/* short mantissas: "1.5", "0.25", integral values */
	memcpy(&f, &u, 4);
	return f;
}

static float
gen_float(obuf *b, reader *r)
{
	float		f = gen_float_value(r);

	spell_float(b, f, rd(r));
	return f;
}

#define MAX_ROWS 24
/* longest body the repeat mode builds: deep nesting and long arrays from short inputs */
#define MAX_REPEATED (64 * 1024)
#define MAX_DIM 8

typedef struct gen_row
{
	obuf		id_json;		/* spelling in the body */
	obuf		id;				/* value */
	bool		has_emb;
	int			dim;
	float		emb[MAX_DIM];
	uint8_t		emb_style;
	bool		has_doc;
	obuf		doc_json;
	obuf		doc;
	bool		has_meta;
	size_t		meta_start;		/* offsets of the metadata object in the body */
	size_t		meta_end;
	bool		dist_null;
	float		dist;
	uint8_t		dist_style;
} gen_row;

/* A metadata value: scalars, arrays of scalars (new servers), now and then an object. */
static void
gen_meta_value(obuf *b, reader *r, uint8_t style, int depth)
{
	uint8_t		kind = rd(r);
	obuf		scratch = {0};
	char		tmp[32];

	switch (kind % 7)
	{
		case 0:
			gen_string(b, &scratch, r, 6);
			break;
		case 1:
			snprintf(tmp, sizeof(tmp), "%lld", (long long) (int8_t) rd(r) * 1000003LL * rd(r));
			puts_(b, tmp);
			break;
		case 2:
			gen_float(b, r);
			break;
		case 3:
			puts_(b, rd(r) & 1 ? "true" : "false");
			break;
		case 4:
			puts_(b, "null");
			break;
		case 5:
			{
				int			n = rd(r) % 4;
				int			k;

				puts_(b, "[");
				for (k = 0; k < n; k++)
				{
					if (k)
						puts_(b, ",");
					ws(b, r, style);
					gen_meta_value(b, r, style, depth + 1);
				}
				puts_(b, "]");
				break;
			}
		default:
			if (depth < 3)
			{
				puts_(b, "{");
				ws(b, r, style);
				gen_string(b, &scratch, r, 4);
				puts_(b, ":");
				gen_meta_value(b, r, style, depth + 1);
				puts_(b, "}");
			}
			else
				puts_(b, "0");
			break;
	}
	free(scratch.data);
}

static void
gen_metadata(obuf *b, reader *r, uint8_t style, gen_row *row)
{
	int			n = rd(r) % 4;
	int			k;
	obuf		scratch = {0};

	row->meta_start = b->len;
	puts_(b, "{");
	for (k = 0; k < n; k++)
	{
		if (k)
			puts_(b, ",");
		ws(b, r, style);
		gen_string(b, &scratch, r, 6);
		ws(b, r, style);
		puts_(b, ":");
		ws(b, r, style);
		gen_meta_value(b, r, style, 0);
		ws(b, r, style);
	}
	puts_(b, "}");
	row->meta_end = b->len;
	free(scratch.data);
}

enum
{
	K_IDS, K_EMB, K_DOCS, K_METAS, K_DISTS, K_URIS, K_INCLUDE, K_DATA, NKEYS
};

/* One column's list for rows[0..n-1]; rows NULL for a decoy per-query list. */
static void
gen_column(obuf *b, reader *r, uint8_t style, int key, gen_row *rows, int n)
{
	int			i;
	obuf		scratch = {0};

	puts_(b, "[");
	for (i = 0; i < n; i++)
	{
		gen_row    *row = rows ? &rows[i] : NULL;
		gen_row		decoy;

		if (row == NULL)
		{
			memset(&decoy, 0, sizeof(decoy));
			row = &decoy;
		}
		if (i)
			puts_(b, ",");
		ws(b, r, style);
		switch (key)
		{
			case K_IDS:
				if (rows)
					put(b, row->id_json.data, row->id_json.len);
				else
					gen_string(b, &scratch, r, 4);
				break;
			case K_EMB:
				if (rows && !row->has_emb)
					puts_(b, "null");
				else
				{
					int			d = rows ? row->dim : rd(r) % 3;
					int			j;

					puts_(b, "[");
					for (j = 0; j < d; j++)
					{
						if (j)
							puts_(b, ",");
						ws(b, r, style);
						if (rows)
							spell_float(b, row->emb[j], (uint8_t) (row->emb_style + j));
						else
							gen_float(b, r);
					}
					puts_(b, "]");
				}
				break;
			case K_DOCS:
				if (rows && !row->has_doc)
					puts_(b, "null");
				else if (rows)
					put(b, row->doc_json.data, row->doc_json.len);
				else
					gen_string(b, &scratch, r, 4);
				break;
			case K_METAS:
				if (rows && !row->has_meta)
					puts_(b, "null");
				else
					gen_metadata(b, r, style, row);
				break;
			case K_DISTS:
				if (rows && row->dist_null)
					puts_(b, "null");
				else if (rows)
					spell_float(b, row->dist, row->dist_style);
				else
					gen_float(b, r);
				break;
		}
	}
	ws(b, r, style);
	puts_(b, "]");
	free(scratch.data);
}

static void
structured(reader *r, bool nested)
{
	uint8_t		style = rd(r);
	uint8_t		cols = rd(r);
	uint8_t		nulls = rd(r);
	int			n = rd(r) % (MAX_ROWS + 1);
	int			extra_lists = nested ? rd(r) % 3 : 0;
	bool		present[NKEYS];
	int			order[NKEYS];
	gen_row    *rows = calloc(MAX_ROWS, sizeof(gen_row));
	obuf		b = {0};
	ChromaRows	out;
	int			i;
	int			k;
	bool		first = true;

	REQUIRE(rows != NULL);
	present[K_IDS] = true;
	present[K_EMB] = cols & 1;
	present[K_DOCS] = cols & 2;
	present[K_METAS] = cols & 4;
	present[K_DISTS] = cols & 8;
	present[K_URIS] = cols & 16;
	present[K_INCLUDE] = cols & 32;
	present[K_DATA] = cols & 64;

	/* the records; ids and documents printed now (their spelling is random) */
	for (i = 0; i < n; i++)
	{
		gen_row    *row = &rows[i];
		uint8_t		f = rd(r);

		gen_string(&row->id_json, &row->id, r, 8);
		row->has_emb = (f & 1) == 0;
		row->dim = rd(r) % (MAX_DIM + 1);
		for (k = 0; k < row->dim; k++)
			row->emb[k] = gen_float_value(r);
		row->emb_style = rd(r);
		row->has_doc = (f & 2) == 0;
		if (row->has_doc)
			gen_string(&row->doc_json, &row->doc, r, 12);
		row->has_meta = (f & 4) == 0;
		row->dist_null = (f & 8) != 0;
		row->dist = gen_float_value(r);
		row->dist_style = rd(r);
	}

	/* key order: a rotation and a swap picked by the style byte */
	for (k = 0; k < NKEYS; k++)
		order[k] = (k + (style >> 2)) % NKEYS;
	{
		int			a = (style >> 5) % NKEYS;
		int			t = order[a];

		order[a] = order[0];
		order[0] = t;
	}

	puts_(&b, "{");
	for (k = 0; k < NKEYS; k++)
	{
		int			key = order[k];
		static const char *const names[NKEYS] = {
			"ids", "embeddings", "documents", "metadatas", "distances", "uris", "include", "data"
		};
		bool		null_col;

		if (!present[key])
		{
			/* the server writes "embeddings": null when not included */
			if (key >= K_URIS || !(nulls & (1 << key)))
				continue;
			null_col = true;
		}
		else
			null_col = false;
		if (!first)
			puts_(&b, ",");
		first = false;
		ws(&b, r, style);
		puts_(&b, "\"");
		puts_(&b, names[key]);
		puts_(&b, "\"");
		ws(&b, r, style);
		puts_(&b, ":");
		ws(&b, r, style);
		if (null_col || key == K_URIS || key == K_DATA)
		{
			puts_(&b, "null");
			continue;
		}
		if (key == K_INCLUDE)
		{
			puts_(&b, "[\"documents\",");
			ws(&b, r, style);
			puts_(&b, "\"metadatas\"]");
			continue;
		}
		if (nested)
		{
			int			l;

			puts_(&b, "[");
			ws(&b, r, style);
			gen_column(&b, r, style, key, rows, n);
			for (l = 0; l < extra_lists; l++)
			{
				puts_(&b, ",");
				ws(&b, r, style);
				gen_column(&b, r, style, key, NULL, rd(r) % 3);
			}
			ws(&b, r, style);
			puts_(&b, "]");
		}
		else
			gen_column(&b, r, style, key, rows, n);
		ws(&b, r, style);
	}
	puts_(&b, "}");

	if (!parse_guarded(b.data, b.len, nested, false, &out))
	{
		fprintf(stderr, "fuzz_response: a valid response was refused: %s (%s)\nbody: %s\n",
				shim_error.message, shim_error.detail, b.data);
		abort();
	}
	check_rows(&out);
	REQUIRE(out.n == n);
	REQUIRE(out.has_embeddings == present[K_EMB]);
	REQUIRE(out.has_documents == present[K_DOCS]);
	REQUIRE(out.has_metadatas == present[K_METAS]);
	REQUIRE(out.has_distances == present[K_DISTS]);
	for (i = 0; i < n; i++)
	{
		gen_row    *row = &rows[i];
		REQUIRE(strlen(out.ids[i]) == row->id.len &&
				memcmp(out.ids[i], row->id.data, row->id.len) == 0);
		if (present[K_EMB])
		{
			if (!row->has_emb)
				REQUIRE(out.embeddings[i] == NULL);
			else
			{
				REQUIRE(out.embeddings[i] != NULL && out.dims[i] == row->dim);
				for (k = 0; k < row->dim; k++)
					REQUIRE(float_bits(out.embeddings[i][k]) == float_bits(row->emb[k]));
			}
		}
		if (present[K_DOCS])
		{
			if (!row->has_doc)
				REQUIRE(out.documents[i] == NULL);
			else
				REQUIRE(out.documents[i] != NULL && strlen(out.documents[i]) == row->doc.len &&
						memcmp(out.documents[i], row->doc.data, row->doc.len) == 0);
		}
		if (present[K_METAS])
		{
			if (!row->has_meta)
				REQUIRE(out.metadatas[i] == NULL);
			else
			{
				size_t		len = row->meta_end - row->meta_start;

				REQUIRE(out.metadatas[i] != NULL && strlen(out.metadatas[i]) == len &&
						memcmp(out.metadatas[i], b.data + row->meta_start, len) == 0);
			}
		}
		if (present[K_DISTS])
		{
			if (row->dist_null)
				REQUIRE(isnan(out.distances[i]));
			else
				REQUIRE(float_bits(out.distances[i]) == float_bits(row->dist));
		}
	}
	for (i = 0; i < MAX_ROWS; i++)
	{
		free(rows[i].id_json.data);
		free(rows[i].id.data);
		free(rows[i].doc_json.data);
		free(rows[i].doc.data);
	}
	free(rows);
	free(b.data);
}

/* ---------------------------------------------------------------- entry */

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader		r = {data, size};
	uint8_t		mode = rd(&r);
	bool		nested = (mode & 1) != 0;

	shim_set_stack_base();
	if (mode & 2)
		structured(&r, nested);
	else
	{
		ChromaRows	rows;
		const char *body = (const char *) r.p;
		size_t		len = r.left;
		char	   *big = NULL;

		if (mode & 4)
		{
			/* "repeat": byte 1 = unit length, bytes 2-3 = count; body = head, unit * count, tail */
			size_t		unit = rd(&r);
			size_t		count = rd(&r);
			size_t		head;
			size_t		tail;
			size_t		k;

			count = count << 8 | rd(&r);
			if (unit > r.left)
				unit = r.left;
			head = (r.left - unit) / 2;
			tail = r.left - head - unit;
			if (unit > 0 && count > MAX_REPEATED / unit)
				count = MAX_REPEATED / unit;
			len = head + count * unit + tail;
			big = malloc(len + 1);
			REQUIRE(big != NULL);
			memcpy(big, r.p, head);
			for (k = 0; k < count; k++)
				memcpy(big + head + k * unit, r.p + head, unit);
			memcpy(big + head + count * unit, r.p + head + unit, tail);
			body = big;
		}
		if (parse_guarded(body, len, nested, (mode & 8) != 0, &rows))
		{
			check_rows(&rows);
			if (getenv("FUZZ_RESPONSE_VERBOSE"))
				fprintf(stderr, "parsed: %d rows, %zu bytes palloc'd at most%s%s%s%s\n", rows.n, shim_peak_bytes(),
						rows.has_embeddings ? ", embeddings" : "",
						rows.has_documents ? ", documents" : "",
						rows.has_metadatas ? ", metadatas" : "",
						rows.has_distances ? ", distances" : "");
		}
		else
		{
			check_error();
			if (getenv("FUZZ_RESPONSE_VERBOSE"))
				fprintf(stderr, "ERROR %s: %s: %s\n", unpack_sql_state(shim_error.sqlerrcode),
						shim_error.message, shim_error.detail);
		}
		/* memory stays linear in the body (a quadratic growth would show here) */
		if (shim_peak_bytes() > 128 * len + 4 * 1024 * 1024)
		{
			fprintf(stderr, "fuzz_response: %zu bytes palloc'd for a %zu-byte body\n",
					shim_peak_bytes(), len);
			abort();
		}
		free(big);
	}
	shim_reset_memory();
	return 0;
}
