-- A partitioned table mirrored as one (issue 17): every leaf, at every level, in one
-- collection with ids from the parent's primary key; the mirror follows the partition
-- tree through CREATE TABLE ... PARTITION OF, ATTACH, DETACH (also CONCURRENTLY, and
-- FINALIZE), DROP and TRUNCATE of a partition, and row movement.

CREATE TABLE regress_pt (id int, region int, embedding real[], doc text,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
CREATE TABLE regress_pt_a PARTITION OF regress_pt FOR VALUES FROM (0) TO (10);
CREATE TABLE regress_pt_b PARTITION OF regress_pt FOR VALUES FROM (10) TO (20);
CREATE TABLE regress_pt_c PARTITION OF regress_pt FOR VALUES FROM (20) TO (30)
	PARTITION BY RANGE (id);
CREATE TABLE regress_pt_c1 PARTITION OF regress_pt_c FOR VALUES FROM (MINVALUE) TO (100);
CREATE TABLE regress_pt_c2 PARTITION OF regress_pt_c FOR VALUES FROM (100) TO (MAXVALUE);
INSERT INTO regress_pt SELECT i, i % 30, cs_vec(i, 3), 'row ' || i FROM generate_series(1, 200) AS i;
SELECT chroma_mirror('regress_pt', collection => 'regress_m_pt', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
-- one status row, the parent's
SELECT source, collection FROM chroma_sync.status;
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- Writes through the parent, to a leaf, to a partitioned partition; row movement.
INSERT INTO regress_pt VALUES (201, 5, cs_vec(201, 3), 'via parent');
INSERT INTO regress_pt_c2 VALUES (202, 25, cs_vec(202, 3), 'via leaf');
UPDATE regress_pt_c SET doc = 'via regress_pt_c' WHERE id BETWEEN 90 AND 110;
DELETE FROM regress_pt_b WHERE id BETWEEN 1 AND 50;
UPDATE regress_pt SET region = region + 10 WHERE region < 10 AND id BETWEEN 51 AND 120;
BEGIN;
UPDATE regress_pt SET region = 29 WHERE region = 9 AND id > 120;
UPDATE regress_pt SET region = 9, doc = 'moved back' WHERE region = 29 AND id > 120;
COMMIT;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
SELECT id, document FROM chroma_get('regress_m_pt', ARRAY['129,9', '129,29', '159,9']) ORDER BY id;

-- CREATE TABLE ... PARTITION OF: the new partition's rows are captured.
CREATE TABLE regress_pt_d PARTITION OF regress_pt FOR VALUES FROM (30) TO (40);
INSERT INTO regress_pt SELECT i, 30 + i % 10, cs_vec(i, 3), 'in d' FROM generate_series(301, 320) AS i;
INSERT INTO regress_pt_d VALUES (321, 31, cs_vec(321, 3), 'in d directly');
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- ATTACH PARTITION: the table's existing rows are sent (its columns in another order,
-- with a dropped one).
CREATE TABLE regress_pt_e (dropped int, doc text, embedding real[], region int, id int);
ALTER TABLE regress_pt_e DROP COLUMN dropped;
ALTER TABLE regress_pt_e ADD PRIMARY KEY (id, region);
INSERT INTO regress_pt_e (id, region, embedding, doc)
	SELECT i, 40 + i % 10, cs_vec(i, 3), 'attached ' || i FROM generate_series(401, 450) AS i;
ALTER TABLE regress_pt ATTACH PARTITION regress_pt_e FOR VALUES FROM (40) TO (50);
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
UPDATE regress_pt_e SET doc = 'written after the attach' WHERE id < 410;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- TRUNCATE of one partition deletes only that partition's ids.
TRUNCATE regress_pt_c1;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
SELECT count AS chroma_count FROM chroma_count('regress_m_pt') AS count;

-- DETACH PARTITION: its rows leave the collection; writes to it are no longer queued.
ALTER TABLE regress_pt DETACH PARTITION regress_pt_b;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
SELECT count(*) AS triggers_left FROM pg_trigger
	WHERE tgrelid = 'regress_pt_b'::regclass AND tgname LIKE 'chroma%';
BEGIN;
UPDATE regress_pt_b SET doc = 'detached';
SELECT count(*) AS queued FROM chroma_sync.queue;
COMMIT;

-- DETACH PARTITION ... CONCURRENTLY (not in a transaction block).
ALTER TABLE regress_pt DETACH PARTITION regress_pt_d CONCURRENTLY;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- A sub-partitioned table attached and detached as a whole.
CREATE TABLE regress_pt_s (id int, region int, embedding real[], doc text,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (id);
CREATE TABLE regress_pt_s1 PARTITION OF regress_pt_s FOR VALUES FROM (MINVALUE) TO (530);
CREATE TABLE regress_pt_s2 PARTITION OF regress_pt_s FOR VALUES FROM (530) TO (MAXVALUE);
INSERT INTO regress_pt_s SELECT i, 50 + i % 10, cs_vec(i, 3), 'sub ' || i FROM generate_series(501, 560) AS i;
ALTER TABLE regress_pt ATTACH PARTITION regress_pt_s FOR VALUES FROM (50) TO (60);
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
ALTER TABLE regress_pt DETACH PARTITION regress_pt_s;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- DROP TABLE of a partition: its rows leave.
DROP TABLE regress_pt_e;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);

-- A partition mirrored on its own: its own collection. A parent and one of its
-- partitions in one collection: refused.
SELECT chroma_mirror('regress_pt_c2', collection => 'regress_m_pt_c2') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_pt_c2', '60 s');
SELECT * FROM cs_mirror_state('regress_pt_c2');
\set VERBOSITY terse
SELECT chroma_mirror('regress_pt_a', collection => 'regress_m_pt');
SELECT chroma_mirror('regress_pt_c', collection => 'regress_m_pt');
\set VERBOSITY default
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
SELECT chroma_unmirror('regress_pt_c2', drop_collection => true);

-- pause, resume, resync act on the whole tree.
SELECT chroma_pause('regress_pt');
UPDATE regress_pt SET doc = 'while paused' WHERE id IN (201, 202);
SELECT state, pending FROM chroma_sync.status;
SELECT chroma_resume('regress_pt');
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_compare('regress_m_pt',
	$$SELECT id || ',' || region, embedding, doc, NULL::jsonb FROM regress_pt$$);
SELECT chroma_delete('regress_m_pt', ARRAY['202,25']);
SELECT rows, missing, extra, different FROM chroma_verify('regress_pt');
SELECT chroma_resync('regress_pt') > 0 AS resynced;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');

-- TRUNCATE of the parent clears the collection.
TRUNCATE regress_pt;
SELECT chroma_flush('regress_pt', '60 s');
SELECT * FROM cs_mirror_state('regress_pt');
SELECT count AS chroma_count FROM chroma_count('regress_m_pt') AS count;

-- chroma_unmirror leaves no chroma_sync trigger on any partition.
SELECT chroma_unmirror('regress_pt', drop_collection => true);
SELECT count(*) AS triggers_left FROM pg_trigger
	WHERE tgrelid IN (SELECT relid FROM pg_partition_tree('regress_pt')) AND tgname LIKE 'chroma%';
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
DROP TABLE regress_pt, regress_pt_b, regress_pt_d, regress_pt_s;
