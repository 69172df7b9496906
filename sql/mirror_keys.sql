-- Mirrors of tables keyed by bigint, text and uuid primary keys, by an explicit unique
-- id_column, and of a table whose names need quoting; key changes; tables that have no
-- usable key are refused.

-- bigint: ids beyond 2^53 and negative ones keep every digit.
CREATE TABLE regress_mk_big (id bigint PRIMARY KEY, embedding real[], doc text);
INSERT INTO regress_mk_big VALUES
	(9007199254740993, cs_vec(1, 4), 'two to the 53 plus one'),
	(-9223372036854775808, cs_vec(2, 4), 'min'),
	(9223372036854775807, cs_vec(3, 4), 'max'),
	(0, cs_vec(4, 4), 'zero');
SELECT chroma_mirror('regress_mk_big', collection => 'regress_m_big', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mk_big', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_big');
SELECT * FROM cs_compare('regress_m_big',
	'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_mk_big WHERE embedding IS NOT NULL');
SELECT id FROM chroma_get('regress_m_big') ORDER BY id;
INSERT INTO regress_mk_big VALUES (-1, cs_vec(5, 4), 'minus one');
UPDATE regress_mk_big SET id = 9007199254740992 WHERE id = 9007199254740993;
UPDATE regress_mk_big SET doc = 'MAX' WHERE id = 9223372036854775807;
DELETE FROM regress_mk_big WHERE id = 0;
SELECT chroma_flush('regress_mk_big', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_big');
SELECT * FROM cs_compare('regress_m_big',
	'SELECT id::text, embedding, doc, NULL::jsonb FROM regress_mk_big WHERE embedding IS NOT NULL');
SELECT id, document FROM chroma_get('regress_m_big') ORDER BY id;
SELECT synced FROM chroma_sync.status WHERE source = 'regress_mk_big'::regclass;
SELECT chroma_unmirror('regress_mk_big', drop_collection => true);
DROP TABLE regress_mk_big;

-- text: ids with spaces, quotes, backslashes, unicode and JSON-looking text.
CREATE TABLE regress_mk_text (id text PRIMARY KEY, embedding real[], meta jsonb);
INSERT INTO regress_mk_text VALUES
	('plain', cs_vec(1, 4), '{"a": 1}'),
	('with space', cs_vec(2, 4), NULL),
	(E'quote " and \' and \\ backslash', cs_vec(3, 4), '{"b": "x"}'),
	('ключ 日本 😀', cs_vec(4, 4), NULL),
	('{"json": [1]}', cs_vec(5, 4), NULL),
	(E'tab\there', cs_vec(6, 4), NULL);
SELECT chroma_mirror('regress_mk_text', collection => 'regress_m_text',
	metadata_columns => ARRAY['meta']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mk_text', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_text');
SELECT * FROM cs_compare('regress_m_text',
	'SELECT id, embedding, NULL::text, meta FROM regress_mk_text WHERE embedding IS NOT NULL');
UPDATE regress_mk_text SET id = 'renamed ключ' WHERE id = 'ключ 日本 😀';
UPDATE regress_mk_text SET id = id || ' (2)', meta = '{"c": true}' WHERE id = 'plain';
DELETE FROM regress_mk_text WHERE id = 'with space';
INSERT INTO regress_mk_text VALUES ('with space', cs_vec(7, 4), '{"again": 1}');
SELECT chroma_flush('regress_mk_text', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_text');
SELECT * FROM cs_compare('regress_m_text',
	'SELECT id, embedding, NULL::text, meta FROM regress_mk_text WHERE embedding IS NOT NULL');
SELECT id, metadata FROM chroma_get('regress_m_text') ORDER BY id COLLATE "C";
SELECT chroma_unmirror('regress_mk_text', drop_collection => true);
DROP TABLE regress_mk_text;

-- uuid: the id is the uuid's text form.
CREATE TABLE regress_mk_uuid (id uuid PRIMARY KEY, embedding real[]);
INSERT INTO regress_mk_uuid
SELECT md5('regress ' || i)::uuid, cs_vec(i, 4) FROM generate_series(1, 20) AS i;
SELECT chroma_mirror('regress_mk_uuid', collection => 'regress_m_uuid') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mk_uuid', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_uuid');
SELECT * FROM cs_compare('regress_m_uuid',
	'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_mk_uuid');
UPDATE regress_mk_uuid SET id = md5('regress changed')::uuid WHERE id = md5('regress 1')::uuid;
UPDATE regress_mk_uuid SET embedding = cs_vec(100, 4) WHERE id = md5('regress 2')::uuid;
DELETE FROM regress_mk_uuid WHERE id = md5('regress 3')::uuid;
SELECT chroma_flush('regress_mk_uuid', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_uuid');
SELECT * FROM cs_compare('regress_m_uuid',
	'SELECT id::text, embedding, NULL::text, NULL::jsonb FROM regress_mk_uuid');
SELECT count(*) FILTER (WHERE id = md5('regress changed')::uuid::text) AS new_id,
	count(*) FILTER (WHERE id = md5('regress 1')::uuid::text) AS old_id,
	count(*) AS records
FROM chroma_get('regress_m_uuid');
SELECT chroma_unmirror('regress_mk_uuid', drop_collection => true);
DROP TABLE regress_mk_uuid;

-- char(n): the id keeps the padding, and the worker finds the row by it.
CREATE TABLE regress_mk_char (code char(6) PRIMARY KEY, embedding real[]);
INSERT INTO regress_mk_char VALUES ('ab', cs_vec(1, 4)), ('abcdef', cs_vec(2, 4)), ('a b', cs_vec(3, 4));
SELECT chroma_mirror('regress_mk_char', collection => 'regress_m_char') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mk_char', '60 s');
UPDATE regress_mk_char SET embedding = cs_vec(4, 4) WHERE code = 'ab';
INSERT INTO regress_mk_char VALUES ('xyz', cs_vec(5, 4));
SELECT chroma_flush('regress_mk_char', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_char');
SELECT * FROM cs_compare('regress_m_char',
	'SELECT bpcharout(code)::text, embedding, NULL::text, NULL::jsonb FROM regress_mk_char');
SELECT '"' || id || '"' AS id FROM chroma_get('regress_m_char') ORDER BY id;
SELECT chroma_unmirror('regress_mk_char', drop_collection => true);
DROP TABLE regress_mk_char;

-- An explicit id_column with a unique index (the primary key is a serial); the column
-- may be NULL: such a row is not in the collection.
CREATE TABLE regress_mk_slug (
	n serial PRIMARY KEY,
	slug text UNIQUE,
	embedding real[],
	title text
);
INSERT INTO regress_mk_slug (slug, embedding, title) VALUES
	('alpha', cs_vec(1, 4), 'A'), ('beta', cs_vec(2, 4), 'B'), (NULL, cs_vec(3, 4), 'no slug'),
	('gamma', cs_vec(4, 4), 'C');
SELECT chroma_mirror('regress_mk_slug', collection => 'regress_m_slug', id_column => 'slug',
	metadata_columns => ARRAY['title', 'n']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mk_slug', '60 s');
CREATE VIEW regress_mk_slug_expected AS
SELECT slug, embedding, NULL::text, jsonb_build_object('title', title, 'n', n)
FROM regress_mk_slug WHERE embedding IS NOT NULL AND slug IS NOT NULL;
SELECT * FROM cs_mirror_state('regress_mk_slug');
SELECT * FROM cs_compare('regress_m_slug', 'SELECT * FROM regress_mk_slug_expected');
SELECT id, metadata FROM chroma_get('regress_m_slug') ORDER BY id;
-- Changing the id column moves the record; NULL removes it; a value brings it back.
UPDATE regress_mk_slug SET slug = 'alpha2' WHERE slug = 'alpha';
UPDATE regress_mk_slug SET slug = NULL WHERE slug = 'beta';
UPDATE regress_mk_slug SET slug = 'delta' WHERE title = 'no slug';
-- The primary key is only metadata here.
UPDATE regress_mk_slug SET n = 40 WHERE slug = 'gamma';
SELECT chroma_flush('regress_mk_slug', '60 s');
SELECT * FROM cs_mirror_state('regress_mk_slug');
SELECT * FROM cs_compare('regress_m_slug', 'SELECT * FROM regress_mk_slug_expected');
SELECT id, metadata FROM chroma_get('regress_m_slug') ORDER BY id;
SELECT chroma_unmirror('regress_mk_slug', drop_collection => true);
DROP VIEW regress_mk_slug_expected;

-- Columns without a unique index of their own are refused.
CREATE INDEX ON regress_mk_slug (title);
CREATE UNIQUE INDEX ON regress_mk_slug (title, slug);
CREATE UNIQUE INDEX ON regress_mk_slug (lower(title));
CREATE UNIQUE INDEX ON regress_mk_slug (n) WHERE n > 10;
SELECT chroma_mirror('regress_mk_slug', collection => 'regress_m_slug', id_column => 'title');
SELECT chroma_mirror('regress_mk_slug', collection => 'regress_m_slug', id_column => 'no_such');
SELECT chroma_mirror('regress_mk_slug', collection => 'regress_m_slug', id_column => 'ctid');
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
DROP TABLE regress_mk_slug;

-- A table without a primary key (composite keys: mirror_composite.sql).
CREATE TABLE regress_mk_nopk (id int, embedding real[]);
SELECT chroma_mirror('regress_mk_nopk', collection => 'regress_m_nopk');
CREATE UNIQUE INDEX ON regress_mk_nopk (id);
SELECT chroma_mirror('regress_mk_nopk', collection => 'regress_m_nopk', id_column => 'id')
	IS NOT NULL AS mirrored_by_unique_index;
SELECT chroma_unmirror('regress_mk_nopk', drop_collection => true);
DROP TABLE regress_mk_nopk;
-- Nothing of the refused mirrors reached Chroma.
SELECT count(*) AS collections FROM chroma_list_collections()
WHERE name = 'regress_m_nopk';
SELECT count(*) AS mirrors FROM chroma_sync.mirror;

-- Names that need quoting: table "My Docs", column "the embedding", in a schema
-- "Odd Schema"; the table's name is not a valid collection name.
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."My Docs" (
	"Doc Id" int PRIMARY KEY,
	"the embedding" real[],
	"the ""text""" text,
	"Meta Data" jsonb,
	"is good?" boolean
);
INSERT INTO "Odd Schema"."My Docs"
SELECT i, cs_vec(i, 6), 'text ' || i, jsonb_build_object('Key With Space', i), i % 3 = 0
FROM generate_series(1, 30) AS i;
SELECT chroma_mirror('"Odd Schema"."My Docs"', embedding_column => 'the embedding');
SELECT chroma_mirror('"Odd Schema"."My Docs"', collection => 'regress_m_my_docs',
	embedding_column => 'the embedding', document_column => 'the "text"',
	metadata_columns => ARRAY['Meta Data', 'is good?']) IS NOT NULL AS mirrored;
CREATE VIEW regress_mk_docs_expected AS
SELECT "Doc Id"::text, "the embedding", "the ""text""",
	"Meta Data" || jsonb_build_object('is good?', "is good?")
FROM "Odd Schema"."My Docs" WHERE "the embedding" IS NOT NULL;
SELECT chroma_flush('"Odd Schema"."My Docs"', '60 s');
SELECT * FROM cs_mirror_state('"Odd Schema"."My Docs"');
SELECT * FROM cs_compare('regress_m_my_docs', 'SELECT * FROM regress_mk_docs_expected');
UPDATE "Odd Schema"."My Docs" SET "the embedding" = cs_vec(-"Doc Id", 6) WHERE "Doc Id" <= 5;
UPDATE "Odd Schema"."My Docs" SET "is good?" = NULL, "the ""text""" = NULL WHERE "Doc Id" = 6;
UPDATE "Odd Schema"."My Docs" SET "Doc Id" = 600 WHERE "Doc Id" = 7;
DELETE FROM "Odd Schema"."My Docs" WHERE "Doc Id" = 8;
SELECT chroma_flush('"Odd Schema"."My Docs"', '60 s');
SELECT * FROM cs_mirror_state('"Odd Schema"."My Docs"');
SELECT * FROM cs_compare('regress_m_my_docs', 'SELECT * FROM regress_mk_docs_expected');
SELECT id, document, metadata FROM chroma_get('regress_m_my_docs', ARRAY['6', '600']) ORDER BY id;
SELECT source, collection FROM chroma_sync.status;
SELECT chroma_unmirror('"Odd Schema"."My Docs"', drop_collection => true);
DROP VIEW regress_mk_docs_expected;
DROP SCHEMA "Odd Schema" CASCADE;
