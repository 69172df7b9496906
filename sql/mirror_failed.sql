-- Bad rows never block a mirror: rows Chroma would refuse or that fail validation land in
-- chroma_sync.failed with a readable reason while the good rows of the same batch sync;
-- fixing a row (UPDATE) syncs it and clears its failure; chroma_retry_failed.

-- A fresh collection: its dimension is fixed by the first good row written.
CREATE TABLE regress_mf (id int PRIMARY KEY, embedding real[], meta jsonb);
SELECT chroma_mirror('regress_mf', collection => 'regress_m_failed',
	metadata_columns => ARRAY['meta']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mf', '60 s');
SELECT dimension FROM chroma_list_collections() WHERE name = 'regress_m_failed';

CREATE VIEW regress_mf_expected AS
SELECT id::text, embedding, NULL::text, meta FROM regress_mf
WHERE embedding IS NOT NULL AND id::text NOT IN (SELECT id FROM chroma_sync.failed);

-- One transaction: 300 good rows and the poison ones, all in the same batches.
BEGIN;
INSERT INTO regress_mf SELECT i, cs_vec(i, 4), jsonb_build_object('i', i) FROM generate_series(1, 300) AS i;
INSERT INTO regress_mf VALUES
	(301, ARRAY[1, 'NaN', 2, 3]::real[], NULL),
	(302, cs_vec(302, 6), NULL),
	(303, cs_vec(303, 4), '{"nested": {"object": 1}}'),
	(304, ARRAY[1, 2, '-Infinity', 3]::real[], NULL),
	(305, ARRAY[1, NULL, 2, 3]::real[], NULL),
	(306, '{}', NULL),
	(307, ARRAY[[1, 2], [3, 4]]::real[], NULL),
	(308, cs_vec(308, 4), '{"$where": 1}'),
	(309, cs_vec(309, 4), '{"": "empty key"}'),
	(310, cs_vec(310, 4), '["not", "an object"]'),
	(311, cs_vec(311, 3), NULL);
INSERT INTO regress_mf SELECT i, cs_vec(i, 4), jsonb_build_object('i', i) FROM generate_series(312, 400) AS i;
COMMIT;
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, error, attempts FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass
ORDER BY id::int;
SELECT * FROM cs_mirror_state('regress_mf');
SELECT * FROM cs_compare('regress_m_failed', 'SELECT * FROM regress_mf_expected');
SELECT synced, last_error FROM chroma_sync.status WHERE source = 'regress_mf'::regclass;
SELECT dimension FROM chroma_list_collections() WHERE name = 'regress_m_failed';
SELECT count AS chroma_count FROM chroma_count('regress_m_failed') AS count;

-- Fixing rows with UPDATE syncs them and clears their failures.
UPDATE regress_mf SET embedding = cs_vec(id, 4) WHERE id IN (301, 302, 304, 305, 306, 307);
UPDATE regress_mf SET meta = '{"nested": "flat now"}' WHERE id = 303;
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, error, attempts FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass
ORDER BY id::int;
SELECT * FROM cs_mirror_state('regress_mf');
SELECT * FROM cs_compare('regress_m_failed', 'SELECT * FROM regress_mf_expected');
SELECT id, metadata FROM chroma_get('regress_m_failed', ARRAY['301', '303']) ORDER BY id;

-- An UPDATE that leaves a row bad keeps it in failed, counting the attempts.
UPDATE regress_mf SET meta = '{"$where": 2}' WHERE id = 308;
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, attempts FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass ORDER BY id::int;

-- chroma_retry_failed queues every failed row again: still bad, they come back.
-- (In one transaction: the worker is woken at commit and may fail them again at once.)
BEGIN;
SELECT chroma_retry_failed('regress_mf');
SELECT count(*) AS failed_rows FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass;
COMMIT;
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass ORDER BY id::int;
SELECT * FROM cs_mirror_state('regress_mf');
-- Without a source: every failed row of the mirrors the caller owns.
SELECT chroma_retry_failed();
SELECT chroma_flush('regress_mf', '60 s');
SELECT count(*) AS failed_rows FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass;

-- A good row that turns bad: the failure is recorded (the collection keeps the last
-- good version until the row is fixed).
UPDATE regress_mf SET embedding = ARRAY[1, 'NaN', 1, 1]::real[] WHERE id = 1;
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass AND id = '1';
SELECT failed FROM chroma_sync.status WHERE source = 'regress_mf'::regclass;

-- Deleting a bad row clears its failure; so does giving it no embedding.
DELETE FROM regress_mf WHERE id IN (308, 309);
UPDATE regress_mf SET embedding = NULL WHERE id IN (1, 310);
SELECT chroma_flush('regress_mf', '60 s');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mf'::regclass ORDER BY id::int;
SELECT * FROM cs_mirror_state('regress_mf');
SELECT * FROM cs_compare('regress_m_failed', 'SELECT * FROM regress_mf_expected');
SELECT synced FROM chroma_sync.status WHERE source = 'regress_mf'::regclass;

-- The last one fixed: nothing is failed any more.
UPDATE regress_mf SET embedding = cs_vec(311, 4) WHERE id = 311;
SELECT chroma_flush('regress_mf', '60 s');
SELECT * FROM cs_mirror_state('regress_mf');
SELECT * FROM cs_compare('regress_m_failed', 'SELECT * FROM regress_mf_expected');

SELECT chroma_unmirror('regress_mf', drop_collection => true);
SELECT count(*) AS failed_rows FROM chroma_sync.failed;
DROP VIEW regress_mf_expected;
DROP TABLE regress_mf;

-- Poison rows during a backfill; an empty text id.
CREATE TABLE regress_mf_text (id text PRIMARY KEY, embedding real[]);
INSERT INTO regress_mf_text SELECT 'k' || i, cs_vec(i, 3) FROM generate_series(1, 50) AS i;
INSERT INTO regress_mf_text VALUES ('', cs_vec(0, 3)), ('k-nan', ARRAY['NaN', 1, 1]::real[]),
	('k-dim', cs_vec(1, 2));
SELECT chroma_mirror('regress_mf_text', collection => 'regress_m_failed_text') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mf_text', '60 s');
-- (Chroma refuses the empty id; its own message varies between servers.)
SELECT id, CASE WHEN id = '' THEN split_part(error, ':', 1) ELSE error END AS error
FROM chroma_sync.failed WHERE source = 'regress_mf_text'::regclass ORDER BY id;
SELECT * FROM cs_mirror_state('regress_mf_text');
SELECT * FROM cs_compare('regress_m_failed_text',
	'SELECT id, embedding, NULL::text, NULL::jsonb FROM regress_mf_text
	WHERE id NOT IN (SELECT id FROM chroma_sync.failed)');
SELECT synced FROM chroma_sync.status WHERE source = 'regress_mf_text'::regclass;

-- An embedding column of another type whose value does not fit a float4: that row fails,
-- the others sync.
CREATE TABLE regress_mf8 (id int PRIMARY KEY, vec float8[]);
INSERT INTO regress_mf8 SELECT i, ARRAY[i, 1.5, -2]::float8[] FROM generate_series(1, 20) AS i;
INSERT INTO regress_mf8 VALUES (21, ARRAY[1e-300, 1, 1]), (22, ARRAY[1, 1e300, 1]);
SELECT chroma_mirror('regress_mf8', collection => 'regress_m_failed8', embedding_column => 'vec')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mf8', '60 s');
SELECT id, error LIKE '%out of range%' AS out_of_range FROM chroma_sync.failed
WHERE source = 'regress_mf8'::regclass ORDER BY id;
SELECT state, pending, failed, synced FROM chroma_sync.status WHERE source = 'regress_mf8'::regclass;
SELECT * FROM cs_compare('regress_m_failed8',
	'SELECT id::text, vec::real[], NULL::text, NULL::jsonb FROM regress_mf8 WHERE id <= 20');
SELECT * FROM chroma_verify('regress_mf8');
SELECT chroma_unmirror('regress_mf8', drop_collection => true);
DROP TABLE regress_mf8;

SELECT chroma_unmirror('regress_mf_text', drop_collection => true);
DROP TABLE regress_mf_text;
SELECT count(*) AS failed_rows FROM chroma_sync.failed;
