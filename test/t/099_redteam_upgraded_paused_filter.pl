# Red team, two findings on a mirror made by 0.4 and updated to 0.5:
# (1) "0.5 records the columns of existing mirrors by name" — the update's DO block calls
# chroma_sync.record_columns, which loads the mirror with the 0.5 column list (chosen
# because column_names exists) naming filter_refs and source_oid; filter_refs is added
# only at the end of the script, so the load fails ("column filter_refs does not exist"),
# the DO block reports it as a WARNING and the columns stay unrecorded (chroma_adopt of a
# dump then refuses: "recorded by attnum only").
# (2) "renames are followed in the DDL's own transaction, paused or not (recorded
# column_names and the filter text), so a pg_dump at any moment names the columns read" —
# not for a filter stored by 0.4. After ALTER EXTENSION UPDATE its filter_node is NULL
# until the worker binds it, which it never does while the mirror is paused
# (sync_mirror_step returns before check_filter); follow_filter_names (ddl.c) rewrites
# the text only from a stored tree (mirror_filter_text_now returns NULL without one).
# So with a mirror paused across the update, swapping two columns' names rewrites
# column_names but leaves the raw 0.4 text 'pub': the dump names the other column, and
# chroma_adopt in the copy binds the filter to it (and the document to the column that
# took the document's old name): the copy sends row 2 where the original sends row 1.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_upgraded_paused_filter', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t099');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text, note text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.s', collection => 'cs_t099', document_column => 'body', filter => 'pub');
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t099')}), '1:B1',
	'the original sends row 1 with its body');

q1(q{SELECT chroma_pause('public.s')});
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
note("ALTER EXTENSION UPDATE said: $err");
unlike($err, qr/could not record the columns/, 'the update records the columns of the existing mirror');
is(q1(q{SELECT column_names::text FROM chroma_sync.mirror}), '{id,embedding,body,pub}',
	'0.5: the 0.4 mirror has its columns recorded by name (those it sends and the filter\'s)');
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'),
	'the worker binds the paused mirror\'s 0.4 filter after the update');
q1(q{
ALTER TABLE s RENAME pub TO tmp; ALTER TABLE s RENAME arch TO pub; ALTER TABLE s RENAME tmp TO arch;
ALTER TABLE s RENAME body TO tmp; ALTER TABLE s RENAME note TO body; ALTER TABLE s RENAME tmp TO note;
});
note('stored after the swap: ' . q1(q{SELECT filter || ' ' || coalesce(column_names::text, '(no names)') FROM chroma_sync.mirror}));
like(q1(q{SELECT filter FROM chroma_sync.mirror}), qr/^\(?arch\)?$/,
	'the filter text names the column it reads by its new name (the DDL\'s own transaction, paused)');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t099.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy099');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy099', $dump ], 'pg_restore into copy099');
($ret, $out, $err) = $node->psql('copy099', q{SELECT chroma_adopt('public.s')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy099', q{SELECT chroma_flush('public.s', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t099')}), '1:B1',
		'the restored copy sends what the original did (row 1, the column that was body), not the columns that took the old names');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
}

finish($node, $log0);
