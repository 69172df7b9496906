-- chroma_sync demo: a table of short documents and embeddings computed in SQL.
--
-- The embedding is a hashed bag of words: lower-case the text, split it into words,
-- drop stop words and words under three letters, fold plural and -ing/-ed/-e endings
-- ("baking", "baked" and "bake" become one word), hash each word into one of 256
-- dimensions with a sign, and L2-normalize. Texts that share words point the same way,
-- which is what the cosine distance of a Chroma collection measures. No model, no
-- network: good enough to show neighbours that share a topic.
--
-- psql variable: docs_file, the path of documents.tsv (topic TAB text).

CREATE TABLE stop_words (word text PRIMARY KEY);
INSERT INTO stop_words
SELECT unnest(string_to_array(
	'about above after again against all also almost always among and any are around '
	'because been before being below between both but can cannot could did does doing '
	'done down during each either enough even ever every few for from further get gets '
	'give gives had has have having her here hers him his how however into its itself '
	'just least less let like lot lots made make makes many may might more most much must '
	'near need needs never new next nor not now off often once one only onto other others '
	'our ours out over own per put rather really same see seen she should since some '
	'still such than that the their theirs them then there these they this those though '
	'through too two three under until upon use used uses using very was way well were '
	'what when where whether which while who whom whose why will with within without '
	'would yet you your yours usually first last long little good best time times day days '
	'year years each instead every around',
	' ')) ON CONFLICT DO NOTHING;

-- Folds common English endings so word forms meet: telescopes -> telescop, investing -> invest.
CREATE FUNCTION demo_stem(word text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE
		WHEN word ~ 'ss$' THEN word
		WHEN length(regexp_replace(word, '(ing|ed|es|s|e)$', '')) >= 3
			THEN regexp_replace(word, '(ing|ed|es|s|e)$', '')
		ELSE word
	END
$$;

-- 256 dimensions, unit length; NULL when no word is left (a zero vector has no direction).
CREATE FUNCTION demo_embed(doc text) RETURNS real[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	WITH words AS (
		SELECT demo_stem(w) AS word
		FROM regexp_split_to_table(lower(doc), '[^a-z0-9]+') AS w
		WHERE length(w) >= 3
		  AND NOT EXISTS (SELECT 1 FROM stop_words s WHERE s.word = w)
	), buckets AS (
		SELECT hashtext(word) & 255 AS dim,
		       sum(CASE WHEN hashtext(word) & 256 = 0 THEN 1.0 ELSE -1.0 END)::float8 AS v
		FROM words
		GROUP BY 1
	), norm AS (
		SELECT sqrt(sum(v * v)) AS len FROM buckets
	)
	SELECT CASE WHEN norm.len > 0 THEN
		(SELECT array_agg((coalesce(b.v, 0) / norm.len)::real ORDER BY d.dim)
		 FROM generate_series(0, 255) AS d(dim)
		 LEFT JOIN buckets b ON b.dim = d.dim)
	END
	FROM norm
$$;

-- For display: the text cut at a word boundary to fit width characters.
CREATE FUNCTION clip(t text, width int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN length(t) <= width THEN t
		ELSE regexp_replace(left(t, width - 2), '\s+\S*$', '') || '...' END
$$;

CREATE TABLE documents (
	id        int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	topic     text NOT NULL,
	body      text NOT NULL,
	embedding real[]
);

-- \copy takes its line verbatim: build the command in a variable to use docs_file.
\set load_documents '\\copy documents (topic, body) FROM ' :'docs_file'
:load_documents
UPDATE documents SET embedding = demo_embed(body);
