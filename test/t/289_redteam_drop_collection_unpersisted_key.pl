# RED TEAM REPRO (742a20f): a 504ed key the worker could not yet write to chroma_sync.resend
# (kept in its memory) outlives chroma_unmirror(..., drop_collection => true): the worker's
# persist_removed_mirrors -> sync_unknown_persist finds the mirror row gone and calls
# chroma_sync.resend_hand_over with the collection id remembered in MirrorState, not knowing
# the collection was dropped; the key lands in chroma_sync.resend_collection under the id
# of a collection that no longer exists, which no chroma_mirror can ever take (a new
# collection of the same name has another id): a row that never goes away. (The backend's
# own path, sync_unknown_forget_mirror(keep_for_collection = false), drops such keys.)
#
# Sequence: as TAP 283 (timeout 8 s, ALTER DATABASE ... SET lock_timeout = '1s', a session
# holds LOCK chroma_sync.resend IN SHARE MODE, UPDATE id 1 -> 504, the worker's INSERT into
# resend hits lock_timeout), then chroma_unmirror('d', drop_collection => true) (waits for
# the lock), the locker commits; the late request is released (404); chroma_mirror('d')
# into a new collection of the same name; flush; 10 s pass.
# Observed: chroma_sync.resend_collection holds (dropped collection's id, '1') for ever.
# Expected: nothing kept for a dropped collection (0/0).
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

my $coll = 'cs_t289';
my $node = new_node('t289',
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
$un->query_until(qr/started/, "SET lock_timeout = 0;\n\\echo started\nSELECT chroma_unmirror('d', drop_collection => true);\n\\echo unmirrored\n");
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
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed request was tried (collection gone)');
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'd mirrored again into a new collection');
sleep 10;
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'flushed');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('d')}), '10|0|0|0', 'chroma_verify: exact');
# the worker drops keys kept for a collection Chroma no longer has (sync_unknown_collect)
ok(wait_for('nothing kept', 30, sub { q1('SELECT (SELECT count(*) FROM chroma_sync.resend_collection) || \'/\' || (SELECT count(*) FROM chroma_sync.resend)') eq '0/0' }),
	'nothing kept for the dropped collection');
finish($node, $log0);
