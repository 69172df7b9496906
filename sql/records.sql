-- Records: 2,000 records of 384 dimensions round-trip bit-identical (base64 and JSON
-- encodings), with hard documents and typed metadata; then add/update/upsert/delete
-- semantics, duplicate ids and counts.

SELECT chroma_create_collection('regress_records_b64') IS NOT NULL AS created;
SELECT chroma_create_collection('regress_records_json') IS NOT NULL AS created;

-- Documents that exercise JSON escaping and UTF-8.
CREATE TEMP TABLE docs (k int PRIMARY KEY, doc text NOT NULL);
INSERT INTO docs VALUES
	(0, 'plain ascii'),
	(1, E'double " quote, single \' quote, backslash \\ and two \\\\, slash /'),
	(2, E'tab\there, newline\nthere, cr\rthere, crlf\r\n, form feed\f, backspace\b'),
	(3, (SELECT string_agg(chr(c), '' ORDER BY c) FROM generate_series(1, 31) AS c) || chr(127)),
	(4, 'emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷'),
	(5, 'Ελληνικά Русский 日本語 中文 한국어 العربية עברית हिन्दी ไทย'),
	(6, E'json-looking {"a": [1, 2]} and escapes \\u0000 \\n \\" as text'),
	(7, E'combining e\u0301, nbsp\u00a0, zero\u200bwidth, bom\ufeff, ls\u2028ps\u2029, max \U0010FFFF'),
	(8, repeat('long document ', 5000)),
	(9, '');

-- Every record has 384 floats; record 1 starts with the values that break naive
-- encoders: -0, the smallest denormals, FLT_MAX, the smallest normals, 2^24 + 1, pi.
CREATE TEMP TABLE src AS
SELECT i,
	'rec-' || i AS id,
	CASE WHEN i = 1 THEN
		ARRAY['-0', '1e-45', '-1e-45', '3.4028235e38', '-3.4028235e38', '1.1754944e-38',
			'1.1754942e-38', '0', '0.1', '-1', '16777216', '3.1415927', '1e-40']::real[]
		|| cs_vec(i, 384 - 13)
	ELSE cs_vec(i, 384) END AS emb,
	(SELECT doc FROM docs WHERE k = i % 10) || CASE WHEN i % 10 = 9 THEN '' ELSE ' #' || i END AS doc,
	CASE WHEN i % 7 = 0 THEN NULL ELSE jsonb_build_object(
		'int', i, 'neg', -i, 'zero', 0,
		'float', i + 0.25, 'whole_float', i::numeric(10, 1), 'tenth', 0.1, 'exp', 1.25e-7, 'precise', 123456.789012345,
		'bool', i % 2 = 0,
		'str', 'str ' || i, 'empty_str', '',
		'ctl', (SELECT doc FROM docs WHERE k = 3), 'quote', (SELECT doc FROM docs WHERE k = 1),
		'unicode', 'ключ ' || i, 'ключ', 'значение',
		'int64_max', 9223372036854775807 - i % 2, 'int64_min', -9223372036854775808 + i % 2,
		'key with "quote" and \ backslash', true)
	END AS meta
FROM generate_series(1, 2000) AS i;

SELECT count(*) AS records, count(DISTINCT array_length(emb, 1)) AS dims,
	count(meta) AS with_metadata FROM src;

-- One call, 2,000 records, base64 on servers that support it (the default: auto).
SELECT chroma_upsert('regress_records_b64',
	array_agg(id ORDER BY i), array_agg(emb ORDER BY i),
	array_agg(doc ORDER BY i), array_agg(meta ORDER BY i)) AS sent
FROM src;
SELECT chroma_count('regress_records_b64') AS count;

CREATE TEMP TABLE got AS SELECT * FROM chroma_get('regress_records_b64');

