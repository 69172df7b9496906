-- Privileges: connection settings are superuser-only, the API key is never displayed,
-- and the network functions need an explicit GRANT.
-- security_1.out: newer majors (seen on 17+) word the refusal to show a setting "permission denied to
-- examine" (15: "must be superuser or have privileges of pg_read_all_settings").

CREATE ROLE regress_cs_user LOGIN;
CREATE ROLE regress_cs_reader LOGIN;
GRANT pg_read_all_settings TO regress_cs_reader;

-- The superuser sets a key: nobody reads it back, not even the superuser.
SET chroma_sync.api_key = 'regress-secret-key';
SHOW chroma_sync.api_key;
SELECT current_setting('chroma_sync.api_key') AS current_setting;
SELECT count(*) AS in_pg_settings FROM pg_settings WHERE name = 'chroma_sync.api_key';
SELECT count(*) AS rows_showing_key FROM pg_settings WHERE setting LIKE '%regress-secret-key%'
	OR reset_val LIKE '%regress-secret-key%' OR boot_val LIKE '%regress-secret-key%';
SELECT count(*) AS in_show_all FROM pg_show_all_settings() WHERE name = 'chroma_sync.api_key';
RESET chroma_sync.api_key;
SHOW chroma_sync.api_key;

-- The key cannot be stored per role or per database (pg_db_role_setting is readable).
SELECT cs_try($$ALTER ROLE regress_cs_user SET chroma_sync.api_key = 'regress-secret-key'$$);
SELECT cs_try(format($$ALTER DATABASE %I SET chroma_sync.api_key = 'regress-secret-key'$$, current_database()));
SELECT cs_try(format($$ALTER ROLE regress_cs_user IN DATABASE %I SET chroma_sync.api_key = 'regress-secret-key'$$, current_database()));
SELECT count(*) AS stored_keys FROM pg_db_role_setting WHERE array_to_string(setconfig, ',') LIKE '%api_key%';

-- A member of pg_read_all_settings sees the key masked, and not in pg_settings.
SET chroma_sync.api_key = 'regress-secret-key';
SET ROLE regress_cs_reader;
SHOW chroma_sync.api_key;
SELECT current_setting('chroma_sync.api_key') AS current_setting;
SELECT count(*) AS in_pg_settings FROM pg_settings WHERE name = 'chroma_sync.api_key';
RESET ROLE;

-- An ordinary role cannot read it at all.
SET ROLE regress_cs_user;
SELECT cs_try('SHOW chroma_sync.api_key');
SELECT cs_try($$SELECT current_setting('chroma_sync.api_key')$$);
SELECT count(*) AS in_pg_settings FROM pg_settings WHERE name = 'chroma_sync.api_key';
RESET ROLE;
RESET chroma_sync.api_key;

-- An ordinary role cannot change where, how or as whom the server connects ...
SET ROLE regress_cs_user;
SELECT name, cs_try(format('SET %s = %L', name, value)) AS result
FROM (VALUES ('chroma_sync.url', 'http://127.0.0.1:9/'),
	('chroma_sync.api_key', 'stolen'),
	('chroma_sync.api_key_file', '/etc/passwd'),
	('chroma_sync.tls_verify', 'off'),
	('chroma_sync.ca_file', '/tmp/evil.pem'),
	('chroma_sync.tenant', 'other_tenant'),
	('chroma_sync.database', 'other_database')) AS s (name, value)
ORDER BY name;
SELECT cs_try($$SELECT set_config('chroma_sync.url', 'http://127.0.0.1:9/', false)$$);
SELECT cs_try($$ALTER ROLE regress_cs_user SET chroma_sync.url = 'http://127.0.0.1:9/'$$);
-- ... but may tune its own requests.
SELECT name, cs_try(format('SET %s = %L', name, value)) AS result
FROM (VALUES ('chroma_sync.batch_size', '50'),
	('chroma_sync.timeout', '5000'),
	('chroma_sync.connect_timeout', '1000'),
	('chroma_sync.embedding_encoding', 'json')) AS s (name, value)
ORDER BY name;
RESET ROLE;

-- No function the extension puts in its schema is executable without a GRANT
-- (internal helpers live in schema chroma_sync; chroma_sync_filter.match, called by
-- generated SQL as a table's owner, is executable by PUBLIC) ...
SELECT p.oid::regprocedure AS function
FROM pg_depend AS d JOIN pg_proc AS p ON p.oid = d.objid
	JOIN pg_namespace AS n ON n.oid = p.pronamespace
WHERE d.refclassid = 'pg_extension'::regclass AND d.classid = 'pg_proc'::regclass
	AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'chroma_sync')
	AND d.deptype = 'e' AND n.nspname NOT IN ('chroma_sync', 'chroma_sync_filter')
	AND has_function_privilege('regress_cs_user', p.oid, 'EXECUTE')
ORDER BY 1::text;

SET ROLE regress_cs_user;
SELECT cs_try('SELECT chroma_heartbeat()');
SELECT cs_try('SELECT chroma_server_info()');
SELECT cs_try($$SELECT chroma_create_collection('regress_security')$$);
SELECT cs_try('SELECT count(*) FROM chroma_list_collections()');
SELECT cs_try($$SELECT chroma_upsert('regress_security', ARRAY['a'], ARRAY[1, 2]::real[])$$);
SELECT cs_try($$SELECT chroma_upsert_query('regress_security', 'SELECT 1')$$);
SELECT cs_try($$SELECT chroma_count('regress_security')$$);
SELECT cs_try($$SELECT count(*) FROM chroma_query('regress_security', ARRAY[1, 2]::real[])$$);
SELECT cs_try($$SELECT chroma_delete_collection('regress_security')$$);
RESET ROLE;
SELECT count(*) AS created_by_user FROM chroma_list_collections() WHERE name = 'regress_security';

-- ... and works after one.
SELECT chroma_create_collection('regress_security') IS NOT NULL AS created;
GRANT EXECUTE ON FUNCTION chroma_heartbeat(), chroma_count(text),
	chroma_upsert(text, text[], real[], text[], jsonb[], boolean),
	chroma_get(text, text[], jsonb, int, int, boolean, jsonb) TO regress_cs_user;
SET ROLE regress_cs_user;
SELECT chroma_heartbeat() > 0 AS heartbeat;
SELECT chroma_upsert('regress_security', ARRAY['a'], ARRAY[1, 2]::real[]) AS upserted;
SELECT chroma_count('regress_security') AS count;
SELECT id, embedding FROM chroma_get('regress_security');
SELECT cs_try($$SELECT chroma_delete('regress_security', ARRAY['a'])$$);
RESET ROLE;

REVOKE EXECUTE ON FUNCTION chroma_heartbeat(), chroma_count(text),
	chroma_upsert(text, text[], real[], text[], jsonb[], boolean),
	chroma_get(text, text[], jsonb, int, int, boolean, jsonb) FROM regress_cs_user;
SET ROLE regress_cs_user;
SELECT cs_try('SELECT chroma_heartbeat()');
RESET ROLE;

SELECT chroma_delete_collection('regress_security');
DROP ROLE regress_cs_user;
DROP ROLE regress_cs_reader;
