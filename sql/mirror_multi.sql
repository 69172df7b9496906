-- Several mirrors of one table (two embedding columns into two collections): each
-- function then needs the collection as its last argument.

CREATE TABLE regress_mm (
	id int PRIMARY KEY,
	title_vec real[],
	body_vec real[],
	title text,
	body text
);
INSERT INTO regress_mm
SELECT i, cs_vec(i, 3), CASE WHEN i % 10 = 0 THEN NULL ELSE cs_vec(-i, 5) END,
	'title ' || i, 'body ' || i
FROM generate_series(1, 60) AS i;
SELECT chroma_mirror('regress_mm', collection => 'regress_m_titles', embedding_column => 'title_vec',
	document_column => 'title') IS NOT NULL AS mirrored;
SELECT chroma_mirror('regress_mm', collection => 'regress_m_bodies', embedding_column => 'body_vec',
	document_column => 'body') IS NOT NULL AS mirrored;
SELECT source, collection FROM chroma_sync.status ORDER BY collection;

-- Without the collection, the choice is ambiguous.
SELECT chroma_flush('regress_mm', '60 s');
SELECT chroma_pause('regress_mm');
SELECT chroma_resume('regress_mm');
SELECT chroma_resync('regress_mm');
SELECT * FROM chroma_verify('regress_mm');
SELECT chroma_retry_failed('regress_mm');
SELECT chroma_unmirror('regress_mm');
-- A collection that is not one of the table's mirrors.
SELECT chroma_flush('regress_mm', '1 s', 'regress_m_other');
-- chroma_flush() without a source waits for every mirror.
SELECT chroma_flush(NULL, '60 s');

SELECT chroma_flush('regress_mm', '60 s', 'regress_m_titles');
SELECT chroma_flush('regress_mm', '60 s', 'regress_m_bodies');
SELECT * FROM cs_mirror_state('regress_mm', 'regress_m_titles');
SELECT * FROM cs_mirror_state('regress_mm', 'regress_m_bodies');
SELECT * FROM cs_compare('regress_m_titles',
	'SELECT id::text, title_vec, title, NULL::jsonb FROM regress_mm WHERE title_vec IS NOT NULL');
SELECT * FROM cs_compare('regress_m_bodies',
	'SELECT id::text, body_vec, body, NULL::jsonb FROM regress_mm WHERE body_vec IS NOT NULL');

-- A change of one embedding column reaches one collection; the key reaches both.
UPDATE regress_mm SET title_vec = cs_vec(100 + id, 3) WHERE id <= 5;
UPDATE regress_mm SET body = 'new body' WHERE id = 6;
UPDATE regress_mm SET id = 1000 WHERE id = 7;
UPDATE regress_mm SET body_vec = cs_vec(-10, 5) WHERE id = 10;
SELECT chroma_flush('regress_mm', '60 s', 'regress_m_titles');
SELECT chroma_flush('regress_mm', '60 s', 'regress_m_bodies');
SELECT * FROM cs_mirror_state('regress_mm', 'regress_m_titles');
SELECT * FROM cs_mirror_state('regress_mm', 'regress_m_bodies');
SELECT * FROM cs_compare('regress_m_titles',
	'SELECT id::text, title_vec, title, NULL::jsonb FROM regress_mm WHERE title_vec IS NOT NULL');
SELECT * FROM cs_compare('regress_m_bodies',
	'SELECT id::text, body_vec, body, NULL::jsonb FROM regress_mm WHERE body_vec IS NOT NULL');
SELECT collection, synced FROM chroma_sync.status WHERE source = 'regress_mm'::regclass
ORDER BY collection;

-- Pausing one mirror leaves the other syncing.
SELECT chroma_pause('regress_mm', 'regress_m_bodies');
UPDATE regress_mm SET title = 'paused body', body = 'paused body' WHERE id = 8;
SELECT chroma_flush('regress_mm', '60 s', 'regress_m_titles');
SELECT chroma_flush('regress_mm', '2 s', 'regress_m_bodies');
SELECT collection, state, pending FROM chroma_sync.status WHERE source = 'regress_mm'::regclass
ORDER BY collection;
SELECT chroma_resume('regress_mm', 'regress_m_bodies');
SELECT chroma_flush('regress_mm', '60 s', 'regress_m_bodies');
SELECT * FROM cs_mirror_state('regress_mm', 'regress_m_bodies');

-- Unmirroring one keeps the other; then the table has one mirror and needs no name.
SELECT chroma_unmirror('regress_mm', drop_collection => true, collection => 'regress_m_titles');
SELECT source, collection FROM chroma_sync.status;
UPDATE regress_mm SET body = 'one mirror left' WHERE id = 9;
SELECT chroma_flush('regress_mm', '60 s');
SELECT * FROM cs_mirror_state('regress_mm');
SELECT * FROM cs_compare('regress_m_bodies',
	'SELECT id::text, body_vec, body, NULL::jsonb FROM regress_mm WHERE body_vec IS NOT NULL');
SELECT chroma_unmirror('regress_mm', drop_collection => true);
SELECT count(*) AS collections FROM chroma_list_collections()
WHERE name IN ('regress_m_titles', 'regress_m_bodies');
DROP TABLE regress_mm;
