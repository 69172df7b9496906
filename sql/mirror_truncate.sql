-- TRUNCATE is a barrier: changes before it are applied, then every record of the
-- collection is deleted (the collection and its id survive), then later changes apply.

CREATE TABLE regress_mt (id int PRIMARY KEY, embedding real[], doc text);
INSERT INTO regress_mt SELECT i, cs_vec(i, 5), 'before ' || i FROM generate_series(1, 1200) AS i;
SELECT chroma_mirror('regress_mt', collection => 'regress_m_trunc', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT * FROM cs_compare('regress_m_trunc',
	'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_mt WHERE embedding IS NOT NULL');
SELECT id AS collection_id FROM chroma_list_collections() WHERE name = 'regress_m_trunc' \gset

-- TRUNCATE then inserts, in one transaction, with changes before the TRUNCATE too.
BEGIN;
UPDATE regress_mt SET doc = 'changed before the truncate' WHERE id = 1;
INSERT INTO regress_mt VALUES (5000, cs_vec(5000, 5), 'inserted before the truncate');
TRUNCATE regress_mt;
INSERT INTO regress_mt SELECT i, cs_vec(-i, 5), 'after ' || i FROM generate_series(1, 10) AS i;
INSERT INTO regress_mt VALUES (2000, cs_vec(2000, 5), 'new after');
SELECT count(*) AS entries, count(*) FILTER (WHERE key IS NULL) AS barriers FROM chroma_sync.queue;
COMMIT;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT * FROM cs_compare('regress_m_trunc',
	'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_mt WHERE embedding IS NOT NULL');
SELECT count AS chroma_count FROM chroma_count('regress_m_trunc') AS count;
SELECT id = :'collection_id' AS same_collection FROM chroma_list_collections()
WHERE name = 'regress_m_trunc';
SELECT id, document FROM chroma_get('regress_m_trunc', ARRAY['1', '2000', '5000']) ORDER BY id;

-- TRUNCATE alone empties the collection.
TRUNCATE regress_mt;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT count AS chroma_count FROM chroma_count('regress_m_trunc') AS count;

-- Rows inserted, then the table truncated and filled again in later transactions.
INSERT INTO regress_mt SELECT i, cs_vec(i, 5), 'third ' || i FROM generate_series(1, 20) AS i;
BEGIN;
TRUNCATE regress_mt;
INSERT INTO regress_mt SELECT i, cs_vec(i + 1, 5), 'fourth ' || i FROM generate_series(11, 30) AS i;
TRUNCATE regress_mt;
INSERT INTO regress_mt SELECT i, cs_vec(i + 2, 5), 'fifth ' || i FROM generate_series(21, 40) AS i;
COMMIT;
UPDATE regress_mt SET doc = 'last' WHERE id = 40;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT * FROM cs_compare('regress_m_trunc',
	'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_mt WHERE embedding IS NOT NULL');

-- A rolled-back TRUNCATE changes nothing.
BEGIN;
TRUNCATE regress_mt;
ROLLBACK;
SELECT count(*) AS queued FROM chroma_sync.queue;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT count AS chroma_count FROM chroma_count('regress_m_trunc') AS count;

-- TRUNCATE of a table with several mirrors: each of them gets its barrier.
SELECT chroma_mirror('regress_mt', collection => 'regress_m_trunc2') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mt', '60 s', 'regress_m_trunc2');
SELECT * FROM cs_mirror_state('regress_mt', 'regress_m_trunc2');
BEGIN;
TRUNCATE regress_mt;
INSERT INTO regress_mt VALUES (7, cs_vec(7, 5), 'seven');
COMMIT;
SELECT chroma_flush('regress_mt', '60 s', 'regress_m_trunc');
SELECT chroma_flush('regress_mt', '60 s', 'regress_m_trunc2');
SELECT * FROM cs_mirror_state('regress_mt', 'regress_m_trunc');
SELECT * FROM cs_mirror_state('regress_mt', 'regress_m_trunc2');
SELECT * FROM cs_compare('regress_m_trunc2',
	'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_mt WHERE embedding IS NOT NULL');

SELECT chroma_unmirror('regress_mt', drop_collection => true, collection => 'regress_m_trunc');
SELECT chroma_unmirror('regress_mt', drop_collection => true, collection => 'regress_m_trunc2');
DROP TABLE regress_mt;
