# Red-team repro (partition DDL serialization, no privilege needed): the before step of
# CREATE TABLE ... PARTITION OF takes the mirrors' partition-set lock (exclusive, to
# transaction end) for the named parent before PostgreSQL checks anything. With IF NOT
# EXISTS and a name that already exists, PostgreSQL skips the statement with a NOTICE and
# never looks at the parent, so a role with no privilege at all on the mirrored table
# (only TEMP, which PUBLIC has) holds alice's partition-set lock for as long as it keeps
# its transaction open: every partition DDL of alice's tree waits for it (and the
# worker's conditional read of the set lock fails meanwhile).
#
# Sequence (alice owns t, LIST (k), mirrored; mallory has no privilege on t):
#   session M (mallory): CREATE TEMP TABLE mt (i int);
#                        BEGIN; CREATE TABLE IF NOT EXISTS pg_temp.mt PARTITION OF t
#                        FOR VALUES IN (9);   -- NOTICE: relation "mt" already exists
#   session A (alice):   ALTER TABLE t DETACH PARTITION t_2;
# Observed: alice's DETACH waits for mallory's open transaction (lock on object t of
# class pg_class).
# Expected (as in database "plain", no extension, the control): the DETACH completes at
# once; mallory's skipped statement holds nothing of alice's. Also: alice's row inserted
# meanwhile is not synced (chroma_flush of 20 s false) while mallory's transaction is open.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt272');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
CREATE DATABASE plain;});
$node->safe_psql('plain', 'GRANT CREATE ON SCHEMA public TO alice');
fresh_collection($node, 'rt272_t');
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
$node->safe_psql('postgres', q{SELECT chroma_mirror('t', collection => 'rt272_t', document_column => 'doc')});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

for my $db ('plain', 'postgres')
{
	my $mal = $node->background_psql($db, on_error_stop => 0);
	$mal->query_safe(q{SET ROLE mallory; CREATE TEMP TABLE mt (i int); BEGIN;});
	$mal->query(q{CREATE TABLE IF NOT EXISTS pg_temp.mt PARTITION OF t FOR VALUES IN (9);});
	like($mal->{stderr}, qr/already exists, skipping/, "$db: mallory's statement skipped")
		or diag($mal->{stderr});
	if ($db eq 'postgres')
	{
		# the worker's conditional read of the set lock fails: nothing of t syncs
		$node->safe_psql('postgres', q{SET ROLE alice; INSERT INTO t VALUES (3, 1, '{3,1}', 'three')});
		is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '20 seconds')"), 't',
			"postgres: alice's new row syncs while mallory's transaction is open");
	}
	my $a = $node->background_psql($db, on_error_stop => 0);
	$a->query_until(qr/started/, q{\echo started
SET ROLE alice;
ALTER TABLE t DETACH PARTITION t_2;
});
	my $done = wait_for("$db: alice's DETACH done", 15, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_class
			WHERE relname = 't_2' AND NOT relispartition}) eq '1' });
	my $waits = $node->safe_psql($db, q{SELECT string_agg(wait_event_type || ':' || wait_event, ',')
		FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE t DETACH%' AND state = 'active'});
	ok($done, "$db: alice's DETACH completes while mallory's transaction is open")
		or diag("alice waits: $waits");
	$mal->query('COMMIT');
	$mal->quit;
	wait_for("$db: DETACH finally done", 30, sub {
		$node->safe_psql($db, q{SELECT count(*) FROM pg_stat_activity
			WHERE query LIKE 'ALTER TABLE t DETACH%' AND state = 'active'}) eq '0' });
	$a->quit;
}

finish($node, $log0);
