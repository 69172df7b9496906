-- chroma_sync 0.4 -> 0.5: hardening (see README "Upgrading")
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.5'" to load this file. \quit

-- Keys of requests whose outcome is unknown (a timeout, a connection lost mid-request,
-- HTTP 500/502/504): Chroma may still apply such a request late, so the worker queues
-- these keys again once not_before (the request timeout after the failure) has passed.
-- A table, not worker memory: a worker restart must not forget them.
CREATE TABLE chroma_sync.resend (
	mirror_id integer NOT NULL,
	key text COLLATE pg_catalog."C" NOT NULL,
	not_before timestamptz NOT NULL,
	PRIMARY KEY (mirror_id, key)
);
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.resend', '');
REVOKE ALL ON chroma_sync.resend FROM PUBLIC;

-- The same keys of a mirror removed while its collection stays (chroma_unmirror without
-- drop_collection, a dropped table, a request that ended after its mirror): another
-- mirror of the collection takes them into chroma_sync.resend at once; without one they
-- wait here, and the next mirror created into the collection takes them, so the late
-- request cannot outlive what that mirror sends (the time passing proves nothing: the
-- late write may have landed while no mirror wrote the collection, so they are kept until
-- taken). A key that cannot be a key of the taking mirror's table is no row of it: its id
-- is deleted. They are dropped with the collection: by chroma_delete_collection, or by the
-- worker once Chroma answers that no collection has that id (chroma_unmirror with
-- drop_collection keeps them too: the drop at commit may fail).
CREATE TABLE chroma_sync.resend_collection (
	collection_id uuid NOT NULL,
	key text COLLATE pg_catalog."C" NOT NULL,
	not_before timestamptz NOT NULL,
	collection text,					-- the collection's name when the keys were kept
	PRIMARY KEY (collection_id, key)
);
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.resend_collection', '');
REVOKE ALL ON chroma_sync.resend_collection FROM PUBLIC;

-- Hands the resend keys of mirror p_mirror (gone, or going) to the other mirrors of this
-- database that write p_collection (named p_name), or else to the collection.
CREATE FUNCTION chroma_sync.resend_hand_over(p_mirror integer, p_collection uuid, p_name text)
	RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF p_collection IS NOT NULL THEN
		INSERT INTO chroma_sync.resend (mirror_id, key, not_before)
			SELECT o.mirror_id, r.key, r.not_before
			FROM chroma_sync.resend r CROSS JOIN chroma_sync.mirror o
			WHERE r.mirror_id OPERATOR(pg_catalog.=) p_mirror
				AND o.mirror_id OPERATOR(pg_catalog.<>) p_mirror
				AND o.collection_id OPERATOR(pg_catalog.=) p_collection
			ON CONFLICT (mirror_id, key) DO UPDATE SET not_before =
				GREATEST(chroma_sync.resend.not_before, excluded.not_before);
		IF NOT FOUND THEN
			INSERT INTO chroma_sync.resend_collection (collection_id, key, not_before, collection)
				SELECT p_collection, r.key, r.not_before, p_name FROM chroma_sync.resend r
				WHERE r.mirror_id OPERATOR(pg_catalog.=) p_mirror
				ON CONFLICT (collection_id, key) DO UPDATE SET not_before =
					GREATEST(chroma_sync.resend_collection.not_before, excluded.not_before),
					collection = COALESCE(excluded.collection,
						chroma_sync.resend_collection.collection);
		END IF;
	END IF;
	DELETE FROM chroma_sync.resend WHERE mirror_id OPERATOR(pg_catalog.=) p_mirror;
END
$$;
REVOKE ALL ON FUNCTION chroma_sync.resend_hand_over(integer, uuid, text) FROM PUBLIC;

-- A dropped table's mirrors hand their resend keys on (chroma_sync.resend_hand_over).
CREATE OR REPLACE FUNCTION chroma_sync.on_sql_drop() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	d record;
	changed boolean := false;
