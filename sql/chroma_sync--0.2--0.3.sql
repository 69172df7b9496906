-- chroma_sync 0.2 -> 0.3: composite ids (chroma_mirror's id_columns)
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.3'" to load this file. \quit

-- A new last argument changes the signature: the function is created again, and the
-- EXECUTE grants given on the old one are given on the new one.
CREATE TEMPORARY TABLE chroma_sync_mirror_grants ON COMMIT DROP AS
	SELECT a.grantee, a.privilege_type, a.is_grantable
	FROM pg_catalog.pg_proc p,
		LATERAL pg_catalog.aclexplode(p.proacl) AS a
	WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text)'::pg_catalog.regprocedure::pg_catalog.oid
		AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;

DROP FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text);

CREATE FUNCTION chroma_mirror(source regclass, collection text DEFAULT NULL,
	id_column name DEFAULT NULL, embedding_column name DEFAULT 'embedding',
	document_column name DEFAULT NULL, metadata_columns name[] DEFAULT NULL,
	backfill boolean DEFAULT true, adopt boolean DEFAULT false, filter text DEFAULT NULL,
	id_columns name[] DEFAULT NULL)
	RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_mirror' LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION
	chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[])
FROM PUBLIC;

DO $$
DECLARE
	g record;
BEGIN
	FOR g IN SELECT * FROM pg_temp.chroma_sync_mirror_grants LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
			'@extschema@.chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text, name[])'::pg_catalog.regprocedure,
			-- regrole's output is already an identifier, quoted where needed
			CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'
				ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
			CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
END
$$;
DROP TABLE pg_temp.chroma_sync_mirror_grants;
