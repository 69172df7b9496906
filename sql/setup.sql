-- Shared set-up of the regression suite: the extension and the helpers later files use.
-- pg_regress runs with --load-extension=chroma_sync; this file stays correct without it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS chroma_sync;
RESET client_min_messages;

SELECT extname, extversion = (SELECT default_version FROM pg_available_extensions
	WHERE name = 'chroma_sync') AS default_version
FROM pg_extension WHERE extname = 'chroma_sync';

-- cs_try(sql): runs sql and returns 'ok', or the SQLSTATE and message of its error.
-- The error is caught in a subtransaction, so a test can go on after it.
CREATE FUNCTION cs_try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END
$$;

-- cs_try_detail(sql): like cs_try, with the error's detail appended.
CREATE FUNCTION cs_try_detail(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || coalesce(E'\nDETAIL: ' || nullif(det, ''), '');
END
$$;

-- cs_vec(seed, dim): a deterministic embedding whose values span many magnitudes.
CREATE FUNCTION cs_vec(seed int, dim int) RETURNS real[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT array_agg((sin(seed * 7919.0 + j) * 10 ^ ((seed + j) % 9 - 4))::real ORDER BY j)
	FROM generate_series(1, dim) AS j
$$;

-- cs_same_floats(a, b): the two arrays hold the same float32 bit patterns
-- (float4send, so -0 and 0 differ), in the same shape.
CREATE FUNCTION cs_same_floats(a real[], b real[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT a IS NOT NULL AND b IS NOT NULL AND array_send(a) = array_send(b)
$$;

GRANT EXECUTE ON FUNCTION cs_try(text), cs_try_detail(text) TO PUBLIC;

-- Nothing is left over from an earlier run against the same server.
SELECT count(*) AS leftover_collections FROM chroma_list_collections() WHERE name LIKE 'regress%';
