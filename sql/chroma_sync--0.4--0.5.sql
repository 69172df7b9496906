-- chroma_sync 0.4 -> 0.5: hardening (see README "Upgrading")
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.5'" to load this file. \quit

-- Keys of requests whose outcome is unknown (a timeout, a connection lost mid-request,
-- HTTP 500/502/504): Chroma may still apply such a request late, so the worker queues
-- these keys again once not_before (the request timeout after the failure) has passed.
-- A table, not worker memory: a worker restart must not forget them.
CREATE TABLE chroma_sync.resend (
	mirror_id integer NOT NULL,
	key text COLLATE pg_catalog."C" NOT NULL,
	not_before timestamptz NOT NULL,
	PRIMARY KEY (mirror_id, key)
);
SELECT pg_catalog.pg_extension_config_dump('chroma_sync.resend', '');
REVOKE ALL ON chroma_sync.resend FROM PUBLIC;
