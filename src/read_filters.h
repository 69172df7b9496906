/*
 * read_filters.h — what restricts a get or a query: ids, "where" and "where_document",
 * checked before anything is sent, then written into the request body.
 */
#ifndef CHROMA_SYNC_READ_FILTERS_H
#define CHROMA_SYNC_READ_FILTERS_H

#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "encode.h"

/*
 * ids as UTF-8 JSON strings, each id once (its first occurrence), in the caller's order;
 * ERROR for a null id or an array of more than one dimension.
 */
extern List *read_filter_ids(ArrayType *ids);
/* One id (server encoding) as a UTF-8 JSON string. */
extern char *read_filter_id_json(const char *id, int len);

/* ERROR unless where is a JSON object (Chroma checks its operators). */
extern void read_filter_check_where(Jsonb *where);
/* And for a delete: no empty $and, $or, $in, $nin list nor empty object inside. */
extern void read_filter_check_where_for_delete(Jsonb *where);

/*
 * ERROR unless where_document is a JSON object built of $contains, $not_contains,
 * $regex and $not_regex (a string each; not empty if nonempty: a delete refuses what
 * matches every document), combined with non-empty $and and $or lists. {} is no filter.
 */
extern void read_filter_check_document(Jsonb *where_document, bool nonempty);

/*
 * Appends ,"where":{..} and ,"where_document":{..} (as UTF-8 JSON) for the filters that
 * are given and not {} (Chroma refuses {}: it means no filter). Check them first.
 */
extern void read_filters_append(cs_buf *b, Jsonb *where, Jsonb *where_document);

#endif							/* CHROMA_SYNC_READ_FILTERS_H */
