# Red team: "renames are followed in the DDL's own transaction, paused or not, so a
# pg_dump at any moment names the columns read" — not when the rename is made on the
# partitioned table (or inheritance parent) of a mirrored partition, as README suggests
# ("Mirror each partition into its own collection"). ALTER TABLE parent RENAME COLUMN
# renames the column in every partition, but pg_event_trigger_ddl_commands() reports the
# parent's OID alone, and chroma_sync.on_ddl_end only calls columns_changed for an objid
# that is a mirror's source: the partition's mirror keeps the old names (column_names and
# the filter's text). Swap two boolean columns' names (the filter's) and two text
# columns' names (the document's) on the parent of a paused mirror, pg_dump: chroma_adopt
# in the copy binds the filter and the document to the other columns, and sends row 2
# with the other column's text where the original (attnums) sends row 1 with its body.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_partition_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t095');
q1(q{
CREATE TABLE public.p (id int, embedding real[], pub bool, arch bool, body text, note text,
	PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (100);
INSERT INTO public.p VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.p1', collection => 'cs_t095', document_column => 'body', filter => 'pub');
});
is(q1(q{SELECT chroma_flush('public.p1', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t095')}), '1:B1',
	'the original sends row 1 with its body');

q1(q{SELECT chroma_pause('public.p1')});
q1(q{
ALTER TABLE p RENAME pub TO tmp; ALTER TABLE p RENAME arch TO pub; ALTER TABLE p RENAME tmp TO arch;
ALTER TABLE p RENAME body TO tmp; ALTER TABLE p RENAME note TO body; ALTER TABLE p RENAME tmp TO note;
});
is(q1(q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'p1'::regclass AND attnum > 0}),
	'id,embedding,arch,pub,note,body', 'the partition\'s columns were renamed with the parent\'s');
is(q1(q{SELECT filter || ' ' || column_names::text FROM chroma_sync.mirror}),
	'(arch) {id,embedding,note,arch}',
	'the recorded names (and the filter text) follow the rename made through the parent, in its own transaction');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t095.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy095');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy095', $dump ], 'pg_restore into copy095');
my ($ret, $out, $err) = $node->psql('copy095', q{SELECT chroma_adopt('public.p1')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy095', q{SELECT chroma_flush('public.p1', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t095')}), '1:B1',
		'the restored copy sends what the original did (row 1, the column that was body), not the columns that took the old names');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
}

finish($node, $log0);
