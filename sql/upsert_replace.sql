-- Upserts merge by default (Chroma's rule: a NULL document keeps the stored one, a
-- metadata key absent from the new object survives, NULL metadata keeps the stored
-- metadata); with replace => true documents and metadata become exactly what was sent.
-- chroma_upsert and chroma_upsert_query, one batch and many, new and existing ids.

SELECT chroma_create_collection('regress_replace') IS NOT NULL AS created;

CREATE FUNCTION replace_state() RETURNS TABLE (id text, document text, metadata jsonb, embedding real[])
LANGUAGE sql AS $$
	SELECT id, document, metadata, embedding FROM chroma_get('regress_replace') ORDER BY id
$$;

SELECT chroma_upsert('regress_replace', ARRAY['a', 'b', 'c', 'd'],
	ARRAY[[1, 0], [0, 1], [1, 1], [2, 2]]::real[],
	ARRAY['doc a', 'doc b', 'doc c', 'doc d'],
	ARRAY['{"x": 1, "y": 2}', '{"x": 1}', '{"z": 3}', '{"k": "v"}']::jsonb[]) AS sent;

-- The default merges: a's document survives NULL and its "y" survives; b keeps its
-- metadata under NULL; c keeps everything when documents and metadatas are left out.
SELECT chroma_upsert('regress_replace', ARRAY['a', 'b'], ARRAY[[1, 0], [0, 1]]::real[],
	ARRAY[NULL, 'doc b2'], ARRAY['{"x": 5}', NULL]::jsonb[]) AS sent;
SELECT chroma_upsert('regress_replace', ARRAY['c'], ARRAY[3, 3]::real[]) AS sent;
SELECT chroma_upsert('regress_replace', ARRAY['d'], ARRAY[2, 2]::real[],
	replace => NULL) AS sent_replace_null_merges;
SELECT id, document, metadata FROM replace_state();

-- replace: a's NULL document is cleared and "y" goes; b's NULL metadata clears it; c
-- gets a new document and a metadata with none of its old keys; e is new.
SELECT chroma_upsert('regress_replace', ARRAY['a', 'b', 'c', 'e'],
	ARRAY[[1, 0], [0, 1], [4, 4], [5, 5]]::real[],
	ARRAY[NULL, 'doc b3', 'doc c3', NULL],
	ARRAY['{"x": 6}', NULL, '{"w": 1}', '{"new": true}']::jsonb[], replace => true) AS sent;
SELECT id, document, metadata, embedding FROM replace_state();

-- replace without documents and metadatas: every document and every key goes.
SELECT chroma_upsert('regress_replace', ARRAY['c', 'd'], ARRAY[[4, 4], [2, 2]]::real[],
	replace => true) AS sent;
SELECT id, document, metadata FROM replace_state() WHERE id IN ('c', 'd');

-- replace with documents but no metadatas: d keeps nothing but its new document.
SELECT chroma_upsert('regress_replace', ARRAY['d'], ARRAY[2, 2]::real[],
	documents => ARRAY['doc d2']) AS sent;
SELECT chroma_upsert('regress_replace', ARRAY['d'], ARRAY[2, 2]::real[],
	metadatas => ARRAY['{"m": 1, "n": 2}']::jsonb[]) AS sent;
SELECT chroma_upsert('regress_replace', ARRAY['d'], ARRAY[2, 2]::real[],
	documents => ARRAY['doc d3'], replace => true) AS sent;
SELECT id, document, metadata FROM replace_state() WHERE id = 'd';

-- Duplicate ids: the last occurrence wins, replaced exactly.
SELECT chroma_upsert('regress_replace', ARRAY['b', 'b'], ARRAY[[0, 1], [0, 2]]::real[],
	ARRAY['first', NULL], ARRAY['{"p": 1}', '{"q": 2}']::jsonb[], replace => true) AS sent;
SELECT id, document, metadata, embedding FROM replace_state() WHERE id = 'b';

-- A replacing upsert that cannot be sent deletes nothing: the wrong dimension is found
-- before the NULL-document record is cleared.
SELECT chroma_upsert('regress_replace', ARRAY['c'], ARRAY[4, 4]::real[],
	ARRAY['doc c4'], ARRAY['{"kept": 1}']::jsonb[]) AS sent;
SELECT cs_try($$SELECT chroma_upsert('regress_replace', ARRAY['c'], ARRAY[1, 2, 3]::real[],
	ARRAY[NULL::text], replace => true)$$) AS wrong_dimension;
SELECT id, document, metadata FROM replace_state() WHERE id = 'c';

-- chroma_upsert_query merges too by default ...
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'a' AS id, ARRAY[1, 0]::real[] AS embedding, 'doc a4' AS document,
		'{"x": 7, "y": 8}'::jsonb AS metadata$$) AS sent;
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'a' AS id, ARRAY[1, 0]::real[] AS embedding, NULL::text AS document,
		'{"x": 9}'::jsonb AS metadata$$) AS sent;
SELECT id, document, metadata FROM replace_state() WHERE id = 'a';

-- ... and replaces exactly with replace => true, with or without the optional columns.
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'a' AS id, ARRAY[1, 0]::real[] AS embedding, NULL::text AS document,
		'{"x": 10}'::jsonb AS metadata$$, replace => true) AS sent;
SELECT id, document, metadata FROM replace_state() WHERE id = 'a';
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'c' AS id, ARRAY[4, 4]::real[] AS embedding$$, true) AS sent;
SELECT id, document, metadata FROM replace_state() WHERE id = 'c';

-- Many batches (2 rows each), an id in two of them: the later row wins, exactly.
SET chroma_sync.batch_size = 2;
SELECT chroma_upsert_query('regress_replace', $$
	SELECT id, ARRAY[n, n]::real[] AS embedding, doc AS document, meta AS metadata
	FROM (VALUES (1, 'e', 'doc e1', '{"e1": 1, "keep": 1}'::jsonb),
		(2, 'f', 'doc f1', '{"f1": 1}'),
		(3, 'e', NULL, '{"keep": 2}'),
		(4, 'f', 'doc f2', NULL),
		(5, 'g', NULL, NULL)) AS v(n, id, doc, meta)
	ORDER BY n$$, replace => true) AS sent;
RESET chroma_sync.batch_size;
SELECT id, document, metadata, embedding FROM replace_state() WHERE id IN ('e', 'f', 'g');

-- 700 records (stored keys are read 300 ids at a time): each loses "old", keeps "n".
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'm' || i AS id, ARRAY[i, 1]::real[] AS embedding, 'doc ' || i AS document,
		jsonb_build_object('n', i, 'old', true) AS metadata
	FROM generate_series(1, 700) AS i$$) AS sent;
SELECT chroma_upsert_query('regress_replace', $$
	SELECT 'm' || i AS id, ARRAY[i, 1]::real[] AS embedding, 'doc ' || i AS document,
		jsonb_build_object('n', i) AS metadata
	FROM generate_series(1, 700) AS i$$, replace => true) AS sent;
SELECT count(*) AS records,
	count(*) FILTER (WHERE metadata = jsonb_build_object('n', substr(id, 2)::int)) AS exact,
	count(*) FILTER (WHERE metadata ? 'old') AS with_old_key
FROM chroma_get('regress_replace') WHERE id LIKE 'm%';

SELECT chroma_delete_collection('regress_replace') AS dropped;
DROP FUNCTION replace_state();
