# Red team: "DDL that changes what would be sent (a type or typmod changed) pauses the
# mirror" — a mirrored column's type is recorded and compared by its name only
# (column_type_names; the type OIDs in column_types serve only to follow renames). A type
# change completed by renames in the same transaction — the usual way to swap a type:
#   CREATE DOMAIN app.label_v2 AS text;
#   ALTER TYPE app.item ALTER ATTRIBUTE lbl TYPE app.label_v2 CASCADE;  -- typed table
#   DROP DOMAIN app.label; ALTER DOMAIN app.label_v2 RENAME TO label;
# leaves the column's type named app.label again, and nothing pauses: ALTER TYPE is not
# ALTER TABLE (no columns_changed), and the worker's check compares names. The metadata
# column was an integer and is now text: changed rows reach Chroma with "lbl": "2", the
# others keep "lbl": 2, and the mirror reports no problem.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_type_swap_by_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t135');
q1(q{
CREATE SCHEMA app;
CREATE DOMAIN app.label AS int;
CREATE TYPE app.item AS (id int, embedding real[], lbl app.label);
CREATE TABLE public.tt OF app.item (PRIMARY KEY (id));
INSERT INTO public.tt SELECT g, ARRAY[g, 1]::real[], g FROM generate_series(1, 4) g;
SELECT chroma_mirror('public.tt', collection => 'cs_t135', metadata_columns => '{lbl}');
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.tt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
note('in Chroma: ' . q1(q{SELECT string_agg(id || ' ' || metadata::text, '; ' ORDER BY id) FROM chroma_get('cs_t135')}));

q1(q{
BEGIN;
CREATE DOMAIN app.label_v2 AS text;
ALTER TYPE app.item ALTER ATTRIBUTE lbl TYPE app.label_v2 CASCADE;
DROP DOMAIN app.label;
ALTER DOMAIN app.label_v2 RENAME TO label;
COMMIT;
});
note('recorded: ' . q1(q{SELECT column_type_names::text || ' ' || column_types::text FROM chroma_sync.mirror}));
q1(q{UPDATE public.tt SET embedding = ARRAY[id, 2]::real[] WHERE id <= 2});
$node->psql('postgres', q{SELECT chroma_flush('public.tt', interval '30 seconds')}, timeout => 60);
note('in Chroma: ' . q1(q{SELECT string_agg(id || ' ' || metadata::text, '; ' ORDER BY id) FROM chroma_get('cs_t135')}));
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
note("status: $state");
like($state, qr/^paused .*type/, 'the metadata column changed type (integer to text): the mirror pauses');
is(q1(q{SELECT count(DISTINCT jsonb_typeof(metadata -> 'lbl')) FROM chroma_get('cs_t135')}), '1',
	'the collection never holds "lbl" as both a number and a string');
finish($node, $log0);
