# DROP DATABASE and DROP EXTENSION while a worker is connected and mid-batch (issue 4,
# item 3). chroma_sync.test_stall keeps a batch in flight for 5 s; both commands must
# succeed promptly (< 10 s). pg_regress's pattern — a fresh database, a mirror, DROP
# DATABASE right away — must never be blocked either.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = new_node('dropdb');
my $log0 = log_offset($node);

sub setup_db
{
	my ($db, $coll, $rows) = @_;
	$node->safe_psql($db, qq{
CREATE EXTENSION IF NOT EXISTS chroma_sync;
CREATE TABLE docs (id int PRIMARY KEY, embedding real[], doc text);
INSERT INTO docs SELECT g, ARRAY[g, 1, 2, 3]::real[], 'd' || g FROM generate_series(1, $rows) g;
SELECT chroma_delete_collection('$coll', true);
SELECT chroma_mirror('docs', collection => '$coll', document_column => 'doc');});
	# changes after the mirror exists are queued: their drain stalls in test_stall, so the
	# worker is reliably mid-batch (a backfill alone takes milliseconds)
	$node->safe_psql($db, qq{
INSERT INTO docs SELECT g, ARRAY[g, 1, 2, 3]::real[], 'd' || g
FROM generate_series($rows + 1, $rows + 20) g;});
	return;
}

# Waits until the worker of $db is inside a step (state active, waiting in the stall).
sub wait_mid_batch
{
	my ($db) = @_;
	return poll_query($node, qq{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND datname = '$db' AND state = 'active'
	AND wait_event_type = 'Extension'}, '1', 60);
}

# Runs $sql in $db, returns (ok, seconds).
sub timed
{
	my ($db, $sql) = @_;
	my $t0 = time();
	my ($ret, $out, $err) = $node->psql($db, $sql, timeout => 120);
	my $dt = time() - $t0;
	diag("$sql: $err") if $ret != 0;
	return ($ret == 0, $dt);
}

set_conf($node, 'chroma_sync.test_stall', '5000');

# ---- DROP DATABASE while its worker is mid-batch
$node->safe_psql('postgres', 'CREATE DATABASE db1');
setup_db('db1', 'cs_t023_db1', 50);
ok(wait_mid_batch('db1'), 'the worker of db1 is connected and mid-batch');
my ($ok, $dt) = timed('postgres', 'DROP DATABASE db1');
ok($ok, 'DROP DATABASE db1 succeeds while its worker is mid-batch');
ok($dt < 10, sprintf('and promptly (%.1f s < 10 s)', $dt));
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'db1'"),
	'0', 'db1 is gone');
ok(poll_query($node, q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND datid IS NOT NULL
	AND datid NOT IN (SELECT oid FROM pg_database)}, '0', 30),
	'no worker is left for the dropped database');

# ---- DROP EXTENSION ... CASCADE while the worker is mid-batch
setup_db('postgres', 'cs_t023_ext', 50);
ok(wait_mid_batch('postgres'), 'the worker of postgres is connected and mid-batch');
($ok, $dt) = timed('postgres', 'DROP EXTENSION chroma_sync CASCADE');
ok($ok, 'DROP EXTENSION chroma_sync CASCADE succeeds while the worker is mid-batch');
ok($dt < 10, sprintf('and promptly (%.1f s < 10 s)', $dt));
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = 'chroma_sync') +
	(SELECT count(*) FROM pg_trigger WHERE tgrelid = 'docs'::regclass)}),
	'0', 'the chroma_sync schema and the triggers on the table are gone');
$node->safe_psql('postgres', q{INSERT INTO docs VALUES (1000, '{1,1,1,1}', 'no mirror')});
pass('the table is writable without its mirror');
ok(poll_query($node, q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres' AND state = 'active'},
		'0', 30),
	'the worker of postgres stopped working');

# ---- pg_regress's pattern, with and without a batch in flight
$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.test_stall');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
sleep 0.5;
$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
for my $i (1 .. 4)
{
	set_conf($node, 'chroma_sync.test_stall', '5000') if $i == 3;
	$node->safe_psql('postgres', 'CREATE DATABASE contrib_regression');
	setup_db('contrib_regression', "cs_t023_regress$i", 20 * $i);
	($ok, $dt) = timed('postgres', 'DROP DATABASE contrib_regression');
	ok($ok && $dt < 10,
		sprintf('round %d: DROP DATABASE contrib_regression right after chroma_mirror (%.1f s)%s',
			$i, $dt, $i >= 3 ? ', test_stall on' : ''));
}
$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.test_stall');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');

# ---- after all that, mirroring works again in postgres
$node->safe_psql('postgres', 'DROP TABLE docs');
make_table($node, 'docs', rows => 100, dim => 8);
fresh_collection($node, 'cs_t023_docs');
mirror($node, 'docs', 'cs_t023_docs');
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'again' WHERE id < 10});
assert_equal($node, 'docs', 'cs_t023_docs', name => 'a new mirror after DROP EXTENSION');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
