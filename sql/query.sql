-- chroma_query: nearest neighbours in distance order, for each distance space, with
-- filters, n_results, documents and metadata.

SELECT chroma_create_collection('regress_query_l2') IS NOT NULL AS created;
SELECT chroma_create_collection('regress_query_cos', space => 'cosine') IS NOT NULL AS created;
SELECT chroma_create_collection('regress_query_ip', space => 'ip') IS NOT NULL AS created;

-- Points on a line (l2): p1 .. p20 at x = 1 .. 20.
SELECT chroma_upsert('regress_query_l2',
	array_agg('p' || i ORDER BY i),
	array_agg(ARRAY[i, 0, 0]::real[] ORDER BY i),
	array_agg('point ' || i ORDER BY i),
	array_agg(jsonb_build_object('x', i, 'parity', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END) ORDER BY i))
	AS upserted
FROM generate_series(1, 20) AS i;

-- Squared l2 distances from x = 7.2: p7 (0.04), p8 (0.64), p6 (1.44), p9 (3.24), p5 (4.84).
SELECT id, round(distance::numeric, 4) AS distance, document, metadata
FROM chroma_query('regress_query_l2', ARRAY[7.2, 0, 0]::real[], n_results => 5);

-- Rows come back ordered by distance.
SELECT bool_and(ordered) AS in_distance_order, count(*) AS rows
FROM (SELECT distance >= lag(distance, 1, '-Infinity') OVER () AS ordered
	  FROM chroma_query('regress_query_l2', ARRAY[13.4, 0, 0]::real[], n_results => 20)) AS q;

-- The default n_results is 10; the nearest of all is p20 for a point beyond it.
SELECT count(*) AS rows, min(id) FILTER (WHERE distance = (SELECT min(distance)
	FROM chroma_query('regress_query_l2', ARRAY[25, 0, 0]::real[]))) AS nearest
FROM chroma_query('regress_query_l2', ARRAY[25, 0, 0]::real[]);

-- An exact hit is at distance 0.
SELECT id, distance FROM chroma_query('regress_query_l2', ARRAY[3, 0, 0]::real[], n_results => 1);

-- A where filter restricts the candidates.
SELECT id, round(distance::numeric, 4) AS distance
FROM chroma_query('regress_query_l2', ARRAY[7.2, 0, 0]::real[], n_results => 3,
	"where" => '{"parity": "odd"}');
SELECT id FROM chroma_query('regress_query_l2', ARRAY[0, 0, 0]::real[], n_results => 5,
	"where" => '{"$and": [{"x": {"$gt": 10}}, {"parity": {"$eq": "even"}}]}');
SELECT count(*) AS none FROM chroma_query('regress_query_l2', ARRAY[0, 0, 0]::real[],
	"where" => '{"parity": "neither"}');
SELECT count(*) AS empty_where_is_no_filter FROM chroma_query('regress_query_l2', ARRAY[0, 0, 0]::real[],
	"where" => '{}');

-- Cosine: direction matters, length does not.
SELECT chroma_upsert('regress_query_cos', ARRAY['east', 'north', 'northeast', 'west', 'far-east'],
	ARRAY[[1, 0], [0, 1], [1, 1], [-1, 0], [100, 0]]::real[]) AS upserted;
SELECT id, round(distance::numeric, 4) AS distance
FROM chroma_query('regress_query_cos', ARRAY[2, 0]::real[], n_results => 5)
ORDER BY round(distance::numeric, 4), id COLLATE "C";

-- Inner product: distance is 1 - dot product.
SELECT chroma_upsert('regress_query_ip', ARRAY['a', 'b', 'c'],
	ARRAY[[0.1, 0], [0.5, 0], [0.9, 0]]::real[]) AS upserted;
SELECT id, round(distance::numeric, 4) AS distance
FROM chroma_query('regress_query_ip', ARRAY[1, 0]::real[], n_results => 3);

-- A collection with no records yet answers with no rows.
SELECT chroma_create_collection('regress_query_empty') IS NOT NULL AS created;
SELECT count(*) AS rows FROM chroma_query('regress_query_empty', ARRAY[1, 2, 3]::real[]);

-- Documents and metadata of every kind come back through query too.
SELECT chroma_upsert('regress_query_empty', ARRAY['doc'], ARRAY[1, 2, 3]::real[],
	ARRAY[E'tab\t"quote"\\ 😀 ключ'], ARRAY['{"f": 0.5, "i": 3, "b": false, "s": "ü"}']::jsonb[])
	AS upserted;
SELECT id, distance, document, metadata FROM chroma_query('regress_query_empty', ARRAY[1, 2, 3]::real[]);

SELECT chroma_delete_collection(n)
FROM unnest(ARRAY['regress_query_l2', 'regress_query_cos', 'regress_query_ip', 'regress_query_empty']) AS n;
