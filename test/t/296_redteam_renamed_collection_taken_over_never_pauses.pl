# RED TEAM REPRO (names as identities, as in TAP 950/951): the worker's check "has another
# mirror adopted the collection?" (sync.c ensure_collection, every 60 s) looks the
# collection up by the mirror's recorded *name*, and only acts when that name still has
# the mirror's collection id. The mirror sends by id, so after a rename (the extension's
# chroma_modify_collection) it goes on writing the collection, but the check never finds
# it: taken over (chroma_mirror(..., adopt => true) into the new name), it never pauses
# (README: "the previous owner's mirror pauses when its worker next checks (within a
# minute)") and keeps overwriting the new owner's records with its own table's rows.
#
# Sequence: table a rows 1..3 synced into cs_t296; chroma_modify_collection('cs_t296',
# new_name => 'cs_t296_new'); table b (same rows, id 1 state 2) mirrored into cs_t296_new
# with adopt => true (the same collection id; b's backfill sends state 2); 65 s pass (past
# a's next owner check); UPDATE a id 1 to state 9; 5 s pass.
# Observed: a is not paused and sent state 9 into the collection b owns; Chroma holds a's
# state 9 for id 1 (chroma_verify('b') 3|0|0|1).
# Expected: a pauses within a minute of the takeover (as without the rename) and sends
# nothing more; Chroma keeps b's state 2. (Control: the same sequence without the rename,
# b taking over cs_t296 itself, passes: a pauses, state 2 stays.)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t296';
my $new = 'cs_t296_new';
my $node = new_node('t296');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub emb { return q1("SELECT embedding::text FROM chroma_get('$new', ARRAY['1'])"); }
q1('CREATE TABLE a (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO a SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, $coll);
fresh_collection($node, $new);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');
q1("SELECT chroma_modify_collection('$coll', new_name => '$new')");
q1('UPDATE a SET embedding = ARRAY[7, 7, 7] WHERE id = 2');
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a still syncs after the rename (by id)');

q1('CREATE TABLE b (LIKE a INCLUDING ALL)');
q1('INSERT INTO b SELECT * FROM a');
q1('UPDATE b SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
q1("SELECT chroma_mirror('b', collection => '$new', adopt => true)");
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'b backfilled');
ok(wait_for('state 2 in Chroma', 30, sub { emb() eq '{2,2,2}' }), 'b sent state 2');
sleep(65);
q1('UPDATE a SET embedding = ARRAY[9, 9, 9] WHERE id = 1');
sleep(5);
ok(wait_for('a paused', 10, sub { q1(q{SELECT paused FROM chroma_sync.mirror WHERE source = 'a'::regclass}) eq 't' }),
	'a paused (taken over more than a minute ago)');
is(emb(), '{2,2,2}', 'Chroma keeps b\'s state 2 for id 1');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '3|0|0|0', 'chroma_verify(b): exact');
finish($node, $log0);
