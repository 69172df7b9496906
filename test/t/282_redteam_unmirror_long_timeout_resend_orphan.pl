# RED TEAM REPRO (e33143c): chroma_unmirror hands the mirror's resend keys to the
# collection, after waiting for the worker to leave the mirror (wait_for_inflight). That
# wait gives up after 600 wakes of 100 ms (60 s at most) and the unmirror goes on; with a
# request in flight and chroma_sync.timeout above that (a slow cloud gateway), the request
# times out after the mirror row is gone: the worker writes its keys to
# chroma_sync.resend under the deleted mirror's id (sync_unknown_persist). They are
# never queued nor deleted (a leak), chroma_sync.resend_collection never gets them, and a
# new mirror into the collection does not resend them: the late write wins for good.
#
# Sequence: timeout 65 s, late_proxy 'upsert+hold' (no answer; forwarded when a file
# appears); rows 1..10 synced; arm; UPDATE id 1 to state 1 (held); chroma_unmirror('d')
# (returns after about 60 s); the worker times out (65 s); UPDATE id 1 to state 2;
# chroma_mirror('d') into the same collection; state 2 sent; the held state 1 lands;
# chroma_flush.
# Before the fix: resend holds key 1 under a mirror id that no longer exists, resend_collection
# is empty, Chroma keeps state 1 (verify 10|0|0|1).
# Expected: the key is kept for the collection and resent by the new mirror: state 2.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert+hold');

my $coll = 'cs_t906';
my $node = new_node('t906',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 65000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0], timeout => 180); }
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 1 is held');
my $t = time;
q1("SELECT chroma_unmirror('d')");
note(sprintf('chroma_unmirror returned after %.1f s', time - $t));
is(q1('SELECT count(*) FROM chroma_sync.mirror'), '0', 'unmirrored');
ok(wait_for('the timed-out key written', 60, sub {
	q1('SELECT (SELECT count(*) FROM chroma_sync.resend) + (SELECT count(*) FROM chroma_sync.resend_collection)') ne '0' }),
	'the timed-out key is recorded');
is(q1('SELECT count(*) FROM chroma_sync.resend r WHERE NOT EXISTS '
		. '(SELECT 1 FROM chroma_sync.mirror m WHERE m.mirror_id = r.mirror_id)'),
	'0', 'no resend row of a mirror that no longer exists');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1', 'the key is kept for the collection');
q1('UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('d', collection => '$coll')");
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'the new mirror sent state 2');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 1 reached Chroma');
is(q1("SELECT chroma_flush('d', interval '150 seconds')"), 't', 'flushed');
ok(wait_for('state 2 again', 20, sub { emb() eq '{2,2,2}' }), 'Chroma holds state 2, the table\'s');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('d')}), '10|0|0|0', 'chroma_verify: exact');
finish($node, $log0);
