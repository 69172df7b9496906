-- Collections' index configuration: created with one, read back, modified, refused when
-- wrong (before anything is sent), and modify's name and metadata.

SELECT chroma_delete_collection(n, missing_ok => true)
FROM unnest(ARRAY['regress_cfg_a', 'regress_cfg_b', 'regress_cfg_c', 'regress_cfg_renamed']) n;

-- Every HNSW key; the configuration Chroma keeps is read back (num_threads and
-- batch_size are not in what it shows).
SELECT chroma_create_collection('regress_cfg_a', configuration =>
	'{"hnsw": {"space": "cosine", "ef_construction": 150, "ef_search": 20, "max_neighbors": 12,
	  "num_threads": 2, "resize_factor": 1.5, "sync_threshold": 2000, "batch_size": 200}}')
	IS NOT NULL AS created;
SELECT c->'name' AS name, c->'dimension' AS dimension, c->'configuration'->'hnsw' AS hnsw
FROM chroma_collection('regress_cfg_a') c;

-- space and configuration together must agree.
SELECT chroma_create_collection('regress_cfg_b', space => 'ip',
	configuration => '{"hnsw": {"space": "ip", "ef_search": 30}}') IS NOT NULL AS created;
SELECT c->'configuration'->'hnsw'->'space' AS space, c->'configuration'->'hnsw'->'ef_search' AS ef_search
FROM chroma_collection('regress_cfg_b') c;
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', space => 'l2',
	configuration => '{"hnsw": {"space": "cosine"}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', space => 'l2',
	configuration => '{"hnsw": {"ef_search": 10}}')$$);

-- Modify: what may change changes; the rest is refused before anything is sent.
SELECT chroma_modify_collection('regress_cfg_a', new_configuration =>
	'{"hnsw": {"ef_search": 40, "num_threads": 1, "resize_factor": 1.2, "sync_threshold": 1500,
	  "batch_size": 100, "max_neighbors": 12}}');
SELECT c->'configuration'->'hnsw' AS hnsw FROM chroma_collection('regress_cfg_a') c;
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a', new_configuration => '{"hnsw": {"space": "l2"}}')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a', new_configuration => '{"hnsw": {"ef_construction": 10}}')$$);

-- New name and metadata.
SELECT chroma_modify_collection('regress_cfg_b', new_name => 'regress_cfg_renamed',
	new_metadata => '{"team": "search", "v": 2}');
SELECT c->'name' AS name, c->'metadata' AS metadata, c->'configuration'->'hnsw'->'space' AS space
FROM chroma_collection('regress_cfg_renamed') c;
SELECT cs_try($$SELECT chroma_collection('regress_cfg_b')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_renamed', new_name => 'regress_cfg_a')$$);

-- Bad input: every case an ERROR with its SQLSTATE, nothing sent.
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '[1]')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '"hnsw"')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"ivf": {}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": 5}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"bogus": 1}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"space": "manhattan"}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"space": 2}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"ef_search": -1}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"ef_search": 0}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"ef_search": 2.5}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"ef_search": 3000000000}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"ef_search": "10"}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"resize_factor": 0}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {"resize_factor": null}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"hnsw": {}, "spann": {}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"spann": {"search_nprobe": -3}}')$$);
SELECT cs_try($$SELECT chroma_create_collection('regress_cfg_c', configuration => '{"spann": {"space": "hamming"}}')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a')$$);
SELECT cs_try($$SELECT chroma_modify_collection(NULL, new_name => 'x_y_z')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a', new_name => 'a')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a', new_metadata => '[1]')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_a', new_configuration => '{"hnsw": {"ef_search": 0}}')$$);
SELECT cs_try($$SELECT chroma_modify_collection('regress_cfg_missing', new_metadata => '{"a": 1}')$$);
SELECT cs_try($$SELECT chroma_collection('regress_cfg_missing')$$);
SELECT cs_try($$SELECT chroma_collection(NULL)$$);
-- regress_cfg_c was never created
SELECT chroma_delete_collection('regress_cfg_c', missing_ok => true) AS existed;

SELECT chroma_delete_collection('regress_cfg_a'), chroma_delete_collection('regress_cfg_renamed');
