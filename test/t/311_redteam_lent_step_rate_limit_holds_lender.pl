# Fixed: no lent steps while chroma_sync.max_records_per_second is set (sync.c
# lend_candidate); the mirrors take turns then. Red team (143b1a5, "a lent step does not wait for the rate limit"): run_pipeline
# checks sync_rate_would_wait() only before it reads a batch. A batch that cannot go out as
# one request (more records than request_records(), which chroma_sync.max_records_per_second
# caps; or deletes and upserts; or a refused batch's bisection) is sent by send_alone ->
# sync_send_batch in chunks, and every chunk calls rate_limit(), which sleeps in WaitLatch
# (no HTTP wait, so no lent_step_waits give-up either). The lent step then holds the step
# that lent its wait for (chunks - 1) * chunk / rate seconds, after that step's own request
# was answered: the 1 s grace of lent_step_waits and "a lent step ends instead of waiting
# for the rate limit" both do not hold.
#
# Steps: tables a and c, mirrors a -> cs_t311_a, c -> cs_t311_c; then
# chroma_sync.max_records_per_second = 2 (requests of at most 2 records). The proxy holds
# requests containing 'zz311'. UPDATE a row 1 to 'a zz311' (a's request held). INSERT 20
# rows into c in one statement (a lent step of c in a's wait: one batch of 20 upserts, sent
# alone in 10 requests of 2, 1 s apart). One second later the hold is lifted: a's request
# is answered.
# Observed: a's queue entry stays ~8-9 s after a's answer (the lent step of c sleeps in
# rate_limit between its chunks); chroma_flush('a', 4 s) returns false.
# Expected: a's step finishes its acknowledged batch within about LENT_GRACE_MS (1 s) of
# its answer; the rate limit is waited for by c's own step, not by a lent step.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $hold = "$dir/hold";

my ($ca, $cc) = ('cs_t311_a', 'cs_t311_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t311',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 60000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
fresh_collection($node, $_) for ($ca, $cc);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'c', rows => 5, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'c', $cc);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'c', $cc, name => 'c after its backfill');
my $ma = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");
my $mc = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'c'::regclass");
q1("ALTER SYSTEM SET chroma_sync.max_records_per_second = 2");
q1("SELECT pg_reload_conf()");
sleep(2);

unlink("$hold.held");
hold_requests($hold, 'zz311');
my $logw = log_offset($node);
q1(q{UPDATE a SET doc = 'a zz311' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held");
sleep(1.5);		# the rate limit's budget of a's request is spent
insert_rows($node, 'c', 100, 20, 8);
sleep(3);
unlike(slurp_file($node->logfile, $logw), qr/mirror $ma lends its wait to mirror $mc/,
	"no lent step while chroma_sync.max_records_per_second is set");
sleep(1);
hold_requests($hold, 'nothing-is-held-now');	# a's request goes on
ok(wait_for("a's change in Chroma", 15, sub { direct_document($node, $ca, 1) eq 'a zz311' }),
	"a's request reached Chroma");
my $t0 = time;
my $gone = wait_for("a's queue entry gone", 20, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $ma") eq '0' });
my $waited = time - $t0;
diag(sprintf("a's queue entry gone %.1f s after a's answer reached Chroma", $waited));
ok($gone && $waited < 3.5,
	sprintf("a's step finishes its acknowledged batch within the lent step's grace (waited %.1f s)", $waited));
unlink($hold);
is(q1("SELECT chroma_flush(NULL, interval '120 seconds')", timeout => 150), 't', 'all flushed at the end');
assert_equal($node, 'a', $ca, name => 'a at the end');
assert_equal($node, 'c', $cc, name => 'c at the end');
finish($node, $log0);