-- Both ways: every source record is in Chroma, identical; nothing else is.
SELECT count(*) AS rows_read FROM got;
SELECT count(*) FILTER (WHERE g.id IS NULL) AS missing,
	count(*) FILTER (WHERE NOT cs_same_floats(s.emb, g.embedding)) AS different_embeddings,
	count(*) FILTER (WHERE g.document IS DISTINCT FROM s.doc) AS different_documents,
	count(*) FILTER (WHERE g.metadata IS DISTINCT FROM s.meta) AS different_metadata
FROM src AS s LEFT JOIN got AS g USING (id);
SELECT count(*) AS extra FROM got AS g LEFT JOIN src AS s USING (id) WHERE s.id IS NULL;

-- The special floats, bit by bit.
SELECT k, float4send(g.embedding[k]) AS bits, float4send(g.embedding[k]) = float4send(s.emb[k]) AS same
FROM got AS g JOIN src AS s USING (id), generate_series(1, 13) AS k
WHERE id = 'rec-1' ORDER BY k;

-- Each kind of document comes back identical.
SELECT i % 10 AS kind, bool_and(g.document = s.doc) AS identical, min(length(g.document)) AS min_length
FROM src AS s JOIN got AS g USING (id) GROUP BY 1 ORDER BY 1;

-- Metadata values keep their JSON types; integers stay integers and floats stay floats.
SELECT e.key, jsonb_typeof(e.value) AS sent_type,
	bool_and(jsonb_typeof(g.metadata->e.key) = jsonb_typeof(e.value)) AS same_type,
	bool_and((e.value::text ~ '[.eE]') = ((g.metadata->e.key)::text ~ '[.eE]')) AS same_number_kind,
	bool_and(g.metadata->e.key = e.value) AS same_value
FROM src AS s JOIN got AS g USING (id), jsonb_each(s.meta) AS e
GROUP BY 1, 2 ORDER BY e.key COLLATE "C";
SELECT metadata->'whole_float' AS whole_float, metadata->'int64_max' AS int64_max,
	metadata->'int64_min' AS int64_min, metadata->'tenth' AS tenth
FROM got WHERE id = 'rec-2';
SELECT count(*) AS null_metadata FROM got WHERE metadata IS NULL;

-- The same with floats sent as JSON numbers.
SET chroma_sync.embedding_encoding = json;
SELECT chroma_upsert('regress_records_json',
	array_agg(id ORDER BY i), array_agg(emb ORDER BY i),
	array_agg(doc ORDER BY i), array_agg(meta ORDER BY i)) AS sent
FROM src;
RESET chroma_sync.embedding_encoding;
TRUNCATE got;
INSERT INTO got SELECT * FROM chroma_get('regress_records_json');
SELECT count(*) AS rows_read FROM got;
SELECT count(*) FILTER (WHERE g.id IS NULL) AS missing,
	count(*) FILTER (WHERE NOT cs_same_floats(s.emb, g.embedding)) AS different_embeddings,
	count(*) FILTER (WHERE g.document IS DISTINCT FROM s.doc) AS different_documents,
	count(*) FILTER (WHERE g.metadata IS DISTINCT FROM s.meta) AS different_metadata
FROM src AS s LEFT JOIN got AS g USING (id);
SELECT count(*) AS extra FROM got AS g LEFT JOIN src AS s USING (id) WHERE s.id IS NULL;
SELECT count(*) AS different_types
FROM src AS s JOIN got AS g USING (id), jsonb_each(s.meta) AS e
WHERE jsonb_typeof(g.metadata->e.key) <> jsonb_typeof(e.value)
	OR (e.value::text ~ '[.eE]') <> ((g.metadata->e.key)::text ~ '[.eE]');

-- Small batches: the same records in requests of 7 (forced base64 this time).
SET chroma_sync.batch_size = 7;
SET chroma_sync.embedding_encoding = base64;
SELECT chroma_upsert('regress_records_json',
	array_agg(id ORDER BY i), array_agg(emb ORDER BY i), array_agg(doc ORDER BY i)) AS sent
