# Red team: "renames that change nothing sent are followed" — by the worker, later: the
# names chroma_adopt re-resolves in a restored copy (chroma_sync.mirror.column_names and
# the filter's text) are rewritten only by the worker's next step, which a paused mirror
# never takes (sync_mirror_step returns before check_filter). Pause, swap two boolean
# columns' names (the filter's) and two text columns' names (the document's), pg_dump:
# the dump holds the old names, so chroma_adopt in the copy binds the filter and the
# document to the other columns. The copy sends row 2 with the other column's text,
# where the original (attnums) sends row 1 with its document, and nothing pauses.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_stale_names_dump');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t093');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text, note text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.s', collection => 'cs_t093', document_column => 'body', filter => 'pub');
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t093')}), '1:B1',
	'the original sends row 1 with its body');

q1(q{SELECT chroma_pause('public.s')});
q1(q{
ALTER TABLE s RENAME pub TO tmp; ALTER TABLE s RENAME arch TO pub; ALTER TABLE s RENAME tmp TO arch;
ALTER TABLE s RENAME body TO tmp; ALTER TABLE s RENAME note TO body; ALTER TABLE s RENAME tmp TO note;
});
sleep 3;
note('stored after the swap: ' . q1(q{SELECT filter || ' ' || column_names::text FROM chroma_sync.mirror}));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t093.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy093');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy093', $dump ], 'pg_restore into copy093');
q1(q{SELECT chroma_adopt('public.s')}, 'copy093');
is($node->safe_psql('copy093', q{SELECT chroma_flush('public.s', interval '60 seconds')}, timeout => 90), 't',
	'the adopted copy flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t093')}), '1:B1',
	'the restored copy sends what the original did (row 1, the column that was body), not the columns that took the old names');

finish($node, $log0);
