-- Server information, heartbeat, settings validation, and an unreachable server.
-- server_1.out: newer majors (seen on 17+) word a setting's range "(100 ms .. 3600000 ms)".

SELECT chroma_heartbeat() > 0 AS heartbeat_positive;

SELECT info->>'url' = current_setting('chroma_sync.url') AS url_is_the_setting,
	info->>'tenant' AS tenant,
	info->>'database' AS database,
	info->'reachable' AS reachable,
	(info->>'max_batch_size')::int > 0 AS has_max_batch_size,
	jsonb_typeof(info->'supports_base64_encoding') AS base64_flag,
	jsonb_typeof(info->'supports_metadata_arrays') AS arrays_flag
FROM chroma_server_info() AS info;

-- Connection and request settings, and their defaults (the URL is the test server's).
SELECT name, setting, unit, context, vartype
FROM pg_settings
WHERE name IN ('chroma_sync.tenant', 'chroma_sync.database', 'chroma_sync.api_key',
	'chroma_sync.api_key_file', 'chroma_sync.tls_verify', 'chroma_sync.ca_file',
	'chroma_sync.batch_size', 'chroma_sync.timeout', 'chroma_sync.connect_timeout',
	'chroma_sync.embedding_encoding')
ORDER BY name;

-- Values the settings refuse.
SELECT cs_try($$SET chroma_sync.url = 'ftp://127.0.0.1/'$$);
SELECT cs_try($$SET chroma_sync.url = 'http://bad host/'$$);
SELECT cs_try($$SET chroma_sync.url = ''$$);
SELECT cs_try($$SET chroma_sync.tenant = ''$$);
SELECT cs_try($$SET chroma_sync.url = 'http://user:secret@127.0.0.1:8000'$$);
SELECT cs_try($$SET chroma_sync.url = 'https:///api'$$);
SELECT cs_try($$SET chroma_sync.tenant = '..'$$);
SELECT cs_try($$SET chroma_sync.database = E'a\nb'$$);
SELECT cs_try($$SET chroma_sync.batch_size = 0$$);
SELECT cs_try($$SET chroma_sync.timeout = 10$$);
SELECT cs_try($$SET chroma_sync.embedding_encoding = 'hex'$$);
SELECT cs_try($$SET chroma_sync.api_key = E'abc\tdef'$$);
SELECT cs_try($$SET chroma_sync.no_such_setting = 1$$);

-- A trailing slash on the URL is harmless.
SELECT set_config('chroma_sync.url', current_setting('chroma_sync.url') || '/', false) IS NOT NULL AS set;
SELECT chroma_heartbeat() > 0 AS heartbeat_with_trailing_slash;
RESET chroma_sync.url;

-- Nothing listens on port 1: info says so, and calls fail with class 08 naming the URL.
SET chroma_sync.url = 'http://127.0.0.1:1';
SET chroma_sync.connect_timeout = 2000;
SELECT info->'reachable' AS reachable, info ? 'max_batch_size' AS has_max_batch_size
FROM chroma_server_info() AS info;
SELECT cs_try('SELECT chroma_heartbeat()');
SELECT cs_try($$SELECT chroma_count('regress_server')$$);
SELECT cs_try($$SELECT chroma_upsert('regress_server', ARRAY['a'], ARRAY[1]::real[])$$);
RESET chroma_sync.url;
RESET chroma_sync.connect_timeout;

-- The right server again: the cached pre-flight of the unreachable one is not reused.
SELECT chroma_heartbeat() > 0 AS heartbeat_again;
SELECT (chroma_server_info())->'reachable' AS reachable_again;

-- A tenant or database that does not exist.
SET chroma_sync.tenant = 'regress_no_such_tenant';
SELECT left(cs_try('SELECT count(*) FROM chroma_list_collections()'), 5) AS list_in_missing_tenant;
RESET chroma_sync.tenant;
SET chroma_sync.database = 'regress_no_such_database';
SELECT left(cs_try($$SELECT chroma_create_collection('regress_server')$$), 5) AS create_in_missing_database;
RESET chroma_sync.database;
