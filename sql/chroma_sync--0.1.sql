-- chroma_sync 0.1: keep Chroma collections in step with PostgreSQL tables
\echo Use "CREATE EXTENSION chroma_sync" to load this file. \quit

-- ===== Server and collections =====

CREATE FUNCTION chroma_server_info() RETURNS jsonb
	AS 'MODULE_PATHNAME', 'chroma_server_info' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_heartbeat() RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_heartbeat' LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION chroma_create_collection(name text, metadata jsonb DEFAULT NULL,
	space text DEFAULT NULL, get_or_create boolean DEFAULT true) RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_create_collection' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_delete_collection(name text, missing_ok boolean DEFAULT false)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'chroma_delete_collection' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_list_collections()
	RETURNS TABLE (id uuid, name text, dimension int, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_list_collections' LANGUAGE C VOLATILE;

-- ===== Records (synchronous, not transactional) =====

CREATE FUNCTION chroma_upsert(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_add(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_add' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_update(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_update' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_upsert_query(collection text, query text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert_query' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_delete(collection text, ids text[]) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_delete' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_count(collection text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_count' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_get(collection text, ids text[] DEFAULT NULL,
	"where" jsonb DEFAULT NULL, "limit" int DEFAULT NULL, "offset" int DEFAULT NULL)
	RETURNS TABLE (id text, embedding real[], document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_get' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_query(collection text, query_embedding real[],
	n_results int DEFAULT 10, "where" jsonb DEFAULT NULL)
	RETURNS TABLE (id text, distance real, document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_query' LANGUAGE C VOLATILE;

-- Every function here reaches the network: a DBA grants them explicitly.
REVOKE EXECUTE ON FUNCTION
	chroma_server_info(), chroma_heartbeat(),
	chroma_create_collection(text, jsonb, text, boolean),
	chroma_delete_collection(text, boolean), chroma_list_collections(),
	chroma_upsert(text, text[], real[], text[], jsonb[]),
	chroma_add(text, text[], real[], text[], jsonb[]),
	chroma_update(text, text[], real[], text[], jsonb[]),
	chroma_upsert_query(text, text), chroma_delete(text, text[]),
	chroma_count(text), chroma_get(text, text[], jsonb, int, int),
	chroma_query(text, real[], int, jsonb)
FROM PUBLIC;

-- ===== Mirrors =====

CREATE SCHEMA chroma_sync;
REVOKE ALL ON SCHEMA chroma_sync FROM PUBLIC;

-- One row per mirror: what is synced where, and the worker's persisted progress.
CREATE TABLE chroma_sync.mirror (
	mirror_id integer PRIMARY KEY,
	source regclass NOT NULL,
	collection text NOT NULL,
	collection_id uuid,
	id_columns smallint[] NOT NULL,		-- attnums: columns survive renames
	embedding_column smallint NOT NULL,
	document_column smallint,
	metadata_columns smallint[] NOT NULL DEFAULT '{}',
	owner oid NOT NULL,					-- the worker reads the table with this role's rights
	dimension integer,					-- fixed by the collection or the first row written
	metadata_keys text[] NOT NULL DEFAULT '{}',	-- every key ever sent (removed keys go out as null)
	paused boolean NOT NULL DEFAULT false,
	paused_reason text,
	in_error boolean NOT NULL DEFAULT false,
	backfill_done boolean NOT NULL DEFAULT false,
	backfill_after text,				-- watermark: last key of the last page sent
	backfill_total bigint,				-- rows to send, counted when the backfill starts
	backfill_sent bigint NOT NULL DEFAULT 0,
	backfill_started_at timestamptz,
	reconcile boolean NOT NULL DEFAULT true,	-- after backfill, delete ids the table lacks
	synced bigint NOT NULL DEFAULT 0,
	last_sync_at timestamptz,
	last_error text,
	last_error_at timestamptz,
	column_types oid[],					-- types of the mirrored columns when mirrored
	filter text,						-- rows where this is not true are not in the collection
	system_identifier text NOT NULL,
	database_oid oid NOT NULL,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (source, collection)
);
CREATE SEQUENCE chroma_sync.mirror_id_seq OWNED BY chroma_sync.mirror.mirror_id;
ALTER TABLE chroma_sync.mirror
	ALTER COLUMN mirror_id SET DEFAULT pg_catalog.nextval('chroma_sync.mirror_id_seq');
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.mirror', '');
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.mirror_id_seq', '');

-- Changes waiting to be sent: append-only; the worker deletes exactly the entries it read.
-- key NULL is a TRUNCATE barrier.
CREATE TABLE chroma_sync.queue (
	qid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	mirror_id integer NOT NULL,
	key text,
	enqueued_at timestamptz NOT NULL DEFAULT pg_catalog.statement_timestamp()
);
CREATE INDEX queue_mirror_qid ON chroma_sync.queue (mirror_id, qid);
-- coalescing reads later entries of the same keys, up to the next TRUNCATE barrier
CREATE INDEX queue_mirror_key ON chroma_sync.queue (mirror_id, key);
CREATE INDEX queue_mirror_barrier ON chroma_sync.queue (mirror_id, qid) WHERE key IS NULL;
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.queue', '');

-- Rows Chroma refused or that failed validation, with the reason.
CREATE TABLE chroma_sync.failed (
	mirror_id integer NOT NULL,
	source regclass NOT NULL,
	id text NOT NULL,
	error text NOT NULL,
	attempts integer NOT NULL DEFAULT 1,
	failed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (mirror_id, id)
);
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.failed', '');

REVOKE ALL ON chroma_sync.mirror, chroma_sync.queue, chroma_sync.failed FROM PUBLIC;

CREATE VIEW chroma_sync.status AS
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
			'this mirror was created in another database or cluster (a restored copy?); '
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
				FROM pg_catalog.pg_control_system() c) AS elsewhere) r;
REVOKE ALL ON chroma_sync.status FROM PUBLIC;

-- The trigger: queues (mirror, key) with the extension owner's rights.
CREATE FUNCTION chroma_sync.capture() RETURNS trigger
	AS 'MODULE_PATHNAME', 'chroma_sync_capture' LANGUAGE C;

CREATE FUNCTION chroma_mirror(source regclass, collection text DEFAULT NULL,
	id_column name DEFAULT NULL, embedding_column name DEFAULT 'embedding',
	document_column name DEFAULT NULL, metadata_columns name[] DEFAULT NULL,
	backfill boolean DEFAULT true, adopt boolean DEFAULT false, filter text DEFAULT NULL)
	RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_mirror' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_unmirror(source regclass, drop_collection boolean DEFAULT false,
	collection text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_unmirror' LANGUAGE C VOLATILE;

-- Takes over the mirror's collection for this database (a restored copy) and resends all.
CREATE FUNCTION chroma_adopt(source regclass, collection text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_adopt' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_pause(source regclass, collection text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_pause' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_resume(source regclass, collection text DEFAULT NULL) RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_resume' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_flush(source regclass DEFAULT NULL,
	timeout interval DEFAULT '60 seconds', collection text DEFAULT NULL) RETURNS boolean
	AS 'MODULE_PATHNAME', 'chroma_flush' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_resync(source regclass, collection text DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_resync' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_verify(source regclass, collection text DEFAULT NULL)
	RETURNS TABLE (rows bigint, missing bigint, extra bigint, different bigint)
	AS 'MODULE_PATHNAME', 'chroma_verify' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_retry_failed(source regclass DEFAULT NULL, collection text DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_retry_failed' LANGUAGE C VOLATILE;

REVOKE EXECUTE ON FUNCTION
	chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text),
	chroma_adopt(regclass, text),
	chroma_unmirror(regclass, boolean, text),
	chroma_pause(regclass, text), chroma_resume(regclass, text),
	chroma_flush(regclass, interval, text), chroma_resync(regclass, text),
	chroma_verify(regclass, text), chroma_retry_failed(regclass, text)
FROM PUBLIC;

-- ===== DDL watch =====

CREATE FUNCTION chroma_sync.config_changed() RETURNS void
	AS 'MODULE_PATHNAME', 'chroma_sync_config_changed' LANGUAGE C;
REVOKE ALL ON FUNCTION chroma_sync.config_changed() FROM PUBLIC;

-- Types of a mirror's columns: key, embedding, document, metadata (NULL for a dropped one).
CREATE FUNCTION chroma_sync.mirror_column_types(m chroma_sync.mirror) RETURNS oid[]
	LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
	SELECT pg_catalog.array_agg(a.atttypid ORDER BY u.ord)
	FROM pg_catalog.unnest(m.id_columns OPERATOR(pg_catalog.||) m.embedding_column
			OPERATOR(pg_catalog.||) COALESCE(m.document_column, 0::pg_catalog.int2)
			OPERATOR(pg_catalog.||) m.metadata_columns) WITH ORDINALITY AS u(attnum, ord)
		LEFT JOIN pg_catalog.pg_attribute a
		ON a.attrelid OPERATOR(pg_catalog.=) m.source::pg_catalog.oid
			AND a.attnum OPERATOR(pg_catalog.=) u.attnum AND NOT a.attisdropped
$$;
REVOKE ALL ON FUNCTION chroma_sync.mirror_column_types(chroma_sync.mirror) FROM PUBLIC;

CREATE FUNCTION chroma_sync.on_sql_drop() RETURNS event_trigger
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

CREATE FUNCTION chroma_sync.on_ddl_end() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	c record;
	m chroma_sync.mirror;
	types oid[];
	disabled text;
BEGIN
	FOR c IN SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands()
			WHERE command_tag OPERATOR(pg_catalog.=) 'ALTER TABLE' LOOP
		FOR m IN SELECT * FROM chroma_sync.mirror
				WHERE source::pg_catalog.oid OPERATOR(pg_catalog.=) c.objid LOOP
			types := chroma_sync.mirror_column_types(m);
			-- (IS DISTINCT FROM would look "=" up by search_path)
			IF m.column_types IS NOT NULL
				AND (types IS NULL OR NOT types OPERATOR(pg_catalog.=) m.column_types) THEN
				UPDATE chroma_sync.mirror
					SET paused = true, in_error = true, last_error_at = pg_catalog.now(),
						last_error = 'the type of a mirrored column changed; unmirror and mirror the table again'
					WHERE mirror_id OPERATOR(pg_catalog.=) m.mirror_id AND NOT paused;
			END IF;
			SELECT pg_catalog.string_agg(t.tgname::pg_catalog.text, ', ') INTO disabled
				FROM pg_catalog.pg_trigger t
				WHERE t.tgrelid OPERATOR(pg_catalog.=) c.objid
					AND t.tgenabled OPERATOR(pg_catalog.<>) 'A'
					AND t.tgname::pg_catalog.text OPERATOR(pg_catalog.=) ANY (ARRAY[
						pg_catalog.format('chroma_sync_%s', m.mirror_id),
						pg_catalog.format('chroma_sync_%s_truncate', m.mirror_id),
						pg_catalog.format('chroma_sync_%s_flush', m.mirror_id)]);
			IF disabled IS NOT NULL THEN
				UPDATE chroma_sync.mirror
					SET in_error = true, last_error_at = pg_catalog.now(),
						last_error = pg_catalog.format('trigger %s is not ENABLE ALWAYS: changes may be missed; '
							'run ALTER TABLE %s ENABLE ALWAYS TRIGGER ..., then chroma_resync()', disabled, m.source)
					WHERE mirror_id OPERATOR(pg_catalog.=) m.mirror_id;
			END IF;
		END LOOP;
		PERFORM chroma_sync.config_changed();
	END LOOP;
END
$$;

CREATE EVENT TRIGGER chroma_sync_sql_drop ON sql_drop
	EXECUTE FUNCTION chroma_sync.on_sql_drop();
CREATE EVENT TRIGGER chroma_sync_ddl_end ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
	EXECUTE FUNCTION chroma_sync.on_ddl_end();
