# Red team: "renaming [a function the filter calls], or its schema, rewrites the filter's
# text in the same transaction, paused mirror or not" — not when the mirror is paused
# because a mirrored column changed: chroma_sync.filters_renamed skips every mirror with a
# column problem. A metadata column retyped (the mirror pauses, "run chroma_resync ... or
# undo it"), then the filter's function renamed: the stored text keeps the old name. A dump
# taken meanwhile cannot be adopted even after the column change is undone in the copy,
# as the hint says: the text calls a function that does not exist there.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_rename_while_column_paused');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t124');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.norm(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT lower(t)$$;
CREATE TABLE public.pc (id int PRIMARY KEY, embedding real[], lbl text, tag text);
INSERT INTO public.pc VALUES (1, '{1,0}', 'a', 'EN'), (2, '{0,1}', 'b', 'DE');
SELECT chroma_mirror('public.pc', collection => 'cs_t124', metadata_columns => '{lbl}',
	filter => $$app.norm(tag) = 'en'$$);
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.pc', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');

q1(q{ALTER TABLE public.pc ALTER COLUMN lbl TYPE varchar(10)});
note('status after the retype: ' . q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status}));
q1(q{ALTER FUNCTION app.norm(text) RENAME TO norm2});
my $stored = q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror});
note("stored after the rename: $stored");
like($stored, qr/^\(app\.norm2\(tag\)/, 'the rename is followed in the same transaction (paused mirror or not)');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t124.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy122');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy122', $dump ], 'pg_restore into copy122');
q1(q{ALTER TABLE public.pc ALTER COLUMN lbl TYPE text}, 'copy122');
my ($ret, $out, $err) = $node->psql('copy122', q{SELECT chroma_adopt('public.pc')});
note("chroma_adopt in the copy (column change undone): ret=$ret err=$err");
is($ret, 0, 'the restored copy adopts once the column change is undone');

finish($node, $log0);
