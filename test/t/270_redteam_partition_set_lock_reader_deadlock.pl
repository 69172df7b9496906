# Red-team repro (partition DDL serialization): a transaction that READ the mirrored
# partitioned table and then creates a partition of it now deadlocks with a concurrent
# CREATE ... PARTITION OF, where PostgreSQL alone just lets the first transaction go
# first. The extension's before step takes the mirror's partition-set lock (exclusive,
# to transaction end) BEFORE PostgreSQL's AccessExclusiveLock on the parent: B holds the
# set lock and waits for t (A's AccessShareLock from its SELECT); A's CREATE then waits
# for the set lock held by B -> hard deadlock. Without the extension, A's AEL request
# jumps ahead of B's queued request (A already holds a lock conflicting with it), so A's
# CREATE completes at once and B follows after A commits.
#
# Sequence (alice owns t, LIST (k), leaves t_1, t_2; t mirrored):
#   session A: BEGIN; SELECT count(*) FROM t;
#   session B: CREATE TABLE t_3 PARTITION OF t FOR VALUES IN (3);  -- waits for A
#   session A: CREATE TABLE t_4 PARTITION OF t FOR VALUES IN (4); COMMIT;
# Observed: "deadlock detected", one of the two CREATEs fails.
# Expected (as in database "plain", no extension, the control): no deadlock; t_3 and t_4
# both created.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt270');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT CREATE ON SCHEMA public TO alice;
CREATE DATABASE plain;});
$node->safe_psql('plain', 'GRANT CREATE ON SCHEMA public TO alice');
fresh_collection($node, 'rt270_t');
for my $db ('plain', 'postgres')
{
	$node->safe_psql($db, q{
SET ROLE alice;
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE t_1 PARTITION OF t FOR VALUES IN (1);
CREATE TABLE t_2 PARTITION OF t FOR VALUES IN (2);
INSERT INTO t VALUES (1, 1, '{1,1}', 'one'), (2, 2, '{2,1}', 'two');
});
}
$node->safe_psql('postgres', q{SELECT chroma_mirror('t', collection => 'rt270_t', document_column => 'doc')});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

for my $db ('plain', 'postgres')
{
	my $a = $node->background_psql($db, on_error_stop => 0);
	my $b = $node->background_psql($db, on_error_stop => 0);
	$a->query_safe(q{SET ROLE alice; BEGIN; SELECT count(*) FROM t;});
	$b->query_until(qr/started/, q{\echo started
SET ROLE alice;
CREATE TABLE t_3 PARTITION OF t FOR VALUES IN (3);
});
	ok(wait_for("$db: B's CREATE waits", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'CREATE TABLE t_3%' AND wait_event_type = 'Lock'}) eq '1' }),
		"$db: B's CREATE waits for A");
	$a->query_until(qr/a-sent/, q{\echo a-sent
CREATE TABLE t_4 PARTITION OF t FOR VALUES IN (4);
});
	sleep 4;	# deadlock_timeout is 1s
	$a->{stdin} .= "COMMIT;\n";
	$a->{run}->pump_nb;
	ok(wait_for("$db: both done", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'CREATE TABLE t_%' AND state = 'active'}) eq '0' }), "$db: both statements done");
	$a->quit;
	$b->quit;
	my ($aerr, $berr) = ($a->{stderr}, $b->{stderr});
	unlike("$aerr\n$berr", qr/deadlock/, "$db: no deadlock") or diag("A: $aerr\nB: $berr");
	is($node->safe_psql($db, q{SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
		WHERE relname IN ('t_3', 't_4')}), 't_3,t_4', "$db: both partitions created");
}

finish($node, $log0);
