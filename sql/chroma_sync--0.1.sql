-- chroma_sync 0.1: keep Chroma collections in step with PostgreSQL tables
\echo Use "CREATE EXTENSION chroma_sync" to load this file. \quit

-- ===== Server and collections =====

CREATE FUNCTION chroma_server_info() RETURNS jsonb
	AS 'MODULE_PATHNAME', 'chroma_server_info' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_heartbeat() RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_heartbeat' LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION chroma_create_collection(name text, metadata jsonb DEFAULT NULL,
	space text DEFAULT NULL, get_or_create boolean DEFAULT true) RETURNS uuid
	AS 'MODULE_PATHNAME', 'chroma_create_collection' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_delete_collection(name text, missing_ok boolean DEFAULT false)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'chroma_delete_collection' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_list_collections()
	RETURNS TABLE (id uuid, name text, dimension int, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_list_collections' LANGUAGE C VOLATILE;

-- ===== Records (synchronous, not transactional) =====

CREATE FUNCTION chroma_upsert(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_add(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_add' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_update(collection text, ids text[], embeddings real[],
	documents text[] DEFAULT NULL, metadatas jsonb[] DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_update' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_upsert_query(collection text, query text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_upsert_query' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_delete(collection text, ids text[]) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_delete' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_count(collection text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'chroma_count' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_get(collection text, ids text[] DEFAULT NULL,
	"where" jsonb DEFAULT NULL, "limit" int DEFAULT NULL, "offset" int DEFAULT NULL)
	RETURNS TABLE (id text, embedding real[], document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_get' LANGUAGE C VOLATILE;

CREATE FUNCTION chroma_query(collection text, query_embedding real[],
	n_results int DEFAULT 10, "where" jsonb DEFAULT NULL)
	RETURNS TABLE (id text, distance real, document text, metadata jsonb)
	AS 'MODULE_PATHNAME', 'chroma_query' LANGUAGE C VOLATILE;

-- Every function here reaches the network: a DBA grants them explicitly.
REVOKE EXECUTE ON FUNCTION
	chroma_server_info(), chroma_heartbeat(),
	chroma_create_collection(text, jsonb, text, boolean),
	chroma_delete_collection(text, boolean), chroma_list_collections(),
	chroma_upsert(text, text[], real[], text[], jsonb[]),
	chroma_add(text, text[], real[], text[], jsonb[]),
	chroma_update(text, text[], real[], text[], jsonb[]),
	chroma_upsert_query(text, text), chroma_delete(text, text[]),
	chroma_count(text), chroma_get(text, text[], jsonb, int, int),
	chroma_query(text, real[], int, jsonb)
FROM PUBLIC;
