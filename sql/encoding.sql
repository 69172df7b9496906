-- A database whose encoding is not UTF-8: ids, documents and metadata go to Chroma as
-- UTF-8 and come back in the database encoding.

SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_cs_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c regress_cs_latin1
SET client_encoding = 'UTF8';
CREATE EXTENSION chroma_sync;
SELECT getdatabaseencoding();

SELECT chroma_create_collection('regress_latin1', metadata => '{"clé": "été"}') IS NOT NULL AS created;
SELECT metadata FROM chroma_list_collections() WHERE name = 'regress_latin1';
SELECT chroma_upsert('regress_latin1', ARRAY['id-café', 'id-ÿ'], ARRAY[[1, 2], [3, 4]]::real[],
	ARRAY['crème brûlée ½ «guillemets» ÿ', E'tab\t"quote" \\ ©'],
	ARRAY['{"clé": "valeur été", "n": 1}', '{"ß": "Æ"}']::jsonb[]) AS upserted;
SELECT id, embedding, document, metadata FROM chroma_get('regress_latin1') ORDER BY id;
SELECT id, document FROM chroma_get('regress_latin1', ids => ARRAY['id-café']);
SELECT id FROM chroma_get('regress_latin1', "where" => '{"clé": "valeur été"}');
SELECT id, distance, document FROM chroma_query('regress_latin1', ARRAY[1, 2]::real[], n_results => 1);
SELECT chroma_upsert_query('regress_latin1',
	$$SELECT 'q-é' AS id, ARRAY[5, 6]::real[] AS embedding, 'doc à' AS document, '{"k": "ü"}'::jsonb AS metadata$$) AS sent;
SELECT id, document, metadata FROM chroma_get('regress_latin1', ids => ARRAY['q-é']);

-- A document the database encoding cannot hold is refused on the way back, clearly.
\c :regress_db
SELECT chroma_upsert('regress_latin1', ARRAY['emoji'], ARRAY[7, 8]::real[], ARRAY['smile 😀']) AS upserted;
\c regress_cs_latin1
SET client_encoding = 'UTF8';
DO $$
BEGIN
	PERFORM * FROM chroma_get('regress_latin1', ids => ARRAY['emoji']);
	RAISE NOTICE 'no error';
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE '%', SQLSTATE;
END
$$;
SELECT chroma_delete('regress_latin1', ARRAY['id-café', 'id-ÿ', 'q-é', 'emoji']) AS deleted;
SELECT chroma_count('regress_latin1') AS count;
SELECT chroma_delete_collection('regress_latin1');

\c :regress_db
DROP DATABASE regress_cs_latin1;
