# Red team: "the filter's text is read back with fixed settings" — DateStyle, IntervalStyle,
# extra_float_digits and TimeZone are fixed, standard_conforming_strings is not. A filter
# constant with a backslash deparses (standard_conforming_strings on, the default) as
# 'x\ty'::text; chroma_adopt parses the stored text with the adopting session's setting,
# and with standard_conforming_strings off (ALTER DATABASE ... SET, or SET in the session)
# that literal is x<TAB>y. The references (filter_refs) hold no constants: the check
# passes, and the restored copy selects other rows than the original, silently.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_scs');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t097');
q1(q{
CREATE TABLE public.bs (id int PRIMARY KEY, embedding real[], doc text);
INSERT INTO public.bs SELECT g, ARRAY[g, 1]::real[], 'x\ty' FROM generate_series(1, 30) g;
INSERT INTO public.bs SELECT g, ARRAY[g, 1]::real[], E'x\ty' FROM generate_series(31, 35) g;
SELECT chroma_mirror('public.bs', collection => 'cs_t097', document_column => 'doc', filter => 'doc = ''x\ty''');
});
is(q1(q{SELECT chroma_flush('public.bs', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT chroma_count('cs_t097')}), '30', 'the original sends the 30 rows with a backslash');
note('stored filter text: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t097.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy097');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy097', $dump ], 'pg_restore into copy097');
q1(q{ALTER DATABASE copy097 SET standard_conforming_strings = off});
my ($ret, $out, $err) = $node->psql('copy097', q{SELECT chroma_adopt('public.bs')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy097', q{SELECT chroma_flush('public.bs', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	note('filter in the copy: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'copy097'));
	is(q1(q{SELECT chroma_count('cs_t097')}), '30',
		'the restored copy selects the rows the original did (a backslash, not a tab)');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
}

finish($node, $log0);
