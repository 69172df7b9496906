# Red team: "renaming a column or the table changes nothing (the mirror keeps syncing)",
# "renaming [a type] or its schema rewrites the filter's text in the same transaction",
# and "a dump taken at any moment names the columns the mirror reads" — the mirror records
# the type of each column it reads by its qualified name (column_type_names) and compares
# that name with the catalog's at each use. Nothing rewrites the recorded name when the
# type is renamed: ALTER TYPE public.addr RENAME TO address (the composite a filter reads
# (a).country from) or ALTER SCHEMA app RENAME TO app2 (the schema of a metadata column's
# domain) is read as "the type of a column changed": the mirror pauses, and the restored
# copy of a dump refuses chroma_adopt. The same holds for ALTER TABLE ... RENAME of a table
# whose row type is a column's type.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_column_type_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t123');
q1(q{
CREATE SCHEMA app;
CREATE DOMAIN app.label AS text;
CREATE TYPE public.addr AS (city text, country text);
CREATE TABLE public.ty (id int PRIMARY KEY, embedding real[], lbl app.label, a public.addr);
INSERT INTO public.ty SELECT g, ARRAY[g, 1]::real[], 'l' || g,
	ROW('Paris', CASE WHEN g <= 3 THEN 'FR' ELSE 'DE' END)::public.addr FROM generate_series(1, 5) g;
SELECT chroma_mirror('public.ty', collection => 'cs_t123', metadata_columns => '{lbl}',
	filter => $$(a).country = 'FR'$$);
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.ty', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t123')}), '3', 'it sends the 3 rows in FR');
note('recorded: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));

q1(q{ALTER TYPE public.addr RENAME TO address});
q1(q{ALTER SCHEMA app RENAME TO app2});
note('recorded after the renames: ' . q1(q{SELECT column_type_names::text || ' ' || filter FROM chroma_sync.mirror}));
q1(q{UPDATE public.ty SET embedding = ARRAY[id, 2]::real[]});
$node->safe_psql('postgres', q{SELECT chroma_flush('public.ty', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
note("status: $state");
is($state, 'syncing ', 'renaming the types of mirrored columns (or their schema) changes nothing: the mirror keeps syncing');

q1(q{SELECT chroma_pause('public.ty')});
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t123.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy121');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy121', $dump ], 'pg_restore into copy121');
my ($ret, $out, $err) = $node->psql('copy121', q{SELECT chroma_adopt('public.ty')});
note("chroma_adopt in the copy: ret=$ret err=$err");
is($ret, 0, 'the restored copy adopts');

finish($node, $log0);
