# RED TEAM REPRO: a pg_cancel_backend of the worker while it reads a batch's rows makes a
# good row "failed" for good. sync_try_subxact (src/sync_txn.c) catches every error of a
# row read except the transaction-rollback class and 55P03, QUERY_CANCELED (57014)
# included: the first cancel during the batch's SELECT is swallowed and the batch is read
# again key by key (sync_read_rows); a cancel during one key's read is recorded as that
# row's error ("could not read the row: canceling statement due to user request"), its
# queue entry is deleted and the row goes to chroma_sync.failed, which only
# chroma_retry_failed() empties. A cancel (an operator stopping what looks stuck, here a
# filter calling an expensive immutable function) should fail the step, as it does
# everywhere else, and leave the entries queued. (The swallowed cancel also made
# chroma_http_progress's progress_cb abort every request in flight: they come back as
# outcome unknown.)
#
# Observed (current code): chroma_sync.failed holds row 1 with "could not read the row:
# canceling statement due to user request"; chroma_verify 10|0|0|1 after chroma_flush
# returned true.
# Expected: no row in chroma_sync.failed; Chroma equals the table (10|0|0|0).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $coll = 'cs_t246';
my $node = new_node('rt_cancel_row_failed',
	conf => "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 10, dim => 4);
# an expensive check (declared immutable: its result depends on its argument only)
$node->safe_psql('postgres', q{
CREATE FUNCTION slow_ok(d text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF d LIKE 'slow%' THEN PERFORM pg_sleep(1.5); END IF;
	RETURN true;
END $$;});
fresh_collection($node, $coll);
$node->safe_psql('postgres', qq{
SELECT chroma_mirror('docs', collection => '$coll', document_column => 'doc',
	metadata_columns => '{meta}', filter => 'slow_ok(doc)')});
assert_equal($node, 'docs', $coll, name => 'after the backfill');

my $w = worker_pid($node);
sub sleeping
{
	return $node->safe_psql('postgres', "SELECT wait_event FROM pg_stat_activity WHERE pid = $w") eq 'PgSleep';
}
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'slow ' || id WHERE id IN (1, 2)});
ok(wait_for('the read of the batch', 20, \&sleeping), 'the worker reads the batch (the filter runs)');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
sleep 0.3;
ok(wait_for('a read again', 20, \&sleeping), 'the worker reads again after the cancel (key by key)');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w)");
sleep 0.3;

is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')", timeout => 40), 't',
	'flushed');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.failed"), '0',
	'no row is in chroma_sync.failed (a cancel says nothing of the rows)');
diag($node->safe_psql('postgres', "SELECT id || ': ' || error FROM chroma_sync.failed"));
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'10|0|0|0', 'Chroma equals the table');
finish($node, $log0);
