/*
 * pg_shim.c — just enough of the PostgreSQL backend to run src/response.c standalone.
 *
 * response.c is compiled unchanged against the server headers. The JSON parser is the
 * one PostgreSQL ships (jsonapi.o of libpgcommon_shlib.a, built for frontends); this
 * file supplies what the backend would:
 *   - palloc and friends on malloc, every chunk on a list so that shim_reset_memory
 *     frees them all (a memory context reset; ASan still sees each chunk's bounds);
 *     requests over MaxAllocSize fail as in the backend;
 *   - ereport/elog: errstart..errfinish record the error and, for ERROR and above,
 *     siglongjmp to PG_exception_stack, as the backend does;
 *   - pg_any_to_server for a UTF8 database: verify, return the input;
 *   - json_errdetail (the frontend library has none): the backend's messages, read
 *     from the lexer's token pointers as the backend does;
 *   - check_stack_depth: the frontend parser leaves it out, so shim_pg_parse_json
 *     (response.c is compiled with -Dpg_parse_json=shim_pg_parse_json) calls it where
 *     the backend parser does, on entering every object and array; limit 2 MB, the
 *     backend's default max_stack_depth.
 */
#include "pg_shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

ShimError	shim_error;
sigjmp_buf *PG_exception_stack = NULL;

/* ------------------------------------------------------------------ memory */

typedef struct ShimChunk
{
	struct ShimChunk *prev;
	struct ShimChunk *next;
	size_t		size;
	size_t		pad;			/* keeps the payload 16-byte aligned */
} ShimChunk;

static ShimChunk chunks = {&chunks, &chunks, 0, 0};
static size_t allocated;
static size_t peak;

static void *
chunk_alloc(Size size, bool zero)
{
	ShimChunk  *c;

	if (!AllocSizeIsValid(size))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c = malloc(sizeof(ShimChunk) + size);
	if (c == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (zero)
		memset(c + 1, 0, size);
	c->size = size;
	c->next = chunks.next;
	c->prev = &chunks;
	chunks.next->prev = c;
	chunks.next = c;
	allocated += size;
	if (allocated > peak)
		peak = allocated;
	return c + 1;
}

void *
palloc(Size size)
{
	return chunk_alloc(size, false);
}

void *
palloc0(Size size)
{
	return chunk_alloc(size, true);
}

void *
palloc_extended(Size size, int flags)
{
	return chunk_alloc(size, (flags & MCXT_ALLOC_ZERO) != 0);
}

void *
palloc0_mul(Size s1, Size s2)
{
	if (s2 != 0 && s1 > SIZE_MAX / s2)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("requested memory size overflows")));
	return chunk_alloc(s1 * s2, true);
}

void
pfree(void *pointer)
{
	ShimChunk  *c = (ShimChunk *) pointer - 1;

	c->prev->next = c->next;
	c->next->prev = c->prev;
	allocated -= c->size;
	free(c);
}

void *
repalloc(void *pointer, Size size)
{
	ShimChunk  *c = (ShimChunk *) pointer - 1;
	ShimChunk  *n;

	if (!AllocSizeIsValid(size))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	allocated -= c->size;
	n = realloc(c, sizeof(ShimChunk) + size);
	if (n == NULL)
		n = c;					/* still valid: put it back before failing */
	n->next = chunks.next;
	n->prev = &chunks;
	chunks.next->prev = n;
	chunks.next = n;
	if (n == c && size > c->size)
	{
		allocated += c->size;
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	}
	n->size = size;
	allocated += size;
	if (allocated > peak)
		peak = allocated;
	return n + 1;
}

char *
pstrdup(const char *in)
{
	size_t		len = strlen(in);
	char	   *out = palloc(len + 1);

	memcpy(out, in, len + 1);
	return out;
}

char *
pnstrdup(const char *in, Size len)
{
	char	   *out;

	len = strnlen(in, len);
	out = palloc(len + 1);
	memcpy(out, in, len);
	out[len] = '\0';
	return out;
}

void
shim_reset_memory(void)
{
	while (chunks.next != &chunks)
	{
		ShimChunk  *c = chunks.next;

		chunks.next = c->next;
		free(c);
	}
	chunks.prev = &chunks;
	allocated = 0;
	peak = 0;
}

size_t
shim_allocated_bytes(void)
{
	return allocated;
}

size_t
shim_peak_bytes(void)
{
	return peak;
}

