-- chroma_upsert_query: streams a query's rows (id, embedding, optional document and
-- metadata) to Chroma in batches; its errors.

SELECT chroma_create_collection('regress_uq') IS NOT NULL AS created;

CREATE TABLE uq_src (
	id int PRIMARY KEY,
	emb real[] NOT NULL,
	body text,
	meta jsonb
);
INSERT INTO uq_src
SELECT i, cs_vec(i, 8),
	CASE WHEN i % 5 = 0 THEN NULL ELSE E'body\t"' || i || '" ключ' END,
	CASE WHEN i % 3 = 0 THEN NULL ELSE jsonb_build_object('i', i, 'half', i / 2.0, 'even', i % 2 = 0) END
FROM generate_series(1, 20000) AS i;

-- 20,000 rows in batches of 1,000.
SET chroma_sync.batch_size = 1000;
SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding FROM uq_src') AS sent;
SELECT chroma_count('regress_uq') AS count;
CREATE TEMP TABLE uq_got AS SELECT * FROM chroma_get('regress_uq');
SELECT count(*) FILTER (WHERE g.id IS NULL) AS missing,
	count(*) FILTER (WHERE NOT cs_same_floats(s.emb, g.embedding)) AS different,
	count(*) FILTER (WHERE g.document IS NOT NULL OR g.metadata IS NOT NULL) AS with_extras
FROM uq_src AS s LEFT JOIN uq_got AS g ON g.id = s.id::text;
SELECT count(*) AS extra FROM uq_got AS g LEFT JOIN uq_src AS s ON g.id = s.id::text WHERE s.id IS NULL;

-- With documents and metadata (NULLs included), odd batch sizes, JSON floats.
SET chroma_sync.batch_size = 777;
SET chroma_sync.embedding_encoding = json;
SELECT chroma_upsert_query('regress_uq',
	'SELECT id, emb AS embedding, body AS document, meta AS metadata FROM uq_src ORDER BY id DESC') AS sent;
RESET chroma_sync.embedding_encoding;
TRUNCATE uq_got;
INSERT INTO uq_got SELECT * FROM chroma_get('regress_uq');
SELECT count(*) AS rows_read,
	count(*) FILTER (WHERE NOT cs_same_floats(s.emb, g.embedding)) AS different_embeddings,
	count(*) FILTER (WHERE g.document IS DISTINCT FROM s.body) AS different_documents,
	count(*) FILTER (WHERE g.metadata IS DISTINCT FROM s.meta) AS different_metadata
FROM uq_src AS s JOIN uq_got AS g ON g.id = s.id::text;
RESET chroma_sync.batch_size;

-- Any id type (its text form is the id) and any document type (its text form).
SELECT chroma_upsert_query('regress_uq', $$
	SELECT gen_random_uuid() AS id, ARRAY[1, 2, 3, 4, 5, 6, 7, 8]::real[] AS embedding,
		42::bigint AS document
	FROM generate_series(1, 3)$$) AS sent;
SELECT count(*) AS uuid_ids, min(document) AS document FROM chroma_get('regress_uq', "where" => NULL)
WHERE id ~ '^[0-9a-f]{8}-';
SELECT chroma_upsert_query('regress_uq', $$
	SELECT 'v' || i::varchar AS id, ARRAY[i, 0, 0, 0, 0, 0, 0, 0]::real[] AS embedding,
		('document ' || i)::varchar(20) AS document, NULL::jsonb AS metadata
	FROM generate_series(1, 5) AS i$$) AS sent;
SELECT id, embedding, document, metadata FROM chroma_get('regress_uq', ids => ARRAY['v1', 'v5']) ORDER BY id;

-- Duplicate ids in one batch: the last row wins.
SELECT chroma_upsert_query('regress_uq', $$
	SELECT 'dup' AS id, ARRAY[i, i, i, i, i, i, i, i]::real[] AS embedding, 'row ' || i AS document
	FROM generate_series(1, 4) AS i ORDER BY i$$) AS sent;
SELECT embedding, document FROM chroma_get('regress_uq', ids => ARRAY['dup']);

-- No rows: nothing to send.
SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding FROM uq_src WHERE false') AS sent;

-- Errors. Each leaves the collection as it was (count checked after the lot).
SELECT chroma_count('regress_uq') AS count_before;
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT emb AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT 1 AS "ID", emb AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb::float8[] AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb::text AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding, meta::text AS metadata FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding, meta::json AS metadata FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT 1 AS nothing WHERE false')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb::float8[] AS embedding FROM uq_src WHERE false')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'INSERT INTO uq_src VALUES (-1, ''{1}'')')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'CREATE TABLE uq_never (x int)')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELEC 1')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT 1; SELECT 2')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', NULL)$$);
SELECT cs_try($$SELECT chroma_upsert_query(NULL, 'SELECT id, emb AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding FROM uq_src WHERE 1 / (id - 5) > -10')$$);
-- bad rows in the first batch: nothing is sent
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT CASE WHEN id = 7 THEN NULL ELSE id END AS id, emb AS embedding FROM uq_src ORDER BY uq_src.id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN NULL ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN ARRAY[[1, 2], [3, 4]]::real[] ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN emb[1:7] ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN ''{}''::real[] ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN emb || ''{NULL}''::real[] ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, CASE WHEN id = 7 THEN emb[1:7] || ''NaN''::real ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding, CASE WHEN id = 7 THEN ''{"a": {"b": 1}}'' ELSE meta END AS metadata FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb AS embedding, CASE WHEN id = 7 THEN ''[1]'' ELSE meta END AS metadata FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT '''' AS id, emb AS embedding FROM uq_src ORDER BY id')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq', 'SELECT id, emb[1:4] AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq_missing', 'SELECT id, emb AS embedding FROM uq_src')$$);
SELECT cs_try($$SELECT chroma_upsert_query('bad..name', 'SELECT id, emb AS embedding FROM uq_src')$$);
SELECT chroma_count('regress_uq') AS count_after;
SELECT count(*) AS changed FROM chroma_get('regress_uq', ids => ARRAY['1', '7', '-1']) AS g
	JOIN uq_src AS s ON g.id = s.id::text
WHERE NOT cs_same_floats(g.embedding, s.emb) OR g.document IS DISTINCT FROM s.body;

-- A bad row in a later batch stops the stream there: earlier batches were sent (the
-- function is not transactional), the bad batch and later ones were not.
SET chroma_sync.batch_size = 100;
SELECT chroma_create_collection('regress_uq_partial') IS NOT NULL AS created;
SELECT cs_try($$SELECT chroma_upsert_query('regress_uq_partial', 'SELECT id, CASE WHEN id = 450 THEN NULL ELSE emb END AS embedding FROM uq_src ORDER BY id')$$);
SELECT chroma_count('regress_uq_partial') BETWEEN 300 AND 400 AS earlier_batches_only;
SELECT count(*) AS from_bad_batch FROM chroma_get('regress_uq_partial', ids => ARRAY['401', '450', '500']);
RESET chroma_sync.batch_size;

DROP TABLE uq_src;
SELECT chroma_delete_collection('regress_uq');
SELECT chroma_delete_collection('regress_uq_partial');
