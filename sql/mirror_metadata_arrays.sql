-- Array metadata columns of a mirror: 1-D arrays of integers, floats, numerics, text,
-- booleans and dates are sent as arrays on a server that accepts them (the new one;
-- float arrays stay floats, whole values included); on the old server every row with
-- an array value fails with the reason. Arrays Chroma cannot hold (empty, with NULL,
-- multidimensional, NaN) fail their row on both. Expected output:
-- mirror_metadata_arrays.out (new server) and mirror_metadata_arrays_1.out (old server).

SELECT (chroma_server_info())->'supports_metadata_arrays' AS server_supports_arrays;
CREATE TABLE regress_ma (
	id int PRIMARY KEY,
	embedding real[],
	ints int[],
	bigs bigint[],
	f8s double precision[],
	f4s real[],
	nums numeric[],
	words text[],
	flags boolean[],
	days date[],
	plain int
);
INSERT INTO regress_ma VALUES
	(1, cs_vec(1, 4), '{1,-2,3}', '{9223372036854775807}', '{1.5,2,-0.25}', '{0.1,3}',
		'{1.5,2.25}', '{a,"b,c",ключ}', '{true,false}', '{2024-02-29,2000-01-01}', 1),
	(2, cs_vec(2, 4), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2),
	(10, cs_vec(10, 4), '{}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 10),
	(11, cs_vec(11, 4), '{1,NULL}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 11),
	(12, cs_vec(12, 4), '{{1,2},{3,4}}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 12),
	(13, cs_vec(13, 4), NULL, NULL, '{1,NaN}', NULL, NULL, NULL, NULL, NULL, 13),
	(14, cs_vec(14, 4), NULL, NULL, NULL, NULL, '{1,2.5}', NULL, NULL, NULL, 14);
SELECT chroma_mirror('regress_ma', collection => 'regress_m_arrays',
	metadata_columns => ARRAY['ints', 'bigs', 'f8s', 'f4s', 'nums', 'words', 'flags', 'days', 'plain'])
	IS NOT NULL AS mirrored;
SELECT chroma_flush('regress_ma', '60 s');
SELECT id, error FROM chroma_sync.failed WHERE source = 'regress_ma'::regclass ORDER BY id::int;
SELECT id, metadata FROM chroma_get('regress_m_arrays') ORDER BY id::int;
-- Without the arrays every row is sent; the records are deleted before the collection
-- (the new server keeps array metadata of a deleted collection's records otherwise).
UPDATE regress_ma SET ints = NULL, bigs = NULL, f8s = NULL, f4s = NULL, nums = NULL,
	words = NULL, flags = NULL, days = NULL;
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT * FROM cs_compare('regress_m_arrays',
	'SELECT id::text, embedding, NULL::text, jsonb_build_object(''plain'', plain) FROM regress_ma');
DELETE FROM regress_ma;
SELECT chroma_flush('regress_ma', '60 s');
SELECT * FROM cs_mirror_state('regress_ma');
SELECT chroma_unmirror('regress_ma', drop_collection => true);
DROP TABLE regress_ma;