FROM src WHERE i <= 100;
RESET chroma_sync.batch_size;
RESET chroma_sync.embedding_encoding;
SELECT count(*) AS different
FROM src AS s JOIN chroma_get('regress_records_json', ids => ARRAY(SELECT id FROM src WHERE i <= 100)) AS g
	USING (id)
WHERE NOT cs_same_floats(s.emb, g.embedding) OR g.document <> s.doc;

-- chroma_get's filters: ids, where, limit and offset.
SELECT id, document = (SELECT doc FROM src WHERE src.id = g.id) AS doc_ok
FROM chroma_get('regress_records_b64', ids => ARRAY['rec-5', 'rec-3', 'no-such-id']) AS g
ORDER BY id;
SELECT count(*) AS even FROM chroma_get('regress_records_b64', "where" => '{"bool": true}');
SELECT id FROM chroma_get('regress_records_b64',
	"where" => '{"$and": [{"int": {"$gte": 3}}, {"int": {"$lte": 6}}]}') ORDER BY id;
SELECT id FROM chroma_get('regress_records_b64', "where" => '{"unicode": "ключ 11"}');
SELECT count(*) AS page FROM chroma_get('regress_records_b64', "limit" => 10, "offset" => 1995);
SELECT count(*) AS page FROM chroma_get('regress_records_b64', "limit" => 25);
SELECT count(*) AS empty_where_is_no_filter FROM chroma_get('regress_records_b64', "where" => '{}');
SELECT count(*) AS none FROM chroma_get('regress_records_b64', ids => ARRAY[]::text[]);

SELECT chroma_delete_collection('regress_records_b64');
SELECT chroma_delete_collection('regress_records_json');

-- ===== add, update, upsert, delete semantics =====
SELECT chroma_create_collection('regress_records_sem') IS NOT NULL AS created;
SELECT chroma_upsert('regress_records_sem', ARRAY['a', 'b', 'c'],
	ARRAY[[1, 0, 0], [0, 1, 0], [0, 0, 1]]::real[],
	ARRAY['doc a', 'doc b', 'doc c'],
	ARRAY['{"k": "a", "n": 1}', '{"k": "b", "n": 2}', '{"k": "c", "n": 3}']::jsonb[]) AS upserted;

CREATE TEMP VIEW sem AS
	SELECT id, embedding, document, metadata FROM chroma_get('regress_records_sem') ORDER BY id COLLATE "C";
SELECT * FROM sem;

-- add skips ids that exist (a keeps everything) and adds new ones.
SELECT chroma_add('regress_records_sem', ARRAY['a', 'd'], ARRAY[[9, 9, 9], [4, 4, 4]]::real[],
	ARRAY['new a', 'doc d']) AS added;
SELECT * FROM sem;

-- update with embeddings => NULL keeps the embeddings; a NULL document keeps the document.
SELECT chroma_update('regress_records_sem', ARRAY['a', 'b'], NULL,
	documents => ARRAY['doc a v2', NULL]) AS updated;
SELECT * FROM sem;
-- update with embeddings replaces them; metadata is merged, a null value deletes a key.
SELECT chroma_update('regress_records_sem', ARRAY['b'], ARRAY[0, 2, 0]::real[],
	metadatas => ARRAY['{"n": null, "extra": true}']::jsonb[]) AS updated;
SELECT * FROM sem;
-- update of an id that does not exist changes nothing.
SELECT chroma_update('regress_records_sem', ARRAY['zz'], ARRAY[[5, 5, 5]]::real[]) AS updated;
SELECT chroma_count('regress_records_sem') AS count;
SELECT count(*) AS zz_rows FROM chroma_get('regress_records_sem', ids => ARRAY['zz']);

-- upsert: NULL document and NULL metadata keep what is stored; {} metadata too (merge).
SELECT chroma_upsert('regress_records_sem', ARRAY['c', 'e'], ARRAY[[0, 0, 3], [5, 5, 5]]::real[],
	ARRAY[NULL, 'doc e'], ARRAY[NULL, '{}']::jsonb[]) AS upserted;
