-- Appended to a copy of the last upgrade script by test/static_checks.sh: every line marked
-- "caught" must be reported by test/lib/check_sql_scripts.sh, and nothing else may be.
CREATE VIEW chroma_sync.fixture AS
SELECT m.backfill_sent / 2.5 AS caught_div,				-- caught: / (numeric, numeric)
	m.mirror_id = 1 AS caught_eq,						-- caught: = (integer, integer)
	lower(m.collection) AS caught_call,					-- caught: lower(text)
	m.collection IN ('a', 'b') AS caught_in,			-- caught: = (text, text)
	m.dimension IS DISTINCT FROM 3 AS caught_distinct,	-- caught: = (integer, integer)
	CASE m.dimension WHEN 3 THEN 1 END AS caught_case,	-- caught: = (integer, integer)
	COALESCE(m.dimension, 0) AS coalesce_ok,
	CAST(m.dimension AS pg_catalog.int8) AS cast_ok,
	EXTRACT(epoch FROM m.created_at) AS extract_ok,
	GREATEST(m.dimension, 1) AS greatest_ok,
	pg_catalog.upper(m.collection) AS qualified_ok,
	m.source OPERATOR(pg_catalog.=) 5::pg_catalog.oid AS caught_implicit,	-- caught: regclass cast to oid
	m.mirror_id OPERATOR(pg_catalog.+) 1 AS operator_ok
FROM chroma_sync.mirror m;
CREATE FUNCTION chroma_sync.fixture_fn(a integer) RETURNS integer
	LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
	SELECT abs(a)											-- caught: abs(integer)
$$;
DO $$
BEGIN
	IF pg_catalog.length(pg_catalog.current_user()) > 0 THEN	-- caught: > (integer, integer)
		PERFORM pg_catalog.now();
	END IF;
END
$$;
