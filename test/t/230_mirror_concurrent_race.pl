# The worker with 4 requests in flight per mirror (chroma_sync.max_concurrent_requests = 4,
# batches of 5): the backfill keeps 4 pages in flight; in the drain, rows are changed
# while their batches are in flight (chroma_sync.test_stall holds the worker before each
# request begins, the earlier ones still in flight): a batch that holds a key of a request
# in flight waits for it; no queue entry is deleted before its own request is
# acknowledged; Chroma ends equal to the table every time.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $coll = 'cs_t220';
my $node = new_node('concurrent_race',
	conf => "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);

# log lines since $from matching $re
sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

make_table($node, 'docs', rows => 40, dim => 8);
# a NULL document is cleared by a delete and an add: such a batch is sent alone (after
# every request in flight); here every batch goes out as one upsert
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'doc ' || id WHERE doc IS NULL});
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after a backfill of 8 pages');
ok(log_count($log0, qr/mirror \d+: 4 requests in flight/) >= 1,
	'the backfill had 4 pages in flight at once');

# True once the worker holds a batch it has read and not sent (it waits in the stall).
sub stalled
{
	return wait_for('the worker holds a batch in the stall', 20, sub {
		$node->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND state = 'active' AND wait_event = 'Extension'})
		  eq '1';
	});
}

# --- keys of a request in flight changed again: their new entries wait for it
set_conf($node, 'chroma_sync.test_stall', 1500);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'a1 ' || id WHERE id <= 15});
ok(stalled(), 'the first batch (ids 1-5) is read and held before its request');
# ids 1-5 again (new queue entries after the third batch, read while the first is in
# flight), and ids 6-7 (coalesced into the second batch)
$node->safe_psql('postgres', q{
UPDATE docs SET doc = 'a2 ' || id, embedding[1] = id * 100, meta = '{"a": 2}' WHERE id <= 7});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't',
	'flushed after the changes of keys in flight');
ok(log_count($loga, qr/mirror \d+: a batch waits for the request in flight that holds one of its keys/) >= 1,
	'a batch holding keys of a request in flight waited for it');
assert_equal($node, 'docs', $coll, name => 'keys changed while in flight');

# --- deletes, a NULL embedding, a primary-key change and a cleared document while
# batches are in flight (such batches go out alone, after every request in flight)
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'a3 ' || id WHERE id <= 20});
ok(stalled(), 'a batch is held before its request');
sleep 1.6;
ok(stalled(), 'the next batch is held, the first in flight');
$node->safe_psql('postgres', q{
DELETE FROM docs WHERE id IN (2, 8);
UPDATE docs SET embedding = NULL WHERE id = 3;
UPDATE docs SET id = 400 WHERE id = 4;
UPDATE docs SET meta = '{"only": true}', doc = NULL WHERE id IN (5, 9)});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't',
	'flushed after deletes and cleared documents in flight');
assert_equal($node, 'docs', $coll, name => 'deletes and cleared documents while in flight');
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'doc ' || id WHERE doc IS NULL});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't',
	'documents set again');

# --- 4 in flight, none of their entries deleted before its own response
set_conf($node, 'chroma_sync.test_stall', 3000);
my $logb = log_offset($node);
# (not row 3, whose NULL embedding makes its batch a delete and an upsert, sent alone)
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'b1 ' || id WHERE embedding IS NOT NULL});
my $keys = $node->safe_psql('postgres', 'SELECT count(*) FROM docs WHERE embedding IS NOT NULL');
ok(wait_for('4 requests in flight', 40,
		sub { log_count($logb, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'the drain has 4 requests in flight');
# the fifth batch is held now; the first four have begun and none is finished
is(status_row($node, 'docs', 'pending'), $keys,
	'with 4 in flight every key is still pending (no entry deleted before its request completed)');
# change rows of the batches in flight (ids 10-30), again and again
for my $v (1 .. 3)
{
	$node->safe_psql('postgres', qq{
UPDATE docs SET embedding[2] = $v * 1000 + id, doc = 'b2 $v ' || id WHERE id BETWEEN 10 AND 30 AND id % 3 = $v % 3});
	sleep 1;
}
$node->safe_psql('postgres', q{
DELETE FROM docs WHERE id IN (11, 22);
INSERT INTO docs VALUES (41, '{4,1,4,1,4,1,4,1}', 'new', '{"k": 41}')});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150), 't',
	'flushed after changes during 4 in flight');
set_conf($node, 'chroma_sync.test_stall', 0);
assert_equal($node, 'docs', $coll, name => 'changes during 4 in flight');

# --- a backlog drained with 4 in flight, no stall
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'c ' || id, meta = meta || '{"c": 1}'});
insert_rows($node, 'docs', 100, 200, 8, 3);
assert_equal($node, 'docs', $coll, name => 'a backlog of 240 keys');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.queue'), '0', 'the queue is empty');
finish($node, $log0);
