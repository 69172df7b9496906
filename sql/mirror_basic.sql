-- Mirrors, basic life: backfill of existing rows, then inserts, updates, deletes and a
-- primary-key change of an integer-keyed table, each applied and checked both ways.

CREATE TABLE regress_mb (
	id int PRIMARY KEY,
	embedding real[],
	body text,
	meta jsonb,
	note text					-- not mirrored
);
-- Existing rows: 250 with an embedding, 10 without (not in the collection).
INSERT INTO regress_mb
SELECT i, CASE WHEN i % 26 = 0 THEN NULL ELSE cs_vec(i, 8) END,
	'document ' || i, jsonb_build_object('n', i, 'even', i % 2 = 0, 'name', 'row ' || i), 'x'
FROM generate_series(1, 260) AS i;

-- The expected content of the collection, for cs_compare.
CREATE VIEW regress_mb_expected AS
SELECT id::text, embedding, body, meta FROM regress_mb WHERE embedding IS NOT NULL;

SELECT chroma_mirror('regress_mb', collection => 'regress_m_basic', document_column => 'body',
	metadata_columns => ARRAY['meta']) IS NOT NULL AS mirrored;
SELECT source, collection, state IN ('backfilling', 'syncing') AS started
FROM chroma_sync.status WHERE source = 'regress_mb'::regclass;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT state, synced, last_sync_at IS NOT NULL AS has_synced, last_error
FROM chroma_sync.status WHERE source = 'regress_mb'::regclass;
SELECT count AS chroma_count FROM chroma_count('regress_m_basic') AS count;
-- The dimension is fixed by the first row written.
SELECT dimension FROM chroma_list_collections() WHERE name = 'regress_m_basic';

-- Insert.
INSERT INTO regress_mb VALUES (1001, cs_vec(1001, 8), 'new one', '{"k": "v"}'),
	(1002, cs_vec(1002, 8), NULL, NULL),
	(1003, NULL, 'no embedding yet', '{"k": 1}');
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT cs_synced('regress_mb') AS synced;
SELECT id, document, metadata FROM chroma_get('regress_m_basic', ARRAY['1001', '1002', '1003'])
ORDER BY id;

-- Update of the embedding; an embedding given to a row that had none.
UPDATE regress_mb SET embedding = cs_vec(-1, 8) WHERE id = 1;
UPDATE regress_mb SET embedding = cs_vec(1003, 8) WHERE id = 1003;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT cs_synced('regress_mb') AS synced;

-- Update of the document, and a document set to NULL (cleared in Chroma).
UPDATE regress_mb SET body = 'changed document' WHERE id = 2;
UPDATE regress_mb SET body = NULL WHERE id = 3;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT id, document FROM chroma_get('regress_m_basic', ARRAY['2', '3']) ORDER BY id;

-- Metadata: a value changed, a key added, a key removed, all keys removed.
UPDATE regress_mb SET meta = meta || '{"n": -4, "added": "yes"}' WHERE id = 4;
UPDATE regress_mb SET meta = meta - 'name' WHERE id = 5;
UPDATE regress_mb SET meta = NULL WHERE id = 6;
UPDATE regress_mb SET meta = '{}' WHERE id = 7;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT id, metadata FROM chroma_get('regress_m_basic', ARRAY['4', '5', '6', '7']) ORDER BY id;

-- The embedding set to NULL removes the record; a delete deletes.
UPDATE regress_mb SET embedding = NULL WHERE id = 8;
DELETE FROM regress_mb WHERE id IN (9, 10, 1002);
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT count(*) AS gone FROM chroma_get('regress_m_basic', ARRAY['8', '9', '10', '1002']);

-- Primary-key change: the old id is deleted, the new one upserted.
UPDATE regress_mb SET id = 2011 WHERE id = 11;
UPDATE regress_mb SET id = id + 5000 WHERE id BETWEEN 20 AND 24;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT array_agg(id ORDER BY id) AS ids
FROM chroma_get('regress_m_basic', ARRAY['11', '2011', '20', '5020', '24', '5024']);

