# RED TEAM REPRO (c1c59cb): a mirror created into a collection copies the resend keys of
# the collection's other mirrors *as they are at that moment* (sync_unknown_adopt_
# collection), because "one it takes over pauses and would never send them". A request of
# the mirror taken over that is still in flight at the takeover ends (timeout: outcome
# unknown) afterwards: its key is written to chroma_sync.resend under that mirror, which
# is paused and never sends it, and nothing copies or hands it to the live mirror. Its
# late write then outlives the live mirror's row.
#
# Sequence: timeout 20 s, late_proxy 'upsert+hold' (the armed upsert gets no answer; it is
# forwarded when a file appears); table a rows 1..3 synced into cs_t292; table b, same
# rows but id 1 state 2; arm; UPDATE a id 1 to state 9 (its upsert held, in flight);
# chroma_mirror('b', 'cs_t292', adopt => true) (copies a's resend keys: none yet);
# chroma_pause('a') (what its worker does at its next owner check: "the other mirror then
# pauses", as in TAP 286); a's request times out (key 1 in chroma_sync.resend under the
# paused mirror a); b's backfill sends state 2; the held state 9 is forwarded and lands
# (within the timeout of the failure); the timeout passes; chroma_flush('b').
# Observed: key 1 stays with the paused mirror a; Chroma keeps state 9 (table a's stale
# write) for id 1; chroma_verify('b') 3|0|0|1.
# Expected: the live mirror b resends key 1 after the late write: state 2, exact.
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

my $coll = 'cs_t292';
my $timeout = 20;
my $node = new_node('t292',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout}000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }
sub resend_of { return q1(qq{SELECT count(*) FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id) WHERE m.source = '$_[0]'::regclass}); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');
q1('CREATE TABLE b (LIKE a INCLUDING ALL)');
q1('INSERT INTO b SELECT * FROM a');
q1('UPDATE b SET embedding = ARRAY[2, 2, 2] WHERE id = 1');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE a SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 9 is held (in flight)');
q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
q1("SELECT chroma_pause('a')");
ok(wait_for('its key in resend', 30, sub { resend_of('a') eq '1' }),
	'a\'s request timed out: key 1 in chroma_sync.resend under a');
my $tfail = time();
# (not chroma_flush: it waits for b's copy of key 1, due one timeout after the failure)
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'b sent state 2 (its backfill)');
is(resend_of('b'), '1', 'b has a copy of key 1');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 9 reached Chroma');
my $late = time() - $tfail;
diag(sprintf('late write landed %.1f s after the timeout (timeout %d s)', $late, $timeout));
ok($late < $timeout, 'the late write landed within the timeout of the failure');
diag('resend: ' . q1(q{SELECT coalesce(string_agg(m.source::text || ':' || r.key || ':' || m.paused, ','), 'none') FROM chroma_sync.resend r JOIN chroma_sync.mirror m USING (mirror_id)}));
sleep($timeout - $late + 3) if $late < $timeout;
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 2 again', 20, sub { emb() eq '{2,2,2}' }), 'Chroma holds state 2, b\'s row');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '3|0|0|0', 'chroma_verify(b): exact');
finish($node, $log0);
