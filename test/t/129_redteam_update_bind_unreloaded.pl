# Red team (after TAP 118's fix): the update to 0.5 binds a 0.4 filter "with the values a
# worker starts with" (worker_start_value), taking the configuration file's value from
# pg_file_settings WHERE applied. pg_file_settings reads the files as they are on disk
# now, and "applied" only says the value could be applied: an ALTER SYSTEM SET (or an edit
# of postgresql.conf) not yet reloaded is listed as applied while the postmaster, and so
# every worker it starts, still has the old value. With ALTER SYSTEM SET DateStyle =
# 'SQL, DMY' pending, the 0.4 worker reads d >= '03/04/2024' as March 4 (38 rows sent), and
# the update binds it as April 3: the mirror silently selects 8 rows.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('redteam_update_bind_unreloaded');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
});
$node->start;
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

note('DateStyle: ' . q1(q{SELECT setting || ' from ' || source FROM pg_settings WHERE name = 'DateStyle'}));
mirror_04_date_filter($node, 'cs_t129');
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t129')}), '38', 'the 0.4 worker reads 03/04/2024 as March 4 (MDY): 38 rows');
# a change prepared for the next reload (or restart), not applied yet
q1(q{ALTER SYSTEM SET DateStyle = 'SQL, DMY'});
note('pending: ' . q1(q{SELECT string_agg(sourcefile || ' ' || setting || ' applied=' || applied, '; ') FROM pg_file_settings WHERE name = 'datestyle'}));
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'});
$node->safe_psql('postgres', q{SELECT pg_sleep(2)});
$node->safe_psql('postgres', q{UPDATE public.dt SET embedding = ARRAY[id, 2]::real[] WHERE id = 3});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'a worker started since flushes');
is(q1(q{SELECT chroma_count('cs_t129')}), '38', 'a worker started since still reads it as March 4: 38 rows');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-03-04'::date)},
	'the bound filter is the one the 0.4 worker evaluated (March 4)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'38', 'it still selects the 38 rows the 0.4 mirror sent');

finish($node, $log0);
