/*
 * ownership.h — which mirror owns a collection, recorded in the collection's metadata,
 * so a restored copy or a second table cannot silently write into the same collection.
 */
#ifndef CHROMA_SYNC_OWNERSHIP_H
#define CHROMA_SYNC_OWNERSHIP_H

#include "chroma_api.h"

#define CHROMA_OWNER_KEY "chroma_sync_owner"

/* "<system identifier>/<database oid>/<table oid>" */
extern char *ownership_tag(const char *system_identifier, Oid dboid, Oid relid);

/* The owner recorded in the collection's metadata, or NULL. */
extern char *ownership_of(const ChromaCollection *coll);

/*
 * Records tag as the collection's owner. Raises when another mirror owns it, unless
 * adopt. Keeps the collection's other metadata.
 */
extern void ownership_claim(const ChromaCollection *coll, const char *tag, bool adopt);

#endif							/* CHROMA_SYNC_OWNERSHIP_H */