BEGIN
	FOR d IN SELECT * FROM pg_catalog.pg_event_trigger_dropped_objects() LOOP
		IF d.object_type OPERATOR(pg_catalog.=) 'table' THEN
			DELETE FROM chroma_sync.queue q USING chroma_sync.mirror m
				WHERE q.mirror_id OPERATOR(pg_catalog.=) m.mirror_id
					AND m.source::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid;
			DELETE FROM chroma_sync.failed WHERE source::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid;
			PERFORM chroma_sync.resend_hand_over(m.mirror_id, m.collection_id, m.collection)
				FROM chroma_sync.mirror m WHERE m.source::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid
				ORDER BY m.mirror_id;
			DELETE FROM chroma_sync.mirror WHERE source::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid;
			changed := changed OR FOUND;
		ELSIF d.object_type OPERATOR(pg_catalog.=) 'table column' THEN
			UPDATE chroma_sync.mirror
				SET paused = true, in_error = true, last_error_at = pg_catalog.now(),
					last_error = pg_catalog.format('mirrored column %s was dropped; unmirror and mirror the table again',
						d.object_identity)
				WHERE source::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid
					AND (d.objsubid OPERATOR(pg_catalog.=) ANY (id_columns)
						OR d.objsubid OPERATOR(pg_catalog.=) embedding_column
						OR d.objsubid OPERATOR(pg_catalog.=) document_column
						OR d.objsubid OPERATOR(pg_catalog.=) ANY (metadata_columns));
			changed := changed OR FOUND;
		END IF;
	END LOOP;
	IF changed THEN
		PERFORM chroma_sync.config_changed();
	END IF;
END
$$;

-- ===== chroma_sync.api_key stored per role or per database (issue 20) =====
-- Before 0.5 the library could be loaded lazily: in a session that had not loaded it,
-- ALTER ROLE/DATABASE ... SET chroma_sync.api_key was stored unchecked in
-- pg_db_role_setting, which every user can read. 0.5's library refuses to load unless
-- preloaded, so its check always runs; keys stored earlier are removed here, with a warning.
DO $$
DECLARE
	s record;
