# RED TEAM REPRO (c1c59cb): chroma_mirror (sync_unknown_adopt_collection) deletes the
# keys kept for *another* collection id of the same name (chroma_sync.resend_collection),
# taking "a collection of that name with another id" to mean the kept one no longer
# exists. A rename (the extension's chroma_modify_collection) makes that false: the kept
# collection lives on under its new name and a late write can still land in it. Any role
# that may call chroma_mirror on a table of its own thus drops the kept keys of another
# owner's table by mirroring into the old name (it needs no right on that table or on the
# collection the keys belong to).
#
# Sequence: timeout 15 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); superuser's table a rows 1..3 synced into cs_t291; arm; UPDATE a id 1 to
# state 9 -> 504 (key 1 in resend); chroma_unmirror('a') (collection kept: key 1 kept for
# its id, name cs_t291); chroma_modify_collection('cs_t291', new_name => 'cs_t291_new');
# role mallory (EXECUTE on chroma_mirror, owns table m only) runs chroma_mirror('m',
# 'cs_t291') (a new collection of the old name); UPDATE a id 1 to state 4;
# chroma_mirror('a', 'cs_t291_new') (the same collection id as before: backfill sends
# state 4); the 504ed state 9 lands (within the timeout of its 504); the timeout passes;
# chroma_flush('a').
# Observed: mallory's chroma_mirror deleted the kept key; a's new mirror takes nothing,
# Chroma keeps state 9 for id 1 (chroma_verify 3|0|0|1).
# Expected: keys kept for a collection that still exists stay (and cannot be dropped by a
# role without rights on it); a's new mirror of that collection id resends state 4.
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

my $coll = 'cs_t291';
my $new = 'cs_t291_new';
my $timeout = 15;
my $node = new_node('t291',
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
q1('CREATE ROLE mallory');
q1('GRANT EXECUTE ON FUNCTION chroma_mirror TO mallory');
q1('CREATE TABLE m (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO m VALUES (1, ARRAY[7, 7, 7])');
q1('ALTER TABLE m OWNER TO mallory');
q1("SET ROLE mallory; SELECT chroma_mirror('m', collection => '$coll')");
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1',
	'key 1 still kept after mallory mirrored m into the old name (its collection exists)');
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
