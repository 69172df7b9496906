# RED TEAM REPRO: an ERROR in a step (here pg_cancel_backend of the worker) while it waits
# for the oldest of 4 requests in flight: sync_abandon remembers the keys of the flights
# still in p->inflight, but the oldest one was already popped from the FIFO
# (pipeline_complete pops it before sync_flight_finish waits), so its keys are not parked
# in chroma_sync.resend although its request was aborted on the wire (with N = 1 the
# flight stayed in p->inflight while waiting, and was remembered). A slow gateway
# delivering that aborted request late then leaves the stale state in Chroma for good.
#
# Sequence: N = 4, batches of 5, 20 rows mirrored (direct URL); chroma_sync.url switched
# (ALTER SYSTEM + reload) to a proxy adding 7 s each way; UPDATE all rows to 'v1' (4
# upserts in flight); url switched back to direct; pg_cancel_backend(worker) while it
# waits for the oldest response; then UPDATE all rows to 'v2'; flush; wait for the
# proxy to deliver the 4 aborted requests and for chroma_sync.timeout.
#
# Observed: right after the cancel chroma_sync.resend holds 15 keys, not 20 (the oldest
# flight's 5 keys are missing); at the end those 5 rows hold 'v1' in Chroma while the
# table says 'v2', with an empty queue and resend (chroma_verify: 20|0|0|5).
# Expected: the 20 keys of the 4 aborted requests are in chroma_sync.resend and are sent
# again after the timeout: Chroma ends equal to the table (20|0|0|0).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $slow = start_proxy('delay_proxy.pl', $dir, 7000);
my $direct = $ENV{CHROMA_URL};

my $coll = 'cs_t241';
my $node = new_node('rt_cancel_oldest',
	conf => "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "chroma_sync.timeout = 25000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);

sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

$node->safe_psql('postgres', "ALTER SYSTEM SET chroma_sync.url = 'http://127.0.0.1:$slow'; SELECT pg_reload_conf()");
# warm up: after a URL change the worker probes the server (one round trip through
# the slow proxy) before its first request; one row sent through it
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'warm' WHERE id = 1});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '90 seconds')", timeout => 100), 't',
	'one row sent through the slow proxy');
my $loga = log_offset($node);
my $t0 = time();
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1'});
ok(wait_for('4 requests in flight', 8,
		sub { log_count($loga, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'4 requests in flight through the slow gateway');
sleep 1;
$node->safe_psql('postgres', "ALTER SYSTEM SET chroma_sync.url = '$direct'; SELECT pg_reload_conf()");
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
ok(wait_for('the step failed', 10,
		sub { log_count($loga, qr/canceling statement due to user request/) >= 1 }),
	'the step was cancelled');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.resend'), '20',
	'the keys of all 4 aborted requests are parked in chroma_sync.resend');
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed');
# the aborted requests reach Chroma 7 s after they were sent; then the request timeout
sleep(1) while time() - $t0 < 45;
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed after the request timeout');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table after the late delivery of the aborted requests');
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
