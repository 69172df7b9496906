/*
 * where_document.h — Chroma's full-text filter on documents (where_document), checked
 * before anything is sent.
 */
#ifndef CHROMA_SYNC_WHERE_DOCUMENT_H
#define CHROMA_SYNC_WHERE_DOCUMENT_H

#include "utils/jsonb.h"

/*
 * Raises an ERROR (22023) unless doc is a where_document filter Chroma accepts: an object
 * with exactly one operator, "$contains", "$not_contains", "$regex" or "$not_regex" with
 * a non-empty string, or "$and" / "$or" with a non-empty array of such filters. `argname`
 * names the argument in messages ("where_document").
 */
extern void chroma_check_where_document(Jsonb *doc, const char *argname);

#endif							/* CHROMA_SYNC_WHERE_DOCUMENT_H */
