# RED TEAM REPRO (e33143c): keys of a 504 that the worker could not yet write to
# chroma_sync.resend (sync_unknown_persist failed: here lock_timeout while a maintenance
# job holds the table; they stay in the worker's memory, "to be tried again" at the
# mirror's next step) are not handed to the collection by chroma_unmirror: it moves only
# the rows of chroma_sync.resend (sync_unknown_forget_mirror). The mirror is gone, its
# MirrorState is never stepped again (worker.c keeps it, with its keys, for ever), so the
# keys are written nowhere: a new mirror into the collection does not resend them, and
# the late write of the 504ed request overwrites the newer state for good.
#
# Sequence: timeout 8 s, ALTER DATABASE ... SET lock_timeout = '1s' (the worker restarted
# with it); late_proxy 'upsert' (504 at once, forwarded when a file appears); rows 1..10
# synced; a session holds LOCK chroma_sync.resend IN SHARE MODE; arm; UPDATE id 1 to state
# 1 -> 504 -> the worker's INSERT into resend hits lock_timeout (key 1 in its memory);
# chroma_unmirror('d') (lock_timeout 0: it waits for the lock); the locker commits; the
# unmirror ends. UPDATE id 1 to state 2; chroma_mirror('d') into the same collection;
# state 2 sent; the late state 1 lands; chroma_flush.
# Before the fix: chroma_sync.resend_collection (and resend) empty after the unmirror; Chroma
# keeps state 1 (verify 10|0|0|1).
# Expected: key 1 kept for the collection, resent by the new mirror: state 2.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert');

my $coll = 'cs_t907';
my $node = new_node('t907',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }

q1("ALTER DATABASE postgres SET lock_timeout = '1s'");
my $old = worker_pid($node);
q1("SELECT pg_terminate_backend($old)");
ok(wait_for_new_worker($node, $old, 30) ne '', 'a new worker, with the database\'s lock_timeout');

my $locker = $node->background_psql('postgres');
$locker->query_safe('SET lock_timeout = 0; BEGIN; LOCK TABLE chroma_sync.resend IN SHARE MODE;');
my $loga = log_offset($node);
open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 1 got its 504');
ok(wait_for('the lock timeout', 20,
		sub { slurp_file($node->logfile, $loga) =~ /canceling statement due to lock timeout/ }),
	'the worker could not write key 1 to chroma_sync.resend (kept in its memory)');

my $un = $node->background_psql('postgres');
$un->query_until(qr/started/, "SET lock_timeout = 0;\n\\echo started\nSELECT chroma_unmirror('d');\n\\echo unmirrored\n");
ok(wait_for('the unmirror waits for chroma_sync.resend', 30, sub {
	q1(q{SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE NOT l.granted AND l.relation = 'chroma_sync.resend'::regclass AND a.query LIKE '%chroma_unmirror%'}) eq '1' }),
	'chroma_unmirror waits for the lock on chroma_sync.resend');
$locker->query_safe('COMMIT');
$locker->quit;
$un->query_until(qr/unmirrored/, '');
$un->quit;
is(q1('SELECT count(*) FROM chroma_sync.mirror'), '0', 'unmirrored');
sleep 2;
is(q1('SELECT (SELECT count(*) FROM chroma_sync.resend_collection) || \'/\' || (SELECT count(*) FROM chroma_sync.resend)'),
	'1/0', 'key 1 is kept for the collection');

q1('UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('d', collection => '$coll')");
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'the new mirror sent state 2');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 1 reached Chroma');
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 2 again', 20, sub { emb() eq '{2,2,2}' }), 'Chroma holds state 2, the table\'s');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('d')}), '10|0|0|0', 'chroma_verify: exact');
finish($node, $log0);
