# RED TEAM REPRO (c1c59cb): chroma_delete_collection drops the keys kept for the
# collection (sync_unknown_forget_collection) only if they are there when it runs. A
# request of a mirror removed by DROP TABLE (which does not wait for the worker) ends
# later; the worker then hands its keys to the collection (sync_unknown_persist ->
# chroma_sync.resend_hand_over), under the id of a collection already deleted, and
# nothing ever removes them unless a mirror is one day created into a collection of the
# same name: rows kept for ever for a collection that no longer exists (TAP 287's
# expectation), one set per collection deleted this way.
#
# Sequence: timeout 8 s, late_proxy 'upsert+hold' (the armed upsert gets no answer; it is
# forwarded when a file appears); table d rows 1..3 synced into cs_t298; arm; UPDATE d id
# 1 (its upsert held); DROP TABLE d; chroma_delete_collection('cs_t298') (nothing kept
# yet); the worker times out and hands key 1 to the collection; the held request is
# released (404: the collection is gone); 10 s pass.
# Observed: chroma_sync.resend_collection holds (deleted collection's id, '1').
# Expected: nothing kept for a collection that no longer exists (0).
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
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert+hold');

my $coll = 'cs_t298';
my $node = new_node('t298',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE d SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert is held (in flight)');
q1('DROP TABLE d');
is(q1('SELECT count(*) FROM chroma_sync.mirror'), '0', 'the dropped table\'s mirror is gone');
is(q1("SELECT chroma_delete_collection('$coll')"), 't', 'the collection is deleted');
# the held request times out (8 s) and the worker hands its key on; it may drop it at once
# (the collection is gone), so only the end is checked
sleep(10);
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held request was tried (collection gone)');
# the worker drops keys kept for a collection Chroma no longer has (sync_unknown_collect)
ok(wait_for('nothing kept', 30, sub {
	q1('SELECT (SELECT count(*) FROM chroma_sync.resend) + (SELECT count(*) FROM chroma_sync.resend_collection)') eq '0' }),
	'nothing kept for the deleted collection');
diag('resend_collection: ' . q1(q{SELECT coalesce(string_agg(collection || ':' || key, ','), 'none') FROM chroma_sync.resend_collection}));
finish($node, $log0);
