# RED TEAM REPRO (e33143c): keys kept for a collection are dropped once their time has
# passed ("their requests can no longer be applied": sync_unknown_adopt_collection), but
# their time passing does not mean the late write did not land: it may have been applied
# while no mirror wrote the collection, and then only the resend of the key would have
# corrected it. Unmirror after a 504 (the newer state already sent), the stale request
# lands, then mirror again into the collection without a backfill (backfill => false: the
# collection already holds the table's rows, as it did at the unmirror) after the key's
# time: the key is dropped and Chroma keeps the stale state for good, although the table
# has not changed since the unmirror. The same mirror a few seconds earlier (before the
# key's time) resends it and ends exact.
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); rows 1..10 synced; arm; UPDATE id 1 to state 1 -> 504 (key in resend);
# UPDATE id 1 to state 2 -> sent (Chroma {2,2,2}); chroma_unmirror('d') (key 1 kept for
# the collection); the 504ed state 1 lands (Chroma {1,1,1}); 10 s later chroma_mirror('d',
# same collection, backfill => false); chroma_flush.
# Before the fix: resend_collection's key is dropped, Chroma keeps {1,1,1} (verify 10|0|0|1).
# Expected: Chroma equals the table ({2,2,2}): a kept key is resent by the next mirror of
# the collection (or the late write cannot land unnoticed).
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

my $coll = 'cs_t904';
my $node = new_node('t904',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');
sub emb { return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 1 got its 504');
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key 1 waits in chroma_sync.resend');
q1('UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
ok(wait_for('state 2 in Chroma', 20, sub { emb() eq '{2,2,2}' }), 'state 2 sent');
q1("SELECT chroma_unmirror('d')");
is(q1('SELECT key FROM chroma_sync.resend_collection'), '1', 'key 1 kept for the collection');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 1 reached Chroma');
is(emb(), '{1,1,1}', 'Chroma holds the stale state 1 while no mirror writes the collection');
ok(wait_for('the key\'s time passes', 30, sub {
	q1('SELECT not_before < clock_timestamp() FROM chroma_sync.resend_collection') eq 't' }), 'its time passed');
q1("SELECT chroma_mirror('d', collection => '$coll', backfill => false)");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 2', 15, sub { emb() eq '{2,2,2}' }), 'Chroma holds state 2, the table\'s');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('d')}), '10|0|0|0', 'chroma_verify: exact');
finish($node, $log0);
