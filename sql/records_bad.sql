-- Bad input: every call is refused with its exact error, and nothing reaches Chroma.
-- The collection holds base1 and base2 (3 dimensions); each bad call also carries a
-- valid record (probe) or changes base1, so a partial send would show.

SELECT chroma_create_collection('regress_bad') IS NOT NULL AS created;
SELECT chroma_upsert('regress_bad', ARRAY['base1', 'base2'], ARRAY[[1, 2, 3], [4, 5, 6]]::real[],
	ARRAY['orig', 'orig'], ARRAY['{"v": 1}', '{"v": 2}']::jsonb[]) AS upserted;

-- bad(sql): the error of sql, and whether the collection is exactly as before.
CREATE FUNCTION bad(q text, OUT error text, OUT nothing_sent boolean)
LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
	probes bigint;
	base1 text;
BEGIN
	error := cs_try(q);
	n := chroma_count('regress_bad');
	SELECT count(*) INTO probes FROM chroma_get('regress_bad', ids => ARRAY['probe', 'probe2']);
	SELECT document || ' ' || metadata::text || ' ' || embedding::text INTO base1
	FROM chroma_get('regress_bad', ids => ARRAY['base1']);
	nothing_sent := n = 2 AND probes = 0 AND base1 = 'orig {"v": 1} {1,2,3}';
END
$$;

-- ids
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', NULL], ARRAY[[1, 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', ''], ARRAY[[1, 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', NULL, ARRAY[[1, 1, 1]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY[['probe', 'probe2']], ARRAY[[1, 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_add('regress_bad', ARRAY['probe', NULL], ARRAY[[1, 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1', ''], NULL, ARRAY['changed', 'x'])$$);

-- array lengths that differ
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], ARRAY['one'])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{}', '{}', '{}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2], [3, 3, 3]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2', 'base1'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1', 'probe'], NULL, ARRAY['changed'])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], ARRAY[['a'], ['b']])$$);

-- embeddings: shape, emptiness, NULLs, non-finite values, dimension
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[[1, 1, 1]], [[2, 2, 2]]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe'], ARRAY[]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe'], NULL)$$);
SELECT * FROM bad($$SELECT chroma_add('regress_bad', ARRAY['probe'], NULL)$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, NULL, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1'], ARRAY[7, NULL, 7]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 'NaN', 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 'Infinity']]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[['-Infinity', 1, 1], [2, 2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1'], ARRAY[[1, 'NaN', 3]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1], [2, 2]]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1'], ARRAY[1, 2, 3, 4]::real[])$$);
SELECT * FROM bad($$SELECT chroma_add('regress_bad', ARRAY['probe'], ARRAY[1, 2, 3, 4, 5]::real[])$$);

-- metadata
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '[1, 2]']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '"text"']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '42']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', 'null']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"a": {"b": 1}}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"a": {}}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"": 1}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"#document": "x"}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"$and": 1}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"chroma:document": "x"}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"n": 9223372036854775808}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"n": -9223372036854775809}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"n": 1e309}']::jsonb[])$$);
SELECT * FROM bad(format($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 1}', '{"f": 1%s.5}']::jsonb[])$$, repeat('0', 400)));
-- a number written with a fraction is rounded to a double (metadata_numbers), except
-- beyond a double's range (also below its smallest value); a whole number is never rounded
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 0.33333333333333333333}', '{"f": 1e-400}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY['{"ok": 0.33333333333333333333}', '{"n": 12345678901234567890}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert_query('regress_bad', 'SELECT id, ARRAY[1, 1, 1]::real[] AS embedding, jsonb_build_object(''f'', CASE WHEN id = ''probe2'' THEN 1e-400 ELSE 1 / 3.0 END) AS metadata FROM unnest(ARRAY[''probe'', ''probe2'']) AS id')$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad', ARRAY['base1'], NULL, NULL, ARRAY['{"v": 5, "chroma:x": 1}']::jsonb[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], NULL, ARRAY[['{}'], ['{}']]::jsonb[])$$);

-- collection names and the collection argument
SELECT * FROM bad($$SELECT chroma_upsert(NULL, ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('ab', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress bad', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress..bad', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('127.0.0.1', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('-regress_bad', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad/../x', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_count('regress_bad?x=1')$$);
SELECT * FROM bad($$SELECT chroma_create_collection('regress_bad_space', space => 'hamming')$$);

-- a collection that does not exist (42704), for every function
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad_missing', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_add('regress_bad_missing', ARRAY['probe'], ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_update('regress_bad_missing', ARRAY['probe'], NULL, ARRAY['x'])$$);
SELECT * FROM bad($$SELECT chroma_delete('regress_bad_missing', ARRAY['base1'])$$);
SELECT * FROM bad($$SELECT chroma_count('regress_bad_missing')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad_missing')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad_missing', ARRAY[1, 1, 1]::real[])$$);
SELECT * FROM bad($$SELECT chroma_upsert_query('regress_bad_missing', 'SELECT ''probe'' AS id, ARRAY[1, 1, 1]::real[] AS embedding')$$);
SELECT count(*) AS missing_not_created FROM chroma_list_collections() WHERE name = 'regress_bad_missing';

-- delete
SELECT * FROM bad($$SELECT chroma_delete('regress_bad', NULL)$$);
SELECT * FROM bad($$SELECT chroma_delete('regress_bad', ARRAY['base1', NULL])$$);
SELECT * FROM bad($$SELECT chroma_delete('regress_bad', ARRAY['base1', ''])$$);
SELECT * FROM bad($$SELECT chroma_delete(NULL, ARRAY['base1'])$$);

-- get and query arguments
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', ids => ARRAY['base1', NULL])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', "where" => '[1]')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', "where" => '"v"')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', "limit" => -1)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', "offset" => -1)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_get(NULL)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1, 1]::real[], n_results => 0)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1, 1]::real[], n_results => -5)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', NULL)$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, NULL, 1]::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 'NaN', 1]::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1, '-Infinity']::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[]::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[[1, 1, 1]]::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1]::real[])$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1, 1]::real[], "where" => '[]')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query(NULL, ARRAY[1, 1, 1]::real[])$$);

-- a filter Chroma itself refuses: its message is in the detail
SELECT * FROM bad($$SELECT count(*) FROM chroma_get('regress_bad', "where" => '{"v": {"$bogus": 1}}')$$);
SELECT * FROM bad($$SELECT count(*) FROM chroma_query('regress_bad', ARRAY[1, 1, 1]::real[], "where" => '{"$nor": []}')$$);

-- a record too large for one request (bodies stay under 32 MiB)
SELECT * FROM bad($$SELECT chroma_upsert('regress_bad', ARRAY['probe', 'probe2'], ARRAY[[1, 1, 1], [2, 2, 2]]::real[], ARRAY['small', repeat('x', 33 * 1024 * 1024)])$$);

-- After all that, the collection still works.
SELECT chroma_upsert('regress_bad', ARRAY['probe'], ARRAY[1, 1, 1]::real[]) AS upserted;
SELECT chroma_count('regress_bad') AS count;
SELECT chroma_delete_collection('regress_bad');
