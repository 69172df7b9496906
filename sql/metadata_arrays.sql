-- Array metadata values. Servers differ here (documented): the new server accepts
-- homogeneous arrays of strings, integers, floats or booleans; the old one refuses every
-- array, so the extension refuses them before sending. Expected output:
-- metadata_arrays.out (new server) and metadata_arrays_1.out (old server).

SELECT chroma_create_collection('regress_arrays') IS NOT NULL AS created;
SELECT (chroma_server_info())->'supports_metadata_arrays' AS server_supports_arrays;

-- arrays_try(sql): the error of sql, and whether nothing reached the collection.
CREATE FUNCTION arrays_try(q text, OUT error text, OUT nothing_sent boolean)
LANGUAGE plpgsql AS $$
BEGIN
	error := cs_try(q);
	nothing_sent := chroma_count('regress_arrays') = 0;
END
$$;

-- Refused everywhere: mixed types, nested arrays, objects in arrays, nulls, empty arrays.
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [1, "two"]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [1, 2.5]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [true, 1]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [[1], [2]]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [{"b": 1}]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": ["x", null]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": []}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [9223372036854775808]}']::jsonb[])$$);
-- an integer and a whole number beyond int64 sent as a float; a number beyond a double's range
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [1, 1e20]}']::jsonb[])$$);
SELECT * FROM arrays_try($$SELECT chroma_upsert('regress_arrays', ARRAY['p1', 'p2'], ARRAY[[1, 1], [2, 2]]::real[], NULL, ARRAY['{"ok": "x"}', '{"a": [0.5, 1e-400]}']::jsonb[])$$);

-- Homogeneous arrays: accepted and read back unchanged by the new server only (a float
-- with more digits than a double holds as that double).
SELECT cs_try($$SELECT chroma_upsert('regress_arrays', ARRAY['s', 'i', 'f', 'b'],
	ARRAY[[1, 1], [2, 2], [3, 3], [4, 4]]::real[], NULL,
	ARRAY['{"a": ["x", "ключ", "😀"]}', '{"a": [1, -2, 9223372036854775807]}',
		'{"a": [0.5, 2.0, 1.25e-7, 0.33333333333333333333]}', '{"a": [true, false]}']::jsonb[])$$) AS result;
SELECT id, metadata FROM chroma_get('regress_arrays') ORDER BY id COLLATE "C";

-- Records are deleted before their collection: the new server keeps array metadata
-- of a deleted collection's records and shows it on records of later collections.
SELECT chroma_delete('regress_arrays', ARRAY['s', 'i', 'f', 'b']) AS deleted;
SELECT chroma_delete_collection('regress_arrays');
