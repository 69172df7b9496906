# Red team (after TAP 118's fix): worker_start_value takes the configuration file's value
# as "SELECT ... FROM pg_file_settings WHERE lower(name) = lower($1) AND applied ... ORDER BY
# o LIMIT 1". PostgreSQL marks an earlier line of a setting as not applied only when a later
# line spells the name the same way (strcmp), so postgresql.conf's initdb line
# "datestyle = 'iso, mdy'" and a line "DateStyle = 'SQL, DMY'" added below it are both
# listed as applied, and the later one is in effect. LIMIT 1 without the file order picks
# the first: the 0.4 worker reads d >= '03/04/2024' as April 3 (8 rows sent, DMY), and the
# update to 0.5 binds it as March 4 (38 rows).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('redteam_update_bind_conf_case');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
DateStyle = 'SQL, DMY'
});
$node->start;
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

note('pg_file_settings: ' . q1(q{SELECT string_agg(seqno || ' ' || name || '=' || setting || ' applied=' || applied, '; ' ORDER BY seqno) FROM pg_file_settings WHERE lower(name) = 'datestyle'}));
note('DateStyle: ' . q1(q{SELECT setting || ' from ' || source FROM pg_settings WHERE name = 'DateStyle'}));
mirror_04_date_filter($node, 'cs_t134');
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t134')}), '8', 'the 0.4 worker reads 03/04/2024 as April 3 (DMY, the last line of postgresql.conf): 8 rows');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-04-03'::date)},
	'the bound filter is the one the 0.4 worker evaluated (April 3)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'8', 'it still selects the 8 rows the 0.4 mirror sent');

finish($node, $log0);
