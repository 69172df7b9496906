# Red-team repro (partition DDL locks): the utility hook's lookup of the table an ATTACH
# PARTITION attaches (partition_utility_before: RangeVarGetRelid(..., AccessExclusiveLock))
# locks it BEFORE the statement runs, while PostgreSQL's ATExecAttachPartition locks the
# parent's DEFAULT partition first and the attached table second. The hook inverts that
# order, for every partitioned table of a database with the extension (mirrored or not),
# so a reader that PostgreSQL alone would let through now deadlocks with the ATTACH.
#
# Sequence (alice owns p, its DEFAULT partition p_def and x; nothing mirrored):
#   session B: BEGIN; SELECT count(*) FROM p_def;
#   session A: ALTER TABLE p ATTACH PARTITION x FOR VALUES IN (1);  -- waits for p_def
#   session B: SELECT count(*) FROM x; COMMIT;
# Observed: session B's SELECT waits for A's lock on x (taken by the hook) while A waits
# for B's lock on p_def: "deadlock detected" after deadlock_timeout, one of them fails.
# Expected (as without the extension): A holds no lock on x while it waits for p_def, so
# B reads x and commits, then A attaches x; neither fails. The same sequences in database
# "plain" (no extension) pass: the control.
# The same inversion holds for DETACH PARTITION (hook: the partition, then PostgreSQL: the
# default partition, then the partition): case 2 below.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt260');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT CREATE ON SCHEMA public TO alice;});
# control: database "plain" has no extension (the hook does nothing there)
$node->safe_psql('postgres', 'CREATE DATABASE plain');
$node->safe_psql('plain', 'GRANT CREATE ON SCHEMA public TO alice');
for my $db ('postgres', 'plain')
{
$node->safe_psql($db, q{
SET ROLE alice;
CREATE TABLE p (k int, v text) PARTITION BY LIST (k);
CREATE TABLE p_def PARTITION OF p DEFAULT;
CREATE TABLE p_2 PARTITION OF p FOR VALUES IN (2);
CREATE TABLE x (k int, v text);
INSERT INTO p VALUES (2, 'two'), (3, 'three');
INSERT INTO x VALUES (1, 'one');
});
}

sub run_case
{
	my ($db, $what, $ddl, $reader_table, $final_sql, $final_expected) = @_;
	$what = "$db: $what";
	my $b = $node->background_psql($db, on_error_stop => 0);
	$b->query_safe(q{SET ROLE alice; BEGIN; SELECT count(*) FROM p_def;});
	my $a = $node->background_psql($db, on_error_stop => 0);
	$a->query_until(qr/started/, qq{\\echo started
SET ROLE alice;
$ddl;
\\echo ddl-finished
});
	ok(wait_for("$what: the DDL waits", 30, sub {
		$node->safe_psql('postgres', qq{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'ALTER TABLE p %' AND wait_event_type = 'Lock'}) eq '1' }),
		"$what: the DDL waits for session B's lock on the default partition");
	my ($out, $ret) = $b->query("SELECT count(*) FROM $reader_table");
	my $berr = $b->{stderr};
	$b->query('COMMIT');
	$b->quit;
	ok(wait_for("$what: the DDL is done", 30, sub {
		$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'ALTER TABLE p %' AND state = 'active'}) eq '0' }), "$what: the DDL is done");
	$a->quit;
	my $aerr = $a->{stderr};
	unlike($berr, qr/deadlock/, "$what: session B's read of $reader_table did not deadlock")
		or diag("session B: $berr");
	unlike($aerr, qr/deadlock|ERROR/, "$what: the DDL did not fail") or diag("session A: $aerr");
	is($node->safe_psql($db, $final_sql), $final_expected, "$what: the DDL took effect");
	return;
}

for my $db ('plain', 'postgres')
{
# 1: ATTACH, reader of the table being attached
run_case($db, 'ATTACH', 'ALTER TABLE p ATTACH PARTITION x FOR VALUES IN (1)', 'x',
	q{SELECT relispartition FROM pg_class WHERE oid = 'x'::regclass}, 't');

# 2: DETACH of p_2, reader of p_2 (PostgreSQL locks p_def, then p_2; the hook p_2 first)
run_case($db, 'DETACH', 'ALTER TABLE p DETACH PARTITION p_2', 'p_2',
	q{SELECT relispartition FROM pg_class WHERE oid = 'p_2'::regclass}, 'f');
}

finish($node, $log0);
