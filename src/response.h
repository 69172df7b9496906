/*
 * response.h — record responses of get and query, parsed with Postgres' JSON parser.
 *
 * Floats are read from the response text with strtof, so values come back bit for bit
 * (-0.0 included, which a trip through numeric would lose).
 */
#ifndef CHROMA_SYNC_RESPONSE_H
#define CHROMA_SYNC_RESPONSE_H

#include "lib/stringinfo.h"
#include "utils/array.h"

/* Bytes in front of each embedding's floats: room for a real[] header. */
#define CHROMA_ROWS_ARRAY_HEADER ARR_OVERHEAD_NONULLS(1)

typedef struct ChromaRows
{
	int			n;				/* records */
	char	  **ids;			/* server encoding */
	float	  **embeddings;		/* NULL when not included; an entry NULL for null; each
								 * preceded by CHROMA_ROWS_ARRAY_HEADER spare bytes */
	int		   *dims;
	char	  **documents;		/* NULL when not included; entries NULL for null */
	char	  **metadatas;		/* JSON text of each object (server encoding), or NULL */
	float	   *distances;		/* query only; NaN for null */
	int			nqueries;		/* chroma_parse_query_results: the lists of the response */
	int		   *query;			/* and the 0-based query of each record */
	bool		has_embeddings;
	bool		has_documents;
	bool		has_metadatas;
	bool		has_distances;
} ChromaRows;

/*
 * Parses a get response (nested = false) or the first result of a query response
 * (nested = true: every column is a list per query embedding).
 */
extern void chroma_parse_rows(StringInfo body, bool nested, ChromaRows *rows);

/*
 * Parses every result of a query response: the records of all query embeddings one
 * after the other, rows->query[i] telling whose record i is.
 */
extern void chroma_parse_query_results(StringInfo body, ChromaRows *rows);

/*
 * Embedding i (not NULL) as a real[], built in place in front of its floats: no copy.
 * Call it once per embedding.
 */
extern ArrayType *chroma_rows_embedding(ChromaRows *rows, int i);

#endif							/* CHROMA_SYNC_RESPONSE_H */
