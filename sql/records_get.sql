-- chroma_get reads in pages of at most 300 records: 650 records come back whole and in
-- one order, limit and offset cut that order across page boundaries, filters still
-- apply, include_embeddings => false leaves embeddings out. Then what jsonb does to the
-- numbers Chroma returns (README: floats of 1e16 and more, -0.0).

SELECT chroma_create_collection('regress_get_pages') IS NOT NULL AS created;
SELECT chroma_upsert_query('regress_get_pages', $$
	SELECT 'g' || i AS id, ARRAY[i, -i, i % 3, 0.5]::real[] AS embedding,
		'document ' || i AS document,
		jsonb_build_object('i', i, 'even', i % 2 = 0) AS metadata
	FROM generate_series(1, 650) AS i$$) AS sent;

CREATE TEMP TABLE whole AS
	SELECT g.* FROM chroma_get('regress_get_pages') WITH ORDINALITY AS g(id, embedding, document, metadata, n);
SELECT count(*) AS records, count(DISTINCT id) AS distinct_ids,
	count(*) FILTER (WHERE document = 'document ' || substr(id, 2)
		AND metadata = jsonb_build_object('i', substr(id, 2)::int, 'even', substr(id, 2)::int % 2 = 0)
		AND array_send(embedding) = array_send(ARRAY[substr(id, 2)::int, -substr(id, 2)::int,
			substr(id, 2)::int % 3, 0.5]::real[])) AS exact
FROM whole;

-- limit and offset: the same records as the whole read, in its order
SELECT o AS "offset", l AS "limit",
	(SELECT count(*) FROM chroma_get('regress_get_pages', "limit" => l, "offset" => o)) AS got,
	(SELECT count(*) FROM chroma_get('regress_get_pages', "limit" => l, "offset" => o)
		WITH ORDINALITY AS g(id, embedding, document, metadata, k)
		JOIN whole w ON w.n = o + g.k WHERE w.id <> g.id) AS out_of_place
FROM (VALUES (0, 300), (0, 301), (299, 2), (100, 500), (600, 100), (649, 1), (650, 1), (0, 0)) AS v(o, l)
ORDER BY o, l;
SELECT count(*) AS rest FROM chroma_get('regress_get_pages', "offset" => 640);

-- filters over several pages
SELECT count(*) AS even, count(*) FILTER (WHERE (metadata ->> 'even')::boolean) AS all_even
FROM chroma_get('regress_get_pages', "where" => '{"even": true}');
SELECT count(*) AS even_from_10
FROM chroma_get('regress_get_pages', "where" => '{"even": true}', "limit" => 310, "offset" => 10);
-- ids (asked 300 at a time), repeated ids (each record once), ids with limit and offset
SELECT count(*) AS by_ids, count(DISTINCT id) AS distinct_ids FROM chroma_get('regress_get_pages',
	ids => ARRAY(SELECT 'g' || (i % 700 + 1) FROM generate_series(1, 1400) AS i));
SELECT string_agg(id, ',' ORDER BY id) AS repeated FROM chroma_get('regress_get_pages',
	ids => ARRAY['g2', 'g1', 'g2', 'nope', 'g1']);
SELECT count(*) AS ids_limit_offset FROM chroma_get('regress_get_pages',
	ids => ARRAY(SELECT 'g' || i FROM generate_series(1, 650) AS i), "limit" => 400, "offset" => 300);

-- include_embeddings => false: documents and metadata, no embedding
SELECT count(*) AS records, count(embedding) AS embeddings, count(document) AS documents,
	count(metadata) AS metadatas
FROM chroma_get('regress_get_pages', include_embeddings => false);
SELECT count(*) AS embeddings_null_means_true FROM chroma_get('regress_get_pages',
	"limit" => 5, include_embeddings => NULL) WHERE embedding IS NOT NULL;

SELECT cs_try($$SELECT * FROM chroma_get('regress_get_pages', "limit" => -1)$$) AS negative_limit;
SELECT cs_try($$SELECT * FROM chroma_get('regress_get_pages', "offset" => -1)$$) AS negative_offset;

-- jsonb keeps numbers as numeric (no -0) and reads Chroma's 1e16 as a whole number
SELECT chroma_upsert('regress_get_pages', ARRAY['numbers'], ARRAY[1, 1, 1, 1]::real[],
	metadatas => ARRAY['{"f15": 1000000000000000.0, "f16": 10000000000000000.0, "negz": -0.0, "e19": 1e19}']::jsonb[]) AS sent;
SELECT metadata FROM chroma_get('regress_get_pages', ids => ARRAY['numbers']);

SELECT chroma_delete_collection('regress_get_pages') AS dropped;
