/*
 * response.c — record responses of get and query, parsed with Postgres' JSON parser.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type_d.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/float.h"

#include "chroma_api.h"
#include "response.h"

typedef enum RowColumn
{
	COL_NONE,
	COL_IDS,
	COL_EMBEDDINGS,
	COL_DOCUMENTS,
	COL_METADATAS,
	COL_DISTANCES
} RowColumn;

typedef struct ParseState
{
	JsonLexContext *lex;
	ChromaRows *rows;
	int			level;			/* 0 = result row for get, 1 = per-query list for query */
	int			depth;			/* nesting of objects and arrays */
	RowColumn	col;			/* column being read */
	int			arr;			/* array depth inside the column */
	int			seen_lists;		/* per-query lists seen in this column (use the first) */
	bool		all_lists;		/* nested: read every per-query list, not the first only */
	int		   *ends[6];		/* all_lists: per column, its element count after each list */
	int			nends[6];
	int			ends_cap[6];
	bool		meta_keep;		/* the metadata object being captured is a result's */
	int			idx[6];			/* next element per column */
	int			cap;
	/* embedding being read (a scratch buffer reused for every record) */
	float	   *emb;
	int			emb_len;
	int			emb_cap;
	/* metadata object being captured */
	int			meta_depth;
	const char *meta_start;
} ParseState;

static void
bad_response(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_JSON_TEXT),
			 errmsg("unexpected response from Chroma"),
			 errdetail("%s", why)));
}

static void
ensure_cap(ParseState *st, int need)
{
	ChromaRows *r = st->rows;
	int			cap;

	if (need <= st->cap)
		return;
	cap = st->cap ? st->cap * 2 : 64;
	while (cap < need)
		cap *= 2;
#define GROW(field, type) \
	r->field = r->field ? repalloc0_array_compat(r->field, type, st->cap, cap) : palloc0_array(type, cap)
#define repalloc0_array_compat(p, type, old, new) \
	((type *) memset((char *) repalloc((p), sizeof(type) * (new)) + sizeof(type) * (old), 0, \
					 sizeof(type) * ((new) - (old))) - (old))
	GROW(ids, char *);
	GROW(embeddings, float *);
	GROW(dims, int);
	GROW(documents, char *);
	GROW(metadatas, char *);
	GROW(distances, float);
#undef GROW
#undef repalloc0_array_compat
	st->cap = cap;
}

/* The parser's token (ours to keep or free) in the server encoding. */
static char *
to_server(char *token)
{
	char	   *s = pg_any_to_server(token, strlen(token), PG_UTF8);

	if (s != token)
		pfree(token);
	return s;
}

/* True when inside the column's element list (past the per-query list when nested). */
static bool
in_elements(ParseState *st, int extra)
{
	return st->col != COL_NONE &&
		(st->all_lists ? st->seen_lists >= 1 : st->seen_lists == 1) &&
		st->arr == 1 + st->level + extra;
}

/* all_lists: a per-query list of the current column has ended. */
static void
list_end(ParseState *st)
{
	int			c = st->col;

	if (st->nends[c] == st->ends_cap[c])
	{
		st->ends_cap[c] = st->ends_cap[c] ? st->ends_cap[c] * 2 : 16;
		st->ends[c] = st->ends[c] ? repalloc(st->ends[c], sizeof(int) * st->ends_cap[c])
			: palloc(sizeof(int) * st->ends_cap[c]);
	}
	st->ends[c][st->nends[c]++] = st->idx[c];
}

static void
rows_object_start(void *state)
{
	ParseState *st = (ParseState *) state;

	st->depth++;
	if (st->col == COL_METADATAS && st->meta_depth == 0 && st->arr == 1 + st->level)
	{
		/* objects of a later per-query list are skipped like its other values */
		st->meta_depth = st->depth;
		st->meta_start = st->lex->token_start;
		st->meta_keep = in_elements(st, 0);
	}
	else if (st->col != COL_NONE && st->meta_depth == 0 && st->depth > 1)
		bad_response("an object where a value was expected");
}

static void
rows_object_end(void *state)
{
	ParseState *st = (ParseState *) state;

	if (st->meta_depth != 0 && st->depth == st->meta_depth && !st->meta_keep)
		st->meta_depth = 0;
	else if (st->meta_depth != 0 && st->depth == st->meta_depth)
	{
		/* the closing brace has been consumed: it ends at prev_token_terminator */
		size_t		len = st->lex->prev_token_terminator - st->meta_start;
		int			i = st->idx[COL_METADATAS]++;
		char	   *txt = pnstrdup(st->meta_start, len);

		ensure_cap(st, i + 1);
		st->rows->metadatas[i] = to_server(txt);
		st->meta_depth = 0;
	}
	st->depth--;
}

