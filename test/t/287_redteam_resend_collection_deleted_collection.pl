# RED TEAM REPRO (742a20f): keys kept for a collection (chroma_sync.resend_collection) are
# now kept "whatever their time, until taken", and only sync_unknown_adopt_collection (a
# chroma_mirror into the same collection id) ever removes them. When the collection itself
# is deleted (chroma_delete_collection, the usual clean-up after chroma_unmirror without
# drop_collection) no mirror can ever be created into that id again: the rows stay for
# ever (before 742a20f, rows past their not_before were dropped at the next chroma_mirror).
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file appears);
# table a rows 1..3 synced into the collection; arm; UPDATE a id 1 -> 504 (key in resend);
# chroma_unmirror('a') (collection kept: key 1 moves to resend_collection);
# chroma_delete_collection(coll); the late write is released (404: no collection);
# chroma_mirror('a') into a new collection of the same name; flush; 12 s pass.
# Observed: chroma_sync.resend_collection still holds (old collection id, '1').
# Expected: nothing kept for a collection that no longer exists (no request to it can be
# applied any more); the table stays empty.
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

my $coll = 'cs_t287';
my $node = new_node('t287',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE a SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert got its 504');
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key 1 waits in chroma_sync.resend');
q1("SELECT chroma_unmirror('a')");
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1', 'key 1 kept for the collection');
q1("SELECT chroma_delete_collection('$coll')");
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '0',
	'chroma_delete_collection dropped the keys kept for the collection');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the late write was tried (collection gone)');
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a mirrored again into a new collection');
sleep(12);
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'flushed');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('a')}), '3|0|0|0', 'chroma_verify(a): exact');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '0',
	'nothing kept for the deleted collection');
finish($node, $log0);
