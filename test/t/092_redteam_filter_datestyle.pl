# Red team: "a filter means what it meant when it was stored" — across pg_dump/restore +
# chroma_adopt it does not when the stored text holds a constant rendered with the
# session's DateStyle. The deparsed text (chroma_sync.mirror.filter, what chroma_adopt
# binds again) renders constants with the output functions under the current settings;
# chroma_sync fixes TimeZone, IntervalStyle and extra_float_digits for rendering, but not
# DateStyle. A database with ALTER DATABASE ... SET DateStyle = 'SQL, DMY' (the worker
# runs with it too, and rewrites the text) stores d >= '2024-03-04' as
# (d >= '04/03/2024'::date). A restored copy (a database without that setting, as
# pg_restore into a new database leaves it) reads it as April 3: chroma_adopt resends only
# the rows after April 3 and chroma_verify reports no difference.
# Fixed: the text is deparsed (and read back at adopt) with DateStyle 'ISO, YMD',
# IntervalStyle postgres, extra_float_digits 3 and TimeZone UTC: (d >= '2024-03-04'::date).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_datestyle');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t092');
q1(q{CREATE DATABASE eu092});
q1(q{ALTER DATABASE eu092 SET DateStyle = 'SQL, DMY'});
q1(q{CREATE EXTENSION chroma_sync}, 'eu092');
q1(q{
CREATE TABLE public.ev (id int PRIMARY KEY, embedding real[], d date);
INSERT INTO public.ev SELECT g, ARRAY[g, 1]::real[], date '2024-03-01' + g FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.ev', collection => 'cs_t092', filter => 'd >= ''2024-03-04''');
}, 'eu092');
is($node->safe_psql('eu092', q{SELECT chroma_flush('public.ev', interval '60 seconds')}, timeout => 90), 't',
	'the original mirror flushes');
is(q1(q{SELECT chroma_count('cs_t092')}), '38', 'the original sends the 38 rows from March 4');
note('stored filter text: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'eu092'));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t092.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'eu092' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy092');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy092', $dump ], 'pg_restore into copy092');
q1(q{SELECT chroma_adopt('public.ev')}, 'copy092');
is($node->safe_psql('copy092', q{SELECT chroma_flush('public.ev', interval '60 seconds')}, timeout => 90), 't',
	'the adopted mirror flushes');
note('filter in the copy: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'copy092'));
is(q1(q{SELECT chroma_count('cs_t092')}), '38',
	'the restored copy selects the rows the original did (d >= March 4, not April 3)');

finish($node, $log0);
