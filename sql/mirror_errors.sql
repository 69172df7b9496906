-- chroma_mirror refuses what it cannot mirror, with exact messages, and nothing reaches
-- Chroma; only the table's owner manages its mirrors; writers need no privilege on the
-- extension's tables.

CREATE TABLE regress_me (
	id int PRIMARY KEY,
	embedding real[],
	emb8 float8[],
	embn numeric[],
	n int,
	j jsonb,
	doc text
);

-- Columns that do not exist, or cannot serve.
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', embedding_column => 'nope');
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', document_column => 'nope');
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', metadata_columns => ARRAY['n', 'nope']);
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', metadata_columns => ARRAY['n', 'n']);
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', metadata_columns => ARRAY['n', NULL]);
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', embedding_column => 'n');
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', embedding_column => 'j');
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', embedding_column => 'xmin');
SELECT chroma_mirror('regress_me', collection => 'regress_m_err', embedding_column => NULL);
SELECT chroma_mirror(NULL, collection => 'regress_m_err');
-- Collection names Chroma would refuse.
SELECT chroma_mirror('regress_me', collection => 'no spaces allowed');
SELECT chroma_mirror('regress_me', collection => 'ab');
SELECT chroma_mirror('regress_me', collection => 'a..b');
-- Not tables.
CREATE VIEW regress_me_view AS SELECT * FROM regress_me;
SELECT chroma_mirror('regress_me_view', collection => 'regress_m_err');
CREATE MATERIALIZED VIEW regress_me_matview AS SELECT * FROM regress_me;
SELECT chroma_mirror('regress_me_matview', collection => 'regress_m_err');
CREATE SEQUENCE regress_me_seq;
SELECT chroma_mirror('regress_me_seq', collection => 'regress_m_err');
CREATE TABLE regress_me_parted (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
CREATE TABLE regress_me_part1 PARTITION OF regress_me_parted FOR VALUES FROM (0) TO (100);
-- a partitioned table is mirrored whole, but not with an unlogged or a foreign partition
CREATE UNLOGGED TABLE regress_me_part2 PARTITION OF regress_me_parted FOR VALUES FROM (100) TO (200);
SELECT chroma_mirror('regress_me_parted', collection => 'regress_m_err');
DROP TABLE regress_me_part2;
SELECT chroma_mirror('no_such_table', collection => 'regress_m_err');
-- Table names that are not valid collection names need an explicit collection.
CREATE TABLE "ab" (id int PRIMARY KEY, embedding real[]);
SELECT chroma_mirror('ab');
CREATE TABLE "Has Space" (id int PRIMARY KEY, embedding real[]);
SELECT chroma_mirror('"Has Space"');
SELECT chroma_mirror('"Has Space"', collection => 'regress_m_has_space') IS NOT NULL AS mirrored;
SELECT chroma_unmirror('"Has Space"', drop_collection => true);
DROP TABLE "ab", "Has Space";
-- Nothing of these reached Chroma or the configuration.
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name LIKE 'regress_m_err%';
SELECT count(*) AS mirrors FROM chroma_sync.mirror;

-- A partition is a table: it may be mirrored on its own.
INSERT INTO regress_me_parted SELECT i, cs_vec(i, 2) FROM generate_series(1, 10) AS i;
SELECT chroma_mirror('regress_me_part1', collection => 'regress_m_err_part') IS NOT NULL AS mirrored;
UPDATE regress_me_parted SET embedding = cs_vec(-id, 2) WHERE id <= 3;
SELECT chroma_flush('regress_me_part1', '60 s');
SELECT * FROM cs_mirror_state('regress_me_part1');
SELECT chroma_unmirror('regress_me_part1', drop_collection => true);
DROP TABLE regress_me_parted;

-- Embedding columns of other numeric array types are cast to real[].
SELECT chroma_mirror('regress_me', collection => 'regress_m_err_n', embedding_column => 'embn')
	IS NOT NULL AS mirrored_numeric_array;
-- The same table and collection twice.
SELECT chroma_mirror('regress_me', collection => 'regress_m_err_n', embedding_column => 'emb8');
SELECT chroma_unmirror('regress_me', drop_collection => true);

-- Privileges: a role that does not own the table.
CREATE ROLE regress_mirror_user;
CREATE ROLE regress_mirror_writer;
GRANT EXECUTE ON FUNCTION
	chroma_mirror, chroma_unmirror, chroma_pause, chroma_resume, chroma_flush, chroma_resync,
	chroma_verify, chroma_retry_failed
TO regress_mirror_user;
GRANT SELECT, INSERT, UPDATE, DELETE ON regress_me TO regress_mirror_user, regress_mirror_writer;
-- Without the GRANT, the functions are not even callable.
SET ROLE regress_mirror_writer;
SELECT chroma_mirror('regress_me', collection => 'regress_m_err');
RESET ROLE;
SET ROLE regress_mirror_user;
SELECT chroma_mirror('regress_me', collection => 'regress_m_err');
RESET ROLE;
SELECT chroma_mirror('regress_me', collection => 'regress_m_err_priv', document_column => 'doc')
	IS NOT NULL AS mirrored;
SET ROLE regress_mirror_user;
SELECT chroma_unmirror('regress_me');
SELECT chroma_unmirror('regress_me', drop_collection => true);
SELECT chroma_pause('regress_me');
SELECT chroma_resume('regress_me');
SELECT chroma_resync('regress_me');
SELECT chroma_retry_failed('regress_me');
-- chroma_verify reads the table with the owner's rights: the owner's call only.
SELECT * FROM chroma_verify('regress_me');
-- Without a source, only the caller's own mirrors are retried.
SELECT chroma_retry_failed();
RESET ROLE;
SELECT state <> 'paused' AS not_paused, collection FROM chroma_sync.status
WHERE source = 'regress_me'::regclass;
-- A writer with rights on the table only: its changes are queued and sent.
SET ROLE regress_mirror_writer;
INSERT INTO regress_me (id, embedding, doc) VALUES (1, cs_vec(1, 4), 'by the writer'),
	(2, cs_vec(2, 4), 'by the writer');
UPDATE regress_me SET doc = 'changed by the writer' WHERE id = 2;
-- (it cannot read the extension's tables)
SELECT count(*) FROM chroma_sync.queue;
RESET ROLE;
SELECT chroma_flush('regress_me', '60 s');
SELECT * FROM cs_mirror_state('regress_me');
SELECT id, document FROM chroma_get('regress_m_err_priv') ORDER BY id;
SELECT chroma_unmirror('regress_me', drop_collection => true);

REVOKE ALL ON regress_me FROM regress_mirror_user, regress_mirror_writer;
REVOKE EXECUTE ON FUNCTION
	chroma_mirror, chroma_unmirror, chroma_pause, chroma_resume, chroma_flush, chroma_resync,
	chroma_verify, chroma_retry_failed
FROM regress_mirror_user;
DROP ROLE regress_mirror_user;
DROP ROLE regress_mirror_writer;
DROP VIEW regress_me_view;
DROP MATERIALIZED VIEW regress_me_matview;
DROP SEQUENCE regress_me_seq;
DROP TABLE regress_me;
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name LIKE 'regress_m_err%';
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
