# Red team: TAP 101 named ALTER VIEW, ALTER MATERIALIZED VIEW and ALTER FOREIGN TABLE as
# ways to rename a table's columns (renameatt does not check that the relation is of the
# kind the statement names); the fix added only 'ALTER VIEW' and 'ALTER FOREIGN TABLE' to
# chroma_sync_ddl_end's tags and on_ddl_end's list. ALTER MATERIALIZED VIEW ... RENAME
# COLUMN on the mirrored table is not followed: TAP 101 with that statement.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_rename_via_alter_matview');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t110');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text, note text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.s', collection => 'cs_t110', document_column => 'body', filter => 'pub');
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t110')}), '1:B1',
	'the original sends row 1 with its body');

q1(q{SELECT chroma_pause('public.s')});
q1(q{
ALTER MATERIALIZED VIEW s RENAME COLUMN pub TO tmp; ALTER MATERIALIZED VIEW s RENAME COLUMN arch TO pub; ALTER MATERIALIZED VIEW s RENAME COLUMN tmp TO arch;
ALTER MATERIALIZED VIEW s RENAME COLUMN body TO tmp; ALTER MATERIALIZED VIEW s RENAME COLUMN note TO body; ALTER MATERIALIZED VIEW s RENAME COLUMN tmp TO note;
});
is(q1(q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 's'::regclass AND attnum > 0}),
	'id,embedding,arch,pub,note,body', 'ALTER MATERIALIZED VIEW renamed the table\'s columns');
is(q1(q{SELECT filter || ' ' || column_names::text FROM chroma_sync.mirror}), '(arch) {id,embedding,note,arch}',
	'the recorded names and the filter text follow the renames, in their own transaction');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t110.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy110');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy110', $dump ], 'pg_restore into copy110');
q1(q{SELECT chroma_adopt('public.s')}, 'copy110');
is($node->safe_psql('copy110', q{SELECT chroma_flush('public.s', interval '60 seconds')}, timeout => 90), 't',
	'the adopted copy flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t110')}), '1:B1',
	'the restored copy sends what the original did (row 1, the column that was body), not the columns that took the old names');

finish($node, $log0);
