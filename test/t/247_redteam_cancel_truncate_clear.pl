# RED TEAM REPRO: pg_cancel_backend of the worker while it waits for the delete of a
# TRUNCATE barrier's clear (src/sync_send.c sync_clear_collection, called by send_alone
# once the 4 flights in flight completed). The delete request is aborted but may still
# reach Chroma; nothing remembers its ids: sync_abandon (run_step's PG_CATCH) only knows
# the pipeline's flights, and the ids a clear's delete carries are parked only when it
# fails with an outcome-unknown answer (res->unknown_ids), not when an ERROR ends the
# wait. The next step clears again, sends the rows inserted after the TRUNCATE (same ids),
# and then the aborted delete lands: those rows are gone from Chroma for good.
#
# Sequence: N = 4, batches of 5, 20 rows; late_proxy.pl in delete+hold mode (the clear's
# delete is held); TRUNCATE; the worker is cancelled while it waits for the held delete;
# the 20 ids are inserted again (v2), which the worker sends within seconds; 8 s after it
# was sent the gateway delivers the held delete (within chroma_sync.timeout); the test
# waits past the timeout.
#
# Observed (current code): chroma_sync.resend empty after the cancel; at the end
# chroma_verify says 20|20|0|0 (every row missing from Chroma) with chroma_flush true.
# Expected: Chroma equals the table, 20|0|0|0 (the aborted delete's ids parked and sent
# again after the timeout, or nothing sent until the worker's unsettled bound passed).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'delete+hold');

my $coll = 'cs_t247';
my $timeout_s = 15;
my $node = new_node('rt_cancel_truncate_clear',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout_s}000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

open(my $fh, '>', $arm) or die;
close($fh);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{TRUNCATE docs});
ok(wait_for('the held delete', 30, sub { !-e $arm }), 'the clear\'s delete is held by the gateway');
my $thold = time();
sleep 0.5;
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
ok(wait_for('the step failed', 10,
		sub { slurp_file($node->logfile, $loga) =~ /canceling statement due to user request/ }),
	'the worker was cancelled while it waited');
diag('info: keys parked in chroma_sync.resend after the cancel: ' . $node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.resend'));

ChromaSyncTest::insert_rows($node, 'docs', 1, 20, 4, 1);
# the current code sends them within a few seconds
sleep(0.2) while time() - $thold < 8;
diag('info: before the late delete chroma_verify says '
	  . $node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"));

open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late delete', 30, sub { -e "$release.done" }), 'the gateway delivered the held delete');
like(slurp_file("$release.done"), qr/^HTTP\/1\.[01] 200/, 'Chroma applied it');
my $late = sprintf("%.1f", time() - $thold);
ok($late < $timeout_s, "it landed within the request timeout ($late s after it was sent)");
sleep(0.5) while time() - $thold < $timeout_s + 3;
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed after the request timeout');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table after the late delivery');
finish($node, $log0);
