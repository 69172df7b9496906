-- Helpers of the mirror tests (mirror_*.sql): an independent comparison of a table's
-- expected state with a collection, through chroma_get, float32 bytes both ways.

-- cs_float_bytes(a): the float4send bytes of each element, in order.
CREATE FUNCTION cs_float_bytes(a real[]) RETURNS bytea[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT array_agg(float4send(x) ORDER BY o) FROM unnest(a) WITH ORDINALITY AS u(x, o)
$$;

-- cs_compare(collection, expected): expected is a query returning (id text, embedding
-- real[], document text, metadata jsonb), the records the collection must hold. Counts
-- records missing from Chroma, extra in Chroma, and records whose embedding (float32
-- bytes), document or metadata differ. Chroma stores no null metadata values and reads
-- {} back as null: the expected metadata is compared that way. The expected query is
-- run with the settings the worker renders metadata with (timestamptz in UTC).
CREATE FUNCTION cs_compare(collection text, expected text)
RETURNS TABLE (records bigint, missing bigint, extra bigint, embeddings bigint,
	documents bigint, metadatas bigint)
LANGUAGE plpgsql
SET TimeZone = 'UTC' SET IntervalStyle = 'postgres' SET extra_float_digits = 1
AS $$
BEGIN
	RETURN QUERY EXECUTE format($q$
		WITH t AS (SELECT e.id, e.embedding, e.document,
				nullif(jsonb_strip_nulls(e.metadata), '{}') AS metadata
			FROM (%s) AS e(id, embedding, document, metadata)),
		c AS (SELECT * FROM chroma_get(%L))
		SELECT count(t.id),
			count(*) FILTER (WHERE c.id IS NULL),
			count(*) FILTER (WHERE t.id IS NULL),
			count(*) FILTER (WHERE t.id IS NOT NULL AND c.id IS NOT NULL
				AND cs_float_bytes(t.embedding) IS DISTINCT FROM cs_float_bytes(c.embedding)),
			count(*) FILTER (WHERE t.id IS NOT NULL AND c.id IS NOT NULL
				AND t.document IS DISTINCT FROM c.document),
			count(*) FILTER (WHERE t.id IS NOT NULL AND c.id IS NOT NULL
				AND t.metadata IS DISTINCT FROM c.metadata)
		FROM t FULL OUTER JOIN c ON t.id = c.id$q$, expected, collection);
END
$$;

-- cs_mirror_state(source, collection): chroma_verify's counts and the mirror's status
-- (pending, failed, and whether lag is NULL).
CREATE FUNCTION cs_mirror_state(source regclass, collection text DEFAULT NULL)
RETURNS TABLE (rows bigint, missing bigint, extra bigint, different bigint,
	pending bigint, failed bigint, lag_is_null boolean, state text)
LANGUAGE sql AS $$
	SELECT v.rows, v.missing, v.extra, v.different, s.pending, s.failed, s.lag IS NULL, s.state
	FROM chroma_verify(source, collection) AS v,
		chroma_sync.status AS s
	WHERE s.source = cs_mirror_state.source
		AND (cs_mirror_state.collection IS NULL OR s.collection = cs_mirror_state.collection)
$$;

-- cs_synced(source, collection): the mirror's synced counter.
CREATE FUNCTION cs_synced(source regclass, collection text DEFAULT NULL) RETURNS bigint
LANGUAGE sql AS $$
	SELECT s.synced FROM chroma_sync.status AS s
	WHERE s.source = cs_synced.source
		AND (cs_synced.collection IS NULL OR s.collection = cs_synced.collection)
$$;

-- No mirror is left over from an earlier file.
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
SELECT count(*) AS queued FROM chroma_sync.queue;