static void
rows_array_start(void *state)
{
	ParseState *st = (ParseState *) state;

	st->depth++;
	if (st->meta_depth)
		return;
	if (st->col == COL_NONE)
		return;
	st->arr++;
	if (st->arr == 2 && st->level == 1)
		st->seen_lists++;
	if (st->arr == 1 && st->level == 0)
		st->seen_lists = 1;
	if (st->col == COL_EMBEDDINGS && in_elements(st, 1))
	{
		st->emb_len = 0;
		if (st->emb == NULL)
		{
			st->emb_cap = 64;
			st->emb = palloc(sizeof(float) * st->emb_cap);
		}
	}
	else if (st->arr > 1 + st->level + (st->col == COL_EMBEDDINGS ? 1 : 0))
		bad_response("an array nested deeper than expected");
}

static void
rows_array_end(void *state)
{
	ParseState *st = (ParseState *) state;

	st->depth--;
	if (st->meta_depth || st->col == COL_NONE)
		return;
	if (st->col == COL_EMBEDDINGS && in_elements(st, 1))
	{
		int			i = st->idx[COL_EMBEDDINGS]++;
		size_t		bytes = sizeof(float) * st->emb_len;
		char	   *a = palloc(CHROMA_ROWS_ARRAY_HEADER + Max(bytes, 1));
		void	   *floats = a + CHROMA_ROWS_ARRAY_HEADER;

		/* exactly sized, with room for a real[] header in front (chroma_rows_embedding) */
		memcpy(floats, st->emb, bytes);
		ensure_cap(st, i + 1);
		st->rows->embeddings[i] = floats;
		st->rows->dims[i] = st->emb_len;
	}
	if (st->all_lists && st->level == 1 && st->arr == 2)
		list_end(st);
	st->arr--;
}

static void
rows_field_start(void *state, char *fname, bool isnull)
{
	ParseState *st = (ParseState *) state;

	if (st->depth != 1)
		return;
	st->arr = 0;
	st->seen_lists = 0;
	if (strcmp(fname, "ids") == 0)
		st->col = COL_IDS;
	else if (strcmp(fname, "embeddings") == 0)
		st->col = COL_EMBEDDINGS;
	else if (strcmp(fname, "documents") == 0)
		st->col = COL_DOCUMENTS;
	else if (strcmp(fname, "metadatas") == 0)
		st->col = COL_METADATAS;
	else if (strcmp(fname, "distances") == 0)
		st->col = COL_DISTANCES;
	else
		st->col = COL_NONE;
	if (st->col == COL_EMBEDDINGS && !isnull)
		st->rows->has_embeddings = true;
	if (st->col == COL_DOCUMENTS && !isnull)
		st->rows->has_documents = true;
	if (st->col == COL_METADATAS && !isnull)
		st->rows->has_metadatas = true;
	if (st->col == COL_DISTANCES && !isnull)
		st->rows->has_distances = true;
}

static void
rows_field_end(void *state, char *fname, bool isnull)
{
	ParseState *st = (ParseState *) state;

	if (st->depth == 1)
		st->col = COL_NONE;
	pfree(fname);				/* the parser hands every key over: metadata keys too */
}

static float
parse_float(const char *token)
{
	char	   *end;
	float		f;

	errno = 0;
	f = strtof(token, &end);
	if (*end != '\0')
		bad_response("a malformed number");
	/* beyond real's range (a denormal underflow is a valid float32: kept) */
	if (errno == ERANGE && isinf(f))
		bad_response("a number out of range for type real");
	return f;
}

/* One scalar of the response; true when token was kept (an id or a document). */
static bool
rows_value(ParseState *st, char *token, JsonTokenType type)
{
	int			i;

	if (st->meta_depth || st->col == COL_NONE)
		return false;
	if (st->arr == 0)
	{
		if (type == JSON_TOKEN_NULL)
			return false;
		bad_response("a column that is not an array");
	}
	switch (st->col)
	{
		case COL_IDS:
			if (!in_elements(st, 0))
				return false;
			if (type != JSON_TOKEN_STRING)
				bad_response("an id that is not a string");
			i = st->idx[COL_IDS]++;
			ensure_cap(st, i + 1);
			st->rows->ids[i] = to_server(token);
			return true;
		case COL_DOCUMENTS:
			if (!in_elements(st, 0))
				return false;
			i = st->idx[COL_DOCUMENTS]++;
			ensure_cap(st, i + 1);
			if (type == JSON_TOKEN_STRING)
			{
				st->rows->documents[i] = to_server(token);
				return true;
			}
			if (type != JSON_TOKEN_NULL)
				bad_response("a document that is not a string");
			break;
		case COL_METADATAS:
			if (!in_elements(st, 0))
				return false;
			i = st->idx[COL_METADATAS]++;
			ensure_cap(st, i + 1);
			if (type != JSON_TOKEN_NULL)
				bad_response("metadata that is not an object");
			break;
		case COL_DISTANCES:
			if (!in_elements(st, 0))
				return false;
			i = st->idx[COL_DISTANCES]++;
			ensure_cap(st, i + 1);
			/* null: the distance overflowed float32 on the server */
			if (type == JSON_TOKEN_NULL)
				st->rows->distances[i] = get_float4_nan();
			else if (type == JSON_TOKEN_NUMBER)
				st->rows->distances[i] = parse_float(token);
			else
				bad_response("a distance that is not a number");
			break;
		case COL_EMBEDDINGS:
			if (in_elements(st, 0) && type == JSON_TOKEN_NULL)
			{
				i = st->idx[COL_EMBEDDINGS]++;
				ensure_cap(st, i + 1);
				break;
			}
			if (!in_elements(st, 1))
				return false;
			if (type != JSON_TOKEN_NUMBER)
				bad_response("an embedding value that is not a number");
			if (st->emb_len == st->emb_cap)
			{
				st->emb_cap *= 2;
				st->emb = repalloc(st->emb, sizeof(float) * st->emb_cap);
			}
			st->emb[st->emb_len++] = parse_float(token);
			break;
		default:
			break;
	}
	return false;
}

