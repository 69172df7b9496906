# Red team: the filter's text (what chroma_adopt binds in a restored copy) renders its
# constants when it is written; a constant whose text changes later without ALTER TABLE
# is not followed. An enum constant is bound by the label's OID: ALTER TYPE ... RENAME
# VALUE 'happy' TO 'glad' keeps the original selecting the same rows, but the stored text
# still says 'happy'. ALTER TYPE ... ADD VALUE 'happy' (a new label of the old name), then
# pg_dump: chroma_adopt in the copy binds the new label, the reference check passes (the
# same type, operator and function: constants are not recorded), and the copy sends
# other rows than the original, silently. (Without the new label, the dump's mirror
# cannot be adopted at all: invalid input value for enum mood: "happy".)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_enum_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t098');
q1(q{
CREATE TYPE public.mood AS ENUM ('happy', 'sad');
CREATE TABLE public.en (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.en SELECT g, ARRAY[g, 1]::real[], CASE WHEN g <= 30 THEN 'happy' ELSE 'sad' END::public.mood
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.en', collection => 'cs_t098', filter => 'm = ''happy''');
});
is(q1(q{SELECT chroma_flush('public.en', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT chroma_count('cs_t098')}), '30', 'the original sends the 30 happy rows');

q1(q{SELECT chroma_pause('public.en')});
q1(q{ALTER TYPE public.mood RENAME VALUE 'happy' TO 'glad'});
q1(q{ALTER TYPE public.mood ADD VALUE 'happy'});
q1(q{UPDATE public.en SET m = 'happy' WHERE id > 35});
is(q1(q{SELECT count(*) FROM public.en WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), en.*)}),
	'30', 'the original still selects the label it bound (now glad)');
note('stored after the rename: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t098.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy098');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy098', $dump ], 'pg_restore into copy098');
my ($ret, $out, $err) = $node->psql('copy098', q{SELECT chroma_adopt('public.en')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy098', q{SELECT chroma_flush('public.en', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	note('filter in the copy: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'copy098'));
	is(q1(q{SELECT chroma_count('cs_t098')}), '30',
		'the restored copy selects the rows the original did (the label now called glad), not the new label happy');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
}

finish($node, $log0);
