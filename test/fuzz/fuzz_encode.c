/*
 * fuzz_encode.c — libFuzzer target for the column-body encoder.
 *
 * The input is read as a list of records (id, optional embedding of a fixed dimension,
 * optional document, optional metadata object built here from the bytes). The body is
 * built with cs_encode_records in both float encodings, then parsed back with the
 * small strict JSON parser below (written for this check, sharing nothing with the
 * encoder) and every field is compared with what went in: ids and documents
 * byte-identical, floats bit-identical, metadata key by key, and the body valid UTF-8
 * whenever the strings that went in were.
 *
 * Input layout: byte 0 = dim - 1 (low 3 bits), a dim multiplier (0x40) and column
 * flags (0x08, 0x10, 0x20 leave out embeddings, documents, metadatas); then per record a
 * flags byte, an id, and the optional parts, each string as a length byte + bytes.
 */
#include "encode.h"

#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORDS 64
#define MAX_META_KEYS 4
#define MAX_DIM 96

/*
 * A smaller ASan quarantine than the default 256 MB: this target frees a lot, and
 * recycling that much fresh memory made it page-fault bound (several times slower).
 */
const char *__asan_default_options(void);

const char *
__asan_default_options(void)
{
	return "quarantine_size_mb=64";
}

static void
fail(const char *what)
{
	fprintf(stderr, "fuzz_encode: %s\n", what);
	abort();
}

#define REQUIRE(cond) do { if (!(cond)) fail(#cond); } while (0)

/* ------------------------------------------------------------- the reader */

typedef struct reader
{
	const uint8_t *p;
	size_t		left;
} reader;

static uint8_t
read_byte(reader *r)
{
	if (r->left == 0)
		return 0;
	r->left--;
	return *r->p++;
}

/* Up to max bytes (as many as remain); returns the count. */
static size_t
read_bytes(reader *r, size_t max, const uint8_t **out)
{
	size_t		n = max < r->left ? max : r->left;

	*out = r->p;
	r->p += n;
	r->left -= n;
	return n;
}

/* ------------------------------------------------------------- the parser */

typedef enum jtype
{
	J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT
} jtype;

typedef struct jvalue jvalue;

struct jvalue
{
	jtype		type;
	char	   *str;			/* J_STRING: decoded bytes; J_NUMBER: the text */
	size_t		len;
	size_t		count;			/* J_ARRAY / J_OBJECT entries */
	char	  **keys;			/* J_OBJECT: decoded keys */
	size_t	   *key_lens;
	jvalue	   *items;
};

typedef struct parser
{
	const char *p;
	const char *end;
	int			depth;
} parser;

static void parse_value(parser *ps, jvalue *v);

