# RED TEAM REPRO (c1c59cb): chroma_mirror now copies the resend keys of the collection's
# other mirrors ("one it takes over pauses and would never send them"), but chroma_adopt,
# the other way to take a collection over (README: "take the collection over with
# chroma_adopt(source) ... the previous owner's mirror pauses"), does not: it neither copies
# the other mirrors' keys nor takes those kept for the collection. The mirror it takes the
# collection from pauses with its outcome-unknown key, which nobody sends again.
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); table a rows 1..3 synced into cs_t293; table b (same rows, id 1 state 2)
# mirrored into it with adopt => true; chroma_pause('a') (a is taken over); arm; UPDATE b
# id 1 to state 3 -> 504 (key 1 in chroma_sync.resend under b); UPDATE a id 1 to state 5;
# chroma_adopt('a') (a takes the collection back: resends every row, state 5);
# chroma_pause('b') (what b's worker does at its next owner check); the 504ed state 3
# lands (within the timeout of its 504); the timeout passes; chroma_flush('a').
# Observed: key 1 stays with the paused mirror b; Chroma keeps b's stale state 3 for id 1;
# chroma_verify('a') 3|0|0|1.
# Expected: the adopting mirror a resends key 1 after the late write (as chroma_mirror's
# copy does since c1c59cb): state 5, exact.
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

my $coll = 'cs_t293';
my $timeout = 8;
my $node = new_node('t293',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout}000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');

q1('CREATE TABLE b (LIKE a INCLUDING ALL)');
q1('INSERT INTO b SELECT * FROM a');
q1('UPDATE b SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'b backfilled');
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'b sent state 2');
q1("SELECT chroma_pause('a')");

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE b SET embedding = ARRAY[3, 3, 3] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 3 got its 504');
my $t504 = time();
ok(wait_for('its key in resend', 20, sub { q1(q{SELECT count(*) FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id) WHERE m.source = 'b'::regclass}) eq '1' }),
	'key 1 waits in chroma_sync.resend under b');
q1('UPDATE a SET embedding = ARRAY[5, 5, 5] WHERE id = 1');
q1("SELECT chroma_adopt('a')");
q1("SELECT chroma_pause('b')");
ok(wait_for('state 5 in Chroma', 30, sub { emb() eq '{5,5,5}' }), 'a resent its rows (state 5)');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 3 reached Chroma');
my $late = time() - $t504;
diag(sprintf('late write released %.1f s after its 504 (timeout %d s)', $late, $timeout));
ok($late < $timeout, 'the late write landed within the timeout of its 504');
diag('resend: ' . q1(q{SELECT coalesce(string_agg(m.source::text || ':' || r.key || ':' || m.paused, ','), 'none') FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id)}));
sleep($timeout - $late + 3) if $late < $timeout;
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 5 again', 20, sub { emb() eq '{5,5,5}' }), 'Chroma holds state 5, a\'s row');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('a')}), '3|0|0|0', 'chroma_verify(a): exact');
finish($node, $log0);
