-- chroma_query_batch: many query embeddings (a 2-D real[], one per row) in few requests;
-- the same results as one chroma_query per row through LATERAL, whatever the requests
-- are split into; bad input refused before anything is sent.

SELECT chroma_create_collection('regress_batch') IS NOT NULL AS created;
-- p1 .. p20 on a line at x = 1 .. 20
SELECT chroma_upsert('regress_batch',
	array_agg('p' || i ORDER BY i),
	array_agg(ARRAY[i, 0, 0]::real[] ORDER BY i),
	array_agg(CASE WHEN i % 2 = 0 THEN 'even point ' ELSE 'odd point ' END || i ORDER BY i),
	array_agg(jsonb_build_object('x', i) ORDER BY i))
	AS upserted
FROM generate_series(1, 20) AS i;

-- Three queries: query_index is the row, rank the place in that row's results
SELECT query_index, rank, id, round(distance::numeric, 2) AS distance, document, metadata
FROM chroma_query_batch('regress_batch', ARRAY[[7.2, 0, 0], [0, 0, 0], [19.9, 0, 0]]::real[],
	n_results => 3);
-- the default n_results is 10; one query is a 1 x dim array
SELECT count(*) AS rows, max(rank) AS max_rank
FROM chroma_query_batch('regress_batch', ARRAY[[4.3, 0, 0]]::real[]);
-- "where" and where_document apply to every query
SELECT query_index, rank, id
FROM chroma_query_batch('regress_batch', ARRAY[[7.2, 0, 0], [12.4, 0, 0]]::real[], 2,
	"where" => '{"x": {"$gt": 8}}', where_document => '{"$contains": "odd"}');
-- a query whose filter matches nothing has no rows
SELECT count(*) AS none FROM chroma_query_batch('regress_batch', ARRAY[[1, 0, 0], [2, 0, 0]]::real[],
	where_document => '{"$contains": "pizza"}');
-- lower bounds other than 1: query_index still counts rows from 1
SELECT query_index, id FROM chroma_query_batch('regress_batch',
	'[0:1][5:7]={{2.1, 0, 0}, {15.8, 0, 0}}'::real[], 1);

-- 300 random records in 16 dimensions, 120 queries: the same answers as LATERAL
-- chroma_query, also when the requests carry 7 queries each or are split in halves
-- because the response is too large
SELECT chroma_create_collection('regress_batch_random') IS NOT NULL AS created;
CREATE FUNCTION rvec(seed int) RETURNS real[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT array_agg(sin(seed * 12.9898 + j * 78.233)::real ORDER BY j) FROM generate_series(1, 16) AS j
$$;
SELECT chroma_upsert_query('regress_batch_random', $$
	SELECT 'r' || i AS id, rvec(i) AS embedding, repeat('doc ' || i || ' ', 200) AS document,
		jsonb_build_object('i', i, 'half', i % 2) AS metadata
	FROM generate_series(1, 300) AS i$$) AS sent;
CREATE TEMP TABLE questions AS SELECT q, rvec(10000 + q) AS embedding FROM generate_series(1, 120) AS q;

CREATE FUNCTION batch_vs_lateral(n_results int, "where" jsonb DEFAULT NULL,
	where_document jsonb DEFAULT NULL,
	OUT batch_rows bigint, OUT lateral_rows bigint, OUT different bigint)
LANGUAGE sql AS $$
	WITH b AS (
		SELECT * FROM chroma_query_batch('regress_batch_random',
			(SELECT array_agg(embedding ORDER BY q) FROM questions), n_results, "where", where_document)),
	l AS (
		SELECT q.q AS query_index, r.*
		FROM questions q CROSS JOIN LATERAL chroma_query('regress_batch_random', q.embedding, n_results,
			"where", where_document) WITH ORDINALITY AS r(id, distance, document, metadata, rank))
	SELECT (SELECT count(*) FROM b), (SELECT count(*) FROM l),
		(SELECT count(*) FROM b FULL JOIN l USING (query_index, rank)
		 WHERE b.id IS DISTINCT FROM l.id OR b.distance IS DISTINCT FROM l.distance
			OR b.document IS DISTINCT FROM l.document OR b.metadata IS DISTINCT FROM l.metadata)
$$;
SELECT * FROM batch_vs_lateral(5);
SELECT * FROM batch_vs_lateral(3, '{"half": 1}', '{"$not_contains": "doc 7"}');
SET chroma_sync.batch_size = 7;
SELECT * FROM batch_vs_lateral(4);
RESET chroma_sync.batch_size;
-- 120 x 20 results of 1.4 kB do not fit in 64 kB: asked again in halves, down to one query
SET chroma_sync.max_response_size = '64kB';
SELECT * FROM batch_vs_lateral(20);
-- one query whose results alone are too large
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch_random',
	ARRAY[rvec(1), rvec(2)], n_results => 60)$$);
RESET chroma_sync.max_response_size;

-- Search from SQL (README): the 2 nearest records of each row of a table, one request
-- per row through LATERAL, or all rows at once through chroma_query_batch
CREATE TEMP TABLE wanted (name text PRIMARY KEY, embedding real[]);
INSERT INTO wanted VALUES ('near 3', ARRAY[3.2, 0, 0]), ('near 11', ARRAY[10.9, 0, 0]),
	('near 18', ARRAY[18.3, 0, 0]);
SELECT w.name, r.id, round(r.distance::numeric, 2) AS distance
FROM wanted w CROSS JOIN LATERAL chroma_query('regress_batch', w.embedding, n_results => 2) AS r
ORDER BY w.name, r.distance;
WITH w AS (SELECT array_agg(name ORDER BY name) AS names, array_agg(embedding ORDER BY name) AS embeddings
		   FROM wanted)
SELECT w.names[r.query_index] AS name, r.id, round(r.distance::numeric, 2) AS distance
FROM w CROSS JOIN LATERAL chroma_query_batch('regress_batch', w.embeddings, n_results => 2) AS r
ORDER BY name, r.rank;

-- An empty collection answers every query with no rows
SELECT chroma_create_collection('regress_batch_empty') IS NOT NULL AS created;
SELECT count(*) AS rows FROM chroma_query_batch('regress_batch_empty', ARRAY[[1, 2], [3, 4]]::real[]);

-- Bad input: SQLSTATE, message and detail; nothing is sent
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', NULL)$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', '{}'::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[1, 2, 3]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[[1, 2, 3]]]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2, 3], [4, NULL, 6]]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2, 3], [4, 5, 'NaN']]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[['-Infinity', 2, 3]]::real[])$$);
-- another dimension than the collection's
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2], [3, 4]]::real[])$$);
-- rows of different lengths cannot make one array (PostgreSQL's own error)
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch',
	(SELECT array_agg(e) FROM (VALUES (ARRAY[1, 2, 3]::real[]), (ARRAY[1, 2]::real[])) AS v(e)))$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2, 3]]::real[], 0)$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch(NULL, ARRAY[[1, 2, 3]]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch_missing', ARRAY[[1, 2, 3]]::real[])$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2, 3]]::real[],
	"where" => '[]')$$);
SELECT cs_try_detail($$SELECT count(*) FROM chroma_query_batch('regress_batch', ARRAY[[1, 2, 3]]::real[],
	where_document => '{"$or": [{"$contains": "a"}, {"$near": "b"}]}')$$);

DROP FUNCTION batch_vs_lateral(int, jsonb, jsonb);
DROP FUNCTION rvec(int);
SELECT chroma_delete_collection(n)
FROM unnest(ARRAY['regress_batch', 'regress_batch_random', 'regress_batch_empty']) AS n;
