-- Exactness of a mirror: float32 bits (-0, denormals, extremes), documents cleared by
-- NULL, metadata from jsonb and scalar columns of many types, keys removed in Postgres
-- removed in Chroma, values set to NULL removed; chroma_verify agrees in a session whose
-- settings (TimeZone, IntervalStyle, extra_float_digits) differ from the worker's.

SET TimeZone = 'America/Sao_Paulo';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;

CREATE TABLE regress_mx (
	id int PRIMARY KEY,
	embedding real[],
	doc text,
	meta jsonb,
	n int,
	big bigint,
	score float8,
	flag boolean,
	label text,
	at timestamp,
	day date,
	ts timestamptz,
	price numeric,
	span interval
);
INSERT INTO regress_mx
SELECT i,
	CASE WHEN i = 1 THEN
		ARRAY['-0', '1e-45', '-1e-45', '3.4028235e38', '-3.4028235e38', '1.1754944e-38',
			'1.1754942e-38', '0', '0.1', '-1', '16777216', '3.1415927']::real[]
	ELSE cs_vec(i, 12) END,
	CASE WHEN i % 5 = 0 THEN NULL ELSE E'doc "' || i || E'"\n' END,
	CASE WHEN i % 4 = 0 THEN NULL ELSE jsonb_build_object('j_int', i, 'j_str', 'v' || i,
		'j_bool', i % 2 = 0, 'j_float', i + 0.5, 'j_null', NULL) END,
	i * 10, 9007199254740993 + i, i / 3.0, i % 3 = 0, 'label ' || i,
	timestamp '2024-02-29 12:34:56.789' + i * interval '1 day',
	date '2024-01-01' + i,
	timestamptz '2024-06-30 23:59:59+00' + i * interval '1 hour',
	1234567.25 * i,
	i * interval '1 day 2 hours'
FROM generate_series(1, 40) AS i;

