# Nothing is sent before it is durable: a writer with synchronous_commit = off commits
# before its WAL reaches the disk, and the WAL writer is told to wait 10 s. The worker
# must flush the WAL up to what it read before sending it; otherwise a crash right
# after the send takes the row from the table while Chroma keeps it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t019';
# (an immediate stop while a request is unanswered makes the next worker wait one request
# timeout before it sends: 5 s here, within the 30 s each round waits)
my $node = new_node('durable',
	conf => "wal_writer_delay = 10s\nwal_writer_flush_after = 0\nrestart_after_crash = on\nchroma_sync.timeout = 5000\n");

$node->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$node->safe_psql('postgres', 'INSERT INTO d VALUES (1, ARRAY[1, 2, 3])');
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

my $rounds = 5;
for my $r (1 .. $rounds)
{
	# each round: one asynchronous commit, seen in Chroma, then an immediate stop
	my $id = 100 + $r;
	$node->safe_psql('postgres',
		"SET synchronous_commit = off; INSERT INTO d VALUES ($id, ARRAY[$id, 2, 3]); UPDATE d SET embedding = ARRAY[$r, $r, $r] WHERE id = 1");
	my $seen = wait_for("row $id in Chroma", 30, sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll', ARRAY['$id'])") eq '1' });
	ok($seen, "round $r: the asynchronously committed row $id reached Chroma");
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('postgres', "SELECT count(*) FROM d WHERE id = $id"), '1',
		"round $r: after an immediate stop the row the worker sent is still in the table");
	is($node->safe_psql('postgres', "SELECT embedding::text FROM d WHERE id = 1"), "{$r,$r,$r}",
		"round $r: so is the update it sent");
}
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'flushed at the end');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('d')"),
	(1 + $rounds) . '|0|0|0', 'chroma_verify: the collection equals the table');
$node->stop;
done_testing();