SELECT * FROM sem;

-- Duplicate ids in one call: the last one wins, one record per id is sent.
SELECT chroma_upsert('regress_records_sem', ARRAY['dup', 'dup', 'dup'],
	ARRAY[[1, 1, 1], [2, 2, 2], [3, 3, 3]]::real[],
	ARRAY['first', 'second', 'third'],
	ARRAY['{"v": 1}', '{"v": 2}', '{"v": 3}']::jsonb[]) AS distinct_sent;
SELECT chroma_upsert('regress_records_sem', ARRAY['x', 'y', 'x', 'y', 'x'],
	ARRAY[[1, 0, 1], [2, 0, 2], [3, 0, 3], [4, 0, 4], [5, 0, 5]]::real[]) AS distinct_sent;
SELECT id, embedding, document, metadata FROM sem WHERE id IN ('dup', 'x', 'y');
SELECT chroma_add('regress_records_sem', ARRAY['w', 'w'], ARRAY[[7, 0, 0], [8, 0, 0]]::real[]) AS distinct_added;
SELECT embedding FROM sem WHERE id = 'w';

-- Empty id arrays send nothing.
SELECT chroma_upsert('regress_records_sem', ARRAY[]::text[], ARRAY[]::real[]) AS upserted;
SELECT chroma_delete('regress_records_sem', ARRAY[]::text[]) AS deleted;

-- delete returns the distinct ids sent, whether or not they existed.
SELECT chroma_count('regress_records_sem') AS count_before;
SELECT chroma_delete('regress_records_sem', ARRAY['a', 'a', 'no-such-id', 'dup']) AS deleted;
SELECT chroma_count('regress_records_sem') AS count_after;
SELECT id FROM sem;

-- A one-dimensional embedding is accepted for a single id.
SELECT chroma_upsert('regress_records_sem', ARRAY['one'], ARRAY[1.5, 2.5, 3.5]::real[]) AS upserted;
SELECT embedding FROM sem WHERE id = 'one';

-- Ids are any non-empty text.
SELECT chroma_upsert('regress_records_sem', ARRAY['id with spaces', 'ид-юникод-😀', E'quote"back\\slash', repeat('L', 300)],
	ARRAY[[1, 1, 0], [1, 2, 0], [1, 3, 0], [1, 4, 0]]::real[]) AS upserted;
SELECT id, embedding FROM sem WHERE embedding[1] = 1 AND embedding[3] = 0 AND id <> 'x' AND length(id) < 50;
SELECT length(id) AS long_id FROM sem WHERE length(id) > 50;
SELECT chroma_delete('regress_records_sem', ARRAY['id with spaces', 'ид-юникод-😀', E'quote"back\\slash', repeat('L', 300)]) AS deleted;
SELECT chroma_count('regress_records_sem') AS count;

-- Large documents: 6 MiB in one record (its JSON is far below the 32 MiB body limit),
-- and twelve of 3 MiB, which need several requests.
SELECT chroma_upsert('regress_records_sem', ARRAY['big'], ARRAY[9, 9, 9]::real[],
	ARRAY[repeat(E'ab"\n', 1536 * 1024)]) AS upserted;
SELECT length(document) AS length, document = repeat(E'ab"\n', 1536 * 1024) AS identical
FROM chroma_get('regress_records_sem', ids => ARRAY['big']);
SELECT chroma_upsert('regress_records_sem', array_agg('big' || i),
	array_agg(ARRAY[i, i, i]::real[]), array_agg(repeat(chr(64 + i), 3 * 1024 * 1024))) AS upserted
FROM generate_series(1, 12) AS i;
SELECT count(*) AS records, bool_and(document = repeat(chr(64 + substr(id, 4)::int), 3 * 1024 * 1024)) AS identical
FROM chroma_get('regress_records_sem', ids => ARRAY(SELECT 'big' || i FROM generate_series(1, 12) AS i));

SELECT chroma_delete_collection('regress_records_sem');
