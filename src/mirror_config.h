/*
 * mirror_config.h — a mirror's configuration (chroma_sync.mirror) and the SQL that
 * reads its rows.
 */
#ifndef CHROMA_SYNC_MIRROR_CONFIG_H
#define CHROMA_SYNC_MIRROR_CONFIG_H

#include "postgres.h"

#include "access/attnum.h"
#include "catalog/objectaddress.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

/* What a mirrored column is for (the order of the recorded columns). */
typedef enum MirrorColumnRole
{
	MIRROR_COLUMN_KEY,
	MIRROR_COLUMN_EMBEDDING,
	MIRROR_COLUMN_DOCUMENT,
	MIRROR_COLUMN_METADATA,
	MIRROR_COLUMN_FILTER		/* named by the filter */
} MirrorColumnRole;

/* How a mismatch of the recorded columns can be resolved (mirror_columns_status). */
typedef enum MirrorColumnFix
{
	MIRROR_FIX_RESYNC,			/* chroma_resync records the change (the least: first) */
	MIRROR_FIX_UNDO,			/* undo the change (or mirror again) */
	MIRROR_FIX_REMIRROR			/* unmirror and mirror again */
} MirrorColumnFix;

/* A mirrored column as recorded (mirror_columns.c). */
typedef struct MirrorColumn
{
	MirrorColumnRole role;
	char	   *name;			/* NULL: no document column */
	AttrNumber	attnum;			/* as recorded; resolved by mirror_columns_resolve */
	char	   *type;			/* qualified, with its typmod: "character(4)" */
} MirrorColumn;

typedef struct MirrorConfig
{
	int			mirror_id;
	Oid			relid;
	char	   *collection;
	char	   *collection_id;	/* NULL until known */
	int			nkeys;			/* 1, or more for a composite id */
	AttrNumber *key_attnums;
	Oid		   *key_types;
	AttrNumber	embedding_attnum;
	AttrNumber	document_attnum;	/* 0: none */
	int			nmeta;
	AttrNumber *meta_attnums;
	Oid			owner;
	int			dimension;		/* 0: not fixed yet */
	int			nknown;
	char	  **known_keys;		/* metadata keys ever sent */
	bool		paused;
	char	   *paused_reason;	/* why, when paused (NULL: not given) */
	bool		backfill_done;
	char	   *backfill_after; /* NULL: from the start */

	/*
	 * The backfill the watermark belongs to: backfill_started_at, set anew by every
	 * restart (chroma_resync, chroma_adopt, a new collection), or by the worker's first
	 * page when NULL (DT_NOBEGIN here). Every watermark write compares it: a page read
	 * before a restart starts from NULL too, like the first page of the new backfill.
	 */
	TimestampTz backfill_run;
	bool		reconcile;
	char	   *system_identifier;
	Oid			database_oid;
	Jsonb	   *configuration;	/* the collection's, given to chroma_mirror (NULL: none) */
	char	   *filter;			/* as stored: deparsed by chroma_mirror (raw text before 0.5) */
	char	   *filter_node;	/* the bound tree stored with it (NULL: stored by 0.4) */
	char	  **filter_refs;	/* what the tree refers to, recorded when bound (NULL: none) */
	int			nfilter_refs;
	char	   *filter_relname; /* a 0.4 text: the table's name when the update recorded
								 * the columns it reads (NULL: none recorded) */
	bool		filter_ddl_after_update;	/* a 0.4 text, and DDL ran before its
											 * binding: not bound until confirmed */
	bool		filter_needs_confirmation;	/* its binding was refused for that */
	char	   *filter_node_derived;	/* the tree bound again from the text (mirror_filter_bound) */
	char	   *filter_sql;		/* the filter in generated SQL (mirror_filter_sql) */
	bool		filter_invalid; /* the stored filter failed that check */
	bool		home;			/* in the database, cluster and table it was recorded for (a
								 * stored tree's OIDs mean something here) */
	int			ncolumns;
	MirrorColumn *columns;		/* NULL: not recorded (a row of chroma_sync before 0.5) */
	char	  **meta_names;		/* metadata columns' recorded names (keys), or NULL */
	char	   *column_problem; /* why the columns no longer match, or NULL */
	char	   *column_problem_name;	/* the column it is about */
	int			column_problem_code;	/* its SQLSTATE */
	MirrorColumnFix column_problem_fix;
	bool		columns_renamed;	/* only renames that change nothing sent */
	int			ncolumn_types;
	Oid		   *column_types;	/* types of the keys, embedding, document, metadata when
								 * recorded (InvalidOid: no document column), or NULL */
} MirrorConfig;

