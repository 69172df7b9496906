-- chroma_mirror's configuration: the collection is created with it and it is recorded;
-- a bad one is refused before anything exists; an existing collection must agree on
-- the keys given; NULL keeps the server's defaults.

SELECT chroma_delete_collection(n, missing_ok => true)
FROM unnest(ARRAY['regress_mcfg_a', 'regress_mcfg_b', 'regress_mcfg_c', 'regress_mcfg_d']) n;

CREATE TABLE regress_mcfg (id int PRIMARY KEY, embedding real[], body text);
INSERT INTO regress_mcfg SELECT g, ARRAY[g, 1, 2]::real[], 'doc ' || g
FROM generate_series(1, 20) g;

-- Created with the configuration, read back from Chroma, recorded in the catalog.
SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_a', document_column => 'body',
	configuration => '{"hnsw": {"space": "cosine", "ef_construction": 120, "ef_search": 30}}')
	IS NOT NULL AS mirrored;
SELECT c->'configuration'->'hnsw'->'space' AS space,
	c->'configuration'->'hnsw'->'ef_construction' AS ef_construction,
	c->'configuration'->'hnsw'->'ef_search' AS ef_search
FROM chroma_collection('regress_mcfg_a') c;
SELECT configuration FROM chroma_sync.mirror WHERE collection = 'regress_mcfg_a';
SELECT chroma_flush('regress_mcfg', '60 s');
-- (embeddings left out: Chroma returns a cosine collection's floats with the last bits
-- changed, see README "Why does chroma_get return slightly different floats")
SELECT records, missing, extra, documents, metadatas
FROM cs_compare('regress_mcfg_a', $$SELECT id::text, embedding, body, NULL::jsonb FROM regress_mcfg$$);

-- A bad configuration is refused before anything exists: no mirror, no collection.
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	configuration => '{"hnsw": {"space": "manhattan"}}')$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	configuration => '{"hnsw": {"ef_search": 0}}')$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	configuration => '{"hnsw": {"bogus": 1}}')$$);
-- 25.0 is a float to Chroma, which would refuse it as a count: refused here first
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	configuration => '{"hnsw": {"ef_search": 25.0}}')$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	configuration => '[1]')$$);
-- checked before the table is: a configuration error wins over a missing column
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_b',
	embedding_column => 'no_such_column', configuration => '{"ivf": {}}')$$);
SELECT count(*) AS mirrors FROM chroma_sync.mirror WHERE collection = 'regress_mcfg_b';
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_mcfg_b';

-- An existing collection must agree on every key given; keys not given are not compared.
SELECT chroma_create_collection('regress_mcfg_c',
	configuration => '{"hnsw": {"space": "ip", "ef_search": 25}}') IS NOT NULL AS created;
SELECT cs_try_detail($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_c',
	configuration => '{"hnsw": {"space": "cosine"}}')$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_c',
	configuration => '{"hnsw": {"space": "ip", "ef_search": 50}}')$$);
-- refused before anything changed: no mirror, the collection untouched (no owner)
SELECT count(*) AS mirrors FROM chroma_sync.mirror WHERE collection = 'regress_mcfg_c';
SELECT c->'metadata' AS metadata, c->'configuration'->'hnsw'->'ef_search' AS ef_search
FROM chroma_collection('regress_mcfg_c') c;
-- the same values, or a subset of them, are accepted (space is not given: not compared)
SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_c',
	configuration => '{"hnsw": {"ef_search": 25}}') IS NOT NULL AS mirrored;
SELECT configuration FROM chroma_sync.mirror WHERE collection = 'regress_mcfg_c';
SELECT chroma_unmirror('regress_mcfg', collection => 'regress_mcfg_c');

-- NULL: as before, the server's defaults (l2), nothing recorded, an existing collection
-- used as it is.
SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_d') IS NOT NULL AS mirrored;
SELECT c->'configuration'->'hnsw'->'space' AS space FROM chroma_collection('regress_mcfg_d') c;
SELECT configuration IS NULL AS no_configuration FROM chroma_sync.mirror WHERE collection = 'regress_mcfg_d';
SELECT chroma_unmirror('regress_mcfg', collection => 'regress_mcfg_d', drop_collection => true);
SELECT chroma_mirror('regress_mcfg', collection => 'regress_mcfg_c') IS NOT NULL AS mirrored;
SELECT c->'configuration'->'hnsw'->'space' AS space FROM chroma_collection('regress_mcfg_c') c;
SELECT chroma_unmirror('regress_mcfg', collection => 'regress_mcfg_c', drop_collection => true);

-- chroma_adopt finds the collection deleted: it creates it again with the recorded configuration.
SELECT chroma_delete_collection('regress_mcfg_a');
SELECT chroma_adopt('regress_mcfg');
SELECT c->'configuration'->'hnsw'->'space' AS space,
	c->'configuration'->'hnsw'->'ef_construction' AS ef_construction
FROM chroma_collection('regress_mcfg_a') c;
SELECT chroma_flush('regress_mcfg', '60 s');
-- (embeddings left out: Chroma returns a cosine collection's floats with the last bits
-- changed, see README "Why does chroma_get return slightly different floats")
SELECT records, missing, extra, documents, metadatas
FROM cs_compare('regress_mcfg_a', $$SELECT id::text, embedding, body, NULL::jsonb FROM regress_mcfg$$);

SELECT chroma_unmirror('regress_mcfg', drop_collection => true);
DROP TABLE regress_mcfg;
