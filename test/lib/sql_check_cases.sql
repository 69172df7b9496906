-- Self-test of test/lib/check_sql_scripts.sh, run by test/static_checks.sh: each
-- "-- case NAME: PATTERN" section is appended alone to a copy of the last upgrade script,
-- and the check must fail with a report matching PATTERN (a Perl regex); the "-- clean"
-- section (the same kinds of statement, everything qualified) must pass, so that a check
-- that fails everything cannot pass this test. Statements of every kind, not only the
-- ones a check knows how to store: the scripts run them all as superuser.
-- case update_operator: :\d+: operator bigint \+ integer is not written
UPDATE chroma_sync.mirror SET synced = synced + 1;
-- case update_function: :\d+: function lower\(text\) is not written
UPDATE chroma_sync.mirror SET collection = lower(collection);
-- case delete_where: :\d+: operator integer > integer is not written
DELETE FROM chroma_sync.failed WHERE attempts > 3;
-- case insert_values: :\d+: operator text \|\| text is not written
INSERT INTO chroma_sync.queue (mirror_id, key) VALUES (1, 'k' || 'x');
-- case values: :\d+: operator integer \+ integer is not written
VALUES (1 + 1);
-- case with_select: :\d+: operator bigint < integer is not written
WITH s AS (SELECT m.synced FROM chroma_sync.mirror m) SELECT * FROM s WHERE s.synced < 0;
-- case alter_type_using: :\d+: operator integer \* integer is not written
ALTER TABLE chroma_sync.mirror ADD COLUMN x integer;
ALTER TABLE chroma_sync.mirror ALTER COLUMN x TYPE bigint USING (mirror_id * 1);
-- case do_execute_literal: operator hostile\.\+\(integer,integer\)|operator integer \+ integer is not written
DO $$ BEGIN EXECUTE 'SELECT 1 + 1'; END $$;
-- case do_execute_built: :\d+: operator integer \+ integer is not written
DO $$ BEGIN EXECUTE pg_catalog.format('SELECT %s + 1', 1); END $$;
-- case do_execute_not_run: :\d+: EXECUTE never ran
DO $$ BEGIN IF pg_catalog.now() OPERATOR(pg_catalog.<) '2000-01-01' THEN EXECUTE pg_catalog.format('SELECT %s', 1); END IF; END $$;
-- clean
UPDATE chroma_sync.mirror SET synced = synced OPERATOR(pg_catalog.+) 1::pg_catalog.int8,
	collection = pg_catalog.lower(collection);
DELETE FROM chroma_sync.failed WHERE attempts OPERATOR(pg_catalog.>) 3;
INSERT INTO chroma_sync.queue (mirror_id, key)
	VALUES (1, 'k'::pg_catalog.text OPERATOR(pg_catalog.||) 'x'::pg_catalog.text);
DELETE FROM chroma_sync.queue;
VALUES (1 OPERATOR(pg_catalog.+) 1);
WITH s AS (SELECT m.synced FROM chroma_sync.mirror m)
	SELECT * FROM s WHERE s.synced OPERATOR(pg_catalog.<) 0::pg_catalog.int8;
ALTER TABLE chroma_sync.mirror ADD COLUMN x integer;
ALTER TABLE chroma_sync.mirror ALTER COLUMN x TYPE bigint
	USING (mirror_id::pg_catalog.int8 OPERATOR(pg_catalog.*) 1::pg_catalog.int8);
ALTER TABLE chroma_sync.mirror DROP COLUMN x;
DO $$ BEGIN EXECUTE 'SELECT 1 OPERATOR(pg_catalog.+) 1'; END $$;
DO $$ BEGIN EXECUTE pg_catalog.format('SELECT %s OPERATOR(pg_catalog.+) 1', 1); END $$;
