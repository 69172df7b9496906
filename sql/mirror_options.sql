-- Mirror options: a row filter, embedding columns of other types, the rate limit setting.

-- A row filter: rows where it is not true are not in the collection.
CREATE TABLE regress_mo_docs (id int PRIMARY KEY, embedding real[], body text,
	published boolean, lang text);
INSERT INTO regress_mo_docs SELECT g, ARRAY[g, 1, 2]::real[], 'doc ' || g,
	g % 2 = 0, CASE WHEN g % 3 = 0 THEN 'de' ELSE 'en' END
FROM generate_series(1, 60) g;
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter',
	document_column => 'body', filter => 'published AND lang = ''en''') IS NOT NULL AS mirrored;
-- stored deparsed: one parenthesized expression, its meaning fixed
SELECT filter FROM chroma_sync.mirror WHERE collection = 'regress_m_filter';
SELECT chroma_flush('regress_mo_docs', '60 s');
SELECT * FROM cs_mirror_state('regress_mo_docs');
SELECT * FROM cs_compare('regress_m_filter',
	$$SELECT id::text, embedding, body, NULL::jsonb FROM regress_mo_docs
	  WHERE published AND lang = 'en'$$);
-- rows move in and out of the filter by UPDATE, of columns that are not mirrored
UPDATE regress_mo_docs SET published = true WHERE id IN (1, 5, 7);
UPDATE regress_mo_docs SET lang = 'de' WHERE id IN (2, 4);
UPDATE regress_mo_docs SET published = NULL WHERE id = 8;
SELECT chroma_flush('regress_mo_docs', '60 s');
SELECT * FROM cs_mirror_state('regress_mo_docs');
SELECT * FROM cs_compare('regress_m_filter',
	$$SELECT id::text, embedding, body, NULL::jsonb FROM regress_mo_docs
	  WHERE published AND lang = 'en'$$);
SELECT id FROM chroma_get('regress_m_filter', ARRAY['1', '2', '4', '5', '7', '8']) ORDER BY id;
-- chroma_resync counts and sends the filtered rows only
SELECT chroma_resync('regress_mo_docs');
SELECT chroma_flush('regress_mo_docs', '60 s');
SELECT * FROM cs_mirror_state('regress_mo_docs');
SELECT chroma_unmirror('regress_mo_docs', drop_collection => true);

-- bad filters are refused at mirror time, nothing is created
\set VERBOSITY terse
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'no_such_column');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'lang');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'count(*) > 0');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2',
	filter => 'true); DROP TABLE regress_mo_docs; SELECT (true');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2',
	filter => 'true) UNION SELECT 1 FROM regress_mo_docs WHERE (true');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'published AND (');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'random() < 0.5');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'false) OR (true');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'now() IS NOT NULL');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'published, published');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => 'published AS p');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2', filter => '$1');
SELECT chroma_mirror('regress_mo_docs', collection => 'regress_m_filter2',
	filter => 'id IN (SELECT id FROM regress_mo_docs WHERE published)');
\set VERBOSITY default
SELECT count(*) AS mirrors FROM chroma_sync.mirror;
SELECT count(*) AS regress_mo_docs_rows FROM regress_mo_docs;
DROP TABLE regress_mo_docs;

-- Embedding columns of double precision[] (rounded to float32 as a cast does) and of a
-- type with a cast to real[] (as pgvector's vector has).
CREATE DOMAIN regress_mo_vec AS real[];
CREATE TYPE regress_mo_pair AS (x real, y real);
CREATE FUNCTION regress_mo_pair_to_real(regress_mo_pair) RETURNS real[]
	LANGUAGE sql IMMUTABLE AS $$ SELECT ARRAY[$1.x, $1.y] $$;
CREATE CAST (regress_mo_pair AS real[]) WITH FUNCTION regress_mo_pair_to_real(regress_mo_pair);
CREATE TABLE regress_mo_types (id bigint PRIMARY KEY, e8 double precision[],
	ep regress_mo_pair, ed regress_mo_vec);
INSERT INTO regress_mo_types SELECT g, ARRAY[g + 0.1, 1.0 / 3, -0.2]::float8[],
	ROW(g, 1.0 / 7)::regress_mo_pair, ARRAY[g, 2]::real[]
FROM generate_series(1, 30) g;
SELECT chroma_mirror('regress_mo_types', collection => 'regress_m_f8',
	embedding_column => 'e8') IS NOT NULL AS mirrored;
SELECT chroma_mirror('regress_mo_types', collection => 'regress_m_pair',
	embedding_column => 'ep') IS NOT NULL AS mirrored;
SELECT chroma_mirror('regress_mo_types', collection => 'regress_m_domain',
	embedding_column => 'ed') IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mo_types', '60 s', 'regress_m_f8'),
	chroma_flush('regress_mo_types', '60 s', 'regress_m_pair'),
	chroma_flush('regress_mo_types', '60 s', 'regress_m_domain');
SELECT * FROM cs_compare('regress_m_f8',
	$$SELECT id::text, e8::real[], NULL::text, NULL::jsonb FROM regress_mo_types$$);
SELECT * FROM cs_compare('regress_m_pair',
	$$SELECT id::text, ep::real[], NULL::text, NULL::jsonb FROM regress_mo_types$$);
SELECT * FROM cs_compare('regress_m_domain',
	$$SELECT id::text, ed::real[], NULL::text, NULL::jsonb FROM regress_mo_types$$);
SELECT rows, missing, extra, different FROM chroma_verify('regress_mo_types', 'regress_m_pair');
SELECT chroma_unmirror('regress_mo_types', true, 'regress_m_f8'),
	chroma_unmirror('regress_mo_types', true, 'regress_m_pair'),
	chroma_unmirror('regress_mo_types', true, 'regress_m_domain');
DROP TABLE regress_mo_types;
DROP CAST (regress_mo_pair AS real[]);
DROP FUNCTION regress_mo_pair_to_real(regress_mo_pair);
DROP TYPE regress_mo_pair;
DROP DOMAIN regress_mo_vec;

-- the rate limit is a server-wide setting
SELECT name, setting, context FROM pg_settings WHERE name = 'chroma_sync.max_records_per_second';
