-- Keys a transaction buffers belong to the (sub)transaction level that wrote them: a
-- flush inside a savepoint (another mirrored table's statement, the 1,000-key flush,
-- a PL/pgSQL exception block) must never write an outer level's keys into the
-- savepoint, where ROLLBACK TO SAVEPOINT would delete them while the outer change commits.

CREATE TABLE regress_sx_a (id int PRIMARY KEY, embedding real[], doc text);
CREATE TABLE regress_sx_b (id int PRIMARY KEY, embedding real[]);
-- a partitioned parent whose partition is mirrored: the partition's statement trigger
-- does not fire for writes through the parent, so its keys stay buffered to the end
CREATE TABLE regress_sx_parent (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
CREATE TABLE regress_sx_p1 PARTITION OF regress_sx_parent FOR VALUES FROM (0) TO (100000);
-- an inheritance parent with a mirrored child, written through the parent
CREATE TABLE regress_sx_inh (id int PRIMARY KEY, embedding real[]);
CREATE TABLE regress_sx_inh_c (PRIMARY KEY (id)) INHERITS (regress_sx_inh);
SELECT chroma_mirror('regress_sx_a', collection => 'regress_sx_a', document_column => 'doc') IS NOT NULL AS a;
SELECT chroma_mirror('regress_sx_b', collection => 'regress_sx_b') IS NOT NULL AS b;
SELECT chroma_mirror('regress_sx_p1', collection => 'regress_sx_p1') IS NOT NULL AS p1;
SELECT chroma_mirror('regress_sx_inh_c', collection => 'regress_sx_inh_c') IS NOT NULL AS inh_c;
INSERT INTO regress_sx_b VALUES (1, cs_vec(1, 3));
SELECT chroma_flush(NULL, '60 s');

-- The repro: a write through the parent, then a statement on another mirrored table
-- inside a savepoint that is rolled back.
BEGIN;
INSERT INTO regress_sx_parent VALUES (777, cs_vec(777, 3));
SAVEPOINT s;
UPDATE regress_sx_b SET embedding = embedding WHERE false;
ROLLBACK TO SAVEPOINT s;
COMMIT;

-- The same through an inheritance parent.
BEGIN;
INSERT INTO regress_sx_inh_c VALUES (5, cs_vec(5, 3));
UPDATE regress_sx_inh SET embedding = cs_vec(55, 3) WHERE id = 5;
SAVEPOINT s;
INSERT INTO regress_sx_b VALUES (2, cs_vec(2, 3));
ROLLBACK TO SAVEPOINT s;
COMMIT;

-- Row keys of an outer level still buffered when a PL/pgSQL exception block flushes
-- (its statement on another mirrored table) and then rolls back.
BEGIN;
INSERT INTO regress_sx_parent VALUES (778, cs_vec(778, 3));
DO $$
BEGIN
	INSERT INTO regress_sx_b VALUES (3, cs_vec(3, 3));
	RAISE EXCEPTION 'roll the block back';
EXCEPTION WHEN raise_exception THEN
	NULL;
END
$$;
COMMIT;

-- More than 1,000 keys inside a savepoint (the size flush) after outer keys.
BEGIN;
INSERT INTO regress_sx_parent VALUES (779, cs_vec(779, 3));
SAVEPOINT big;
INSERT INTO regress_sx_parent SELECT i, cs_vec(i, 3) FROM generate_series(10000, 11500) AS i;
ROLLBACK TO SAVEPOINT big;
SAVEPOINT kept;
INSERT INTO regress_sx_a SELECT i, cs_vec(i, 3), 'kept ' || i FROM generate_series(1, 1200) AS i;
RELEASE SAVEPOINT kept;
SAVEPOINT gone;
INSERT INTO regress_sx_a SELECT i, cs_vec(i, 3), 'gone ' || i FROM generate_series(2000, 3200) AS i;
ROLLBACK TO SAVEPOINT gone;
COMMIT;

-- Nested savepoints: released inner levels keep their keys, rolled-back ones drop theirs.
BEGIN;
UPDATE regress_sx_a SET doc = 'outer' WHERE id = 1;
SAVEPOINT s1;
UPDATE regress_sx_a SET doc = 'level 2' WHERE id = 2;
SAVEPOINT s2;
INSERT INTO regress_sx_parent VALUES (780, cs_vec(780, 3));
UPDATE regress_sx_b SET embedding = cs_vec(10, 3) WHERE id = 1;
RELEASE SAVEPOINT s2;
SAVEPOINT s3;
UPDATE regress_sx_a SET doc = 'level 3, rolled back' WHERE id = 3;
INSERT INTO regress_sx_b VALUES (4, cs_vec(4, 3));
ROLLBACK TO SAVEPOINT s3;
RELEASE SAVEPOINT s1;
COMMIT;

SELECT chroma_flush(NULL, '60 s');
SELECT * FROM cs_mirror_state('regress_sx_p1');
SELECT * FROM cs_mirror_state('regress_sx_inh_c');
SELECT * FROM cs_mirror_state('regress_sx_a');
SELECT * FROM cs_mirror_state('regress_sx_b');
SELECT * FROM cs_compare('regress_sx_p1', 'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_sx_p1');
SELECT * FROM cs_compare('regress_sx_inh_c', 'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_sx_inh_c');
SELECT * FROM cs_compare('regress_sx_a', 'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_sx_a');
SELECT * FROM cs_compare('regress_sx_b', 'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_sx_b');
SELECT id FROM regress_sx_p1 ORDER BY id;

SELECT chroma_unmirror('regress_sx_a', drop_collection => true);
SELECT chroma_unmirror('regress_sx_b', drop_collection => true);
SELECT chroma_unmirror('regress_sx_p1', drop_collection => true);
SELECT chroma_unmirror('regress_sx_inh_c', drop_collection => true);
DROP TABLE regress_sx_a, regress_sx_b, regress_sx_parent, regress_sx_inh CASCADE;
