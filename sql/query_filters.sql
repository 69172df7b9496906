-- where_document on chroma_get and chroma_query (filters on the documents' text), ids on
-- chroma_query (restricts the candidates); bad filters are refused before anything is sent.

SELECT chroma_create_collection('regress_filters') IS NOT NULL AS created;
-- p1 .. p12 on a line at x = 1 .. 12
SELECT chroma_upsert('regress_filters',
	array_agg('p' || i ORDER BY i),
	array_agg(ARRAY[i, 0]::real[] ORDER BY i),
	array_agg(CASE i % 4 WHEN 0 THEN 'apple pie ' WHEN 1 THEN 'Banana bread '
		WHEN 2 THEN 'cherry tart ' ELSE 'crème brûlée ' END || i ORDER BY i),
	array_agg(jsonb_build_object('x', i, 'parity', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END)
		ORDER BY i))
	AS upserted
FROM generate_series(1, 12) AS i;
-- one record without a document
SELECT chroma_upsert('regress_filters', ARRAY['nodoc'], ARRAY[100, 0]::real[]) AS upserted;

-- ids of a get (p1 .. p12, nodoc)
CREATE FUNCTION got(where_document jsonb, "where" jsonb DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(id, ' ' ORDER BY length(id), id), '(none)')
	FROM chroma_get('regress_filters', "where" => "where", where_document => where_document,
		include_embeddings => false)
$$;

-- Each operator (Chroma's $contains and $regex are case-sensitive); the record without a
-- document matches every $not_contains and $not_regex, and no $contains or $regex
SELECT got('{"$contains": "apple"}') AS contains_apple;
SELECT got('{"$contains": "Apple"}') AS contains_apple_capital;
SELECT got('{"$contains": "brûlée"}') AS contains_non_ascii;
SELECT got('{"$not_contains": "a"}') AS not_contains_a;
SELECT got('{"$regex": "^[Bb]anana bread [0-9]$"}') AS regex;
SELECT got('{"$not_regex": "[0-9]{2}$"}') AS not_regex;
SELECT got('{"$regex": ".*"}') AS regex_any;
SELECT got('{"$contains": ""}') AS contains_empty;
-- $and, $or, nested; a list of one filter
SELECT got('{"$and": [{"$contains": "r"}, {"$not_contains": "tart"}]}') AS "and";
SELECT got('{"$or": [{"$contains": "apple"}, {"$regex": "^c.*1$"}]}') AS "or";
SELECT got('{"$or": [{"$and": [{"$contains": "pie"}, {"$regex": "1"}]}, {"$contains": "bread 5"}]}') AS nested;
SELECT got('{"$and": [{"$contains": "pie"}]}') AS list_of_one;
-- with "where"; {} and NULL are no filter
SELECT got('{"$contains": "r"}', '{"parity": "even"}') AS with_where;
SELECT count(*) AS empty_object_is_no_filter FROM chroma_get('regress_filters', where_document => '{}');
SELECT count(*) AS null_is_no_filter FROM chroma_get('regress_filters', where_document => NULL);
-- with ids, limit and offset
SELECT string_agg(id, ' ' ORDER BY id) AS with_ids FROM chroma_get('regress_filters',
	ids => ARRAY['p1', 'p4', 'p5', 'p8', 'nodoc'], where_document => '{"$contains": "a"}');
SELECT count(*) AS with_limit FROM chroma_get('regress_filters', "limit" => 2, "offset" => 1,
	where_document => '{"$contains": "e"}');

-- chroma_query: nearest first among the records that match
SELECT id, round(distance::numeric, 2) AS distance, document
FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[], n_results => 3,
	where_document => '{"$contains": "apple"}');
SELECT id, round(distance::numeric, 2) AS distance FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[], n_results => 3,
	"where" => '{"parity": "odd"}', where_document => '{"$not_regex": "^Banana"}');
SELECT count(*) AS no_match FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	where_document => '{"$contains": "pizza"}');

-- ids restricts the candidates: nearest among them, unknown ids are no candidates
SELECT id, round(distance::numeric, 2) AS distance FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[], n_results => 2,
	ids => ARRAY['p1', 'p3', 'p10', 'p12']);
SELECT id, round(distance::numeric, 2) AS distance FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	ids => ARRAY['p12', 'nope', 'p1', 'p12']);
SELECT count(*) AS only_unknown FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	ids => ARRAY['nope', 'neither']);
SELECT count(*) AS empty_ids FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	ids => ARRAY[]::text[]);
SELECT count(*) AS null_ids_no_restriction FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	n_results => 20, ids => NULL);
SELECT id FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[],
	"where" => '{"parity": "even"}', where_document => '{"$contains": "a"}',
	ids => ARRAY['p2', 'p3', 'p4', 'p6', 'p8', 'nope']);
-- positional calls of the earlier signature keep working
SELECT id FROM chroma_query('regress_filters', ARRAY[6.2, 0]::real[], 1, '{"parity": "odd"}');

-- Bad filters: SQLSTATE, message, detail and hint; nothing is sent
CREATE FUNCTION try_full(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
		hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
		|| coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END
$$;
CREATE FUNCTION bad_get(where_document text) RETURNS text
LANGUAGE sql AS $$
	SELECT try_full(format('SELECT count(*) FROM chroma_get(%L, where_document => %L)',
		'regress_filters', where_document))
$$;
-- unknown operators
SELECT bad_get('{"$matches": "x"}');
SELECT bad_get('{"$and": [{"$contains": "a"}, {"$or": [{"$regex": "b"}, {"$like": "c%"}]}]}');
SELECT bad_get('{"lang": "en"}');
SELECT bad_get('{"$contains": "a", "$regex": "b"}');
SELECT bad_get('{"$and": [{}]}');
-- wrong value types
SELECT bad_get('{"$contains": 1}');
SELECT bad_get('{"$not_contains": null}');
SELECT bad_get('{"$regex": ["a"]}');
SELECT bad_get('{"$or": [{"$not_regex": {"x": 1}}]}');
SELECT bad_get('{"$and": {"$contains": "a"}}');
SELECT bad_get('{"$or": "a"}');
SELECT bad_get('{"$or": [{"$contains": "a"}, "b"]}');
-- empty lists
SELECT bad_get('{"$and": []}');
SELECT bad_get('{"$or": [{"$and": []}]}');
-- not an object
SELECT bad_get('"apple"');
SELECT bad_get('["apple"]');
SELECT bad_get('3');
SELECT bad_get('null');
-- chroma_query checks the same way, before looking the collection up
SELECT try_full($$SELECT count(*) FROM chroma_query('regress_filters_missing', ARRAY[1, 0]::real[],
	where_document => '{"$or": []}')$$);
SELECT try_full($$SELECT count(*) FROM chroma_get('regress_filters_missing',
	where_document => '{"$contains": 7}')$$);
-- a regular expression Chroma cannot compile: refused by the server
SELECT cs_try($$SELECT count(*) FROM chroma_get('regress_filters', where_document => '{"$regex": "("}')$$);
-- bad ids
SELECT try_full($$SELECT count(*) FROM chroma_query('regress_filters', ARRAY[1, 0]::real[],
	ids => ARRAY['p1', NULL])$$);
SELECT try_full($$SELECT count(*) FROM chroma_query('regress_filters', ARRAY[1, 0]::real[],
	ids => ARRAY[['p1', 'p2']])$$);

DROP FUNCTION got(jsonb, jsonb);
DROP FUNCTION bad_get(text);
DROP FUNCTION try_full(text);
SELECT chroma_delete_collection('regress_filters');