-- An UPDATE that changes no mirrored column enqueues nothing.
SELECT cs_synced('regress_mb') AS synced_before \gset
BEGIN;
UPDATE regress_mb SET note = 'changed' WHERE id BETWEEN 1 AND 100;
UPDATE regress_mb SET body = body, meta = meta, embedding = embedding WHERE id BETWEEN 1 AND 100;
SELECT count(*) AS queued FROM chroma_sync.queue;
COMMIT;
SELECT pending FROM chroma_sync.status WHERE source = 'regress_mb'::regclass;
SELECT chroma_flush('regress_mb', '60 s');
SELECT cs_synced('regress_mb') - :synced_before AS synced_delta;

-- A mirrored column written in the same statement as a non-mirrored one is queued.
BEGIN;
UPDATE regress_mb SET note = 'again', body = 'document 12 changed' WHERE id = 12;
SELECT count(*) AS queued FROM chroma_sync.queue;
COMMIT;
SELECT chroma_flush('regress_mb', '60 s');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT cs_synced('regress_mb') - :synced_before AS synced_delta;

-- A rolled-back transaction queues nothing and sends nothing.
SELECT cs_synced('regress_mb') AS synced_before \gset
BEGIN;
INSERT INTO regress_mb VALUES (3001, cs_vec(3001, 8), 'rolled back', NULL);
UPDATE regress_mb SET body = 'rolled back' WHERE id = 13;
DELETE FROM regress_mb WHERE id = 14;
SELECT count(*) AS queued_inside FROM chroma_sync.queue;
ROLLBACK;
SELECT count(*) AS queued_after FROM chroma_sync.queue;
SELECT chroma_flush('regress_mb', '60 s');
SELECT cs_synced('regress_mb') - :synced_before AS synced_delta;
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT count(*) AS rolled_back_in_chroma FROM chroma_get('regress_m_basic', ARRAY['3001']);

-- Ten updates of one row in one transaction: ten queue entries, one upsert.
SELECT cs_synced('regress_mb') AS synced_before \gset
BEGIN;
UPDATE regress_mb SET embedding = cs_vec(100 + g, 8), body = 'version ' || g
FROM generate_series(1, 1) AS g WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(102, 8), body = 'version 2' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(103, 8), body = 'version 3' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(104, 8), body = 'version 4' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(105, 8), body = 'version 5' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(106, 8), body = 'version 6' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(107, 8), body = 'version 7' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(108, 8), body = 'version 8' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(109, 8), body = 'version 9' WHERE id = 15;
UPDATE regress_mb SET embedding = cs_vec(110, 8), body = 'version 10' WHERE id = 15;
SELECT count(*) AS queue_entries, count(DISTINCT key) AS keys FROM chroma_sync.queue;
COMMIT;
-- At most one key waits (the worker may already have sent it).
SELECT pending <= 1 AS at_most_one FROM chroma_sync.status WHERE source = 'regress_mb'::regclass;
SELECT chroma_flush('regress_mb', '60 s');
SELECT cs_synced('regress_mb') - :synced_before AS synced_delta;
SELECT * FROM cs_mirror_state('regress_mb');
SELECT * FROM cs_compare('regress_m_basic', 'SELECT * FROM regress_mb_expected');
SELECT document FROM chroma_get('regress_m_basic', ARRAY['15']);

-- chroma_flush cannot wait for changes of its own transaction.
BEGIN;
UPDATE regress_mb SET body = 'inside' WHERE id = 16;
SELECT chroma_flush('regress_mb', '1 s');
ROLLBACK;
BEGIN;
DELETE FROM regress_mb WHERE id = 16;
SELECT cs_try($$SELECT chroma_flush('regress_mb', '1 s')$$);
SELECT cs_try($$SELECT chroma_flush(NULL, '1 s')$$);
ROLLBACK;
-- A transaction that only read the table may wait.
BEGIN;
SELECT count(*) AS rows FROM regress_mb;
SELECT chroma_flush('regress_mb', '60 s');
COMMIT;
-- So may a REPEATABLE READ transaction not: it would not see later commits.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT chroma_flush('regress_mb', '1 s');
ROLLBACK;

-- Status after all this: nothing pending, nothing failed.
SELECT state, pending, failed, lag IS NULL AS no_lag, last_error
FROM chroma_sync.status WHERE source = 'regress_mb'::regclass;

SELECT chroma_unmirror('regress_mb', drop_collection => true);
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_m_basic';
DROP VIEW regress_mb_expected;
DROP TABLE regress_mb;
