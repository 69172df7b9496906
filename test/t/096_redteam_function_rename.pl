# Red team: "chroma_adopt refuses (55000) a binding that refers to anything else" — the
# references (filter_refs) and the text are recorded by name when the filter is bound and
# never follow a rename of what they name: only ALTER TABLE reaches the DDL trigger. Rename
# the filter's function (ALTER FUNCTION ... RENAME) and create another function of the old
# name: the original keeps evaluating the renamed one (by OID), but the dump's text and
# references name the new one, so chroma_adopt in the restored copy binds it, the
# reference check passes, and the copy sends other rows than the original.
# (The rename alone, without a new function of the old name, leaves a dump whose mirror
# chroma_adopt cannot bind at all: function public.keep(integer) does not exist.)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_function_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t096');
q1(q{
CREATE FUNCTION public.keep(n int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT n > 10';
CREATE TABLE public.fr (id int PRIMARY KEY, embedding real[]);
INSERT INTO public.fr SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.fr', collection => 'cs_t096', filter => 'public.keep(id)');
});
is(q1(q{SELECT chroma_flush('public.fr', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT chroma_count('cs_t096')}), '30', 'the original sends the 30 rows with id > 10');
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));

# paused (so the worker does not load it again), a new version of the function, the old
# one kept under another name for this mirror
q1(q{SELECT chroma_pause('public.fr')});
q1(q{
ALTER FUNCTION public.keep(int) RENAME TO keep_v1;
CREATE FUNCTION public.keep(n int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT n > 30';
});
is(q1(q{SELECT count(*) FROM public.fr WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), fr.*)}),
	'30', 'the original still evaluates the function it bound (keep_v1: id > 10)');
note('stored after the rename: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t096.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy096');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy096', $dump ], 'pg_restore into copy096');
my ($ret, $out, $err) = $node->psql('copy096', q{SELECT chroma_adopt('public.fr')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy096', q{SELECT chroma_flush('public.fr', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	note('filter in the copy: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}, 'copy096'));
	is(q1(q{SELECT chroma_count('cs_t096')}), '30',
		'the restored copy selects the rows the original did (keep_v1: id > 10), not those of the function that took the old name');
}
else
{
	like($err, qr/binds to other objects/, 'chroma_adopt refuses the copy (55000), as it does for an overload');
}

finish($node, $log0);
