-- Collections: create, get_or_create, conflicts, metadata, spaces, list, delete.

CREATE TEMP TABLE coll_ids (name text PRIMARY KEY, id uuid);

INSERT INTO coll_ids SELECT 'a', chroma_create_collection('regress_coll_a');
SELECT id IS NOT NULL AS created FROM coll_ids WHERE name = 'a';

-- get_or_create (the default) returns the existing collection.
SELECT chroma_create_collection('regress_coll_a') = id AS same_id FROM coll_ids WHERE name = 'a';
SELECT chroma_create_collection('regress_coll_a', get_or_create => true) = id AS same_id_explicit
FROM coll_ids WHERE name = 'a';

-- Without it, an existing name is a conflict (42710).
SELECT cs_try($$SELECT chroma_create_collection('regress_coll_a', get_or_create => false)$$);

-- Metadata and distance spaces.
INSERT INTO coll_ids SELECT 'b', chroma_create_collection('regress_coll_b',
	metadata => '{"owner": "regress", "version": 3, "ratio": 0.5, "public": false}');
INSERT INTO coll_ids SELECT 'c', chroma_create_collection('regress_coll_c', space => 'cosine');
INSERT INTO coll_ids SELECT 'd', chroma_create_collection('regress_coll_d', space => 'ip');
INSERT INTO coll_ids SELECT 'e', chroma_create_collection('Regress.Coll-E_1', space => 'l2',
	get_or_create => false);
SELECT count(DISTINCT id) AS distinct_ids FROM coll_ids;

SELECT cs_try($$SELECT chroma_create_collection('regress_coll_x', space => 'manhattan')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_coll_x', metadata => '[1, 2]')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_coll_x', metadata => '"text"')$$);
SELECT cs_try($$SELECT chroma_create_collection(NULL)$$);

-- Bad names are refused before anything is sent (42602).
SELECT regexp_replace(cs_try(format('SELECT chroma_create_collection(%L)', n)), 'x{10,}', 'xxx...')
	AS refused
FROM unnest(ARRAY['ab', repeat('x', 513), 'has space', 'bad/slash', 'a..b', '-abc', 'abc-',
	'_abc', '10.0.0.1', 'ümlaut', '']) AS n;
-- ... and the longest, dotted or numeric names are fine (3 and 512 characters).
SELECT cs_try(format('SELECT chroma_delete_collection(%L, missing_ok => true)', n)) AS accepted
FROM unnest(ARRAY['abc', repeat('y', 512), 'a.b.c', '1.2.3', '1.2.3.4.5']) AS n;
SELECT count(*) AS refused_not_created FROM chroma_list_collections() WHERE name LIKE 'regress_coll_x%';

-- The list shows ours with their metadata; dimension is NULL before the first write.
SELECT l.name, l.id = c.id AS id_matches, l.dimension, l.metadata
FROM chroma_list_collections() AS l JOIN coll_ids AS c ON l.id = c.id
ORDER BY l.name COLLATE "C";

SELECT chroma_upsert('regress_coll_a', ARRAY['r1'], ARRAY[1, 2, 3]::real[]);
SELECT dimension FROM chroma_list_collections() WHERE name = 'regress_coll_a';

-- Deletes: true, then 42704, or false with missing_ok.
SELECT chroma_delete_collection('regress_coll_a');
SELECT cs_try($$SELECT chroma_delete_collection('regress_coll_a')$$);
SELECT chroma_delete_collection('regress_coll_a', missing_ok => true);
SELECT cs_try($$SELECT chroma_delete_collection('regress_coll_a', NULL)$$);
SELECT cs_try($$SELECT chroma_delete_collection(NULL)$$);
SELECT cs_try($$SELECT chroma_delete_collection('a..b', missing_ok => true)$$);

-- A re-created collection is a new one, empty, with a new id.
SELECT chroma_create_collection('regress_coll_a') <> id AS new_id FROM coll_ids WHERE name = 'a';
SELECT chroma_count('regress_coll_a') AS count_after_recreate;

SELECT chroma_delete_collection(n)
FROM unnest(ARRAY['regress_coll_a', 'regress_coll_b', 'regress_coll_c', 'regress_coll_d',
	'Regress.Coll-E_1']) AS n;
SELECT count(*) AS left_over FROM chroma_list_collections() AS l JOIN coll_ids AS c ON l.id = c.id;
