-- chroma_sync 0.3 -> 0.4: a cheaper queue insert on every mirrored write
\echo Use "ALTER EXTENSION chroma_sync UPDATE TO '0.4'" to load this file. \quit

-- Every query of the queue names its mirror, so (mirror_id, qid) serves them all: the
-- primary key on qid alone was a third index written by every mirrored change.
ALTER TABLE chroma_sync.queue DROP CONSTRAINT queue_pkey;

-- Keys are compared for equality only (coalescing): in byte order each comparison in the
-- (mirror_id, key) index is a memcmp instead of a locale-aware one. Rebuilt here, which
-- takes a while on a long queue.
DROP INDEX chroma_sync.queue_mirror_key;
CREATE INDEX queue_mirror_key ON chroma_sync.queue (mirror_id, key COLLATE pg_catalog."C");