/* ------------------------------------------------------------------ errors */

static void
format_into(char *dst, size_t size, const char *fmt, va_list ap)
{
	vsnprintf(dst, size, fmt, ap);
}

bool
errstart(int elevel, const char *domain)
{
	if (elevel < ERROR)
		return false;			/* notices and debug messages: dropped */
	memset(&shim_error, 0, sizeof(shim_error));
	shim_error.elevel = elevel;
	shim_error.sqlerrcode = ERRCODE_INTERNAL_ERROR;	/* the backend's default */
	return true;
}

bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

int
errcode(int sqlerrcode)
{
	shim_error.sqlerrcode = sqlerrcode;
	return 0;
}

int
errmsg(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	format_into(shim_error.message, sizeof(shim_error.message), fmt, ap);
	va_end(ap);
	return 0;
}

int
errmsg_internal(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	format_into(shim_error.message, sizeof(shim_error.message), fmt, ap);
	va_end(ap);
	return 0;
}

int
errdetail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	format_into(shim_error.detail, sizeof(shim_error.detail), fmt, ap);
	va_end(ap);
	return 0;
}

int
errdetail_internal(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	format_into(shim_error.detail, sizeof(shim_error.detail), fmt, ap);
	va_end(ap);
	return 0;
}

int
errhint(const char *fmt,...)
{
	return 0;
}

void
errfinish(const char *filename, int lineno, const char *funcname)
{
	shim_error.filename = filename;
	shim_error.lineno = lineno;
	if (PG_exception_stack == NULL)
	{
		fprintf(stderr, "pg_shim: ERROR outside a PG_TRY: %s (%s:%d)\n",
				shim_error.message, filename, lineno);
		abort();
	}
	siglongjmp(*PG_exception_stack, 1);
}

void
pg_re_throw(void)
{
	if (PG_exception_stack == NULL)
		abort();
	siglongjmp(*PG_exception_stack, 1);
}

char *
unpack_sql_state(int sql_state)
{
	static char buf[12];
	int			i;

	for (i = 0; i < 5; i++)
	{
		buf[i] = PGUNSIXBIT(sql_state);
		sql_state >>= 6;
	}
	buf[i] = '\0';
	return buf;
}

/* ------------------------------------------------------------ JSON errors */

#define token_error(lex, format) \
	psprintf(format, (int) ((lex)->token_terminator - (lex)->token_start), (lex)->token_start)

char *
json_errdetail(JsonParseErrorType error, JsonLexContext *lex)
{
	switch (error)
	{
		case JSON_SUCCESS:
			break;
		case JSON_ESCAPING_INVALID:
			return token_error(lex, "Escape sequence \"\\%.*s\" is invalid.");
		case JSON_ESCAPING_REQUIRED:
			return psprintf("Character with value 0x%02x must be escaped.",
							(unsigned char) *(lex->token_terminator));
		case JSON_EXPECTED_END:
			return token_error(lex, "Expected end of input, but found \"%.*s\".");
		case JSON_EXPECTED_ARRAY_FIRST:
			return token_error(lex, "Expected array element or \"]\", but found \"%.*s\".");
		case JSON_EXPECTED_ARRAY_NEXT:
			return token_error(lex, "Expected \",\" or \"]\", but found \"%.*s\".");
		case JSON_EXPECTED_COLON:
			return token_error(lex, "Expected \":\", but found \"%.*s\".");
		case JSON_EXPECTED_JSON:
			return token_error(lex, "Expected JSON value, but found \"%.*s\".");
		case JSON_EXPECTED_MORE:
			return "The input string ended unexpectedly.";
		case JSON_EXPECTED_OBJECT_FIRST:
			return token_error(lex, "Expected string or \"}\", but found \"%.*s\".");
		case JSON_EXPECTED_OBJECT_NEXT:
			return token_error(lex, "Expected \",\" or \"}\", but found \"%.*s\".");
		case JSON_EXPECTED_STRING:
			return token_error(lex, "Expected string, but found \"%.*s\".");
		case JSON_INVALID_TOKEN:
			return token_error(lex, "Token \"%.*s\" is invalid.");
		case JSON_UNICODE_CODE_POINT_ZERO:
			return "\\u0000 cannot be converted to text.";
		case JSON_UNICODE_ESCAPE_FORMAT:
			return "\"\\u\" must be followed by four hexadecimal digits.";
		case JSON_UNICODE_HIGH_ESCAPE:
			return "Unicode escape values cannot be used for code point values above 007F when the encoding is not UTF8.";
		case JSON_UNICODE_HIGH_SURROGATE:
			return "Unicode high surrogate must not follow a high surrogate.";
		case JSON_UNICODE_LOW_SURROGATE:
			return "Unicode low surrogate must follow a high surrogate.";
	}
	elog(ERROR, "unexpected json parse error type: %d", (int) error);
	return NULL;
}

