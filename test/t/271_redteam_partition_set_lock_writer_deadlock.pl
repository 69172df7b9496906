# Red-team repro (partition DDL serialization, another owner): alice's transaction that
# only WROTE a row of the mirrored tree (under bob's partitioned partition y) and then
# creates a partition of her own partitioned partition x now deadlocks with bob's CREATE
# of a partition of y, where PostgreSQL alone has no conflict at all (bob waits for
# alice's row lock on y, alice's CREATE locks only x). The extension's before step takes
# the mirror's partition-set lock before PostgreSQL's lock on the parent: bob holds the
# set lock while he waits for y; alice's CREATE under x waits for that set lock.
#
# Sequence (t LIST (k) mirrored, owned by alice; x PARTITION OF t FOR VALUES IN (1, 2)
# PARTITION BY LIST (k) owned by alice with leaf x_1; y FOR VALUES IN (3, 4) PARTITION
# BY LIST (k) owned by bob with leaf y_3):
#   session A (alice): BEGIN; INSERT INTO t VALUES (30, 3, ...);
#   session B (bob):   CREATE TABLE y_4 PARTITION OF y FOR VALUES IN (4);  -- waits for A
#   session A (alice): CREATE TABLE x_2 PARTITION OF x FOR VALUES IN (2); COMMIT;
# Observed: "deadlock detected", one of the two fails.
# Expected (as in database "plain", no extension, the control): alice's CREATE completes
# at once, bob's after her COMMIT; x_2 and y_4 both exist.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt271');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
GRANT CREATE ON SCHEMA public TO alice, bob;
CREATE DATABASE plain;});
$node->safe_psql('plain', 'GRANT CREATE ON SCHEMA public TO alice, bob');
fresh_collection($node, 'rt271_t');
for my $db ('plain', 'postgres')
{
	$node->safe_psql($db, q{
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE x PARTITION OF t FOR VALUES IN (1, 2) PARTITION BY LIST (k);
CREATE TABLE x_1 PARTITION OF x FOR VALUES IN (1);
CREATE TABLE y PARTITION OF t FOR VALUES IN (3, 4) PARTITION BY LIST (k);
CREATE TABLE y_3 PARTITION OF y FOR VALUES IN (3);
INSERT INTO t VALUES (1, 1, '{1,1}', 'one'), (3, 3, '{3,1}', 'three');
ALTER TABLE t OWNER TO alice;
ALTER TABLE x OWNER TO alice;
ALTER TABLE x_1 OWNER TO alice;
ALTER TABLE y OWNER TO bob;
ALTER TABLE y_3 OWNER TO bob;
GRANT INSERT, SELECT ON t TO alice;
});
}
$node->safe_psql('postgres', q{SELECT chroma_mirror('t', collection => 'rt271_t', document_column => 'doc')});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

for my $db ('plain', 'postgres')
{
	my $a = $node->background_psql($db, on_error_stop => 0);
	my $b = $node->background_psql($db, on_error_stop => 0);
	$a->query_safe(q{SET ROLE alice; BEGIN; INSERT INTO t VALUES (30, 3, '{30,1}', 'thirty');});
	$b->query_until(qr/started/, q{\echo started
SET ROLE bob;
CREATE TABLE y_4 PARTITION OF y FOR VALUES IN (4);
});
	ok(wait_for("$db: bob's CREATE waits", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'CREATE TABLE y_4%' AND wait_event_type = 'Lock'}) eq '1' }),
		"$db: bob's CREATE waits for alice");
	$a->query_until(qr/a-sent/, q{\echo a-sent
CREATE TABLE x_2 PARTITION OF x FOR VALUES IN (2);
});
	sleep 4;	# deadlock_timeout is 1s
	$a->{stdin} .= "COMMIT;\n";
	$a->{run}->pump_nb;
	ok(wait_for("$db: both done", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'CREATE TABLE %' AND state = 'active'}) eq '0' }), "$db: both statements done");
	$a->quit;
	$b->quit;
	my ($aerr, $berr) = ($a->{stderr}, $b->{stderr});
	unlike("$aerr\n$berr", qr/deadlock/, "$db: no deadlock") or diag("A: $aerr\nB: $berr");
	is($node->safe_psql($db, q{SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
		WHERE relname IN ('x_2', 'y_4')}), 'x_2,y_4', "$db: both partitions created");
}

finish($node, $log0);
