# RED TEAM REPRO: the oldest of 4 requests in flight gets an outcome-unknown answer (a
# gateway's 504); pipeline_complete remembers its keys at once (remember_unknown ->
# sync_unknown_persist) while the 3 other flights are still in the FIFO. The INSERT into
# chroma_sync.resend waits for a lock (a session holds the table in SHARE mode: a backup
# tool, a maintenance script) and the worker is cancelled meanwhile (pg_cancel_backend,
# or a lock_timeout). sync_unknown_persist catches the error and calls
# AbortOutOfAnyTransaction, whose XACT_EVENT_ABORT callback (http.c http_xact_callback ->
# chroma_http_abort_all) releases EVERY request slot, including the 3 flights still in
# the pipeline (release_slot sets done = false, removes the easy handle). pipeline_settle
# then waits for them in chroma_http_wait, whose loop "while (!req->done)" can never end:
# the worker hangs for good, no mirror of the database syncs again.
#
# Observed (current code): chroma_flush returns f after 30 s, the worker sits in
# pg_stat_activity as Extension/Extension (chroma_http_wait) with 20 pending, and
# chroma_verify says 20|0|0|20 (v2 never sent; nothing is sent for the database again).
#
# Expected: the worker recovers (the flights counted as outcome unknown, or completed),
# the rows written after are synced: chroma_flush returns true, Chroma equals the table.
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
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release);

my $coll = 'cs_t243';
my $node = new_node('rt_persist_cancel',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 4000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

# a session holds chroma_sync.resend: the worker's INSERT into it waits
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE chroma_sync.resend IN SHARE MODE;');

open(my $fh, '>', $arm) or die;
close($fh);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1'});
ok(wait_for('the 504', 30, sub { !-e $arm }), 'one upsert got the late 504');
my $w = worker_pid($node);
ok(poll_query($node, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $w", 'Lock', 20),
	'the worker waits for the lock on chroma_sync.resend (remembering the 504 keys)');
like(slurp_file($node->logfile, $loga), qr/mirror \d+: 4 requests in flight/,
	'the 504 request was one of 4 in flight');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
sleep 1;
$locker->query_safe('COMMIT');
$locker->quit;

$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')", timeout => 40), 't',
	'the worker goes on after the cancel: the rows written after it are synced');
diag('worker wait: ' . $node->safe_psql('postgres',
	"SELECT coalesce(wait_event_type, '-') || '/' || coalesce(wait_event, '-') || ' ' || state FROM pg_stat_activity WHERE pid = $w"));
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table');
# the stale write the gateway held is never delivered (release not created): nothing late
finish($node, $log0);
