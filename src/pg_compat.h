/*
 * pg_compat.h — every difference of PostgreSQL's API between the majors we build on,
 * as a small macro or inline function named for what it does; the rest of the code
 * calls these names and never tests PG_VERSION_NUM itself.
 */
#ifndef CHROMA_SYNC_PG_COMPAT_H
#define CHROMA_SYNC_PG_COMPAT_H

#include "postgres.h"

#include "catalog/pg_database.h"
#include "utils/acl.h"

#if PG_VERSION_NUM >= 160000
#define chroma_database_ownercheck(dboid, role) \
	object_ownercheck(DatabaseRelationId, (dboid), (role))
#else
#define chroma_database_ownercheck(dboid, role) pg_database_ownercheck((dboid), (role))
#endif

#endif							/* CHROMA_SYNC_PG_COMPAT_H */
