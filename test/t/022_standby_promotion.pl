# Physical replication (issue 4, item 2): a streaming standby of a primary with a mirror.
# The mirror is paused on the primary, rows are written (they wait in the queue), the
# standby replays them. No chroma_sync worker runs on the standby. The primary stops, the
# standby is promoted, chroma_resume there drains the queue that came with the WAL: the
# collection ends equal to the promoted node's table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $coll = 'cs_t022_docs';
my $url = $ENV{CHROMA_URL};

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$url'
chroma_sync.retry_max_delay = 2000
chroma_sync.timeout = 5000
log_line_prefix = '%m [%p] %b '
});
$primary->start;
my $plog0 = log_offset($primary);
$primary->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');

make_table($primary, 'docs', rows => 300, dim => 8);
fresh_collection($primary, $coll);
mirror($primary, 'docs', $coll);
assert_equal($primary, 'docs', $coll, name => 'primary before the standby');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
my $slog0 = log_offset($standby);

# changes that only reach the queue: the mirror is paused on the primary
$primary->safe_psql('postgres', "SELECT chroma_pause('docs')");
$primary->safe_psql('postgres', q{
INSERT INTO docs SELECT g, ARRAY(SELECT (cos(g * 1.7 + d) * 3)::real FROM generate_series(1, 8) d),
	'queued ' || g, jsonb_build_object('queued', true, 'n', g) FROM generate_series(301, 500) g;
UPDATE docs SET doc = 'changed on the primary', meta = meta - 'tag' WHERE id % 9 = 0;
UPDATE docs SET embedding = NULL WHERE id BETWEEN 10 AND 12;
DELETE FROM docs WHERE id BETWEEN 200 AND 239;});
my $pending = status_row($primary, 'docs', 'pending');
ok($pending >= 200, "the primary's queue holds the changes ($pending keys)");
$primary->wait_for_catchup($standby, 'replay');

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is(status_row($standby, 'docs', 'pending'), $pending,
	'the queue arrived on the standby with the WAL');
is(status_row($standby, 'docs', 'state'), 'paused', 'the mirror is paused there too');

# sample the standby's processes for a few seconds: no worker connects to a database
my $workers_seen = 0;
my %types;
for (1 .. 10)
{
	my $rows = $standby->safe_psql('postgres',
		"SELECT backend_type FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%'");
	for (split /\n/, $rows)
	{
		$types{$_}++;
		$workers_seen++ if $_ eq 'chroma_sync worker';
	}
	sleep 0.5;
}
is($workers_seen, 0, 'no chroma_sync worker runs on the standby')
  or diag('seen: ' . join(', ', map { "$_ x$types{$_}" } sort keys %types));
note('chroma_sync processes on the standby: '
	  . (%types ? join(', ', sort keys %types) : 'none (the launcher starts after recovery)'));

$primary->stop('fast');
assert_no_crash($primary, $plog0, 'no crash on the primary');

$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'the standby was promoted');
ok(poll_query($standby,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'",
		'1', 60),
	'a chroma_sync worker starts after promotion');
# the former primary may have left requests unanswered: one request timeout first (TAP 253)
$standby->wait_for_log(qr/this server is on timeline 2, the worker's last record is from timeline 1: nothing is sent for 5000 ms/, $slog0);
pass('the promoted worker waits one request timeout for the former primary\'s requests');
is(status_row($standby, 'docs', 'state'), 'paused',
	'the mirror is still paused (by chroma_pause, not as a restored copy)');
is(status_row($standby, 'docs', 'last_error'), 'paused by chroma_pause()',
	'last_error is the pause of the primary');

$standby->safe_psql('postgres', "SELECT chroma_resume('docs')");
assert_equal($standby, 'docs', $coll, name => 'promoted standby after chroma_resume');
is(status_row($standby, 'docs', 'pending'), '0', 'the queue is drained');
is(status_row($standby, 'docs', 'state'), 'syncing', 'the mirror syncs on the new primary');

# and keeps syncing new changes
$standby->safe_psql('postgres', q{
INSERT INTO docs VALUES (9001, '{1,2,3,4,5,6,7,8}', 'written after promotion', '{"p": 1}');
DELETE FROM docs WHERE id = 1;});
assert_equal($standby, 'docs', $coll, name => 'promoted standby, new changes');

assert_no_crash($standby, $slog0, 'no crash on the standby');
$standby->stop;
done_testing();
