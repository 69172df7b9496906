# Red team (after TAP 118's fix): the update to 0.5 binds a 0.4 filter "with the values a
# worker starts with" — worker_start_value reads TimeZone and IntervalStyle from
# pg_db_role_setting, the configuration files and boot_val. But a worker does not keep
# those: right after connecting it sets TimeZone = UTC and IntervalStyle = postgres
# (mirror_fix_render_settings, in chroma_worker_main since 0.4), and the 0.4 worker parsed
# a filter's text with them. On a server with timezone = 'America/New_York' (initdb writes
# the machine's zone), the 0.4 worker reads ts >= '2024-03-04 00:00' as midnight UTC (6 rows
# sent), and the update binds it as midnight in New York, 05:00 UTC: 1 row.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('redteam_update_bind_timezone');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
timezone = 'America/New_York'
});
$node->start;
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

note('TimeZone: ' . q1(q{SELECT setting || ' from ' || source FROM pg_settings WHERE name = 'TimeZone'}));
q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t137');
q1(q{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], ts timestamptz);
-- 20:00 UTC on March 3 to 05:00 UTC on March 4, hourly
INSERT INTO public.dt SELECT g, ARRAY[g, 1]::real[], timestamptz '2024-03-03 20:00+00' + g * interval '1 hour'
	FROM generate_series(0, 9) g;
-- one transaction: the worker never sees the mirror before its filter is 0.4's text
BEGIN;
SELECT chroma_mirror('public.dt', collection => 'cs_t137', filter => $$ts >= '2024-03-04 00:00'$$);
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = $$ts >= '2024-03-04 00:00'$$;
COMMIT;
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t137')}), '6', "the 0.4 worker reads '2024-03-04 00:00' as midnight UTC (its TimeZone): 6 rows");

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(ts >= '2024-03-04 00:00:00+00'::timestamp with time zone)},
	'the bound filter is the one the 0.4 worker evaluated (midnight UTC)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'6', 'it still selects the 6 rows the 0.4 mirror sent');

finish($node, $log0);
