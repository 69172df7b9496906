# chroma_unmirror does not wait while holding the locks the worker needs: it asks the
# worker to leave the mirror and waits for its batch in flight before locking the table
# and the mirror row. During a backfill the worker reads the next page while a request
# is in flight; locking first made that read wait out the 60 s limit (3 of 3 rounds
# before the fix). Also: a failed DROP DATABASE (permission denied) does not stop that
# database's worker, and ALTER DATABASE ... RENAME and CREATE DATABASE ... TEMPLATE are
# not blocked by it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = new_node('unmirror_no_wait', conf => "max_prepared_transactions = 5\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 50, dim => 4);
fresh_collection($node, 'cs_t028');
mirror($node, 'docs', 'cs_t028');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't', 'backfilled');

set_conf($node, 'chroma_sync.test_stall', '3000');
$node->safe_psql('postgres', "UPDATE docs SET doc = 'changed' WHERE id <= 10");
ok(poll_query($node, "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND wait_event = 'Extension'", 't', 10),
	'the worker waits in the stall with a batch of the mirror read');
my $t0 = time();
$node->safe_psql('postgres', "SELECT chroma_unmirror('docs')", timeout => 120);
my $took = time() - $t0;
ok($took < 15, sprintf('chroma_unmirror returned in %.1f s (the stall is 3 s; not the 60 s limit)', $took));
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror"), '0', 'the mirror is gone');
set_conf($node, 'chroma_sync.test_stall', '0');

# during a backfill the worker reads the next page while a request is in flight: a
# table lock taken before waiting for it made that read wait until the 60 s limit
make_table($node, 'big', rows => 30000, dim => 4);
fresh_collection($node, 'cs_t028_big');
set_conf($node, 'chroma_sync.batch_size', '100');
mirror($node, 'big', 'cs_t028_big');
ok(poll_query($node, "SELECT coalesce(backfill_sent, 0) >= 300 FROM chroma_sync.status WHERE source = 'big'::regclass", 't', 60),
	'the backfill of big is under way');
for my $round (1 .. 3)
{
	$t0 = time();
	$node->safe_psql('postgres', "SELECT chroma_unmirror('big')", timeout => 120);
	$took = time() - $t0;
	ok($took < 15, sprintf('round %d: chroma_unmirror during a backfill returned in %.1f s', $round, $took));
	last if $round == 3;
	mirror($node, 'big', 'cs_t028_big', backfill => 1);
	ok(poll_query($node, "SELECT coalesce(backfill_sent, 0) >= 300 FROM chroma_sync.status WHERE source = 'big'::regclass", 't', 60),
		"round $round: the backfill runs again");
}
set_conf($node, 'chroma_sync.batch_size', '500');

# a DROP DATABASE that fails its permission check leaves the database's worker alone
$node->safe_psql('postgres', q{
CREATE ROLE stranger LOGIN;
CREATE DATABASE t028;});
$node->safe_psql('t028', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 5) g;
SELECT chroma_delete_collection('cs_t028_db', true);
SELECT chroma_mirror('t', collection => 'cs_t028_db');});
my $wsql = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 't028'";
ok(poll_query($node, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 't028'", '1', 30),
	'database t028 has its worker');
my $w = $node->safe_psql('postgres', $wsql);
for my $i (1 .. 5)
{
	my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE t028', extra_params => [ '-U', 'stranger' ]);
	like($err, qr/must be owner of database t028/, "attempt $i: DROP DATABASE by a non-owner fails its permission check");
}
is($node->safe_psql('postgres', $wsql), $w, 'the worker of t028 was never stopped');

# statements that need the database without other sessions stop its worker first
$node->safe_psql('postgres', 'ALTER DATABASE t028 RENAME TO t028b');
pass('ALTER DATABASE ... RENAME is not blocked by the worker');
$node->safe_psql('postgres', 'CREATE DATABASE t028c TEMPLATE t028b');
pass('CREATE DATABASE ... TEMPLATE is not blocked by the worker');
ok(poll_query($node, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 't028b'", '1', 30),
	'the renamed database gets its worker back');
$node->safe_psql('t028b', "INSERT INTO t VALUES (6, '{6,1}')");
is($node->safe_psql('t028b', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'and it syncs');
$node->safe_psql('postgres', 'DROP DATABASE t028c');

# COMMIT PREPARED wakes the worker (the session that prepared never committed): the
# change is in Chroma long before the worker's 10 s idle wait ends
$node->safe_psql('t028b', "SELECT chroma_flush('t', interval '60 seconds')");
sleep 1;
$node->safe_psql('t028b', "BEGIN; INSERT INTO t VALUES (7, '{7,1}'); PREPARE TRANSACTION 'p028'");
$t0 = time();
$node->safe_psql('t028b', "COMMIT PREPARED 'p028'");
ok(wait_for('row 7 in Chroma', 4, sub {
	$node->safe_psql('t028b', "SELECT count(*) FROM chroma_get('cs_t028_db', ARRAY['7'])") eq '1' }),
	sprintf('COMMIT PREPARED: the change reached Chroma in %.1f s, without chroma_flush', time() - $t0));
$node->safe_psql('t028b', "SELECT chroma_unmirror('t', drop_collection => true)");
finish($node, $log0);