/* Every token the parser hands over is ours: kept, or freed at once. */
static void
rows_scalar(void *state, char *token, JsonTokenType type)
{
	if (!rows_value((ParseState *) state, token, type))
		pfree(token);
}

/* Each column's per-query lists as long as those of ids; rows->query from them. */
static void
split_queries(ParseState *st)
{
	ChromaRows *r = st->rows;
	int			nq = st->nends[COL_IDS];
	bool		has[6] = {false, false, r->has_embeddings, r->has_documents,
	r->has_metadatas, r->has_distances};

	for (int c = COL_EMBEDDINGS; c <= COL_DISTANCES; c++)
		if (has[c] && (st->nends[c] != nq ||
					   (nq > 0 && memcmp(st->ends[c], st->ends[COL_IDS], sizeof(int) * nq) != 0)))
			bad_response("per-query lists of different lengths");
	r->nqueries = nq;
	r->query = palloc(sizeof(int) * Max(r->n, 1));
	for (int q = 0, i = 0; q < nq; q++)
		for (; i < st->ends[COL_IDS][q]; i++)
			r->query[i] = q;
	for (int c = 0; c < 6; c++)
		if (st->ends[c])
			pfree(st->ends[c]);
}

static void
parse_rows(StringInfo body, int level, bool all_lists, ChromaRows *rows)
{
	ParseState	st;
	ChromaJsonSem sem;
	JsonParseErrorType err;

	memset(rows, 0, sizeof(*rows));
	memset(&st, 0, sizeof(st));
	st.rows = rows;
	st.level = level;
	st.all_lists = all_lists;
	st.lex = chroma_json_lexer(body->data, body->len, PG_UTF8, true);

	memset(&sem, 0, sizeof(sem));
	sem.semstate = &st;
	sem.object_start = rows_object_start;
	sem.object_end = rows_object_end;
	sem.array_start = rows_array_start;
	sem.array_end = rows_array_end;
	sem.object_field_start = rows_field_start;
	sem.object_field_end = rows_field_end;
	sem.scalar = rows_scalar;

	if (body->len == 0 || body->data[0] != '{')
		bad_response("the response is not a JSON object");
	chroma_check_response_encoding(body->data, body->len, "read records");
	err = chroma_parse_json(st.lex, &sem);
	if (err != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_JSON_TEXT),
				 errmsg("unexpected response from Chroma"),
				 errdetail("%s", json_errdetail(err, st.lex))));

	rows->n = st.idx[COL_IDS];
	if ((rows->has_embeddings && st.idx[COL_EMBEDDINGS] != rows->n) ||
		(rows->has_documents && st.idx[COL_DOCUMENTS] != rows->n) ||
		(rows->has_metadatas && st.idx[COL_METADATAS] != rows->n) ||
		(rows->has_distances && st.idx[COL_DISTANCES] != rows->n))
		bad_response("columns of different lengths");
	if (all_lists)
		split_queries(&st);
	ensure_cap(&st, rows->n + 1);
	if (st.emb)
		pfree(st.emb);
	pfree(st.lex->strval->data);
	pfree(st.lex->strval);
	pfree(st.lex);
}

void
chroma_parse_rows(StringInfo body, bool nested, ChromaRows *rows)
{
	parse_rows(body, nested ? 1 : 0, false, rows);
}

void
chroma_parse_query_results(StringInfo body, ChromaRows *rows)
{
	parse_rows(body, 1, true, rows);
}

ArrayType *
chroma_rows_embedding(ChromaRows *rows, int i)
{
	void	   *floats = rows->embeddings[i];
	ArrayType  *a = (ArrayType *) ((char *) floats - CHROMA_ROWS_ARRAY_HEADER);
	int			n = rows->dims[i];

	/* the header parse_rows left room for: a one-dimensional real[] without nulls */
	a->dataoffset = 0;
	a->elemtype = FLOAT4OID;
	if (n == 0)
	{
		SET_VARSIZE(a, sizeof(ArrayType));
		a->ndim = 0;
		return a;
	}
	SET_VARSIZE(a, CHROMA_ROWS_ARRAY_HEADER + sizeof(float) * n);
	a->ndim = 1;
	ARR_DIMS(a)[0] = n;
	ARR_LBOUND(a)[0] = 1;
	return a;
}
