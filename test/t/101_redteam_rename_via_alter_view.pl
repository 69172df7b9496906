# Red team: "renames are followed in the DDL's own transaction (event trigger ->
# chroma_sync.columns_changed)" — chroma_sync.on_ddl_end looks only at commands tagged
# 'ALTER TABLE'. PostgreSQL renames a table's column also through ALTER VIEW,
# ALTER MATERIALIZED VIEW, ALTER FOREIGN TABLE or ALTER INDEX ... RENAME COLUMN (renameatt
# does not check that the relation is of the kind the statement names), tagged 'ALTER
# VIEW' etc.: the mirror's recorded names and filter text are not followed. Swap two
# boolean columns' names (the filter's) and two text columns' names (the document's) of
# a paused mirror with ALTER VIEW, pg_dump: chroma_adopt in the copy binds the filter and
# the document to the other columns, and sends row 2 where the original sends row 1.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_rename_via_alter_view');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t101');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text, note text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.s', collection => 'cs_t101', document_column => 'body', filter => 'pub');
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t101')}), '1:B1',
	'the original sends row 1 with its body');

q1(q{SELECT chroma_pause('public.s')});
q1(q{
ALTER VIEW s RENAME COLUMN pub TO tmp; ALTER VIEW s RENAME COLUMN arch TO pub; ALTER VIEW s RENAME COLUMN tmp TO arch;
ALTER VIEW s RENAME COLUMN body TO tmp; ALTER VIEW s RENAME COLUMN note TO body; ALTER VIEW s RENAME COLUMN tmp TO note;
});
is(q1(q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 's'::regclass AND attnum > 0}),
	'id,embedding,arch,pub,note,body', 'ALTER VIEW renamed the table\'s columns');
is(q1(q{SELECT filter || ' ' || column_names::text FROM chroma_sync.mirror}), '(arch) {id,embedding,note,arch}',
	'the recorded names and the filter text follow the renames, in their own transaction');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t101.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy101');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy101', $dump ], 'pg_restore into copy101');
q1(q{SELECT chroma_adopt('public.s')}, 'copy101');
is($node->safe_psql('copy101', q{SELECT chroma_flush('public.s', interval '60 seconds')}, timeout => 90), 't',
	'the adopted copy flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t101')}), '1:B1',
	'the restored copy sends what the original did (row 1, the column that was body), not the columns that took the old names');

finish($node, $log0);
