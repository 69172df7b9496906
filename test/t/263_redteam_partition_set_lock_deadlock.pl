# Red-team repro (partition DDL locks): CREATE TABLE ... PARTITION OF a mid-level
# partitioned table takes, in its after step, the mirror's "partition set" lock
# (lock_partition_set: an AccessExclusive object lock on the MIRRORED ROOT, held to the end
# of the transaction). Two transactions that each create a partition under a different
# mid-level table of one mirrored tree (and PostgreSQL locks only the mid-level parent)
# now wait for each other's root lock: the ordinary pattern "A creates under m1 then m2,
# B creates under m2" deadlocks, where PostgreSQL alone just queues A behind B.
#
# Sequence (alice owns t, LIST (k), with partitioned partitions m1 (k in 1, 2) and m2 (k
# in 3, 4), each with one leaf; t mirrored):
#   session A: BEGIN; CREATE TABLE a1 PARTITION OF m1 FOR VALUES IN (2);
#   session B: BEGIN; CREATE TABLE b1 PARTITION OF m2 FOR VALUES IN (4);
#              -- created, then waits for A's partition-set lock on t
#   session A: CREATE TABLE a2 PARTITION OF m2 FOR VALUES IN (5)...  -- waits for B's m2
# Observed: "deadlock detected", one of the transactions fails.
# Expected (as in database "plain", no extension, the control): B's CREATE completes at
# once, A waits for B's COMMIT, then both commit.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt263');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT CREATE ON SCHEMA public TO alice;
CREATE DATABASE plain;});
$node->safe_psql('plain', 'GRANT CREATE ON SCHEMA public TO alice');
fresh_collection($node, 'rt263_t');
for my $db ('plain', 'postgres')
{
	$node->safe_psql($db, q{
SET ROLE alice;
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE m1 PARTITION OF t FOR VALUES IN (1, 2) PARTITION BY LIST (k);
CREATE TABLE m1_1 PARTITION OF m1 FOR VALUES IN (1);
CREATE TABLE m2 PARTITION OF t FOR VALUES IN (3, 4, 5) PARTITION BY LIST (k);
CREATE TABLE m2_3 PARTITION OF m2 FOR VALUES IN (3);
INSERT INTO t VALUES (1, 1, '{1,1}', 'one'), (3, 3, '{3,1}', 'three');
});
}
$node->safe_psql('postgres', q{SELECT chroma_mirror('t', collection => 'rt263_t', document_column => 'doc')});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

for my $db ('plain', 'postgres')
{
	my $a = $node->background_psql($db, on_error_stop => 0);
	my $b = $node->background_psql($db, on_error_stop => 0);
	$a->query_safe(q{SET ROLE alice; BEGIN; CREATE TABLE a1 PARTITION OF m1 FOR VALUES IN (2);});
	$b->query_until(qr/started/, q{\echo started
SET ROLE alice;
BEGIN;
CREATE TABLE b1 PARTITION OF m2 FOR VALUES IN (4);
\echo b1-created
});
	# B's CREATE either completes (plain) or waits for A (the mirror's partition-set lock)
	wait_for("$db: B's CREATE done or waiting", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'CREATE TABLE b1%' AND (state = 'idle in transaction' OR wait_event_type = 'Lock')}) eq '1' });
	$a->query_until(qr/a2-sent/, q{\echo a2-sent
CREATE TABLE a2 PARTITION OF m2 FOR VALUES IN (5);
});
	sleep 4;	# deadlock_timeout is 1s
	# (A may be waiting in its CREATE: queue its COMMIT without waiting for output)
	$a->{stdin} .= "COMMIT;\n";
	$a->{run}->pump_nb;
	$b->query_until(qr/b-commit-sent/, q{\echo b-commit-sent
COMMIT;
});
	$a->quit;
	$b->quit;
	my ($aerr, $berr) = ($a->{stderr}, $b->{stderr});
	unlike("$aerr\n$berr", qr/deadlock/, "$db: no deadlock") or diag("A: $aerr\nB: $berr");
	is($node->safe_psql($db, q{SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
		WHERE relname IN ('a1', 'a2', 'b1')}), 'a1,a2,b1', "$db: all three partitions created");
}

finish($node, $log0);
