# RED TEAM REPRO: the worker terminated with 4 requests in flight, and a request it
# aborted delivered to Chroma late (a slow gateway), after the next worker sent the
# rows' newer state: the stale state wins and nothing sends the rows again.
#
# Sequence: N = 4, batches of 5, 20 rows mirrored (direct URL). chroma_sync.url is
# switched (ALTER SYSTEM + reload) to a proxy adding 7 s each way. UPDATE every row to
# 'v1': 4 upserts go in flight (log "4 requests in flight"). chroma_sync.url is switched
# back to the direct URL, the worker is pg_terminate_backend'ed, every row is updated to
# 'v2', chroma_flush returns (the new worker sent v2 directly). The 4 aborted requests
# are still in the proxy, which delivers them to Chroma 7 s after they were sent.
#
# Observed (run 04:03 UTC): after the late delivery Chroma holds 'v1' for every row, the queue and
# chroma_sync.resend are empty, chroma_flush says 't' and chroma_verify reports 20
# different rows, forever (the terminated worker exits through FATAL: sync_abandon does
# not run, its in-flight keys are never parked in chroma_sync.resend).
# Expected: the keys of requests in flight when the worker went are treated as outcome
# unknown (sent again after the request timeout), so Chroma ends equal to the table.
# (doc/concurrency.md names this gap for N = 1 as well; with N in flight the window
# is N batches wide.)
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

my $coll = 'cs_t240';
my $node = new_node('rt_terminate_late',
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
$node->safe_psql('postgres', "ALTER SYSTEM SET chroma_sync.url = '$direct'; SELECT pg_reload_conf()");
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
isnt(wait_for_new_worker($node, $w, 30), '', 'a new worker runs');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed');
my $flushed_at = time() - $t0;
note(sprintf("flushed %.1f s after the v1 update", $flushed_at));
is($node->safe_psql('postgres',
		"SELECT count(*) FROM chroma_get('$coll', (SELECT array_agg(id::text) FROM docs)) WHERE document = 'v2'"),
	'20', 'Chroma held v2 before the late delivery');
# the aborted requests reach Chroma 7 s after they were sent
sleep(1) while time() - $t0 < 14;
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed again');
# give a resend (after chroma_sync.timeout) its chance
sleep(1) while time() - $t0 < 45;
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed after the request timeout');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table after the late delivery of the aborted requests');
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