static void
jfree(jvalue *v)
{
	size_t		i;

	free(v->str);
	for (i = 0; i < v->count; i++)
	{
		if (v->keys)
			free(v->keys[i]);
		jfree(&v->items[i]);
	}
	free(v->keys);
	free(v->key_lens);
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static unsigned
parse_hex4(parser *ps)
{
	unsigned	v = 0;
	int			i;

	REQUIRE(ps->end - ps->p >= 4);
	for (i = 0; i < 4; i++)
	{
		int			h = hex_value(*ps->p++);

		REQUIRE(h >= 0);
		v = v * 16 + (unsigned) h;
	}
	return v;
}

static size_t
put_utf8(char *out, unsigned cp)
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

/* A string: raw bytes >= 0x20 (not validated as UTF-8 here) and all JSON escapes. */
static void
parse_string(parser *ps, char **out, size_t *out_len)
{
	const char *q;
	char	   *buf;
	size_t		n = 0;

	REQUIRE(ps->p < ps->end && *ps->p == '"');
	/* decoded text is never longer than the quoted text: find where that ends */
	for (q = ps->p + 1; q < ps->end && *q != '"'; q++)
		if (*q == '\\' && q + 1 < ps->end)
			q++;
	buf = malloc((size_t) (q - ps->p) + 1);
	REQUIRE(buf != NULL);
	ps->p++;
	for (;;)
	{
		unsigned char c;

		REQUIRE(ps->p < ps->end);
		c = (unsigned char) *ps->p++;
		if (c == '"')
			break;
		REQUIRE(c >= 0x20);
		if (c != '\\')
		{
			buf[n++] = (char) c;
			continue;
		}
		REQUIRE(ps->p < ps->end);
		c = (unsigned char) *ps->p++;
		switch (c)
		{
			case '"':
			case '\\':
			case '/':
				buf[n++] = (char) c;
				break;
			case 'b':
				buf[n++] = '\b';
				break;
			case 'f':
				buf[n++] = '\f';
				break;
			case 'n':
				buf[n++] = '\n';
				break;
			case 'r':
				buf[n++] = '\r';
				break;
			case 't':
				buf[n++] = '\t';
				break;
			case 'u':
				{
					unsigned	cp = parse_hex4(ps);

					if (cp >= 0xD800 && cp < 0xDC00)
					{
						unsigned	lo;

						REQUIRE(ps->end - ps->p >= 2 && ps->p[0] == '\\' && ps->p[1] == 'u');
						ps->p += 2;
						lo = parse_hex4(ps);
						REQUIRE(lo >= 0xDC00 && lo < 0xE000);
						cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					}
					else
						REQUIRE(cp < 0xDC00 || cp >= 0xE000);
					n += put_utf8(buf + n, cp);
					break;
				}
			default:
				fail("bad escape");
		}
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static void
parse_number(parser *ps, jvalue *v)
{
	const char *start = ps->p;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	REQUIRE(ps->p < ps->end && is_digit(*ps->p));
	if (*ps->p == '0')
		ps->p++;
	else
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.')
	{
		ps->p++;
		REQUIRE(ps->p < ps->end && is_digit(*ps->p));
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E'))
	{
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		REQUIRE(ps->p < ps->end && is_digit(*ps->p));
		while (ps->p < ps->end && is_digit(*ps->p))
			ps->p++;
	}
	v->type = J_NUMBER;
	v->len = (size_t) (ps->p - start);
	v->str = malloc(v->len + 1);
	REQUIRE(v->str != NULL);
	memcpy(v->str, start, v->len);
	v->str[v->len] = '\0';
}

static void
skip_ws(parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static void
expect_literal(parser *ps, const char *lit)
{
	size_t		n = strlen(lit);

	REQUIRE((size_t) (ps->end - ps->p) >= n && memcmp(ps->p, lit, n) == 0);
	ps->p += n;
}

static void
add_item(jvalue *v, size_t *cap)
{
	if (v->count == *cap)
	{
		*cap = *cap ? *cap * 2 : 4;
		v->items = realloc(v->items, *cap * sizeof(jvalue));
		REQUIRE(v->items != NULL);
		if (v->type == J_OBJECT)
		{
			v->keys = realloc(v->keys, *cap * sizeof(char *));
			v->key_lens = realloc(v->key_lens, *cap * sizeof(size_t));
			REQUIRE(v->keys != NULL && v->key_lens != NULL);
		}
	}
	memset(&v->items[v->count], 0, sizeof(jvalue));
	v->count++;
}

static void
parse_value(parser *ps, jvalue *v)
{
	size_t		cap = 0;

	memset(v, 0, sizeof(*v));
	REQUIRE(++ps->depth < 64);
	skip_ws(ps);
	REQUIRE(ps->p < ps->end);
	switch (*ps->p)
	{
		case 'n':
			expect_literal(ps, "null");
			v->type = J_NULL;
			break;
		case 't':
			expect_literal(ps, "true");
			v->type = J_TRUE;
			break;
		case 'f':
			expect_literal(ps, "false");
			v->type = J_FALSE;
			break;
		case '"':
			v->type = J_STRING;
			parse_string(ps, &v->str, &v->len);
			break;
		case '[':
			v->type = J_ARRAY;
			ps->p++;
			skip_ws(ps);
			if (ps->p < ps->end && *ps->p == ']')
			{
				ps->p++;
				break;
			}
			for (;;)
			{
				add_item(v, &cap);
				parse_value(ps, &v->items[v->count - 1]);
				skip_ws(ps);
				REQUIRE(ps->p < ps->end);
				if (*ps->p == ',')
				{
					ps->p++;
					continue;
				}
				REQUIRE(*ps->p == ']');
				ps->p++;
				break;
			}
			break;
		case '{':
			v->type = J_OBJECT;
			ps->p++;
			skip_ws(ps);
			if (ps->p < ps->end && *ps->p == '}')
			{
				ps->p++;
				break;
			}
			for (;;)
			{
				add_item(v, &cap);
				skip_ws(ps);
				parse_string(ps, &v->keys[v->count - 1], &v->key_lens[v->count - 1]);
				skip_ws(ps);
				REQUIRE(ps->p < ps->end && *ps->p == ':');
				ps->p++;
				parse_value(ps, &v->items[v->count - 1]);
				skip_ws(ps);
				REQUIRE(ps->p < ps->end);
				if (*ps->p == ',')
				{
					ps->p++;
					continue;
				}
				REQUIRE(*ps->p == '}');
				ps->p++;
				break;
			}
			break;
		default:
			parse_number(ps, v);
			break;
	}
	ps->depth--;
}

static void
parse_document(const char *text, size_t len, jvalue *v)
{
	parser		ps = {text, text + len, 0};

	parse_value(&ps, v);
	skip_ws(&ps);
	REQUIRE(ps.p == ps.end);
}

/* --------------------------------------------------------------- checkers */

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
static int
valid_utf8(const uint8_t *s, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		uint8_t		c = s[i];
		size_t		len;
		uint32_t	cp;
		size_t		k;

		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
		{
			len = 2;
			cp = c & 0x1F;
		}
		else if (c >= 0xE0 && c <= 0xEF)
		{
			len = 3;
			cp = c & 0x0F;
		}
		else if (c >= 0xF0 && c <= 0xF4)
		{
			len = 4;
			cp = c & 0x07;
		}
		else
			return 0;
		if (n - i < len)
			return 0;
		for (k = 1; k < len; k++)
		{
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
			(cp >= 0xD800 && cp < 0xE000))
			return 0;
		i += len;
	}
	return 1;
}

static int
b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Strict decoder: length a multiple of 4, '=' only as final padding, zero spare bits. */
static size_t
b64_decode(const char *s, size_t n, uint8_t *out)
{
	size_t		i;
	size_t		o = 0;

	REQUIRE(n % 4 == 0);
	for (i = 0; i < n; i += 4)
	{
		int			pad = 0;
		uint32_t	v = 0;
		int			k;

		for (k = 0; k < 4; k++)
		{
			int			d;

			if (s[i + k] == '=')
			{
				REQUIRE(i + 4 == n && k >= 2);
				pad++;
				d = 0;
			}
			else
			{
				REQUIRE(pad == 0);
				d = b64_value(s[i + k]);
				REQUIRE(d >= 0);
			}
			v = v << 6 | (uint32_t) d;
		}
		out[o++] = (uint8_t) (v >> 16);
		if (pad < 2)
			out[o++] = (uint8_t) (v >> 8);
		else
			REQUIRE((v & 0xFFFF) == 0);
		if (pad < 1)
			out[o++] = (uint8_t) v;
		else
			REQUIRE((v & 0xFF) == 0);
	}
	return o;
}

/* ------------------------------------------------------------ the records */

typedef enum mtype
{
	M_STRING, M_INT, M_FLOAT, M_BOOL, M_NULL
} mtype;

typedef struct meta_entry
{
	const uint8_t *key;
	size_t		key_len;
	mtype		type;
	const uint8_t *str;
	size_t		str_len;
	long long	i;
	float		f;
	int			b;
} meta_entry;

typedef struct fuzz_record
{
	float	   *embedding;
	int			has_meta;
	size_t		nmeta;
	meta_entry	meta[MAX_META_KEYS];
	cs_buf		meta_text;
} fuzz_record;

/*
 * Exact growth: the buffer's cap is always exactly what the encoder reserved, and the
 * bytes of the allocation past it are poisoned for ASan, so any write past a reserve is
 * caught. The allocation itself grows geometrically (its size is kept in ctx): a
 * realloc per reserve made the target ~10x slower.
 */
static void
exact_grow(cs_buf *b, size_t need)
{
	size_t		want = b->len + need + 1;
	size_t		real = (size_t) (uintptr_t) b->ctx;

	if (want > real)
	{
		real = real * 2 > want ? real * 2 : want;
		b->data = realloc(b->data, real);
		REQUIRE(b->data != NULL);
		b->ctx = (void *) (uintptr_t) real;
	}
	ASAN_UNPOISON_MEMORY_REGION(b->data, want);
	ASAN_POISON_MEMORY_REGION(b->data + want, real - want);
	b->cap = want;
}

static void
exact_buf_init(cs_buf *b)
{
	b->data = malloc(1);
	REQUIRE(b->data != NULL);
	b->len = 0;
	b->cap = 1;
	b->grow = exact_grow;
	b->ctx = (void *) (uintptr_t) 1;
}

static uint32_t
float_bits(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	return u;
}

static void
build_metadata(reader *r, fuzz_record *fr, int *utf8_ok)
{
	cs_buf	   *b = &fr->meta_text;
	uint8_t		head = read_byte(r);
	size_t		k;
	char		tmp[32];

	fr->nmeta = head % (MAX_META_KEYS + 1);
	exact_buf_init(b);
	cs_buf_putc(b, '{');
	for (k = 0; k < fr->nmeta; k++)
	{
		meta_entry *m = &fr->meta[k];
		uint8_t		kind = read_byte(r);

		m->key_len = read_bytes(r, read_byte(r) % 12, &m->key);
		*utf8_ok &= valid_utf8(m->key, m->key_len);
		if (k > 0)
			cs_buf_putc(b, ',');
		cs_json_string(b, (const char *) m->key, m->key_len);
		cs_buf_putc(b, ':');
		m->type = (mtype) (kind % 5);
		switch (m->type)
		{
			case M_STRING:
				m->str_len = read_bytes(r, read_byte(r) % 24, &m->str);
				*utf8_ok &= valid_utf8(m->str, m->str_len);
				cs_json_string(b, (const char *) m->str, m->str_len);
				break;
			case M_INT:
				{
					uint64_t	u = 0;
					int			j;

					for (j = 0; j < 8; j++)
						u = u << 8 | read_byte(r);
					memcpy(&m->i, &u, sizeof(u));
					snprintf(tmp, sizeof(tmp), "%lld", m->i);
					cs_buf_puts(b, tmp);
					break;
				}
			case M_FLOAT:
				{
					uint32_t	u = 0;
					int			j;

					for (j = 0; j < 4; j++)
						u = u << 8 | read_byte(r);
					if ((u & 0x7f800000) == 0x7f800000)
						u &= ~UINT32_C(0x00800000);
					memcpy(&m->f, &u, 4);
					cs_buf_append(b, tmp, cs_format_float(m->f, tmp));
					break;
				}
			case M_BOOL:
				m->b = read_byte(r) & 1;
				cs_buf_puts(b, m->b ? "true" : "false");
				break;
			case M_NULL:
				cs_buf_puts(b, "null");
				break;
		}
	}
	cs_buf_putc(b, '}');
}

static void
check_metadata(const jvalue *v, const fuzz_record *fr)
{
	size_t		k;

	if (!fr->has_meta)
	{
		REQUIRE(v->type == J_NULL);
		return;
	}
	REQUIRE(v->type == J_OBJECT && v->count == fr->nmeta);
	for (k = 0; k < fr->nmeta; k++)
	{
		const meta_entry *m = &fr->meta[k];
		const jvalue *item = &v->items[k];

		REQUIRE(v->key_lens[k] == m->key_len &&
				(m->key_len == 0 || memcmp(v->keys[k], m->key, m->key_len) == 0));
		switch (m->type)
		{
			case M_STRING:
				REQUIRE(item->type == J_STRING && item->len == m->str_len &&
						(m->str_len == 0 || memcmp(item->str, m->str, m->str_len) == 0));
				break;
			case M_INT:
				REQUIRE(item->type == J_NUMBER && strtoll(item->str, NULL, 10) == m->i);
				break;
			case M_FLOAT:
				REQUIRE(item->type == J_NUMBER &&
						float_bits(strtof(item->str, NULL)) == float_bits(m->f));
				break;
			case M_BOOL:
				REQUIRE(item->type == (m->b ? J_TRUE : J_FALSE));
				break;
			case M_NULL:
				REQUIRE(item->type == J_NULL);
				break;
		}
	}
}

static void
check_string(const jvalue *v, const char *s, size_t n)
{
	REQUIRE(v->type == J_STRING && v->len == n && (n == 0 || memcmp(v->str, s, n) == 0));
}

static void
check_body(const cs_buf *body, const cs_record *recs, const fuzz_record *frs, size_t n,
		   const cs_body_options *opt, int utf8_ok)
{
	jvalue		root;
	size_t		col = 0;
	size_t		i;
	size_t		dim = opt->dim;

	REQUIRE(body->len < body->cap && body->data[body->len] == '\0');
	if (utf8_ok)
		REQUIRE(valid_utf8((const uint8_t *) body->data, body->len));
	parse_document(body->data, body->len, &root);
	REQUIRE(root.type == J_OBJECT);

	REQUIRE(root.count > col && strcmp(root.keys[col], "ids") == 0);
	REQUIRE(root.items[col].type == J_ARRAY && root.items[col].count == n);
	for (i = 0; i < n; i++)
		check_string(&root.items[col].items[i], recs[i].id, recs[i].id_len);
	col++;

	if (opt->with_embeddings)
	{
		const jvalue *arr;

		REQUIRE(root.count > col && strcmp(root.keys[col], "embeddings") == 0);
		arr = &root.items[col];
		REQUIRE(arr->type == J_ARRAY && arr->count == n);
		for (i = 0; i < n; i++)
		{
			const jvalue *e = &arr->items[i];
			size_t		j;

			if (recs[i].embedding == NULL)
			{
				REQUIRE(e->type == J_NULL);
				continue;
			}
			if (opt->encoding == CS_ENCODING_JSON)
			{
				REQUIRE(e->type == J_ARRAY && e->count == dim);
				for (j = 0; j < dim; j++)
				{
					const jvalue *num = &e->items[j];

					REQUIRE(num->type == J_NUMBER);
					/* always a float form, never a bare integer */
					REQUIRE(strchr(num->str, '.') != NULL || strchr(num->str, 'e') != NULL);
					REQUIRE(num->len <= CS_FLOAT_MAXLEN);
					REQUIRE(float_bits(strtof(num->str, NULL)) == float_bits(recs[i].embedding[j]));
				}
			}
			else
			{
				uint8_t		bytes[MAX_DIM * 4 + 4];
				uint8_t		want[MAX_DIM * 4];

				REQUIRE(e->type == J_STRING);
				REQUIRE(e->len == cs_base64_len(dim * 4));
				REQUIRE(b64_decode(e->str, e->len, bytes) == dim * 4);
				for (j = 0; j < dim; j++)
				{
					uint32_t	u = float_bits(recs[i].embedding[j]);

					want[j * 4] = (uint8_t) u;
					want[j * 4 + 1] = (uint8_t) (u >> 8);
					want[j * 4 + 2] = (uint8_t) (u >> 16);
					want[j * 4 + 3] = (uint8_t) (u >> 24);
				}
				REQUIRE(memcmp(bytes, want, dim * 4) == 0);
			}
		}
		col++;
	}

	if (opt->with_documents)
	{
		REQUIRE(root.count > col && strcmp(root.keys[col], "documents") == 0);
		REQUIRE(root.items[col].type == J_ARRAY && root.items[col].count == n);
		for (i = 0; i < n; i++)
		{
			if (recs[i].document == NULL)
				REQUIRE(root.items[col].items[i].type == J_NULL);
			else
				check_string(&root.items[col].items[i], recs[i].document, recs[i].document_len);
		}
		col++;
	}

	if (opt->with_metadatas)
	{
		REQUIRE(root.count > col && strcmp(root.keys[col], "metadatas") == 0);
		REQUIRE(root.items[col].type == J_ARRAY && root.items[col].count == n);
		for (i = 0; i < n; i++)
			check_metadata(&root.items[col].items[i], &frs[i]);
		col++;
	}
	REQUIRE(root.count == col);
	jfree(&root);
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader		r = {data, size};
	uint8_t		head = read_byte(&r);
	/* 1..8 floats, or (bit 0x40) 12..96 so the SIMD base64 encoders see whole blocks */
	size_t		dim = ((size_t) (head & 7) + 1) * (head & 0x40 ? 12 : 1);
	cs_body_options opt;
	cs_record	recs[MAX_RECORDS];
	fuzz_record frs[MAX_RECORDS];
	size_t		n = 0;
	size_t		i;
	int			utf8_ok = 1;
	cs_buf		body;
	int			enc;

	opt.dim = dim;
	opt.with_embeddings = (head & 0x08) == 0;
	opt.with_documents = (head & 0x10) == 0;
	opt.with_metadatas = (head & 0x20) == 0;

	/* every base64 encoder this CPU runs agrees with the scalar one on the raw input */
	{
		static const char *const impls[] = {"avx2", "avx512vbmi"};
		size_t		len = cs_base64_len(size);
		char	   *a = malloc(len + 1);
		char	   *b = malloc(len + 1);
		size_t		k;

		REQUIRE(a != NULL && b != NULL);
		REQUIRE(cs_base64_encode_scalar(data, size, b) == len);
		REQUIRE(cs_base64_encode(data, size, a) == len);
		REQUIRE(memcmp(a, b, len) == 0);
		for (k = 0; k < sizeof(impls) / sizeof(impls[0]); k++)
		{
			cs_base64_fn fn = cs_base64_encoder(impls[k]);

			if (fn == NULL)
				continue;
			REQUIRE(fn(data, size, a) == len);
			REQUIRE(memcmp(a, b, len) == 0);
		}
		free(a);
		free(b);
	}

	memset(frs, 0, sizeof(frs));
	while (r.left > 0 && n < MAX_RECORDS)
	{
		cs_record  *rec = &recs[n];
		fuzz_record *fr = &frs[n];
		uint8_t		flags = read_byte(&r);
		const uint8_t *s;

		memset(rec, 0, sizeof(*rec));
		rec->id_len = read_bytes(&r, (size_t) (read_byte(&r) % 40), &s);
		rec->id = (const char *) s;
		utf8_ok &= valid_utf8(s, rec->id_len);

		if (flags & 1)
		{
			const uint8_t *raw;
			size_t		got = read_bytes(&r, dim * 4, &raw);
			ptrdiff_t	bad = -1;

			fr->embedding = calloc(dim, sizeof(float));
			REQUIRE(fr->embedding != NULL);
			memcpy(fr->embedding, raw, got);
			for (i = 0; i < dim && bad < 0; i++)
				if ((float_bits(fr->embedding[i]) & 0x7f800000) == 0x7f800000)
					bad = (ptrdiff_t) i;
			REQUIRE(cs_first_nonfinite(fr->embedding, dim) == bad);
			/* non-finite values are refused upstream; make them finite here */
			for (i = 0; i < dim; i++)
			{
				uint32_t	u = float_bits(fr->embedding[i]);

				if ((u & 0x7f800000) == 0x7f800000)
				{
					u &= ~UINT32_C(0x00800000);
					memcpy(&fr->embedding[i], &u, 4);
				}
			}
			REQUIRE(cs_first_nonfinite(fr->embedding, dim) == -1);
			rec->embedding = fr->embedding;
		}
		if (flags & 2)
		{
			/* mostly short documents; now and then up to ~1 KiB */
			size_t		max = read_byte(&r);

			if (flags & 0x80)
				max *= 4;
			rec->document_len = read_bytes(&r, max, &s);
			rec->document = (const char *) s;
			utf8_ok &= valid_utf8(s, rec->document_len);
		}
		if (flags & 4)
		{
			fr->has_meta = 1;
			build_metadata(&r, fr, &utf8_ok);
			rec->metadata = fr->meta_text.data;
			rec->metadata_len = fr->meta_text.len;
		}
		n++;
	}

	for (enc = 0; enc < 2; enc++)
	{
		opt.encoding = enc == 0 ? CS_ENCODING_JSON : CS_ENCODING_BASE64;
		exact_buf_init(&body);
		cs_encode_records(&body, recs, n, &opt);
		check_body(&body, recs, frs, n, &opt, utf8_ok);
		free(body.data);
	}

	/* the delete body */
	{
		cs_body_options ids_only = {dim, CS_ENCODING_JSON, false, false, false};

		exact_buf_init(&body);
		cs_encode_ids(&body, recs, n);
		check_body(&body, recs, frs, n, &ids_only, utf8_ok);
		free(body.data);
	}

	for (i = 0; i < n; i++)
	{
		free(frs[i].embedding);
		if (frs[i].has_meta)
			free(frs[i].meta_text.data);
	}
	return 0;
}
