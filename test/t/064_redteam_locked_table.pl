# Red team: a session holding a lock on one mirrored table (LOCK TABLE, or an ALTER
# TABLE in a long migration transaction) stops every mirror of the database: the
# worker waits for the lock (no lock_timeout) while reading that table's changed rows,
# and the other mirrors' changes wait behind it. Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_locked');
my $log0 = log_offset($node);
for my $t ('locked', 'other')
{
	make_table($node, $t, rows => 10, dim => 4);
	fresh_collection($node, "cs_t064_$t");
	mirror($node, $t, "cs_t064_$t");
	is($node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')"), 't', "$t backfilled");
}

# a change of 'locked' waits in the queue, then its owner locks the table
$node->safe_psql('postgres', "SELECT chroma_pause('locked'); UPDATE locked SET doc = 'queued' WHERE id = 1");
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
		'-c', 'BEGIN', '-c', 'LOCK TABLE locked IN ACCESS EXCLUSIVE MODE', '-c', 'SELECT pg_sleep(40)', '-c', 'COMMIT' ],
	'>', \$out, '2>', \$err);
ok(poll_query($node, "SELECT count(*) FROM pg_locks WHERE relation = 'locked'::regclass AND mode = 'AccessExclusiveLock' AND granted", '1', 10),
	'a session holds the lock on locked');
$node->safe_psql('postgres', "SELECT chroma_resume('locked')");
sleep 2;

# another mirror of the same database keeps syncing
$node->safe_psql('postgres', "UPDATE other SET doc = 'while locked is locked' WHERE id = 1");
is($node->safe_psql('postgres', "SELECT chroma_flush('other', interval '15 seconds')"), 't',
	'a change of another mirror is synced while one mirrored table is locked');
diag($node->safe_psql('postgres', q{SELECT wait_event_type || ' ' || wait_event FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker'}));
$h->kill_kill;
$h->finish;
$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(40)%' AND pid <> pg_backend_pid()");
ok(assert_equal($node, 'other', 'cs_t064_other'), 'other equals its collection');
ok(assert_equal($node, 'locked', 'cs_t064_locked'), 'locked equals its collection once the lock is gone');
finish($node, $log0);