/*
 * Whether chroma_sync.mirror has the columns of 0.5 (column_names...): until ALTER
 * EXTENSION UPDATE runs, the library can be newer than the catalog.
 */
extern bool mirror_columns_by_name_exist(void);

/* Loads mirrors (in a transaction, SPI connected by the caller or not). */
extern List *mirror_load_all(void);
extern MirrorConfig *mirror_load(int mirror_id);

/*
 * The mirror of `source` (and `collection`, required when the table has several);
 * raises a clear error when there is none or the choice is ambiguous.
 */
extern MirrorConfig *mirror_lookup(Oid relid, const char *collection);

/*
 * SELECT key, embedding::real[], document::text, metadata-jsonb FROM source ...
 * `tail` is appended (WHERE/ORDER BY/LIMIT); $1.. are the caller's parameters.
 */
extern char *mirror_select_sql(MirrorConfig *m, const char *tail);
/* The table as a FROM item (ONLY, quoted, qualified); an ERROR (42P01) when it was dropped meanwhile. */
extern char *mirror_table_sql(MirrorConfig *m);
/*
 * The id (key) in SQL, for building tails. mirror_key_sql is an expression of the row's
 * id: the key column itself for a one-column key, else the id's text (NULL when a key
 * column is NULL). The others are conditions: the row's id is one of the text[] `param`,
 * equals the text `param`, comes after the id text `param` in key order; the key is not
 * NULL; and the key's ORDER BY list. Ids decode with the key types' input functions.
 */
extern char *mirror_key_sql(MirrorConfig *m);
/* The row's id as text, exactly as sent (the type's output function). */
extern char *mirror_id_text_sql(MirrorConfig *m);
extern char *mirror_key_in_sql(MirrorConfig *m, const char *param);
/*
 * The id text param as values of the key columns' base types (domains stripped): an error
 * when no value of those types has that text. Every key parameter is compared as such.
 */
extern char *mirror_key_cast_sql(MirrorConfig *m, const char *param);
extern char *mirror_key_eq_sql(MirrorConfig *m, const char *param);
extern char *mirror_key_after_sql(MirrorConfig *m, const char *param);
extern char *mirror_key_not_null_sql(MirrorConfig *m);
extern char *mirror_key_order_sql(MirrorConfig *m);

/*
 * SELECT <id> FROM source WHERE <key not null> [AND <key after $1>] ORDER BY <key>
 * LIMIT limit: a backfill page's ids in key order ($1 the previous page's last id).
 */
extern char *mirror_backfill_page_sql(MirrorConfig *m, bool after, int limit, bool rows);

/*
 * The condition of a row that belongs in the collection: a non-NULL embedding, and the
 * filter when there is one (SQL over the table's columns, unqualified).
 */
extern char *mirror_present_sql(MirrorConfig *m);

/* Text form of a key value (the Chroma id): the type's output function. */
extern char *mirror_key_text(Oid key_type, Datum value);

/*
 * The Chroma id of a composite key: each value's text form with '%' written as "%25" and
 * ',' as "%2C", joined by ','. Reversible (split on ',', then undo the two escapes), so
 * two different keys never share an id. A one-column key's id is its plain text form.
 */
#define MIRROR_ID_SEPARATOR ','
extern char *mirror_id_encode(int n, char **parts);

/*
 * Fixes the settings that change how column values render as metadata (TimeZone for
 * timestamptz, IntervalStyle, extra_float_digits), so that the worker and
 * chroma_verify, in any session, render the same metadata. Inside a GUC nest level
 * (NewGUCNestLevel) the caller's values come back with AtEOXact_GUC.
 */
extern void mirror_fix_render_settings(void);
extern int	mirror_plain_names(void);

/*
 * User SQL of a mirror (its filter, casts of its columns, what they call) runs only as
 * the table's current owner (pg_class.relowner, read when it runs, as VACUUM does), as a
 * security-restricted operation with search_path pinned to MIRROR_OWNER_SEARCH_PATH;
 * every setting it changes is undone after it. Never as the caller, never as the role
 * that created the mirror. The caller holds a lock on the table (ALTER TABLE ... OWNER
 * TO waits for it).
 */
#define MIRROR_OWNER_SEARCH_PATH "pg_catalog, pg_temp"

typedef struct MirrorSavedUser
{
	Oid			userid;
	int			sec;
	int			guc_level;
} MirrorSavedUser;

extern void mirror_become_table_owner(Oid relid, MirrorSavedUser *s);
extern void mirror_become_owner(MirrorConfig *m, MirrorSavedUser *s);
extern void mirror_restore_user(MirrorSavedUser *s);

