# RED TEAM REPRO (e33143c): keys of an earlier mirror of a collection are taken only by a
# mirror *created after* they were handed to the collection (sync_unknown_adopt_collection
# runs in chroma_mirror's insert only). A takeover (chroma_mirror(..., adopt => true), the
# HINT's way: "the other mirror then pauses") makes a second mirror of the collection
# while the first still holds its resend keys: the paused first mirror never resends
# them, and chroma_unmirror of it afterwards (the natural clean-up) moves them to
# chroma_sync.resend_collection, where the existing new mirror never looks. The late write
# of the first mirror's 504ed request overwrites the new mirror's state for good, and the
# resend_collection row stays until some later chroma_mirror.
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file appears);
# table a rows 1..10 synced into the collection; arm; UPDATE a id 1 to state 1 -> 504 (key
# in resend); table b (same rows, id 1 in state 2) mirrored into the collection with
# adopt => true (a pauses); b's backfill sends state 2; chroma_unmirror('a'); the 504ed
# state 1 lands; chroma_flush('b').
# Before the fix: Chroma keeps state 1 for id 1 (chroma_verify('b') 10|0|0|1), key 1 sits in
# chroma_sync.resend_collection.
# Expected: the mirror that now owns the collection resends key 1 after the late write:
# state 2, chroma_verify exact, nothing left behind.
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

my $coll = 'cs_t903';
my $node = new_node('t903',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'backfilled');

sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE a SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 1 got its 504');
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key 1 waits in chroma_sync.resend');

q1('CREATE TABLE b (LIKE a INCLUDING ALL)');
q1('INSERT INTO b SELECT * FROM a');
q1('UPDATE b SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'b sent state 2');
q1("SELECT chroma_unmirror('a')");
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'a\'s 504ed state 1 reached Chroma');
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 2 again', 20, sub { emb() eq '{2,2,2}' }), 'Chroma holds state 2, b\'s');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '10|0|0|0', 'chroma_verify(b): exact');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '0', 'no key left behind for the collection');
finish($node, $log0);
