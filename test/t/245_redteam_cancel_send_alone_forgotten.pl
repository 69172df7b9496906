# RED TEAM REPRO: pg_cancel_backend of the worker while it waits for a request of a batch
# sent "alone" (send_alone: upserts and deletes mixed, a cleared document), the path every
# batch that cannot be one flight takes. Such a batch is never in the pipeline's FIFO
# (src/sync.c send_alone -> sync_send_batch, synchronous), so sync_abandon (run_step's
# PG_CATCH) remembers nothing of it: the aborted request's keys never reach
# chroma_sync.resend (TAP 241 fixed this for flights only). The request may still reach
# Chroma (a slow gateway, a server that read it and goes on): here the gateway holds the
# batch's delete and delivers it after the worker has sent the rows' newer state; the
# deleted-then-reinserted rows are deleted from Chroma for good.
#
# Sequence: N = 4, batch_size 20, late_proxy.pl in delete+hold mode; one transaction
# updates rows 1-10 and deletes rows 16-20 (one batch, mixed: sent alone, deletes first);
# the delete is held by the gateway; the worker is cancelled while it waits for it; rows
# 16-20 are inserted again (v2), which the worker sends within seconds; 8 s after it was
# sent the gateway delivers the held delete (within chroma_sync.timeout), and the test
# waits past the timeout.
#
# Observed (current code): chroma_sync.resend holds 0 of the keys 16-20 right after the
# cancel; at the end chroma_verify says 20|5|0|0 (rows 16-20 missing from Chroma, queue
# and resend empty, chroma_flush true).
# Expected: Chroma equals the table, 20|0|0|0 (the aborted request's keys parked and sent
# again after the timeout, or the worker sending nothing until its unsettled bound passed).
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

my $coll = 'cs_t245';
my $timeout_s = 15;
my $node = new_node('rt_cancel_send_alone',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout_s}000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 20\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

open(my $fh, '>', $arm) or die;
close($fh);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{
BEGIN;
UPDATE docs SET doc = 'v1' WHERE id <= 10;
DELETE FROM docs WHERE id > 15;
COMMIT;});
ok(wait_for('the held delete', 30, sub { !-e $arm }), 'the batch\'s delete is held by the gateway');
my $thold = time();
sleep 0.5;
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
ok(wait_for('the step failed', 10,
		sub { slurp_file($node->logfile, $loga) =~ /canceling statement due to user request/ }),
	'the worker was cancelled while it waited');
diag('info: keys parked in chroma_sync.resend after the cancel: ' . $node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.resend WHERE key::int > 15'));

# the rows come back (the current code sends them within a few seconds)
ChromaSyncTest::insert_rows($node, 'docs', 16, 5, 4, 1);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2' WHERE id > 15});
sleep(0.2) while time() - $thold < 8;
diag('info: rows 16-20 in Chroma before the late delete: '
	  . $node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll', '{16,17,18,19,20}'::text[])"));

# now the gateway delivers the held delete
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
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
