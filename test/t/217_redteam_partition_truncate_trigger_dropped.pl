# A leaf partition's TRUNCATE trigger dropped by its owner (not a superuser), the leaf
# truncated unseen, and the trigger then back or the leaf gone before the worker's check
# (mirror_check.c) looks at the committed tree:
#
#   A  BEGIN; DROP TRIGGER chroma_sync_N_truncate ON t_1; TRUNCATE t_1;
#      ALTER TABLE t ATTACH PARTITION other ...; COMMIT;
#      (an ATTACH made the trigger of every leaf again: the red-team repro)
#   B  ... DETACH PARTITION t_1; ATTACH PARTITION t_1 ...  (same leaf, one transaction)
#   C  ... DROP TABLE t_1                                   (the leaf gone)
#   D  ... DROP SCHEMA s CASCADE                            (the leaf gone with its schema)
#   E  DROP TRIGGER and TRUNCATE committed; DETACH and DROP right after
#   H  ... DETACH PARTITION t_1 CONCURRENTLY
#
# Each must pause the mirror (the records of t_1's truncated rows are in the collection):
# an ATTACH makes the trigger only on the leaves it attaches; a leaf that leaves the tree
# (DETACH, DROP) without its trigger pauses the mirror in the DDL's transaction. After
# chroma_resume and chroma_resync the collection is exact.
#
# And no false pause: the trigger renamed (it still fires) and the leaf dropped (F); a
# dropped trigger rolled back to a savepoint (I) or with the whole transaction (J);
# ordinary DETACH, DETACH+ATTACH, DROP, DROP SCHEMA, CREATE ... PARTITION OF (G).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('t217');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
GRANT CREATE ON DATABASE postgres TO alice;
});

# Partitioned table t (owned by alice) with leaves t_1 (k = 1, rows 1..5) and t_2 (k = 2,
# rows 6..10), t_1 in schema $schema, mirrored and backfilled. Returns the mirror id.
sub setup
{
	my ($t, $schema) = @_;
	$schema //= 'public';
	fresh_collection($node, "t217_$t");
	$node->safe_psql('postgres', qq{
SET ROLE alice;
CREATE SCHEMA IF NOT EXISTS $schema;
CREATE TABLE $t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE $schema.${t}_1 PARTITION OF $t FOR VALUES IN (1);
CREATE TABLE ${t}_2 PARTITION OF $t FOR VALUES IN (2);
INSERT INTO $t SELECT g, CASE WHEN g <= 5 THEN 1 ELSE 2 END, ARRAY[g, 1]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
RESET ROLE;
SELECT chroma_mirror('$t', collection => 't217_$t', document_column => 'doc');
});
	is($node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')"), 't',
		"$t: backfilled");
	return $node->safe_psql('postgres',
		"SELECT mirror_id FROM chroma_sync.mirror WHERE source = '$t'::regclass");
}

sub as_alice
{
	my ($what, $sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', "SET ROLE alice;\n$sql", stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	unlike($err, qr/ERROR|FATAL/, "$what: alice ran it");
	unlike($err, qr/NOTICE:  trigger .* does not exist/, "$what: no NOTICE of a trigger missing");
	return;
}

sub pause_state
{
	my ($t) = @_;
	return $node->safe_psql('postgres', qq{
SELECT paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror
WHERE source = '$t'::regclass});
}

sub verify
{
	my ($t) = @_;
	$node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')");
	return $node->safe_psql('postgres',
		"SELECT rows, missing, extra, different FROM chroma_verify('$t')");
}

# paused now or by the worker's check soon, then repaired by resume + resync
sub expect_pause_then_repair
{
	my ($t, $what, $rows, $reason) = @_;
	my $state;
	my $ok = wait_for("$t paused", 30, sub { $state = pause_state($t); $state =~ /^true /; });
	ok($ok, "$what: the mirror is paused") or diag("state: $state; verify: " . verify($t));
	like($state, $reason, "$what: the reason names the TRUNCATE trigger") if $ok;
	if ($state =~ /unmirror and mirror the table again/)
	{
		# a leaf still lacks the trigger: the advice is to mirror again
		$node->safe_psql('postgres', qq{SELECT chroma_unmirror('$t');
SELECT chroma_mirror('$t', collection => 't217_$t', document_column => 'doc');});
		is(verify($t), "$rows|0|0|0", "$what: exact after chroma_unmirror and chroma_mirror");
		return;
	}
	$node->safe_psql('postgres', "SELECT chroma_resume('$t'); SELECT chroma_resync('$t');");
	is(verify($t), "$rows|0|0|0", "$what: exact after chroma_resume and chroma_resync");
	return;
}

sub expect_no_pause
{
	my ($t, $what, $rows) = @_;
	is(verify($t), "$rows|0|0|0", "$what: exact");
	is(pause_state($t), 'false ', "$what: not paused");
	return;
}

# A: the red-team repro
{
	my $m = setup('ta');
	as_alice('A', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON ta_1;
TRUNCATE ta_1;
CREATE TABLE ta_9 (LIKE ta);
ALTER TABLE ta ATTACH PARTITION ta_9 FOR VALUES IN (9);
COMMIT;});
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_trigger
		WHERE tgrelid = 'ta_1'::regclass AND tgname LIKE '%truncate'}), '0',
		'A: the ATTACH did not make the trigger of ta_1 again');
	expect_pause_then_repair('ta', 'A (ATTACH of another table)', 5, qr/ta_1: trigger chroma_sync_${m}_truncate was dropped/);
}