/*
 * The filter `filter` of table relid, checked (one boolean expression over the row,
 * immutable functions only, no subquery, no domain with a mutable CHECK) with the table
 * owner's rights, names resolved in the caller's search_path: returns the deparsed text
 * (names outside pg_catalog qualified, for display) and sets *node to the analyzed tree
 * (nodeToString: columns by attnum, functions by OID), the forms chroma_mirror stores.
 * ERROR otherwise.
 */
extern char *mirror_filter_canonical(Oid relid, const char *filter, char **node);

/*
 * The tree of m's stored filter text, bound again as the table owner in the pinned
 * search_path. When m->filter_refs were recorded, the text is read with the fixed settings
 * it was written in, and a tree that refers to other functions, operators, types or
 * collations than those recorded is refused (55000): an overload planted in a restored
 * copy before chroma_adopt is never bound.
 */
extern char *mirror_filter_derive(MirrorConfig *m);

/* What a bound tree (nodeToString) refers to, sorted, each once, as text. */
extern char **mirror_filter_refs(const char *node, int *n);
extern Datum mirror_filter_refs_datum(const char *node);

/*
 * Records that the mirror's row trigger depends on what the bound tree refers to
 * (functions, operators, types, collations; not its columns), as a CHECK constraint does:
 * DROP FUNCTION of a function the filter calls is refused (2BP01) unless CASCADE, which
 * drops the trigger (the mirror then pauses). mirror_filter_depend.c.
 */
extern void mirror_filter_record_depends(Oid relid, int mirror_id, const char *node);

/* What the bound tree refers to (functions, operators, types, collations; not its columns), each once. */
extern ObjectAddress *mirror_filter_objects(const char *node, int *n);

/* Whether every object the bound tree refers to (but its columns) still exists. */
extern bool mirror_filter_refs_exist(const char *node);

/*
 * Stores node as m's bound filter (a filter stored by 0.4 as text, bound now): the tree,
 * its references, its text written with the fixed settings, its dependencies.
 */
extern void mirror_filter_store_bound(MirrorConfig *m, const char *node);

/*
 * Writes m's filter text and references again from its bound tree, names as they are now,
 * when they changed (a column, the table, a function, type or schema renamed): in the
 * transaction of the rename, so that a dump names what the mirror reads.
 */
extern void mirror_filter_follow_names(MirrorConfig *m);

/* The text of a bound tree, names as they are now, deparsed with fixed settings. */
extern char *mirror_filter_text_of(Oid relid, const char *node);

/*
 * The mirror's bound filter (NULL: none), checked against the table as it is now: the
 * stored tree, or one derived from the text (m->filter_node_derived) when none was stored
 * (0.4) or it was stored in another database or cluster. ERROR when it no longer fits.
 */
extern Node *mirror_filter_bound(MirrorConfig *m);

/*
 * The stored tree's text with the table's names as they are now (NULL: no tree made
 * here), to keep the text (display, pg_dump, chroma_adopt) in step with renames.
 */
extern char *mirror_filter_text_now(MirrorConfig *m);

/*
 * Set by the sync worker: a filter stored by 0.4 as text is bound by it alone, with the
 * settings 0.4's worker read the text with; elsewhere it is refused until then.
 */
extern bool mirror_filter_in_worker;

/*
 * The pause reason of a 0.4 filter not bound because DDL ran first; chroma_resume() of a
 * mirror paused with it confirms the text as its names read now.
 */
/*
 * The DDL epoch: advanced by DDL that may change what names mean (ALTER, DROP, CREATE FUNCTION
 * and the like), unless on temporary objects only
 * (0 before the first; the sequence does not exist before the update to 0.5). SQL text.
 */
#define MIRROR_DDL_EPOCH "COALESCE(pg_catalog.pg_sequence_last_value(pg_catalog.to_regclass('chroma_sync.ddl_epoch')), 0)"
#define MIRROR_FILTER_DDL_REASON "DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter"

/* Whether filters are bound (the catalog is 0.5's: filter_node, chroma_sync_filter.match). */
extern bool mirror_filter_binds(void);

/*
 * The mirror's filter for generated SQL (NULL: none): a call of chroma_sync_filter.match
 * on the whole row of the FROM item mirror_table_sql, after mirror_filter_bound's checks;
 * an ERROR (and m->filter_invalid) when they fail.
 */
extern const char *mirror_filter_sql(MirrorConfig *m);

/* This cluster's system identifier as text. */
extern char *mirror_system_identifier(void);

#endif							/* CHROMA_SYNC_MIRROR_CONFIG_H */