/* ------------------------------------------------------------ encoding */

/* A UTF8 database: verified and returned as is, like the backend's pg_any_to_server. */
char *
pg_any_to_server(const char *s, int len, int encoding)
{
	if (len <= 0)
		return unconstify(char *, s);
	if (encoding != PG_UTF8)
		elog(ERROR, "pg_shim: only UTF8 input is modelled");
	if (pg_encoding_verifymbstr(PG_UTF8, s, len) != len)
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("invalid byte sequence for encoding \"UTF8\"")));
	return unconstify(char *, s);
}

/* src/chroma_api.c's check of a whole response body, which response.c calls first. */
void		chroma_check_response_encoding(const char *data, int len, const char *action);

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

/* ------------------------------------------------------------ stack depth */

static char *stack_base;

#define SHIM_MAX_STACK_DEPTH (2 * 1024 * 1024)

void
shim_set_stack_base(void)
{
	char		here;

	stack_base = &here;
}

void
check_stack_depth(void)
{
	char		here;
	ptrdiff_t	depth = stack_base - &here;

	if (depth < 0)
		depth = -depth;
	if (stack_base != NULL && depth > SHIM_MAX_STACK_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
				 errmsg("stack depth limit exceeded")));
}

/* -------------------------------------------------- pg_parse_json with the check */

typedef struct WrapState
{
	JsonSemAction *sem;
} WrapState;

static void
wrap_object_start(void *state)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	check_stack_depth();
	if (sem->object_start)
		sem->object_start(sem->semstate);
}

static void
wrap_array_start(void *state)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	check_stack_depth();
	if (sem->array_start)
		sem->array_start(sem->semstate);
}

static void
wrap_object_end(void *state)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->object_end)
		sem->object_end(sem->semstate);
}

static void
wrap_array_end(void *state)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->array_end)
		sem->array_end(sem->semstate);
}

static void
wrap_field_start(void *state, char *fname, bool isnull)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->object_field_start)
		sem->object_field_start(sem->semstate, fname, isnull);
}

static void
wrap_field_end(void *state, char *fname, bool isnull)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->object_field_end)
		sem->object_field_end(sem->semstate, fname, isnull);
}

static void
wrap_element_start(void *state, bool isnull)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->array_element_start)
		sem->array_element_start(sem->semstate, isnull);
}

static void
wrap_element_end(void *state, bool isnull)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->array_element_end)
		sem->array_element_end(sem->semstate, isnull);
}

static void
wrap_scalar(void *state, char *token, JsonTokenType type)
{
	JsonSemAction *sem = ((WrapState *) state)->sem;

	if (sem->scalar)
		sem->scalar(sem->semstate, token, type);
}

JsonParseErrorType shim_pg_parse_json(JsonLexContext *lex, JsonSemAction *sem);

JsonParseErrorType
shim_pg_parse_json(JsonLexContext *lex, JsonSemAction *sem)
{
	WrapState	ws = {sem};
	JsonSemAction wrapped;

	/* a callback only where the caller has one: the parser skips work for the others */
	memset(&wrapped, 0, sizeof(wrapped));
	wrapped.semstate = &ws;
	wrapped.object_start = wrap_object_start;	/* always: the stack check */
	wrapped.array_start = wrap_array_start;
	if (sem->object_end)
		wrapped.object_end = wrap_object_end;
	if (sem->array_end)
		wrapped.array_end = wrap_array_end;
	if (sem->object_field_start)
		wrapped.object_field_start = wrap_field_start;
	if (sem->object_field_end)
		wrapped.object_field_end = wrap_field_end;
	if (sem->array_element_start)
		wrapped.array_element_start = wrap_element_start;
	if (sem->array_element_end)
		wrapped.array_element_end = wrap_element_end;
	if (sem->scalar)
		wrapped.scalar = wrap_scalar;

	return pg_parse_json(lex, &wrapped);
}
