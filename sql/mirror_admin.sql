-- Managing a mirror: chroma_pause / chroma_resume, chroma_resync after changes made
-- behind the mirror's back, chroma_unmirror (the collection dropped only at COMMIT).

CREATE TABLE regress_ma (id int PRIMARY KEY, embedding real[], doc text);
INSERT INTO regress_ma SELECT i, cs_vec(i, 3), 'doc ' || i FROM generate_series(1, 100) AS i;
CREATE VIEW regress_ma_expected AS
SELECT id::text, embedding, doc, NULL::jsonb FROM regress_ma WHERE embedding IS NOT NULL;
SELECT chroma_mirror('regress_ma', collection => 'regress_m_admin', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT synced FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;

-- Paused: changes are queued, nothing is sent.
SELECT chroma_pause('regress_ma');
SELECT state, last_error FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
INSERT INTO regress_ma SELECT i, cs_vec(i, 3), 'doc ' || i FROM generate_series(101, 105) AS i;
UPDATE regress_ma SET doc = 'changed while paused' WHERE id = 1;
UPDATE regress_ma SET doc = 'changed twice while paused' WHERE id = 1;
DELETE FROM regress_ma WHERE id = 2;
SELECT state, pending, failed, synced, lag IS NOT NULL AS has_lag
FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT chroma_flush('regress_ma', '2 s');
SELECT count AS chroma_count FROM chroma_count('regress_m_admin') AS count;
SELECT document FROM chroma_get('regress_m_admin', ARRAY['1']);
SELECT rows, missing, extra, different FROM chroma_verify('regress_ma');
-- Pausing twice is harmless.
SELECT chroma_pause('regress_ma');
SELECT pending FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;

-- Resumed: the queue drains.
SELECT chroma_resume('regress_ma');
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT * FROM cs_compare('regress_m_admin', 'SELECT * FROM regress_ma_expected');
SELECT state, pending, synced, last_error FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT chroma_resume('regress_ma');
SELECT state FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;

-- Changes behind the mirror's back: records deleted, one changed, a stray one added.
SELECT chroma_delete('regress_m_admin', ARRAY['3', '4', '5']);
SELECT chroma_upsert('regress_m_admin', ARRAY['6'], cs_vec(-6, 3), ARRAY['tampered']);
SELECT chroma_upsert('regress_m_admin', ARRAY['stray'], cs_vec(0, 3));
SELECT * FROM chroma_verify('regress_ma');
SELECT * FROM cs_compare('regress_m_admin', 'SELECT * FROM regress_ma_expected');
SELECT synced AS synced_before FROM chroma_sync.status WHERE source = 'regress_ma'::regclass \gset
-- chroma_resync sends every row again and deletes what the table lacks.
SELECT chroma_resync('regress_ma');
SELECT state IN ('backfilling', 'syncing') AS resyncing
FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT * FROM cs_compare('regress_m_admin', 'SELECT * FROM regress_ma_expected');
-- Every row sent again, and the stray record deleted.
SELECT synced - :synced_before AS synced_delta FROM chroma_sync.status
WHERE source = 'regress_ma'::regclass;
SELECT count(*) AS stray FROM chroma_get('regress_m_admin', ARRAY['stray']);

-- chroma_resync of a paused mirror waits for chroma_resume.
SELECT chroma_pause('regress_ma');
SELECT chroma_delete('regress_m_admin', ARRAY['7']);
SELECT chroma_resync('regress_ma');
SELECT chroma_flush('regress_ma', '2 s');
SELECT rows, missing, extra, different FROM chroma_verify('regress_ma');
SELECT chroma_resume('regress_ma');
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');

-- chroma_unmirror: rolled back, nothing changes.
BEGIN;
SELECT chroma_unmirror('regress_ma', drop_collection => true);
ROLLBACK;
SELECT count(*) AS mirrors FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_m_admin';
SELECT count(*) > 0 AS has_triggers, bool_and(tgenabled = 'A') AS enabled_always
FROM pg_trigger WHERE tgrelid = 'regress_ma'::regclass AND tgname LIKE 'chroma_sync%';

-- chroma_unmirror with queued changes and failed rows: all of them go; the collection is
-- dropped when the transaction commits, not before.
INSERT INTO regress_ma VALUES (200, ARRAY[1, 'NaN', 1]::real[], 'bad');
SELECT chroma_flush('regress_ma', '60 s');
SELECT chroma_pause('regress_ma');
UPDATE regress_ma SET doc = 'queued' WHERE id < 10;
SELECT pending, failed FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT mirror_id AS ma_mirror FROM chroma_sync.mirror WHERE source = 'regress_ma'::regclass \gset
BEGIN;
SELECT chroma_unmirror('regress_ma', drop_collection => true);
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'regress_ma'::regclass;
SELECT count(*) AS queued FROM chroma_sync.queue WHERE mirror_id = :ma_mirror;
SELECT count(*) AS failed FROM chroma_sync.failed WHERE mirror_id = :ma_mirror;
SELECT count(*) AS mirrors FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_m_admin';
COMMIT;
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_m_admin';
-- The table is no longer mirrored: writes queue nothing.
UPDATE regress_ma SET doc = 'after unmirror' WHERE id < 50;
SELECT count(*) AS queued FROM chroma_sync.queue;
SELECT chroma_unmirror('regress_ma');
SELECT chroma_pause('regress_ma');
SELECT chroma_flush('regress_ma', '1 s');
SELECT * FROM chroma_verify('regress_ma');

-- Without drop_collection the collection stays, with its records.
SELECT chroma_mirror('regress_ma', collection => 'regress_m_admin2') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_ma', '60 s');
SELECT chroma_unmirror('regress_ma');
SELECT count AS chroma_count FROM chroma_count('regress_m_admin2') AS count;
SELECT chroma_delete_collection('regress_m_admin2');

-- A new mirror into a collection that already holds records: the backfill replaces them
-- with the table's rows and deletes the others.
SELECT chroma_create_collection('regress_m_admin3') IS NOT NULL AS created;
SELECT chroma_upsert('regress_m_admin3', ARRAY['1', 'old-a', 'old-b'],
	ARRAY[[9, 9, 9], [8, 8, 8], [7, 7, 7]]::real[], ARRAY['stale', 'a', 'b']);
DELETE FROM regress_ma WHERE id = 200;
SELECT chroma_mirror('regress_ma', collection => 'regress_m_admin3', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT * FROM cs_compare('regress_m_admin3', 'SELECT * FROM regress_ma_expected');
-- backfill => false: only later changes are sent.
SELECT chroma_unmirror('regress_ma', drop_collection => true);
SELECT chroma_mirror('regress_ma', collection => 'regress_m_admin4', document_column => 'doc',
	backfill => false) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_ma', '60 s');
SELECT count AS chroma_count FROM chroma_count('regress_m_admin4') AS count;
UPDATE regress_ma SET doc = 'after a mirror without backfill' WHERE id <= 3;
SELECT chroma_flush('regress_ma', '60 s');
SELECT id, document FROM chroma_get('regress_m_admin4') ORDER BY id;
SELECT state, pending, failed, synced FROM chroma_sync.status WHERE source = 'regress_ma'::regclass;
SELECT chroma_unmirror('regress_ma', drop_collection => true);

SELECT count(*) AS collections FROM chroma_list_collections() WHERE name LIKE 'regress_m_admin%';
DROP VIEW regress_ma_expected;
DROP TABLE regress_ma;
