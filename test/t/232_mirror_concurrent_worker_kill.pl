# The worker terminated with 4 requests in flight (chroma_sync.max_concurrent_requests =
# 4, batches of 5, every request through a proxy that adds 1.5 s each way, so the four
# are in flight on the network when the worker goes): their queue entries were not
# deleted, the next worker sends the rows' current state, and Chroma ends equal to the
# table. Rows of the batches in flight are changed right after the termination. Then the
# same with the whole cluster restarted (crash recovery) while 4 are in flight.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $pport = start_proxy('delay_proxy.pl', $dir, 1500);

my $coll = 'cs_t222';
my $node = new_node('concurrent_worker_kill',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "chroma_sync.timeout = 8000\nlog_min_messages = debug1\nrestart_after_crash = on\n");
my $log0 = log_offset($node);

sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

make_table($node, 'docs', rows => 40, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

# --- pg_terminate_backend with 4 in flight
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1 ' || id, embedding[1] = id + 0.5});
my $keys = $node->safe_psql('postgres', 'SELECT count(*) FROM docs');
ok(wait_for('4 requests in flight', 30,
		sub { log_count($loga, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'4 requests in flight');
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
is(status_row($node, 'docs', 'pending'), $keys, 'every key is still pending after the termination');
$node->safe_psql('postgres', q{
UPDATE docs SET doc = 'v2 ' || id, embedding[2] = id * 10 WHERE id % 2 = 0;
DELETE FROM docs WHERE id IN (3, 13);
UPDATE docs SET embedding = NULL WHERE id = 5});
isnt(wait_for_new_worker($node, $w, 30), '', 'a new worker runs');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '90 seconds')", timeout => 120), 't',
	'flushed after the termination');
assert_equal($node, 'docs', $coll, name => 'after the worker was terminated with 4 in flight');

# --- the cluster restarted (crash recovery) with 4 in flight
my $logb = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v3 ' || id, meta = meta || '{"v": 3}'});
ok(wait_for('4 requests in flight', 30,
		sub { log_count($logb, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'4 requests in flight again');
assert_no_crash($node, $log0, 'no crash before the one on purpose');
# kill -9 of the worker: the postmaster restarts every process (crash recovery)
crash_restart_cluster($node, 'no such application');
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v4 ' || id WHERE id % 3 = 0});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '90 seconds')", timeout => 120), 't',
	'flushed after the crash');
assert_equal($node, 'docs', $coll, name => 'after a crash with 4 in flight');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
# the crash was on purpose: the log check starts after it
finish($node, log_offset($node));