-- What the collection must hold (cs_compare runs it with the worker's settings).
CREATE VIEW regress_mx_expected AS
SELECT id::text, embedding, doc,
	coalesce(meta, '{}') || jsonb_build_object('n', n, 'big', big, 'score', score,
		'flag', flag, 'label', label, 'at', at, 'day', day,
		'ts', ts, 'price', price, 'span', span) AS metadata
FROM regress_mx WHERE embedding IS NOT NULL;

SELECT chroma_mirror('regress_mx', collection => 'regress_m_exact', document_column => 'doc',
	metadata_columns => ARRAY['meta', 'n', 'big', 'score', 'flag', 'label', 'at', 'day', 'ts',
		'price', 'span']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT * FROM cs_compare('regress_m_exact', 'SELECT * FROM regress_mx_expected');
-- The first record, every float bit checked above; its metadata as Chroma holds it.
SELECT cs_float_bytes(embedding) = cs_float_bytes(ARRAY['-0', '1e-45', '-1e-45',
	'3.4028235e38', '-3.4028235e38', '1.1754944e-38', '1.1754942e-38', '0', '0.1', '-1',
	'16777216', '3.1415927']::real[]) AS same_bits,
	document, jsonb_pretty(metadata) AS metadata
FROM chroma_get('regress_m_exact', ARRAY['1']);
SELECT synced FROM chroma_sync.status WHERE source = 'regress_mx'::regclass;

-- The keys the mirror has sent (a row lacking one sends it as null).
SELECT array(SELECT unnest(metadata_keys) ORDER BY 1) AS keys
FROM chroma_sync.mirror WHERE source = 'regress_mx'::regclass;

-- Documents: set to NULL (cleared in Chroma), set again, changed.
UPDATE regress_mx SET doc = NULL WHERE id IN (1, 2);
UPDATE regress_mx SET doc = 'back again' WHERE id = 5;
UPDATE regress_mx SET doc = '' WHERE id = 3;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT * FROM cs_compare('regress_m_exact', 'SELECT * FROM regress_mx_expected');
SELECT id, document IS NULL AS no_document, document FROM chroma_get('regress_m_exact', ARRAY['1', '2', '3', '5'])
ORDER BY id;

-- Metadata: a jsonb key removed, a jsonb key set to JSON null, scalar columns set to
-- NULL, everything NULL, a key added.
UPDATE regress_mx SET meta = meta - 'j_str' WHERE id = 6;
UPDATE regress_mx SET meta = jsonb_set(meta, '{j_int}', 'null') WHERE id = 7;
UPDATE regress_mx SET label = NULL, ts = NULL, score = NULL WHERE id = 9;
UPDATE regress_mx SET meta = NULL, n = NULL, big = NULL, score = NULL, flag = NULL,
	label = NULL, at = NULL, day = NULL, ts = NULL, price = NULL, span = NULL WHERE id = 10;
UPDATE regress_mx SET meta = meta || '{"j_new": "added"}' WHERE id = 11;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT * FROM cs_compare('regress_m_exact', 'SELECT * FROM regress_mx_expected');
SELECT id, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(metadata) AS k) AS keys
FROM chroma_get('regress_m_exact', ARRAY['6', '7', '9', '10', '11']) ORDER BY id;
SELECT array(SELECT unnest(metadata_keys) ORDER BY 1) AS keys
FROM chroma_sync.mirror WHERE source = 'regress_mx'::regclass;

-- Values come back: the keys reappear.
UPDATE regress_mx SET label = 'label again', n = 0 WHERE id = 10;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT metadata FROM chroma_get('regress_m_exact', ARRAY['10']);

-- Embeddings changed to other special values; -0 and 0 are different bits.
UPDATE regress_mx SET embedding = array_fill('-0'::real, ARRAY[12]) WHERE id = 12;
UPDATE regress_mx SET embedding = array_fill('0'::real, ARRAY[12]) WHERE id = 13;
UPDATE regress_mx SET embedding = array_fill('1e-45'::real, ARRAY[12]) WHERE id = 14;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT * FROM cs_compare('regress_m_exact', 'SELECT * FROM regress_mx_expected');
-- Setting -0 where 0 was is a change: it is queued and sent.
BEGIN;
UPDATE regress_mx SET embedding = array_fill('-0'::real, ARRAY[12]) WHERE id = 13;
SELECT count(*) AS queued FROM chroma_sync.queue;
COMMIT;
SELECT chroma_flush('regress_mx', '60 s');
SELECT * FROM cs_mirror_state('regress_mx');
SELECT cs_float_bytes(embedding) = cs_float_bytes(array_fill('-0'::real, ARRAY[12])) AS minus_zero
FROM chroma_get('regress_m_exact', ARRAY['13']);
SELECT synced, failed FROM chroma_sync.status WHERE source = 'regress_mx'::regclass;

SELECT chroma_unmirror('regress_mx', drop_collection => true);
DROP VIEW regress_mx_expected;
DROP TABLE regress_mx;

-- An embedding column of another type that casts to real[]: double precision[].
CREATE TABLE regress_mx8 (id int PRIMARY KEY, vec float8[], score float8);
INSERT INTO regress_mx8
SELECT i, ARRAY[i / 7.0, -i / 3.0, 1e-40, 1e30]::float8[], i / 7.0 FROM generate_series(1, 10) AS i;
SELECT chroma_mirror('regress_mx8', collection => 'regress_m_exact8', embedding_column => 'vec',
	metadata_columns => ARRAY['score']) IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_mx8', '60 s');
SELECT * FROM cs_mirror_state('regress_mx8');
SELECT * FROM cs_compare('regress_m_exact8',
	'SELECT id::text, vec::real[], NULL::text, jsonb_build_object(''score'', score) FROM regress_mx8');
-- A whole-valued double beyond the 64-bit integer range is a valid float metadata value.
UPDATE regress_mx8 SET score = 1e300 WHERE id = 1;
UPDATE regress_mx8 SET score = -1e19 WHERE id = 2;
SELECT chroma_flush('regress_mx8', '60 s');
SELECT * FROM cs_mirror_state('regress_mx8');
SELECT * FROM cs_compare('regress_m_exact8',
	'SELECT id::text, vec::real[], NULL::text, jsonb_build_object(''score'', score) FROM regress_mx8');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_mx8'::regclass ORDER BY id;
SELECT chroma_unmirror('regress_mx8', drop_collection => true);
DROP TABLE regress_mx8;

RESET TimeZone;
RESET IntervalStyle;
RESET extra_float_digits;
