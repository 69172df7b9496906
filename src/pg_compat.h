/*
 * pg_compat.h — every difference of PostgreSQL's API between the majors we build on,
 * as a small macro or inline function named for what it does; the rest of the code
 * calls these names and never tests PG_VERSION_NUM itself.
 */
#ifndef CHROMA_SYNC_PG_COMPAT_H
#define CHROMA_SYNC_PG_COMPAT_H

#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "common/jsonapi.h"

/* 16 folded the per-catalog owner checks into object_ownercheck (callers include utils/acl.h). */
#if PG_VERSION_NUM >= 160000
#define chroma_database_ownercheck(dboid, role) \
	object_ownercheck(DatabaseRelationId, (dboid), (role))
#define chroma_class_ownercheck(relid, role) \
	object_ownercheck(RelationRelationId, (relid), (role))
#else
#define chroma_database_ownercheck(dboid, role) pg_database_ownercheck((dboid), (role))
#define chroma_class_ownercheck(relid, role) pg_class_ownercheck((relid), (role))
#endif

/* 17 tells a background worker by its backend type; IsBackgroundWorker is gone. */
#if PG_VERSION_NUM >= 170000
#define chroma_am_background_worker() AmBackgroundWorkerProcess()
#else
#define chroma_am_background_worker() IsBackgroundWorker
#endif

/* 18 spells "does not return" pg_noreturn, before the declaration. */
#if PG_VERSION_NUM < 180000 && !defined(pg_noreturn)
#define pg_noreturn pg_attribute_noreturn()
#endif

/* 19 marks an intended fall-through with pg_fallthrough (it builds with -Wimplicit-fallthrough=5). */
#ifndef pg_fallthrough
#if defined(__has_attribute)
#if __has_attribute(fallthrough)
#define pg_fallthrough __attribute__((fallthrough))
#endif
#endif
#ifndef pg_fallthrough
#define pg_fallthrough ((void) 0)
#endif
#endif

/*
 * Whether a column is a virtual generated column (18): computed when read, never stored,
 * so row triggers never see its value.
 */
#if PG_VERSION_NUM >= 180000
#define chroma_column_is_virtual(relid, attnum) \
	(get_attgenerated((relid), (attnum)) == ATTRIBUTE_GENERATED_VIRTUAL)
#else
#define chroma_column_is_virtual(relid, attnum) ((void) (relid), (void) (attnum), false)
#endif

/*
 * A tuple descriptor built by hand is finalized before any use (19: TupleDescFinalize
 * computes what deforming relies on; a descriptor used without it crashed).
 */
#if PG_VERSION_NUM >= 190000
#define chroma_tupdesc_finalize(td) TupleDescFinalize(td)
#else
#define chroma_tupdesc_finalize(td) ((void) (td))
#endif

/* A sequential scan of a table (19 added a last argument: ScanOptions flags). */
#if PG_VERSION_NUM >= 190000
#define chroma_table_beginscan(rel, snap) table_beginscan((rel), (snap), 0, NULL, SO_NONE)
#else
#define chroma_table_beginscan(rel, snap) table_beginscan((rel), (snap), 0, NULL)
#endif

/* A type name's parse tree (callers include parser/parse_type.h; 16 added escontext). */
#if PG_VERSION_NUM >= 160000
#define chroma_type_string_to_name(str) typeStringToTypeName((str), NULL)
#else
#define chroma_type_string_to_name(str) typeStringToTypeName(str)
#endif

/*
 * A lexer over a string, allocated in the current memory context (17 added a first
 * argument: a context to initialise, or NULL to allocate one).
 */
#if PG_VERSION_NUM >= 170000
#define chroma_json_lexer(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), (need_escapes))
#else
#define chroma_json_lexer(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen((json), (len), (encoding), (need_escapes))
#endif

/*
 * The semantic actions our parsers use, with the callbacks of 15 (returning void): since
 * 16 a callback returns a JsonParseErrorType, so chroma_parse_json hands the parser
 * trampolines that call ours and return JSON_SUCCESS (our callbacks raise errors).
 */
typedef struct ChromaJsonSem
{
	void	   *semstate;
	void		(*object_start) (void *state);
	void		(*object_end) (void *state);
	void		(*array_start) (void *state);
	void		(*array_end) (void *state);
	void		(*object_field_start) (void *state, char *fname, bool isnull);
	void		(*object_field_end) (void *state, char *fname, bool isnull);
	void		(*scalar) (void *state, char *token, JsonTokenType tokentype);
} ChromaJsonSem;

#if PG_VERSION_NUM >= 160000
static inline JsonParseErrorType
chroma_json_tramp_object_start(void *s)
{
	((ChromaJsonSem *) s)->object_start(((ChromaJsonSem *) s)->semstate);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_object_end(void *s)
{
	((ChromaJsonSem *) s)->object_end(((ChromaJsonSem *) s)->semstate);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_array_start(void *s)
{
	((ChromaJsonSem *) s)->array_start(((ChromaJsonSem *) s)->semstate);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_array_end(void *s)
{
	((ChromaJsonSem *) s)->array_end(((ChromaJsonSem *) s)->semstate);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_field_start(void *s, char *fname, bool isnull)
{
	((ChromaJsonSem *) s)->object_field_start(((ChromaJsonSem *) s)->semstate, fname, isnull);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_field_end(void *s, char *fname, bool isnull)
{
	((ChromaJsonSem *) s)->object_field_end(((ChromaJsonSem *) s)->semstate, fname, isnull);
	return JSON_SUCCESS;
}

static inline JsonParseErrorType
chroma_json_tramp_scalar(void *s, char *token, JsonTokenType tokentype)
{
	((ChromaJsonSem *) s)->scalar(((ChromaJsonSem *) s)->semstate, token, tokentype);
	return JSON_SUCCESS;
}
#endif

/* pg_parse_json with our callbacks (any of them may be NULL). */
static inline JsonParseErrorType
chroma_parse_json(JsonLexContext *lex, ChromaJsonSem *ours)
{
	JsonSemAction sem;

	memset(&sem, 0, sizeof(sem));
#if PG_VERSION_NUM >= 160000
	sem.semstate = ours;
	sem.object_start = ours->object_start ? chroma_json_tramp_object_start : NULL;
	sem.object_end = ours->object_end ? chroma_json_tramp_object_end : NULL;
	sem.array_start = ours->array_start ? chroma_json_tramp_array_start : NULL;
	sem.array_end = ours->array_end ? chroma_json_tramp_array_end : NULL;
	sem.object_field_start = ours->object_field_start ? chroma_json_tramp_field_start : NULL;
	sem.object_field_end = ours->object_field_end ? chroma_json_tramp_field_end : NULL;
	sem.scalar = ours->scalar ? chroma_json_tramp_scalar : NULL;
#else
	sem.semstate = ours->semstate;
	sem.object_start = ours->object_start;
	sem.object_end = ours->object_end;
	sem.array_start = ours->array_start;
	sem.array_end = ours->array_end;
	sem.object_field_start = ours->object_field_start;
	sem.object_field_end = ours->object_field_end;
	sem.scalar = ours->scalar;
#endif
	return pg_parse_json(lex, &sem);
}

#endif							/* CHROMA_SYNC_PG_COMPAT_H */
