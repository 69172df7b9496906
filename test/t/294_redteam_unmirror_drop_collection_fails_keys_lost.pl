# RED TEAM REPRO (c1c59cb, resend keys): chroma_unmirror(drop_collection => true) deletes
# the mirror's outcome-unknown keys at once (sync_unknown_forget_mirror(..., false)), but
# the collection is dropped only after COMMIT, where a failure is a WARNING
# ("could not drop Chroma collection"): the collection stays, with a late write still on
# its way, and no key is kept for it. A mirror created into it again (same collection id)
# takes nothing, and the late write outlives its backfill. (Since c1c59cb keys kept for a
# collection are dropped once it is really gone -- chroma_delete_collection, or a mirror
# created into a new collection of the name -- so they could be kept here too.)
#
# Sequence: timeout 40 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); table t rows 1..3 synced into cs_t294; arm; UPDATE t id 1 to state 9 -> 504
# (key 1 in resend); Chroma stopped; chroma_unmirror('t', drop_collection => true) (WARNING
# at commit: the collection is not dropped); Chroma started; UPDATE t id 1 to state 4;
# chroma_mirror('t', 'cs_t294') (the same collection: backfill sends state 4); the 504ed
# state 9 lands (within the timeout of its 504); the timeout passes; chroma_flush('t').
# Observed: no key kept (resend and resend_collection empty after the unmirror); Chroma
# keeps state 9 for id 1; chroma_verify('t') 3|0|0|1.
# Expected: the key survives a drop that did not happen; the new mirror resends state 4.
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
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert');

my $coll = 'cs_t294';
my $timeout = 40;
my $node = new_node('t294',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout}000\nchroma_sync.connect_timeout = 1000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }
q1('CREATE TABLE t (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO t SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
my $id0 = q1("SELECT chroma_mirror('t', collection => '$coll')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE t SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 9 got its 504');
my $t504 = time();
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key 1 waits in chroma_sync.resend');

chroma_stop();
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_unmirror('t', drop_collection => true)");
is($ret, 0, 'chroma_unmirror committed');
like($err, qr/could not drop Chroma collection/, 'the drop at commit failed (WARNING)');
chroma_start();
ok(wait_for('Chroma up', 30, sub { q1("SELECT chroma_heartbeat() > 0") eq 't' }), 'Chroma is back');
is(q1("SELECT chroma_collection('$coll')->>'id'"), $id0, 'the collection was not dropped');
is(q1('SELECT (SELECT count(*) FROM chroma_sync.resend) + (SELECT count(*) FROM chroma_sync.resend_collection)'),
	'1', 'key 1 is still kept (its collection is still there)');

q1('UPDATE t SET embedding = ARRAY[4, 4, 4] WHERE id = 1');
is(q1("SELECT chroma_mirror('t', collection => '$coll')"), $id0, 'mirrored again into the same collection');
ok(wait_for('state 4 in Chroma', 30, sub { emb() eq '{4,4,4}' }), 'backfill sent state 4');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 9 reached Chroma');
my $late = time() - $t504;
diag(sprintf('late write released %.1f s after its 504 (timeout %d s)', $late, $timeout));
ok($late < $timeout, 'the late write landed within the timeout of its 504');
sleep($timeout - $late + 3) if $late < $timeout;
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 4 again', 20, sub { emb() eq '{4,4,4}' }), 'Chroma holds state 4, the row of t');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('t')}), '3|0|0|0', 'chroma_verify(t): exact');
finish($node, $log0);
