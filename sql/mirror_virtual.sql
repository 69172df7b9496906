-- A virtual generated column (PostgreSQL 18) is computed when read and never stored: the
-- mirror's triggers would never see its value, so chroma_mirror refuses it as an id,
-- embedding, document or metadata column, and creates nothing. Stored generated columns
-- stay allowed.
-- Two expected outputs: before 18 the VIRTUAL keyword is a syntax error (PostgreSQL's own
-- message, mirror_virtual.out); from 18 on, the refusals (mirror_virtual_1.out).

CREATE TABLE regress_virt (
	id int PRIMARY KEY,
	embedding real[],
	doc text,
	n int,
	n_stored int GENERATED ALWAYS AS (n * 3) STORED,
	id_v int GENERATED ALWAYS AS (id + 1) VIRTUAL,
	emb_v real[] GENERATED ALWAYS AS (embedding) VIRTUAL,
	doc_v text GENERATED ALWAYS AS (upper(doc)) VIRTUAL,
	n_v int GENERATED ALWAYS AS (n * 2) VIRTUAL
);

SELECT chroma_mirror('regress_virt', collection => 'regress_m_virt', id_column => 'id_v');
SELECT chroma_mirror('regress_virt', collection => 'regress_m_virt', embedding_column => 'emb_v');
SELECT chroma_mirror('regress_virt', collection => 'regress_m_virt', document_column => 'doc_v');
SELECT chroma_mirror('regress_virt', collection => 'regress_m_virt',
	metadata_columns => ARRAY['n_stored', 'n_v']);
SELECT count(*) AS mirrors FROM chroma_sync.mirror WHERE source::text = 'regress_virt';

-- The table itself can be mirrored through its stored columns: rows reach Chroma whatever
-- the virtual columns hold.
INSERT INTO regress_virt (id, embedding, doc, n) SELECT i, cs_vec(i, 4), 'doc ' || i, i
FROM generate_series(1, 5) AS i;
SELECT chroma_mirror('regress_virt', collection => 'regress_m_virt', document_column => 'doc',
	metadata_columns => ARRAY['n_stored']) IS NOT NULL AS mirrored;
INSERT INTO regress_virt (id, embedding, doc, n) VALUES (6, cs_vec(6, 4), 'doc 6', 6);
UPDATE regress_virt SET n = 20 WHERE id = 2;
SELECT chroma_flush('regress_virt', '60 s');
SELECT * FROM cs_compare('regress_m_virt', $$SELECT id::text, embedding, doc,
	jsonb_build_object('n_stored', n_stored) FROM regress_virt$$);
SELECT chroma_unmirror('regress_virt', drop_collection => true);

DROP TABLE regress_virt;
