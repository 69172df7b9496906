# Crashes during a drain: kill -9 of the worker (the postmaster restarts the whole cluster,
# crash recovery), then an immediate shutdown and start. After each, the collection ends
# equal to the table. status.synced survives a clean restart.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $coll = 'cs_t011_docs';
# test_stall slows the drain a little (each batch waits 100 ms before it is sent), so the
# kill reliably lands in the middle of it, whatever the machine's speed.
my $node = new_node('crash',
	conf => "restart_after_crash = on\nchroma_sync.batch_size = 200\nchroma_sync.test_stall = 100\n");

make_table($node, 'docs', rows => 2000, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

# Writes in several transactions, then waits until the worker is in the middle of them.
sub start_drain
{
	my ($from, $salt) = @_;
	my $synced = status_row($node, 'docs', 'synced');
	for my $i (0 .. 9)
	{
		my $lo = $from + $i * 600;
		my $hi = $lo + 599;
		$node->safe_psql('postgres', qq{
INSERT INTO docs SELECT g, ARRAY(SELECT (cos(g * 3.1 + d + $salt))::real FROM generate_series(1, 8) d),
	'crash doc ' || g, jsonb_build_object('batch', $i, 'salt', $salt)
FROM generate_series($lo, $hi) g
ON CONFLICT (id) DO UPDATE SET embedding = excluded.embedding, doc = excluded.doc, meta = excluded.meta;
UPDATE docs SET doc = 'updated $salt ' || id, meta = meta || '{"u": $salt}' WHERE id % 10 = $i AND id <= 2000;
DELETE FROM docs WHERE id % 97 = $i AND id <= 2000;});
	}
	my $ok = wait_for('the worker is in the middle of the drain', 60, sub {
		my ($s, $p) = split /\|/, $node->safe_psql('postgres',
			"SELECT synced, pending FROM chroma_sync.status WHERE source = 'docs'::regclass");
		$s >= $synced + 600 && $p > 600;
	});
	ok($ok, 'the drain is under way: some changes sent, many pending') or diagnostics($node);
	note('status: ' . $node->safe_psql('postgres',
		"SELECT synced, pending FROM chroma_sync.status WHERE source = 'docs'::regclass"));
}

# --- kill -9 of the worker
my $log1 = log_offset($node);
start_drain(100_001, 1);
my $pid = worker_pid($node);
like($pid, qr/^\d+$/, 'the worker runs');
is(kill('KILL', $pid), 1, "kill -9 of the worker (pid $pid)");

ok( wait_for('crash recovery', 60, sub {
		my $log = slurp_file($node->logfile, $log1);
		$log =~ /terminating any other active server processes/
		  && $log =~ /all server processes terminated; reinitializing/
		  && $log =~ /database system is ready to accept connections/s
		  && $node->safe_psql('postgres', 'SELECT 1') eq '1';
	}),
	'the postmaster restarted the cluster (crash recovery)');
like(slurp_file($node->logfile, $log1), qr/chroma_sync worker.*was terminated by signal 9/,
	'the server log shows the killed worker');
isnt(wait_for_new_worker($node, $pid, 30), '', 'a worker runs again after crash recovery');
assert_equal($node, 'docs', $coll, name => 'after kill -9 and crash recovery');

# --- immediate shutdown during a drain
my $log2 = log_offset($node);
start_drain(100_301, 2);    # mostly updates of the first drain's rows, 300 new ones
$node->stop('immediate');
$node->start;
assert_equal($node, 'docs', $coll, name => 'after an immediate shutdown and start');

# --- status survives a clean restart
my $before = $node->safe_psql('postgres',
	"SELECT synced, pending, failed, lag IS NULL, state FROM chroma_sync.status WHERE source = 'docs'::regclass");
like($before, qr/^\d+\|0\|0\|t\|syncing$/, "status after the flush: $before");
$node->restart;
my $after = $node->safe_psql('postgres',
	"SELECT synced, pending, failed, lag IS NULL, state FROM chroma_sync.status WHERE source = 'docs'::regclass");
is($after, $before, 'status (synced, pending, failed, lag, state) survives a clean restart');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
assert_equal($node, 'docs', $coll, name => 'after a clean restart');

finish($node, $log2);