BEGIN
	FOR s IN SELECT r.rolname, d.datname
		FROM pg_catalog.pg_db_role_setting x
			LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) x.setrole
			LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) x.setdatabase
		WHERE EXISTS (SELECT FROM pg_catalog.unnest(x.setconfig) AS c(setting)
			WHERE pg_catalog.starts_with(c.setting, 'chroma_sync.api_key=')) LOOP
		-- ALTER ROLE ALL IN DATABASE d is ALTER DATABASE d; ALTER ROLE ALL is every role
		EXECUTE pg_catalog.format('ALTER ROLE %s%s RESET chroma_sync.api_key',
			COALESCE(pg_catalog.quote_ident(s.rolname::pg_catalog.text), 'ALL'),
			COALESCE(' IN DATABASE ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(s.datname::pg_catalog.text), ''));
		RAISE WARNING 'removed chroma_sync.api_key stored for role %, database %',
			COALESCE(s.rolname::pg_catalog.text, '(all)'), COALESCE(s.datname::pg_catalog.text, '(all)')
			USING DETAIL = 'Settings stored per role or per database are readable by every user.',
				HINT = 'Treat that key as disclosed: replace it, and set the new one in postgresql.conf or in chroma_sync.api_key_file.';
	END LOOP;
END
$$;

-- ===== Records: chroma_upsert and chroma_upsert_query take replace, chroma_get
-- include_embeddings and where_document, chroma_query where_document and ids (new last
-- arguments); chroma_query_batch is new =====
-- A new argument changes the signature: each function is created again, and the EXECUTE
-- grants given on the old one are given on the new one (read here, for every function this
-- script creates again, and given before the last section).
CREATE TEMPORARY TABLE chroma_sync_grants ON COMMIT DROP AS
	SELECT s.new_signature, a.grantee, a.is_grantable
	FROM (VALUES
		('chroma_upsert(text, text[], real[], text[], jsonb[])',
		 'chroma_upsert(text, text[], real[], text[], jsonb[], boolean)'),
		('chroma_upsert_query(text, text)', 'chroma_upsert_query(text, text, boolean)'),
		('chroma_get(text, text[], jsonb, int, int)',
		 'chroma_get(text, text[], jsonb, int, int, boolean, jsonb)'),
		('chroma_query(text, real[], int, jsonb)',
		 'chroma_query(text, real[], int, jsonb, jsonb, text[])'),
		('chroma_create_collection(text, jsonb, text, boolean)',
		 'chroma_create_collection(text, jsonb, text, boolean, jsonb)'),
		('chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[])',
		 'chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[], jsonb)'))
		AS s(old_signature, new_signature),
		pg_catalog.pg_proc AS p,
		LATERAL pg_catalog.aclexplode(p.proacl) AS a
	WHERE p.oid OPERATOR(pg_catalog.=) s.old_signature::pg_catalog.regprocedure::pg_catalog.oid
		AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
		AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE';

DROP FUNCTION chroma_upsert(text, text[], real[], text[], jsonb[]);
DROP FUNCTION chroma_upsert_query(text, text);
DROP FUNCTION chroma_get(text, text[], jsonb, int, int);
DROP FUNCTION chroma_query(text, real[], int, jsonb);

-- replace: documents and metadata become exactly what is sent (a NULL document clears
-- the stored one, keys absent from the new metadata are removed).
CREATE FUNCTION chroma_upsert(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL,
	replace boolean DEFAULT false) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_upsert_query(collection text, query text,
	replace boolean DEFAULT false) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert_query' LANGUAGE C VOLATILE;

-- Reads the whole result in pages; include_embeddings => false leaves embeddings out.
-- where_document filters on the documents' text ($contains, $not_contains, $regex,
-- $not_regex, $and, $or), checked before anything is sent.
CREATE FUNCTION chroma_get(collection text, ids text[] DEFAULT NULL,
	"where" jsonb DEFAULT NULL, "limit" int DEFAULT NULL, "offset" int DEFAULT NULL,
	include_embeddings boolean DEFAULT true, where_document jsonb DEFAULT NULL)
	RETURNS TABLE (id text, embedding real[], document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_get' LANGUAGE C VOLATILE;

-- ids restricts the candidates to those records.
CREATE FUNCTION chroma_query(collection text, query_embedding real[],
	n_results int DEFAULT 10, "where" jsonb DEFAULT NULL,
	where_document jsonb DEFAULT NULL, ids text[] DEFAULT NULL)
	RETURNS TABLE (id text, distance real, document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_query' LANGUAGE C VOLATILE;

-- Many queries per request: query_embeddings is 2-D, one query embedding per row;
-- query_index is the row (from 1), rank the place of the record in its row's results.
CREATE FUNCTION chroma_query_batch(collection text, query_embeddings real[],
	n_results int DEFAULT 10, "where" jsonb DEFAULT NULL, where_document jsonb DEFAULT NULL)
	RETURNS TABLE (query_index int, rank int, id text, distance real, document text,
		metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_query_batch' LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION
	chroma_upsert(text, text[], real[], text[], jsonb[], boolean),
	chroma_upsert_query(text, text, boolean),
	chroma_get(text, text[], jsonb, int, int, boolean, jsonb),
	chroma_query(text, real[], int, jsonb, jsonb, text[]),
	chroma_query_batch(text, real[], int, jsonb, jsonb)
FROM PUBLIC;

-- ===== Filters run as the table's owner, stored deparsed (issue 15) =====
-- 0.5 stores a new mirror's filter deparsed (one expression, names outside pg_catalog
-- qualified) and runs it as the table's current owner with search_path pg_catalog,
-- pg_temp. A filter stored by 0.4 is raw text: the library checks it again each time it
-- is used (one boolean expression, immutable functions only), and a mirror whose filter
-- fails pauses with the reason in chroma_sync.status. Named here, with a warning (notices
-- are not shown while an extension script runs), so that nobody is surprised.
DO $$
DECLARE
	m record;
BEGIN
	FOR m IN SELECT x.source, x.collection, x.filter FROM chroma_sync.mirror x
		WHERE x.filter IS NOT NULL ORDER BY x.mirror_id LOOP
		RAISE WARNING 'the filter of the mirror of % into "%" is checked again when it is used: %',
			m.source, m.collection, m.filter
			USING HINT = 'If the mirror pauses, re-create it with chroma_unmirror and chroma_mirror, naming functions outside pg_catalog with their schema.';
	END LOOP;
END
$$;

-- ===== Mirrored columns by name and type (issue 15) =====
-- Columns were kept by attnum only. pg_dump leaves dropped columns out, so a restored
-- table's attnums can differ from the original's, and chroma_adopt synced other columns
-- than the mirrored ones. Each mirrored column (keys, embedding, document, metadata, then
-- the columns the filter names) is now recorded by name, attnum and type with its typmod
-- (qualified: "character(4)", "pg_catalog.text"); a restored copy finds its columns by
-- name, and DDL that changes what would be sent pauses the mirror (see README "Mirrors").
-- source_oid: the table's OID when they were recorded. pg_restore --clean over the same
-- database keeps its OID and system identifier, but gives the table a new OID (source, a
-- regclass, is dumped by name): a mirror whose source_oid differs is a restored copy too.
ALTER TABLE chroma_sync.mirror
	ADD COLUMN column_names name[],
	ADD COLUMN column_attnums smallint[],		-- in the database the mirror was created in
	ADD COLUMN column_type_names text[],
	ADD COLUMN source_oid oid,
	-- what a bound filter refers to (below; read with the columns, so added with them)
	ADD COLUMN filter_refs text[],
	-- a filter stored by 0.4 as text: the table's name when its columns were recorded
	-- (the text may qualify them with it; the worker binds it under that name)
	ADD COLUMN filter_relname name,
	-- the DDL epoch its text was last confirmed at (see the end of this script)
	ADD COLUMN filter_confirmed_epoch bigint NOT NULL DEFAULT 0;

-- After ALTER TABLE on a mirrored table: follow renames that change nothing sent, pause
-- on any other change of the mirrored columns (or of the filter's).
CREATE FUNCTION chroma_sync.columns_changed(source oid) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_sync_columns_changed' LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION chroma_sync.columns_changed(oid) FROM PUBLIC;

-- The mirrors of this database are recorded from the catalog; a restored copy's attnums
-- need not be its table's, so it stays unrecorded (chroma_adopt refuses it). A mirror that
-- cannot be recorded (a mirrored column dropped already) is reported and left as it is.
CREATE FUNCTION chroma_sync.record_columns(mirror_id integer) RETURNS boolean
	AS 'MODULE_PATHNAME', 'chroma_sync_record_columns' LANGUAGE C STRICT;
DO $$
DECLARE
	m record;
BEGIN
	FOR m IN SELECT mirror_id, source FROM chroma_sync.mirror LOOP
		BEGIN
			PERFORM chroma_sync.record_columns(m.mirror_id);
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'could not record the columns of the mirror of %: %', m.source, SQLERRM
				USING HINT = 'Unmirror the table and mirror it again.';
		END;
	END LOOP;
END
$$;
DROP FUNCTION chroma_sync.record_columns(integer);

-- After renaming (or moving) a function, type, operator, collation or schema: the text of
-- every bound filter that names it is written again, in that transaction (TAP 049), and so
-- are the recorded type names of mirrored columns whose type it renamed (TAP 123).
-- all_types false (after ALTER TABLE and the like): only composite row types are followed,
-- as a typmod may have changed there (TAP 126)
CREATE FUNCTION chroma_sync.filters_renamed(all_types boolean) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_sync_filters_renamed' LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION chroma_sync.filters_renamed(boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION chroma_sync.on_ddl_end() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	c record;
	m record;
	disabled text;
BEGIN
	-- a table's columns are renamed by ALTER VIEW and ALTER FOREIGN TABLE too (TAP 101)
	IF TG_TAG OPERATOR(pg_catalog.<>) ALL (ARRAY['ALTER TABLE', 'ALTER VIEW', 'ALTER FOREIGN TABLE',
			'ALTER MATERIALIZED VIEW']) THEN
		-- the filters' texts, and the recorded type names of mirrored columns (TAP 123)
		IF EXISTS (SELECT FROM chroma_sync.mirror) THEN
			PERFORM chroma_sync.filters_renamed(true);
		END IF;
		RETURN;
	END IF;
	FOR c IN SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands()
			WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass LOOP
		-- names, types and typmods of the mirrored columns and of the filter's, for the
		-- table and every partition or child the command recursed to (reported as one)
		IF EXISTS (SELECT FROM chroma_sync.mirror) THEN
			PERFORM chroma_sync.columns_changed(c.objid);
		END IF;
		-- the mirror of the table, or of a partitioned table above it (a partition's
		-- trigger disabled and enabled again in one transaction: TAP 216)
		FOR m IN SELECT mirror_id, source FROM chroma_sync.mirror
				WHERE source::pg_catalog.oid OPERATOR(pg_catalog.=) c.objid
					OR source::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
						SELECT a.relid::pg_catalog.oid
						FROM pg_catalog.pg_partition_ancestors(c.objid::pg_catalog.regclass) a)) LOOP
			SELECT pg_catalog.string_agg(t.tgname::pg_catalog.text, ', ') INTO disabled
				FROM pg_catalog.pg_trigger t
				WHERE t.tgrelid OPERATOR(pg_catalog.=) c.objid
					AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
					-- the mirror's own, by function and argument, whatever its name now
					-- (renamed, disabled, enabled and renamed back: TAP 218, 222)
					AND t.tgfoid OPERATOR(pg_catalog.=) 'chroma_sync.capture()'::pg_catalog.regprocedure
					AND t.tgargs OPERATOR(pg_catalog.=) (pg_catalog.convert_to(m.mirror_id::pg_catalog.text, 'UTF8')
						OPERATOR(pg_catalog.||) pg_catalog.decode('00', 'hex'));
			IF disabled IS NOT NULL THEN
				-- paused, not only in error: the worker's next batch would clear in_error,
				-- and the trigger may be ALWAYS again before it looks (TAP 216)
				UPDATE chroma_sync.mirror
					SET in_error = true, last_error_at = pg_catalog.now(),
						last_error = pg_catalog.format('trigger %s is not ENABLE ALWAYS: changes may be missed; '
							'run ALTER TABLE %s ENABLE ALWAYS TRIGGER ..., then chroma_resume() and chroma_resync()',
							disabled, c.objid::pg_catalog.regclass),
						paused = true
					WHERE mirror_id OPERATOR(pg_catalog.=) m.mirror_id;
				UPDATE chroma_sync.mirror SET paused_reason = last_error
					WHERE mirror_id OPERATOR(pg_catalog.=) m.mirror_id;
			END IF;
		END LOOP;
		PERFORM chroma_sync.config_changed();
	END LOOP;
	-- a table renamed that another mirror's filter names (a regclass constant), or whose
	-- row type is a mirrored column's type (TAP 130)
	IF EXISTS (SELECT FROM chroma_sync.mirror) THEN
		PERFORM chroma_sync.filters_renamed(false);
	END IF;
END
$$;

DROP EVENT TRIGGER chroma_sync_ddl_end;
CREATE EVENT TRIGGER chroma_sync_ddl_end ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER FOREIGN TABLE', 'ALTER MATERIALIZED VIEW',
		'ALTER FUNCTION', 'ALTER ROUTINE', 'ALTER TYPE', 'ALTER DOMAIN', 'ALTER OPERATOR',
		'ALTER COLLATION', 'ALTER SCHEMA', 'ALTER EXTENSION', 'ALTER TEXT SEARCH CONFIGURATION',
		'ALTER TEXT SEARCH DICTIONARY', 'ALTER OPERATOR FAMILY',
		-- what a regclass or regprocedure constant may name besides tables and functions (TAP 116)
		'ALTER SEQUENCE', 'ALTER INDEX', 'ALTER PROCEDURE', 'ALTER AGGREGATE')
	EXECUTE FUNCTION chroma_sync.on_ddl_end();
-- DDL applied with session_replication_role = replica (replication tools) is followed too,
-- as the capture triggers fire ALWAYS (TAP 109)
ALTER EVENT TRIGGER chroma_sync_ddl_end ENABLE ALWAYS;
ALTER EVENT TRIGGER chroma_sync_sql_drop ENABLE ALWAYS;

-- ===== Filters bound once, like CHECK constraints (TAP 090) =====
-- A filter's text was parsed again at every use: its names were looked up again, so an
-- overload planted later in a function's schema, or two columns that swapped names,
-- changed what it ran. chroma_mirror now also stores the analyzed tree (columns by
-- attnum, functions and operators by OID); generated SQL calls
-- chroma_sync_filter.match(mirror_id, row), which evaluates that tree on the row.
-- filter stays, deparsed, for display, pg_dump and chroma_adopt (which binds it again in
-- the new database). A filter stored by 0.4 is bound by the worker the first time it
-- loads the mirror. The function has a schema of its own, USAGE for everyone, CREATE for
-- nobody: generated SQL runs as the table's owner, who needs no USAGE on chroma_sync, and
-- nobody can plant an overload next to it.
ALTER TABLE chroma_sync.mirror ADD COLUMN filter_node text;
CREATE SCHEMA chroma_sync_filter;
REVOKE ALL ON SCHEMA chroma_sync_filter FROM PUBLIC;
GRANT USAGE ON SCHEMA chroma_sync_filter TO PUBLIC;
-- it evaluates only the stored, checked filter of a mirror, on a row of that mirror's
-- table that the caller passes (and so can read already), with the caller's rights
CREATE FUNCTION chroma_sync_filter.match(mirror_id integer, "row" record) RETURNS boolean
	AS 'MODULE_PATHNAME', 'chroma_sync_filter_match' LANGUAGE C STABLE STRICT;
GRANT EXECUTE ON FUNCTION chroma_sync_filter.match(integer, record) TO PUBLIC;
-- What the bound tree refers to, by name and signature (functions as regprocedure,
-- operators as regoperator, types as format_type, schema-qualified), recorded when the
-- filter is bound: chroma_adopt binds the text again in a restored copy and refuses when
-- it binds anything else (an overload planted before the adoption). NULL: not recorded
-- (a filter bound before this column existed), the text alone is bound again.
-- The filter's text is deparsed with fixed settings (DateStyle ISO, YMD...), so that it
-- reads back the same in any database. (The column, filter_refs, is added above.)

-- Filters stored by 0.4 as text are not bound here: the sync worker of each mirror's
-- database binds one the first time it loads the mirror (paused or not), with the
-- settings the worker of 0.4 read the text with (its role's and database's, the server's
-- command line, the configuration file as last loaded), which this session cannot know.
-- Until then the filter is refused elsewhere (chroma_sync_filter.match, chroma_adopt),
-- and text that binds other columns than those recorded above pauses the mirror.

-- ===== The status view: operators and functions resolved in pg_catalog only (issue 20) =====
-- While a script runs, search_path is the extension's schema and then pg_catalog: where
-- pg_catalog has no operator of the exact argument types, a role with CREATE on that schema
-- could plant one that wins. 0.1's status view bound bigint / numeric that way, and every
-- superuser who read it ran what it was bound to. The view is created again with every
-- operator written OPERATOR(pg_catalog.x) on exactly matching types (same columns, so
-- grants and views built on it stay). The functions of 0.1 pin search_path: their bodies
-- were never exposed. Last in this script: it reads source_oid, added above. A mirror whose
-- table was restored in its place (pg_restore --clean: same database, new OID) shows paused
-- at once, as its worker pauses it.
CREATE OR REPLACE VIEW chroma_sync.status AS
SELECT m.source,
	m.collection,
	CASE WHEN m.paused OR r.elsewhere THEN 'paused'
		WHEN m.in_error THEN 'error'
		WHEN NOT m.backfill_done THEN 'backfilling'
		ELSE 'syncing' END AS state,
	(SELECT pg_catalog.count(DISTINCT q.key) FROM chroma_sync.queue q
		WHERE q.mirror_id OPERATOR(pg_catalog.=) m.mirror_id) AS pending,
	(SELECT pg_catalog.count(*) FROM chroma_sync.failed f
		WHERE f.mirror_id OPERATOR(pg_catalog.=) m.mirror_id) AS failed,
	m.synced,
	m.last_sync_at,
	CASE WHEN r.elsewhere AND NOT m.paused THEN
			'this mirror was created in another database or cluster, or for a table since '
			'restored in its place (a restored copy?); '
			'mirror the table into another collection, or take this one over with chroma_adopt()'
		WHEN m.paused AND m.last_error IS NULL THEN m.paused_reason ELSE m.last_error END
		AS last_error,
	m.last_error_at,
	pg_catalog.now() OPERATOR(pg_catalog.-) (SELECT pg_catalog.min(q.enqueued_at) FROM chroma_sync.queue q
		WHERE q.mirror_id OPERATOR(pg_catalog.=) m.mirror_id) AS lag,
	CASE WHEN NOT m.backfill_done THEN m.backfill_sent END AS backfill_sent,
	CASE WHEN NOT m.backfill_done THEN m.backfill_total END AS backfill_total,
	CASE WHEN NOT m.backfill_done AND m.backfill_started_at OPERATOR(pg_catalog.<) pg_catalog.now() THEN
		pg_catalog.round(m.backfill_sent::pg_catalog.numeric OPERATOR(pg_catalog./)
			EXTRACT(epoch FROM pg_catalog.now() OPERATOR(pg_catalog.-) m.backfill_started_at), 1)
		END AS backfill_rows_per_second
FROM chroma_sync.mirror m,
	-- a restored copy is paused before its worker has seen it (or when it has no worker)
	LATERAL (SELECT m.database_oid OPERATOR(pg_catalog.<>) (SELECT d.oid FROM pg_catalog.pg_database d
				WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
			OR m.system_identifier OPERATOR(pg_catalog.<>) (SELECT (c.system_identifier::pg_catalog.numeric
					OPERATOR(pg_catalog.+) CASE WHEN c.system_identifier OPERATOR(pg_catalog.<) 0::pg_catalog.int8
						THEN 18446744073709551616 ELSE 0 END)::pg_catalog.text	-- unsigned, as the worker prints it
				FROM pg_catalog.pg_control_system() c)
			OR m.source_oid OPERATOR(pg_catalog.<>) m.source::pg_catalog.oid AS elsewhere) r;

-- ===== Collections: index configuration (issue 19) =====
-- chroma_create_collection takes configuration (a new last argument: created again, with
-- the EXECUTE grants of the old one); chroma_modify_collection changes a collection's
-- name, metadata or configuration; chroma_collection reads one, configuration included.
DROP FUNCTION chroma_create_collection(text, jsonb, text, boolean);

CREATE FUNCTION chroma_create_collection(name text, metadata jsonb DEFAULT NULL,
	space text DEFAULT NULL, get_or_create boolean DEFAULT true,
	configuration jsonb DEFAULT NULL) RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_create_collection' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_modify_collection(name text, new_name text DEFAULT NULL,
	new_metadata jsonb DEFAULT NULL, new_configuration jsonb DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_modify_collection' LANGUAGE C VOLATILE;

-- {"id", "name", "dimension", "metadata", "configuration"} of one collection
CREATE FUNCTION chroma_collection(name text) RETURNS jsonb
	AS 'MODULE_PATHNAME', 'chroma_collection' LANGUAGE C VOLATILE;

-- Every function here reaches the network: a DBA grants them explicitly.
REVOKE ALL ON FUNCTION
	chroma_create_collection(text, jsonb, text, boolean, jsonb),
	chroma_modify_collection(text, text, jsonb, jsonb),
	chroma_collection(text)
FROM PUBLIC;

-- ===== chroma_delete_where (issue 19) =====
-- Deletes the records matching a metadata filter and/or a document filter (at least one),
-- and returns how many were deleted.
CREATE FUNCTION chroma_delete_where(collection text, "where" jsonb DEFAULT NULL,
	where_document jsonb DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_delete_where' LANGUAGE C VOLATILE;
REVOKE EXECUTE ON FUNCTION chroma_delete_where(text, jsonb, jsonb) FROM PUBLIC;

-- ===== chroma_mirror takes configuration (issue 19) =====
-- The mirror's collection is created with it, and it is recorded: a collection created
-- again for the mirror (chroma_resume or chroma_adopt after it was deleted) gets it too.
-- NULL: the server's defaults, as before.
ALTER TABLE chroma_sync.mirror ADD COLUMN configuration jsonb;

-- A new last argument changes the signature: the function is created again, and the
-- EXECUTE grants given on the old one are given on the new one.
DROP FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[]);

CREATE FUNCTION chroma_mirror(source regclass, collection text DEFAULT NULL,
	id_column name DEFAULT NULL, embedding_column name DEFAULT 'embedding',
	document_column name DEFAULT NULL, metadata_columns name[] DEFAULT NULL,
	backfill boolean DEFAULT true, adopt boolean DEFAULT false, filter text DEFAULT NULL,
	id_columns name[] DEFAULT NULL, configuration jsonb DEFAULT NULL)
	RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_mirror' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION
	chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[], jsonb)
FROM PUBLIC;

-- ===== The EXECUTE grants of the functions created again (read at the top) =====
DO $$
DECLARE
	g record;
BEGIN
	FOR g IN SELECT * FROM pg_temp.chroma_sync_grants LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
			g.new_signature::pg_catalog.regprocedure,
			-- regrole's output is already an identifier, quoted where needed
			CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
				ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
			CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
END
$$;
DROP TABLE pg_temp.chroma_sync_grants;

-- ===== A 0.4 filter's text and the DDL run before its binding (issue 15) =====
-- The worker binds a filter stored by 0.4 as text the first time it loads the mirror after
-- this update. DDL run before that may change what its names mean: a column, function,
-- type field or schema renamed (or swapped by renames), an overload created or dropped.
-- Any DDL advances the DDL epoch (a CREATE TABLE too: it may rename an array type away
-- and take its name, TAP 193), and the worker refuses to bind a text whose confirmed epoch (0: the update) is behind it; the mirror pauses saying why,
-- and chroma_resume() of a mirror paused so confirms the text at the epoch then: the worker
-- binds it as its names read (TAP 160-169). The epoch is a sequence: advancing it takes no
-- row lock and cannot fail a serializable transaction (TAP 172, 174). Creating or dropping
-- temporary objects only does not advance it (TAP 171). Last in this script: its own DDL
-- does not count.
CREATE SEQUENCE chroma_sync.ddl_epoch;
REVOKE ALL ON SEQUENCE chroma_sync.ddl_epoch FROM PUBLIC;

CREATE FUNCTION chroma_sync.on_ddl_unbound_filters() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF TG_EVENT OPERATOR(pg_catalog.=) 'sql_drop' THEN
		-- temporary objects only (a permanent one that depended on them shows here too)
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() d
				WHERE NOT d.is_temporary) THEN
			RETURN;
		END IF;
	ELSE
		-- drops: at sql_drop, which tells what they dropped
		IF pg_catalog.starts_with(TG_TAG, 'DROP ') THEN
			RETURN;
		END IF;
		-- this very update (its ALTER EXTENSION ends after the trigger exists)
		IF TG_TAG OPERATOR(pg_catalog.=) 'ALTER EXTENSION' AND EXISTS (
				SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() c, pg_catalog.pg_extension e
				WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
					AND c.objid OPERATOR(pg_catalog.=) e.oid
					AND e.extname OPERATOR(pg_catalog.=) 'chroma_sync') THEN
			RETURN;
		END IF;
		-- the creation of temporary objects only (altering one may change what a permanent
		-- table's column of its type reads, TAP 194; a command not reported counts)
		IF (pg_catalog.starts_with(TG_TAG, 'CREATE ') OR TG_TAG OPERATOR(pg_catalog.=) 'SELECT INTO')
				AND EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands())
				AND NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() c
					WHERE c.schema_name IS DISTINCT FROM 'pg_temp') THEN
			RETURN;
		END IF;
	END IF;
	-- whether or not a filter is unbound: a snapshot taken before the update cannot tell
	PERFORM pg_catalog.nextval('chroma_sync.ddl_epoch'::pg_catalog.regclass);
	-- held until this transaction ends: chroma_resume() confirms no epoch while DDL that
	-- advanced it may still commit (TAP 190). Two keys of no meaning elsewhere (src/mirror.c):
	-- an application's single-key advisory locks are in another space.
	PERFORM pg_catalog.pg_advisory_xact_lock_shared(1668505459, 1701867363);
END
$$;
REVOKE ALL ON FUNCTION chroma_sync.on_ddl_unbound_filters() FROM PUBLIC;
CREATE EVENT TRIGGER chroma_sync_unbound_filters ON ddl_command_end
	EXECUTE FUNCTION chroma_sync.on_ddl_unbound_filters();
ALTER EVENT TRIGGER chroma_sync_unbound_filters ENABLE ALWAYS;
CREATE EVENT TRIGGER chroma_sync_unbound_filters_drop ON sql_drop
	EXECUTE FUNCTION chroma_sync.on_ddl_unbound_filters();
ALTER EVENT TRIGGER chroma_sync_unbound_filters_drop ENABLE ALWAYS;
