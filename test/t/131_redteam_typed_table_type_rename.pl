# Red team (after TAP 123's fix): "renaming a mirrored column's type or its schema changes
# nothing (the mirror keeps syncing)" — mirror_columns_follow_type_renames leaves the
# columns of a typed table (CREATE TABLE ... OF type) out altogether, because ALTER TYPE
# ... ALTER ATTRIBUTE ... CASCADE can change their typmod under the same type OID (the
# check compares no typmod: TAP 126). Nothing in the README says so: a pure rename of the
# domain of a typed table's metadata column (ALTER DOMAIN app.label RENAME TO tag, or
# ALTER SCHEMA app RENAME) pauses its mirror as a type change.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_typed_table_type_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t131');
q1(q{
CREATE SCHEMA app;
CREATE DOMAIN app.label AS text;
CREATE TYPE app.item AS (id int, embedding real[], lbl app.label);
CREATE TABLE public.tt OF app.item (PRIMARY KEY (id));
INSERT INTO public.tt SELECT g, ARRAY[g, 1]::real[], 'l' || g FROM generate_series(1, 5) g;
SELECT chroma_mirror('public.tt', collection => 'cs_t131', metadata_columns => '{lbl}');
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.tt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t131')}), '5', 'it sends the 5 rows');

q1(q{ALTER DOMAIN app.label RENAME TO tag});
note('recorded after the rename: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));
q1(q{UPDATE public.tt SET embedding = ARRAY[id, 2]::real[]});
$node->psql('postgres', q{SELECT chroma_flush('public.tt', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
note("status: $state");
is($state, 'syncing ', "renaming the domain of a typed table's mirrored column changes nothing: the mirror keeps syncing");
q1(q{ALTER SCHEMA app RENAME TO app2});
q1(q{UPDATE public.tt SET embedding = ARRAY[id, 3]::real[]});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.tt', interval '60 seconds')}, timeout => 90), 't',
	'renaming the schema of that type changes nothing either: the mirror flushes');
like(q1(q{SELECT column_type_names::text FROM chroma_sync.mirror WHERE source = 'public.tt'::regclass}), qr/app2\.tag/,
	'the recorded type name follows');

# the same command with a typmod: ALTER TYPE ... ALTER ATTRIBUTE ... CASCADE is no rename
fresh_collection($node, 'cs_t131k');
q1(q{
CREATE TYPE app2.k AS (code char(4), embedding real[]);
CREATE TABLE public.tk OF app2.k (PRIMARY KEY (code));
INSERT INTO public.tk VALUES ('ab', '{1,0}');
SELECT chroma_mirror('public.tk', collection => 'cs_t131k');
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.tk', interval '60 seconds')}, timeout => 90), 't',
	'the char(4) key mirror flushes');
q1(q{ALTER TYPE app2.k ALTER ATTRIBUTE code TYPE char(6) CASCADE});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'public.tk'::regclass}, 'paused', 30),
	'a typed table\'s key typmod changed by ALTER TYPE ... CASCADE pauses its mirror (ids would change)');
like(q1(q{SELECT last_error FROM chroma_sync.status WHERE source = 'public.tk'::regclass}), qr/character\(4\).*character\(6\)/,
	'... saying the type changed');
finish($node, $log0);
