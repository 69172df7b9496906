-- chroma_delete_where: deletes the records matching a metadata filter ("where") and/or a
-- document filter (where_document), and returns how many. The new server counts what a
-- delete removes and takes a limit (requests of chroma_sync.batch_size); the old one does
-- neither: the matching ids are read first (pages of 300), then deleted by id in batches.

SELECT chroma_create_collection('regress_delwhere') IS NOT NULL AS created;
SELECT chroma_upsert_query('regress_delwhere', $$
	SELECT i AS id, ARRAY[i, 1]::real[] AS embedding,
		CASE WHEN i % 10 = 0 THEN 'apple ' || i ELSE 'pear ' || i END AS document,
		jsonb_build_object('g', i % 3, 'i', i) AS metadata
	FROM generate_series(1, 1000) AS i$$) AS sent;

-- The records that must remain, computed by PostgreSQL, compared with the collection.
CREATE TABLE regress_dw_expected (id text PRIMARY KEY);
INSERT INTO regress_dw_expected SELECT i::text FROM generate_series(1, 1000) AS i;
CREATE FUNCTION regress_dw_check(OUT records bigint, OUT missing bigint, OUT extra bigint)
LANGUAGE sql AS $$
	SELECT count(e.id), count(*) FILTER (WHERE c.id IS NULL), count(*) FILTER (WHERE e.id IS NULL)
	FROM regress_dw_expected AS e
		FULL JOIN chroma_get('regress_delwhere', include_embeddings => false) AS c ON c.id = e.id
$$;

-- Several requests: 333 records in requests of at most 100 (new server), or ids read in
-- pages of 300 and deleted in batches of 100 (old server).
SET chroma_sync.batch_size = 100;
SELECT chroma_delete_where('regress_delwhere', '{"g": 0}') AS deleted;
DELETE FROM regress_dw_expected WHERE id::int % 3 = 0;
SELECT * FROM regress_dw_check();
-- Exactly a multiple of the request size: 180 records in requests of 90 (the last
-- deletes none), or ids deleted in batches of 90.
SET chroma_sync.batch_size = 90;
SELECT chroma_delete_where('regress_delwhere', '{"i": {"$gt": 700}}', '{"$contains": "pear"}') AS deleted;
DELETE FROM regress_dw_expected WHERE id::int > 700 AND id::int % 10 <> 0;
SELECT * FROM regress_dw_check();
RESET chroma_sync.batch_size;

-- where_document alone, and both filters; $regex, $not_contains, $and, $or.
SELECT chroma_delete_where('regress_delwhere', where_document => '{"$contains": "apple"}') AS deleted;
DELETE FROM regress_dw_expected WHERE id::int % 10 = 0;
SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$regex": "7$"}') AS deleted;
DELETE FROM regress_dw_expected WHERE id::int % 3 = 1 AND id LIKE '%7';
SELECT chroma_delete_where('regress_delwhere', where_document =>
	'{"$and": [{"$regex": "^pear [0-9]+$"}, {"$or": [{"$contains": "pear 1"}, {"$not_contains": "5"}]}]}',
	"where" => '{"i": {"$lte": 60}}') AS deleted;
DELETE FROM regress_dw_expected WHERE id::int <= 60 AND (id LIKE '1%' OR id NOT LIKE '%5%');
SELECT * FROM regress_dw_check();
-- Nothing matches: 0, and nothing changes.
SELECT chroma_delete_where('regress_delwhere', '{"g": 5}') AS deleted;
SELECT chroma_delete_where('regress_delwhere', where_document => '{"$contains": "plum"}') AS deleted;
-- {} is no filter: the other one applies alone.
SELECT chroma_delete_where('regress_delwhere', '{}', '{"$contains": "pear 692"}') AS deleted;
DELETE FROM regress_dw_expected WHERE id = '692';
SELECT * FROM regress_dw_check();

-- 3,000 matching records with work_mem at its minimum: on the old server their ids spill
-- to disk before they are deleted.
SELECT chroma_upsert_query('regress_delwhere', $$
	SELECT 'bulk' || i AS id, ARRAY[i, 2]::real[] AS embedding,
		jsonb_build_object('bulk', true) AS metadata
	FROM generate_series(1, 3000) AS i$$) AS sent;
SET work_mem = '64kB';
SELECT chroma_delete_where('regress_delwhere', '{"bulk": true}') AS deleted;
RESET work_mem;
SELECT * FROM regress_dw_check();

-- Bad input: an ERROR before anything is deleted.
SELECT chroma_count('regress_delwhere') AS before;
SELECT cs_try_detail($$SELECT chroma_delete_where('regress_delwhere')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', NULL, NULL)$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{}', '{}')$$);
SELECT cs_try($$SELECT chroma_delete_where(NULL, '{"g": 1}')$$);
SELECT cs_try($$SELECT chroma_delete_where('x', '{"g": 1}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_no_such_collection', '{"g": 1}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '[{"g": 1}]')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '"g"')$$);
SELECT cs_try_detail($$SELECT chroma_delete_where('regress_delwhere', where_document => '{"$contain": "pear"}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', where_document => '{"$matches": "pear"}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', where_document => '{"$contains": "pear", "$regex": "1"}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$contains": 1}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$not_regex": ""}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$and": []}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$or": {"$contains": "pear"}}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$or": ["pear"]}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '{"$and": [{"$contains": "pear"}, {"$or": [{"$regex": "1"}, {"$nope": "x"}]}]}')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '["$contains", "pear"]')$$);
SELECT cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": 1}', '"pear"')$$);
-- a filter Chroma itself refuses (the request that reaches it differs by server)
SELECT left(cs_try($$SELECT chroma_delete_where('regress_delwhere', '{"g": {"$bogus": 1}}')$$), 33) AS refused;
SELECT chroma_count('regress_delwhere') AS after;

SELECT chroma_delete_collection('regress_delwhere');
DROP FUNCTION regress_dw_check();
DROP TABLE regress_dw_expected;
