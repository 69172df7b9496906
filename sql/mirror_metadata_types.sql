-- Metadata columns of many types: integers, numeric, float, bool, text, varchar, enum,
-- date and timestamps (ISO-8601 text), uuid (text). Floats are sent as floats even when
-- whole; a number with more digits than a double holds is sent as the nearest double (as
-- ::float8 rounds); numbers Chroma cannot hold (NaN, infinity, whole numbers beyond int64
-- that no double holds as written) fail their row with the reason.

CREATE TYPE regress_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE regress_mt (
	id int PRIMARY KEY,
	embedding real[],
	n_small smallint,
	n_int int,
	n_big bigint,
	n_num numeric,
	n_cents numeric(12, 2),
	f4 real,
	f8 double precision,
	flag boolean,
	label text,
	code varchar(8),
	mood regress_mood,
	day date,
	at timestamp,
	at_tz timestamptz,
	ref uuid
);
INSERT INTO regress_mt VALUES
	(1, cs_vec(1, 4), -32768, 2147483647, 9223372036854775807, 12345.678, 10.50, 0.1, 3,
		true, 'ключ 😀', 'abc', 'happy', '2024-02-29', '2024-02-29 13:14:15.123456',
		'2024-02-29 13:14:15+05:30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
	(2, cs_vec(2, 4), 0, -1, -9223372036854775808, -0.5, 0, -1.5e-10, 1e300,
		false, '', 'x', 'sad', '0001-01-01', '1999-12-31 23:59:59', '1970-01-01 00:00:00+00',
		'00000000-0000-0000-0000-000000000000'),
	(3, cs_vec(3, 4), NULL, NULL, NULL, 1e20, NULL, 3.4028235e38, -2.2250738585072014e-308,
		NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
	(4, cs_vec(4, 4), 1, 1, 1, 1, 1, 1, 1, true, 'plain', 'y', 'ok', '2000-01-01',
		'2000-01-01 00:00:00', '2000-01-01 00:00:00+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'),
	-- refused: not finite, beyond int64 and a double's digits; 14 is rounded to a double
	(10, cs_vec(10, 4), 1, 1, 1, 1, 1, 1, 'NaN', true, 'nan', 'a', 'ok', NULL, NULL, NULL, NULL),
	(11, cs_vec(11, 4), 1, 1, 1, 1, 1, '-Infinity', 1, true, 'inf', 'a', 'ok', NULL, NULL, NULL, NULL),
	(12, cs_vec(12, 4), 1, 1, 1, 'NaN', 1, 1, 1, true, 'nan', 'a', 'ok', NULL, NULL, NULL, NULL),
	(13, cs_vec(13, 4), 1, 1, 1, 12345678901234567890, 1, 1, 1, true, 'big', 'a', 'ok', NULL, NULL, NULL, NULL),
	(14, cs_vec(14, 4), 1, 1, 1, 0.12345678901234567890123, 1, 1, 1, true, 'precise', 'a', 'ok', NULL, NULL, NULL, NULL),
	(15, cs_vec(15, 4), 1, 1, 1, 1e400, 1, 1, 1, true, 'huge', 'a', 'ok', NULL, NULL, NULL, NULL);
SELECT chroma_mirror('regress_mt', collection => 'regress_m_types',
	metadata_columns => ARRAY['n_small', 'n_int', 'n_big', 'n_num', 'n_cents', 'f4', 'f8',
		'flag', 'label', 'code', 'mood', 'day', 'at', 'at_tz', 'ref']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mt', '60 s');
-- The expected metadata, computed by PostgreSQL (cs_compare renders it in UTC).
CREATE VIEW regress_mt_expected AS
SELECT id::text, embedding, NULL::text, jsonb_build_object('n_small', n_small, 'n_int', n_int,
	'n_big', n_big, 'n_num', CASE WHEN id = 14 THEN to_jsonb(n_num::float8) ELSE to_jsonb(n_num) END, 'n_cents', n_cents, 'f4', f4, 'f8', f8, 'flag', flag,
	'label', label, 'code', code, 'mood', mood, 'day', day, 'at', at, 'at_tz', at_tz, 'ref', ref)
FROM regress_mt;
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mt'::regclass ORDER BY id::int;
SELECT * FROM cs_compare('regress_m_types', 'SELECT * FROM regress_mt_expected WHERE id::int < 10 OR id::int = 14');
-- Row 14 holds the double nearest to its numeric, and chroma_verify counts it equal.
SELECT metadata->'n_num' AS n_num_14, (metadata->>'n_num')::float8 = 0.12345678901234567890123::float8 AS as_float8
FROM chroma_get('regress_m_types', ids => ARRAY['14']);
-- As Chroma holds them: whole floats and numerics with a scale stay floats.
SELECT id, metadata FROM chroma_get('regress_m_types') WHERE id IN ('1', '4') ORDER BY id::int;
SELECT id, metadata->'f4' AS f4, metadata->'n_cents' AS n_cents, metadata->'n_num' AS n_num
FROM chroma_get('regress_m_types') WHERE id IN ('2', '3') ORDER BY id::int;
-- The refused rows are fixed: every row is sent, and table and collection are equal
-- (chroma_verify compares row 14 as the double that was sent).
UPDATE regress_mt SET f8 = 2.5 WHERE id = 10;
UPDATE regress_mt SET f4 = -3.5 WHERE id = 11;
UPDATE regress_mt SET n_num = 7 WHERE id = 12;
UPDATE regress_mt SET n_num = 12345678901234567000 WHERE id = 13;
UPDATE regress_mt SET n_num = 1e300 WHERE id = 15;
SELECT chroma_flush('regress_mt', '60 s');
SELECT * FROM cs_mirror_state('regress_mt');
SELECT * FROM cs_compare('regress_m_types', 'SELECT * FROM regress_mt_expected');
SELECT id, metadata->'n_num' AS n_num FROM chroma_get('regress_m_types')
WHERE id IN ('12', '13', '14') ORDER BY id::int;
SELECT chroma_unmirror('regress_mt', drop_collection => true);
DROP VIEW regress_mt_expected;
DROP TABLE regress_mt;
DROP TYPE regress_mood;

-- chroma_upsert checks numbers the same way, and sends nothing when one is refused.
SELECT chroma_create_collection('regress_m_types_upsert') IS NOT NULL AS created;
SELECT cs_try($$SELECT chroma_upsert('regress_m_types_upsert', ARRAY['a'], ARRAY[1, 2]::real[], NULL, ARRAY['{"x": 1e-400}']::jsonb[])$$);
SELECT cs_try($$SELECT chroma_upsert('regress_m_types_upsert', ARRAY['a'], ARRAY[1, 2]::real[], NULL, ARRAY['{"x": 1e400}']::jsonb[])$$);
SELECT cs_try($$SELECT chroma_upsert('regress_m_types_upsert', ARRAY['a'], ARRAY[1, 2]::real[], NULL, ARRAY['{"x": 12345678901234567890}']::jsonb[])$$);
SELECT chroma_count('regress_m_types_upsert') AS nothing_sent;
SELECT chroma_upsert('regress_m_types_upsert', ARRAY['a'], ARRAY[1, 2]::real[], NULL,
	ARRAY['{"x": 1e20, "y": 2.50, "z": 9223372036854775807, "w": 0.12345678901234567890123}']::jsonb[]);
SELECT id, metadata FROM chroma_get('regress_m_types_upsert');
SELECT chroma_delete_collection('regress_m_types_upsert');
