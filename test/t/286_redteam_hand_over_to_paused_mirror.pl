# RED TEAM REPRO (742a20f): chroma_sync.resend_hand_over gives a removed mirror's
# outcome-unknown keys to *any* other mirror of the collection, a paused one included (the
# mirror a takeover left behind: "the other mirror then pauses"). A paused mirror sends
# nothing, so the keys are never resent; they are not in chroma_sync.resend_collection
# either, so the mirror that next writes the collection (the same table mirrored again)
# does not take them, and the late write of the 504ed request outlives what it sent.
#
# Sequence: timeout 20 s, late_proxy 'upsert' (504 at once, forwarded when a file appears);
# table a rows 1..5 synced into the collection; table b (same rows, id 1 state 2) mirrored
# into it with adopt => true; chroma_pause('a'); arm; UPDATE b id 1 to state 3 -> 504 (key
# in resend of b); chroma_unmirror('b') (collection kept); UPDATE b id 1 to state 4;
# chroma_mirror('b') into the collection again (backfill sends state 4); the 504ed state 3
# lands; chroma_flush('b').
# Observed before the fix: key 1 sat in chroma_sync.resend under the paused mirror a;
# Chroma kept state 3 for id 1 (chroma_verify('b') 5|0|0|1). Now a mirror created into the
# collection copies the keys of its other mirrors.
# Expected: the live mirror of the collection resends key 1 after the late write: state 4,
# chroma_verify exact.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert');

my $coll = 'cs_t286';
my $node = new_node('t286',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 20000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 5) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');

q1('CREATE TABLE b (LIKE a INCLUDING ALL)');
q1('INSERT INTO b SELECT * FROM a');
q1('UPDATE b SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'b backfilled');
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'b sent state 2');
$node->psql('postgres', "SELECT chroma_pause('a')");
ok(wait_for('a paused', 60, sub { q1(q{SELECT paused FROM chroma_sync.mirror WHERE source = 'a'::regclass}) eq 't' }),
	'a is paused (taken over)');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE b SET embedding = ARRAY[3, 3, 3] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 3 got its 504');
ok(wait_for('its key in resend', 20, sub { q1(q{SELECT count(*) FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id) WHERE m.source = 'b'::regclass}) eq '1' }),
	'key 1 waits in chroma_sync.resend');
q1("SELECT chroma_unmirror('b')");
diag('resend after unmirror: ' . q1(q{SELECT coalesce(string_agg(m.source::text || ':' || r.key, ','), 'none') FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id)}));
diag('resend_collection: ' . q1('SELECT count(*) FROM chroma_sync.resend_collection'));
q1('UPDATE b SET embedding = ARRAY[4, 4, 4] WHERE id = 1');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_mirror('b', collection => '$coll')");
if ($ret != 0)
{
	diag("chroma_mirror without adopt: $err");
	q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
}
# (the late write lands within the request timeout of its 504: chroma_flush would wait
# for the resend, so it comes after the release)
ok(wait_for('state 4 in Chroma', 30, sub { emb() eq '{4,4,4}' }), 'b sent state 4 (its backfill)');
is(q1(q{SELECT count(*) FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id)
WHERE m.source = 'b'::regclass AND r.key = '1'}), '1', 'b took a copy of key 1 from the paused mirror a');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 3 reached Chroma');
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 4 again', 25, sub { emb() eq '{4,4,4}' }), 'Chroma holds state 4, b\'s row');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '5|0|0|0', 'chroma_verify(b): exact');
finish($node, $log0);
