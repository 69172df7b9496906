# RED TEAM REPRO: TAP 243's hang without any cancel. The database has a lock_timeout (a
# common DBA setting, ALTER DATABASE ... SET lock_timeout), which the worker inherits; a
# maintenance job holds chroma_sync.resend (VACUUM FULL, CLUSTER, REINDEX, here LOCK TABLE
# ... IN SHARE MODE) a little longer than that while the oldest of 4 flights gets a 504.
# The INSERT into chroma_sync.resend (sync_unknown_persist, called by pipeline_complete
# before pipeline_settle) fails with 55P03; its PG_CATCH calls AbortOutOfAnyTransaction,
# whose XACT_EVENT_ABORT callback (http.c http_xact_callback -> chroma_http_abort_all)
# releases the 3 flights still in the pipeline; pipeline_settle then waits for them in
# chroma_http_wait ("while (!req->done)") forever.
#
# Observed (current code): chroma_flush false after 30 s, the worker in
# Extension/Extension, chroma_verify 20|0|0|20.
# Expected: the worker goes on; Chroma equals the table (20|0|0|0).
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

my $coll = 'cs_t249';
my $node = new_node('rt_persist_lock_timeout',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 4000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

# a session holds chroma_sync.resend: the worker's INSERT into it waits
$node->safe_psql('postgres', "ALTER DATABASE postgres SET lock_timeout = '2s'");
my $old = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
ok(wait_for_new_worker($node, $old, 30) ne '', 'a new worker, with the database\'s lock_timeout');
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
ok(wait_for('the lock timeout', 10,
		sub { slurp_file($node->logfile, $loga) =~ /canceling statement due to lock timeout/ }),
	'the worker\'s INSERT into chroma_sync.resend hit lock_timeout (no cancel)');
$locker->query_safe('COMMIT');
$locker->quit;

$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')", timeout => 40), 't',
	'the worker goes on after the lock timeout: the rows written after it are synced');
diag('worker wait: ' . $node->safe_psql('postgres',
	"SELECT coalesce(wait_event_type, '-') || '/' || coalesce(wait_event, '-') || ' ' || state FROM pg_stat_activity WHERE pid = $w"));
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table');
# the stale write the gateway held is never delivered (release not created): nothing late
finish($node, $log0);
