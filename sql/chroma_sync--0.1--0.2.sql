-- chroma_sync 0.1 -> 0.2: progress of running chroma_upsert_query calls
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.2'" to load this file. \quit

CREATE FUNCTION chroma_sync.upsert_progress(OUT pid integer, OUT collection text,
	OUT rows_sent bigint, OUT rows_per_second double precision,
	OUT started_at timestamptz) RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'chroma_sync_upsert_progress' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION chroma_sync.upsert_progress() FROM PUBLIC;

-- One row per chroma_upsert_query running in this database.
CREATE VIEW chroma_sync.upsert_progress AS
	SELECT * FROM chroma_sync.upsert_progress();
REVOKE ALL ON chroma_sync.upsert_progress FROM PUBLIC;