# B: DETACH and ATTACH of the same leaf in one transaction
{
	my $m = setup('tb');
	as_alice('B', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON tb_1;
TRUNCATE tb_1;
ALTER TABLE tb DETACH PARTITION tb_1;
ALTER TABLE tb ATTACH PARTITION tb_1 FOR VALUES IN (1);
COMMIT;});
	like(pause_state('tb'), qr/^true partition tb_1 was detached without the mirror's TRUNCATE trigger/,
		'B: paused by the DETACH, in its transaction');
	expect_pause_then_repair('tb', 'B (DETACH and ATTACH again)', 5, qr/tb_1 was detached/);
}

# C: the leaf dropped
{
	my $m = setup('tc');
	as_alice('C', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON tc_1;
TRUNCATE tc_1;
DROP TABLE tc_1;
COMMIT;});
	like(pause_state('tc'), qr/^true partition tc_1 was dropped without/, 'C: paused by the DROP');
	expect_pause_then_repair('tc', 'C (DROP TABLE)', 5, qr/tc_1 was dropped/);
}

# D: the leaf dropped with its schema
{
	my $m = setup('td', 'td_s');
	as_alice('D', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON td_s.td_1;
TRUNCATE td_s.td_1;
DROP SCHEMA td_s CASCADE;
COMMIT;});
	expect_pause_then_repair('td', 'D (DROP SCHEMA ... CASCADE)', 5, qr/td_1 was dropped/);
}

# E: trigger dropped and leaf truncated in one committed transaction, DETACH and DROP next
{
	my $m = setup('te');
	as_alice('E', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON te_1;
TRUNCATE te_1;
COMMIT;
ALTER TABLE te DETACH PARTITION te_1;
DROP TABLE te_1;});
	expect_pause_then_repair('te', 'E (separate transactions)', 5,
		qr/te_1(: trigger chroma_sync_${m}_truncate was dropped| was detached without)/);
}

# H: DETACH ... CONCURRENTLY of a leaf without its trigger
{
	my $m = setup('th');
	as_alice('H', qq{
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON th_1;
TRUNCATE th_1;
COMMIT;
ALTER TABLE th DETACH PARTITION th_1 CONCURRENTLY;});
	expect_pause_then_repair('th', 'H (DETACH CONCURRENTLY)', 5, qr/th_1/);
}

# K: the trigger renamed, then dropped (TAP 218 of the earlier design), DETACH and ATTACH
{
	my $m = setup('tk');
	as_alice('K', qq{
BEGIN;
ALTER TRIGGER chroma_sync_${m}_truncate ON tk_1 RENAME TO gone;
DROP TRIGGER gone ON tk_1;
TRUNCATE tk_1;
ALTER TABLE tk DETACH PARTITION tk_1;
ALTER TABLE tk ATTACH PARTITION tk_1 FOR VALUES IN (1);
COMMIT;});
	expect_pause_then_repair('tk', 'K (renamed, dropped, DETACH and ATTACH)', 5, qr/tk_1 was detached/);
}

# F: the trigger renamed still fires: truncate and drop captured, no pause
{
	my $m = setup('tf');
	as_alice('F', qq{
BEGIN;
ALTER TRIGGER chroma_sync_${m}_truncate ON tf_1 RENAME TO mine;
TRUNCATE tf_1;
DROP TABLE tf_1;
COMMIT;});
	expect_no_pause('tf', 'F (renamed trigger, leaf dropped)', 5);
}

# I and J: the dropped trigger rolled back
{
	my $m = setup('ti');
	as_alice('I', qq{
BEGIN;
SAVEPOINT a;
DROP TRIGGER chroma_sync_${m}_truncate ON ti_1;
ROLLBACK TO a;
UPDATE ti SET doc = 'moved' WHERE id = 6;
DROP TABLE ti_1;
COMMIT;
BEGIN;
DROP TRIGGER chroma_sync_${m}_truncate ON ti_2;
DROP TABLE ti_2;
ROLLBACK;});
	expect_no_pause('ti', 'I, J (savepoint and transaction rolled back)', 5);
}

# G: ordinary partition DDL pauses nothing
{
	my $m = setup('tg', 'tg_s');
	$node->safe_psql('postgres', q{SET ROLE alice;
CREATE TABLE tg_3 PARTITION OF tg FOR VALUES IN (3);
INSERT INTO tg VALUES (11, 3, '{11,1}', 'doc 11');
ALTER TABLE tg DETACH PARTITION tg_2;
BEGIN;
ALTER TABLE tg DETACH PARTITION tg_3;
ALTER TABLE tg ATTACH PARTITION tg_3 FOR VALUES IN (3);
COMMIT;
DROP TABLE tg_2;});
	expect_no_pause('tg', 'G (CREATE, DETACH, DETACH+ATTACH, DROP)', 6);
	$node->safe_psql('postgres', 'SET ROLE alice; DROP SCHEMA tg_s CASCADE;');
	expect_no_pause('tg', 'G (DROP SCHEMA ... CASCADE)', 1);
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_trigger
		WHERE tgname = 'chroma_sync_${m}_truncate' AND tgrelid = 'tg_3'::regclass}), '1',
		'G: the leaf attached again has its trigger');
}

finish($node, $log0);
