# A TRUNCATE barrier with 4 requests in flight (chroma_sync.max_concurrent_requests = 4,
# batches of 5, every request through a proxy that adds 300 ms each way, so the requests
# are in flight on the network too): the batches read before the barrier are completed
# first, then the collection is cleared, and nothing written after the TRUNCATE is sent
# before the clear is acknowledged. Only the rows written after the TRUNCATE end in
# Chroma, with their latest state; twice, the second time with a TRUNCATE, writes and a
# second TRUNCATE in a row.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $pport = start_proxy('delay_proxy.pl', $dir, 300);

my $coll = 'cs_t221';
my $node = new_node('concurrent_truncate',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);

sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

sub chroma_ids
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(id, ',' ORDER BY id::int) FROM chroma_get('$coll')");
}

make_table($node, 'docs', rows => 40, dim => 8);
# no NULL document (a batch clearing one is sent alone): the batches go out concurrently
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'doc ' || id WHERE doc IS NULL});
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

# --- TRUNCATE while 4 are in flight
set_conf($node, 'chroma_sync.test_stall', 1000);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'before ' || id});
ok(wait_for('4 requests in flight', 40,
		sub { log_count($loga, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'the drain has 4 requests in flight');
$node->safe_psql('postgres', q{
BEGIN;
UPDATE docs SET doc = 'just before' WHERE id <= 30;
TRUNCATE docs;
INSERT INTO docs VALUES (7, '{7,7,7,7,7,7,7,7}', 'after truncate', '{"t": 1}'),
	(70, '{7,0,7,0,7,0,7,0}', 'new after truncate', NULL);
COMMIT});
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'after truncate, again' WHERE id = 70});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150), 't',
	'flushed after the TRUNCATE');
ok(log_count($loga, qr/mirror \d+: TRUNCATE barrier: the [1-4] requests? in flight complete before the clear/) >= 1,
	'the barrier completed the requests in flight before the clear');
is(chroma_ids(), '7,70', 'only the rows written after the TRUNCATE are in Chroma');
assert_equal($node, 'docs', $coll, name => 'after the TRUNCATE with 4 in flight');

# --- rows again, a backlog in flight, then TRUNCATE, writes, TRUNCATE, writes
$node->safe_psql('postgres', q{
INSERT INTO docs SELECT g, ARRAY[g, 1, 2, 3, 4, 5, 6, 7]::real[], 'row ' || g, jsonb_build_object('n', g)
FROM generate_series(100, 159) g});
my $logb = log_offset($node);
ok(wait_for('4 requests in flight', 60,
		sub { log_count($logb, qr/mirror \d+: 4 requests in flight/) >= 1 }),
	'the drain of 60 new rows has 4 requests in flight');
$node->safe_psql('postgres', q{TRUNCATE docs});
insert_rows($node, 'docs', 120, 10, 8, 2);
$node->safe_psql('postgres', q{TRUNCATE docs});
insert_rows($node, 'docs', 150, 7, 8, 3);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'last' WHERE id = 151});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150), 't',
	'flushed after two TRUNCATEs');
set_conf($node, 'chroma_sync.test_stall', 0);
is(chroma_ids(), '150,151,152,153,154,155,156', 'only the rows written after the second TRUNCATE are in Chroma');
assert_equal($node, 'docs', $coll, name => 'after two TRUNCATEs with requests in flight');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
finish($node, $log0);
