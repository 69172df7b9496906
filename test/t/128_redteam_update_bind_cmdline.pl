# Red team (after TAP 118's fix): the update to 0.5 binds a 0.4 filter "with the values a
# worker starts with" (worker_start_value: pg_db_role_setting, then pg_file_settings, then
# boot_val). A worker starts with the postmaster's values, and those include the server's
# command-line options (postgres -c ..., pg_ctl -o, a service unit's options), which beat
# the configuration file (pg_settings.source = 'command line'). worker_start_value skips
# them: on a server started with -c DateStyle=SQL,DMY the 0.4 worker reads d >= '03/04/2024'
# as April 3 (8 rows sent), and the update binds it from postgresql.conf's 'ISO, MDY' as
# March 4: the mirror silently selects 38 rows.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('redteam_update_bind_cmdline');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
DateStyle = 'ISO, MDY'
});
# started as a packaged server may be: an option on the command line
system_or_bail('pg_ctl', '-w', '-D', $node->data_dir, '-l', $node->logfile,
	'-o', '--cluster-name=redteam_update_bind_cmdline -c DateStyle=SQL,DMY', 'start');
$node->_update_pid(1);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

note('DateStyle: ' . q1(q{SELECT setting || ' from ' || source FROM pg_settings WHERE name = 'DateStyle'}));
mirror_04_date_filter($node, 'cs_t128');
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t128')}), '8', 'the 0.4 worker reads 03/04/2024 as April 3 (DMY, the command line): 8 rows');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-04-03'::date)},
	'the bound filter is the one the 0.4 worker evaluated (April 3)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'8', 'it still selects the 8 rows the 0.4 mirror sent');

finish($node, $log0);
