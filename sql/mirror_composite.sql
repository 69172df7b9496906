-- Composite keys: a table whose primary key has several columns is mirrored with ids
-- that are a reversible text form of the key (each value's text with '%' written "%25"
-- and ',' written "%2C", joined by ','); an explicit id_columns list; key changes;
-- backfill over several pages; stray ids; renamed and dropped key columns; bad input.

-- cs_id(parts): the documented id form, written here independently of the extension.
CREATE FUNCTION cs_id(VARIADIC parts text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT string_agg(replace(replace(p, '%', '%25'), ',', '%2C'), ',' ORDER BY o)
	FROM unnest(parts) WITH ORDINALITY AS u(p, o)
$$;
-- cs_id_parts(id): the inverse: split on ',', then undo the two escapes.
CREATE FUNCTION cs_id_parts(id text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT array_agg(replace(replace(p, '%2C', ','), '%25', '%') ORDER BY o)
	FROM unnest(string_to_array(id, ',')) WITH ORDINALITY AS u(p, o)
$$;

-- Values containing the separator and the escape character, chosen so that a naive
-- join would give two keys the same id.
CREATE TABLE regress_mc (tenant text, n int, embedding real[], doc text,
	PRIMARY KEY (tenant, n));
INSERT INTO regress_mc VALUES
	('a,b', 1, cs_vec(1, 4), 'comma in the first value'),
	('a', 1, cs_vec(2, 4), 'plain'),
	('a%2C', 1, cs_vec(3, 4), 'an escape sequence, literally'),
	('a%', 1, cs_vec(4, 4), 'percent at the end'),
	('%', 1, cs_vec(5, 4), 'only a percent'),
	(',', 1, cs_vec(6, 4), 'only a comma'),
	('', 1, cs_vec(7, 4), 'empty text'),
	('a,1', 1, cs_vec(8, 4), 'looks like a whole id'),
	('ключ, 日本', -1, cs_vec(9, 4), 'unicode'),
	('no embedding', 1, NULL, 'not in the collection');
-- Every key has its own id under the documented form, and that form reads back.
SELECT count(*) AS keys, count(DISTINCT cs_id(tenant, n::text)) AS ids,
	count(*) FILTER (WHERE cs_id_parts(cs_id(tenant, n::text)) = ARRAY[tenant, n::text]) AS round_trips
FROM regress_mc;
SELECT chroma_mirror('regress_mc', collection => 'regress_m_composite', document_column => 'doc')
	IS NOT NULL AS mirrored;
SELECT id_columns FROM chroma_sync.mirror WHERE source = 'regress_mc'::regclass;
SELECT chroma_flush('regress_mc', '60 s');
CREATE VIEW regress_mc_expected AS
SELECT cs_id(tenant, n::text), embedding, doc, NULL::jsonb FROM regress_mc
WHERE embedding IS NOT NULL;
SELECT * FROM cs_mirror_state('regress_mc');
SELECT * FROM cs_compare('regress_m_composite', 'SELECT * FROM regress_mc_expected');
SELECT id, cs_id_parts(id) AS parts, document FROM chroma_get('regress_m_composite')
ORDER BY id COLLATE "C";
-- Every id in Chroma decodes to a key of the table, and no two ids to the same key.
SELECT count(*) AS records, count(DISTINCT cs_id_parts(c.id)) AS keys,
	count(t.tenant) AS in_table
FROM chroma_get('regress_m_composite') AS c
LEFT JOIN regress_mc AS t ON ARRAY[t.tenant, t.n::text] = cs_id_parts(c.id);

-- Changes: a key part changes (old id deleted, new one written), a delete, an insert
-- whose id would collide under a naive join, a document change.
UPDATE regress_mc SET n = 2 WHERE tenant = 'a,b';
UPDATE regress_mc SET tenant = 'a,b,c' WHERE tenant = 'a' AND n = 1;
DELETE FROM regress_mc WHERE tenant = '%';
INSERT INTO regress_mc VALUES ('a', 2, cs_vec(10, 4), 'a then 2'), ('a,2', 1, cs_vec(11, 4), NULL);
UPDATE regress_mc SET doc = 'changed' WHERE tenant = 'a%2C';
UPDATE regress_mc SET embedding = cs_vec(12, 4) WHERE tenant = 'no embedding';
SELECT chroma_flush('regress_mc', '60 s');
SELECT * FROM cs_mirror_state('regress_mc');
SELECT * FROM cs_compare('regress_m_composite', 'SELECT * FROM regress_mc_expected');
SELECT id, document FROM chroma_get('regress_m_composite') ORDER BY id COLLATE "C";

-- A stray id in the collection (written behind the mirror's back) is deleted by
-- chroma_resync; a renamed key column keeps working.
SELECT chroma_upsert('regress_m_composite', ARRAY['a,99', 'a%2C,1,'], ARRAY[[1, 2, 3, 4], [4, 3, 2, 1]]::real[]);
ALTER TABLE regress_mc RENAME COLUMN tenant TO "the tenant";
SELECT chroma_resync('regress_mc');
SELECT chroma_flush('regress_mc', '60 s');
CREATE OR REPLACE VIEW regress_mc_expected AS
SELECT cs_id("the tenant", n::text), embedding, doc, NULL::jsonb FROM regress_mc
WHERE embedding IS NOT NULL;
SELECT * FROM cs_mirror_state('regress_mc');
SELECT * FROM cs_compare('regress_m_composite', 'SELECT * FROM regress_mc_expected');
INSERT INTO regress_mc VALUES ('renamed', 3, cs_vec(13, 4), 'after the rename');
SELECT chroma_flush('regress_mc', '60 s');
SELECT * FROM cs_mirror_state('regress_mc');
SELECT * FROM cs_compare('regress_m_composite', 'SELECT * FROM regress_mc_expected');

-- Dropping a key column pauses the mirror with the reason.
DROP VIEW regress_mc_expected;
ALTER TABLE regress_mc DROP COLUMN n;
SELECT state, last_error FROM chroma_sync.status WHERE source = 'regress_mc'::regclass;
SELECT chroma_unmirror('regress_mc', drop_collection => true);
DROP TABLE regress_mc;

-- Three columns of three types, mirrored by an explicit id_columns list in another
-- order than the unique index (the id follows the list), over several backfill pages;
-- char(n) keeps its padding, a NULL key part keeps the row out of the collection.
CREATE TABLE regress_mc3 (
	serial_id serial PRIMARY KEY,
	region char(4),
	day_no bigint,
	tag uuid,
	embedding real[],
	score int,
	UNIQUE (tag, region, day_no)
);
INSERT INTO regress_mc3 (region, day_no, tag, embedding, score)
SELECT CASE WHEN i % 3 = 0 THEN 'eu' WHEN i % 3 = 1 THEN 'us,w' ELSE '%25' END,
	i / 3, md5('tag ' || (i % 7))::uuid, cs_vec(i, 3), i
FROM generate_series(1, 1300) AS i;
INSERT INTO regress_mc3 (region, day_no, tag, embedding, score)
VALUES (NULL, 1, md5('null part')::uuid, cs_vec(5000, 3), -1);
SELECT chroma_mirror('regress_mc3', collection => 'regress_m_composite3',
	id_columns => ARRAY['region', 'day_no', 'tag'], metadata_columns => ARRAY['score'])
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mc3', '120 s');
CREATE VIEW regress_mc3_expected AS
SELECT cs_id(bpcharout(region)::text, day_no::text, tag::text), embedding, NULL::text,
	jsonb_build_object('score', score)
FROM regress_mc3 WHERE embedding IS NOT NULL AND region IS NOT NULL;
SELECT * FROM cs_mirror_state('regress_mc3');
SELECT * FROM cs_compare('regress_m_composite3', 'SELECT * FROM regress_mc3_expected');
SELECT id FROM chroma_get('regress_m_composite3',
	ARRAY[cs_id('us,w', '0', md5('tag 1')::uuid::text), cs_id('%25 ', '0', md5('tag 2')::uuid::text)])
ORDER BY id COLLATE "C";
UPDATE regress_mc3 SET region = 'ap' WHERE score = 3;
UPDATE regress_mc3 SET region = NULL WHERE score = 4;
UPDATE regress_mc3 SET region = 'eu' WHERE score = -1;
UPDATE regress_mc3 SET score = 0 WHERE score = 5;
DELETE FROM regress_mc3 WHERE score = 6;
SELECT chroma_flush('regress_mc3', '60 s');
SELECT * FROM cs_mirror_state('regress_mc3');
SELECT * FROM cs_compare('regress_m_composite3', 'SELECT * FROM regress_mc3_expected');
SELECT chroma_unmirror('regress_mc3', drop_collection => true);
DROP VIEW regress_mc3_expected;

-- Refused: both id_column and id_columns; no unique index on exactly these columns;
-- a column listed twice, an empty list, a NULL, a missing column; a key part whose text
-- form depends on settings. Nothing reaches Chroma.
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_column => 'serial_id', id_columns => ARRAY['region', 'day_no', 'tag'])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY['region', 'day_no'])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY['region', 'day_no', 'tag', 'score'])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY['region', 'day_no', 'region'])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => '{}')$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY['region', NULL])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY['region', 'no_such'])$$);
SELECT cs_try($$SELECT chroma_mirror('regress_mc3', collection => 'regress_m_bad', id_columns => ARRAY[['region'], ['tag']])$$);
CREATE TABLE regress_mc_ts (at timestamptz, n int, embedding real[], PRIMARY KEY (n, at));
SELECT cs_try($$SELECT chroma_mirror('regress_mc_ts', collection => 'regress_m_bad')$$);
DROP TABLE regress_mc_ts;
DROP TABLE regress_mc3;
SELECT count(*) AS collections FROM chroma_list_collections() WHERE name = 'regress_m_bad';
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
DROP FUNCTION cs_id(text[]), cs_id_parts(text);
