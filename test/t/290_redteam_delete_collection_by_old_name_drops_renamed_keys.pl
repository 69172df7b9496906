# RED TEAM REPRO (c1c59cb): keys kept for a collection (chroma_sync.resend_collection) are
# dropped by chroma_delete_collection *by name*, whatever collection that name now means,
# and even when nothing is deleted (missing_ok => true, no such collection). A collection
# is renamed with the extension's own chroma_modify_collection: the kept keys still carry
# the old name while their collection (same id) lives on under the new one, and a late
# write of the 504ed request can still land in it.
#
# Sequence: timeout 15 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); table a rows 1..3 synced into cs_t290; arm; UPDATE a id 1 to state 9 -> 504
# (key 1 in resend); chroma_unmirror('a') (collection kept: key 1 kept for its id, name
# cs_t290); chroma_modify_collection('cs_t290', new_name => 'cs_t290_new');
# chroma_delete_collection('cs_t290', missing_ok => true) (returns false: nothing deleted);
# UPDATE a id 1 to state 4; chroma_mirror('a', 'cs_t290_new') (the same collection id:
# backfill sends state 4); the 504ed state 9 lands (within the timeout of its 504);
# the timeout passes; chroma_flush('a').
# Observed: the kept key is gone after the chroma_delete_collection that deleted nothing,
# the new mirror takes no key, Chroma keeps state 9 for id 1 (chroma_verify 3|0|0|1).
# Expected: a chroma_delete_collection that did not delete the keys' collection leaves
# them; the new mirror of that collection id takes key 1 and resends state 4. (Control: the
# same sequence without the chroma_delete_collection call passes: state 4, exact.)
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

my $coll = 'cs_t290';
my $new = 'cs_t290_new';
my $timeout = 15;
my $node = new_node('t290',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout}000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$new', ARRAY['1'])"); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
fresh_collection($node, $new);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE a SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 9 got its 504');
my $t504 = time();
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key 1 waits in chroma_sync.resend');
q1("SELECT chroma_unmirror('a')");
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1', 'key 1 kept for the collection');
q1("SELECT chroma_modify_collection('$coll', new_name => '$new')");
is(q1("SELECT chroma_delete_collection('$coll', missing_ok => true)"), 'f',
	'chroma_delete_collection of the old name deletes nothing');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1',
	'key 1 still kept (its collection was not deleted)');
q1('UPDATE a SET embedding = ARRAY[4, 4, 4] WHERE id = 1');
q1("SELECT chroma_mirror('a', collection => '$new')");
ok(wait_for('state 4 in Chroma', 30, sub { emb() eq '{4,4,4}' }), 'a sent state 4 (its backfill)');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 9 reached Chroma');
my $late = time() - $t504;
diag(sprintf('late write released %.1f s after its 504 (timeout %d s)', $late, $timeout));
ok($late < $timeout, 'the late write landed within the timeout of its 504');
sleep($timeout - $late + 2) if $late < $timeout;
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 4 again', 20, sub { emb() eq '{4,4,4}' }), 'Chroma holds state 4, the row of a');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('a')}), '3|0|0|0', 'chroma_verify(a): exact');
finish($node, $log0);
