-- Metadata numbers. A number written with a fraction is sent as the nearest double,
-- rounded exactly as ::float8 rounds (1 / 3.0 = 0.33333333333333333333 is sent as
-- 0.3333333333333333), by the record functions, chroma_upsert_query and mirrors. A whole
-- number is never rounded: within int64 it is an integer, beyond int64 a float only when
-- a double holds it as written. NaN, infinity and numbers beyond a double's range (also
-- those that would underflow to zero) are refused. chroma_verify compares a rounded
-- number as the double that was sent, and integers exactly.

SELECT chroma_create_collection('regress_numbers') IS NOT NULL AS created;

-- chroma_upsert, chroma_add and chroma_update.
SELECT chroma_upsert('regress_numbers', ARRAY['u'], ARRAY[1, 2]::real[], NULL,
	ARRAY[jsonb_build_object('third', 1 / 3.0, 'neg', -2 / 3.0, 'cents', 0.10,
		'big', 12345678901234567890.5, 'int', 9007199254740993, 'e20', 1e20)]) AS upserted;
SELECT chroma_add('regress_numbers', ARRAY['a'], ARRAY[3, 4]::real[], NULL,
	ARRAY['{"x": 0.30000000000000000001, "sub": 1e-320}'::jsonb]) AS added;
SELECT metadata FROM chroma_get('regress_numbers', ids => ARRAY['u']);
SELECT (metadata->>'x')::float8 = 0.30000000000000000001::float8 AS x_as_float8,
	(metadata->>'sub')::float8 = 1e-320::float8 AS subnormal_as_float8
FROM chroma_get('regress_numbers', ids => ARRAY['a']);
SELECT chroma_update('regress_numbers', ARRAY['u'], NULL, NULL,
	ARRAY[jsonb_build_object('third', 2 / 3.0)]) AS updated;
SELECT metadata->'third' AS third FROM chroma_get('regress_numbers', ids => ARRAY['u']);

-- chroma_upsert_query: every number as ::float8 has it.
SELECT chroma_upsert_query('regress_numbers', $$
	SELECT 'q' || i AS id, ARRAY[i, i]::real[] AS embedding,
		jsonb_build_object('r', i / 7.0) AS metadata
	FROM generate_series(1, 50) AS i$$) AS sent;
SELECT count(*) AS records,
	count(*) FILTER (WHERE (g.metadata->>'r')::float8 = (substr(g.id, 2)::int / 7.0)::float8) AS as_float8
FROM chroma_get('regress_numbers') AS g WHERE g.id LIKE 'q%';

-- Refused, with nothing sent: numbers beyond a double's range, whole numbers beyond int64
-- that no double holds as written.
SELECT chroma_count('regress_numbers') AS before;
SELECT cs_try_detail($$SELECT chroma_upsert('regress_numbers', ARRAY['p', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"tiny": 1e-400}']::jsonb[])$$);
SELECT cs_try_detail($$SELECT chroma_upsert('regress_numbers', ARRAY['p', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"neg": -1.5e-330}']::jsonb[])$$);
SELECT cs_try_detail(format($$SELECT chroma_add('regress_numbers', ARRAY['p'], ARRAY[1, 1]::real[], NULL, ARRAY['{"huge": -2%s.25}']::jsonb[])$$, repeat('0', 310)));
SELECT cs_try_detail($$SELECT chroma_update('regress_numbers', ARRAY['u'], NULL, NULL, ARRAY['{"n": 12345678901234567890}']::jsonb[])$$);
SELECT cs_try_detail($$SELECT chroma_upsert_query('regress_numbers', 'SELECT ''p'' AS id, ARRAY[1, 1]::real[] AS embedding, ''{"n": 1e-999}''::jsonb AS metadata')$$);
SELECT chroma_count('regress_numbers') AS after;
SELECT metadata->'third' AS third, metadata->'n' AS n FROM chroma_get('regress_numbers', ids => ARRAY['u']);
SELECT chroma_delete_collection('regress_numbers');

-- Mirrors: a numeric column and a jsonb column with more digits than a double holds.
CREATE TABLE regress_mn (id int PRIMARY KEY, embedding real[], n numeric, big bigint, meta jsonb);
INSERT INTO regress_mn VALUES
	(1, cs_vec(1, 4), 1 / 3.0, 9007199254740993, jsonb_build_object('ratio', 2 / 7.0)),
	(2, cs_vec(2, 4), 0.1, 1, '{"many": 3.14159265358979323846264338327950288}'),
	(3, cs_vec(3, 4), 1e-400, 1, NULL),
	(4, cs_vec(4, 4), 1, 1, '{"whole": 12345678901234567890}');
SELECT chroma_mirror('regress_mn', collection => 'regress_m_numbers',
	metadata_columns => ARRAY['n', 'big', 'meta']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mn', '60 s');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mn'::regclass ORDER BY id::int;
SELECT id, metadata FROM chroma_get('regress_m_numbers') ORDER BY id;
-- The refused rows fixed; chroma_verify counts the rounded numbers equal.
UPDATE regress_mn SET n = 5 / 7.0 WHERE id = 3;
UPDATE regress_mn SET meta = '{"whole": 12345678901234567890.0}' WHERE id = 4;
SELECT chroma_flush('regress_mn', '60 s');
SELECT * FROM cs_mirror_state('regress_mn');
SELECT g.id, (g.metadata->>'n')::float8 = t.n::float8 AS n_as_float8, g.metadata->'whole' AS whole
FROM chroma_get('regress_m_numbers') AS g JOIN regress_mn AS t ON t.id::text = g.id
WHERE g.id IN ('3', '4') ORDER BY g.id;
-- chroma_verify sees a change: an integer beyond 2^53 by one, a float by more than a rounding.
SELECT chroma_update('regress_m_numbers', ARRAY['1'], NULL, NULL,
	ARRAY['{"big": 9007199254740992}'::jsonb]) AS changed;
SELECT rows, missing, extra, different FROM chroma_verify('regress_mn');
SELECT chroma_update('regress_m_numbers', ARRAY['1'], NULL, NULL,
	ARRAY['{"big": 9007199254740993, "n": 0.3333333333333333}'::jsonb]) AS restored;
SELECT rows, missing, extra, different FROM chroma_verify('regress_mn');
SELECT chroma_update('regress_m_numbers', ARRAY['1'], NULL, NULL,
	ARRAY['{"n": 0.33333333333333}'::jsonb]) AS changed;
SELECT rows, missing, extra, different FROM chroma_verify('regress_mn');
SELECT chroma_unmirror('regress_mn', drop_collection => true);
DROP TABLE regress_mn;
