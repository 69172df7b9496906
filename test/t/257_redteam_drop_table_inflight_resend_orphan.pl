# RED TEAM REPRO (e33143c): a mirrored table dropped while a request of its mirror is in
# flight. DROP TABLE does not wait for the worker (unlike chroma_unmirror, which waits for
# it to leave the mirror: wait_for_inflight), so chroma_sync.on_sql_drop finds no key in
# chroma_sync.resend to hand to the collection and deletes the mirror row. The request
# then times out (outcome unknown): the worker writes its keys into chroma_sync.resend
# under the deleted mirror's id (sync_unknown_persist). Nothing ever reads or deletes
# them (a leak), and chroma_sync.resend_collection never gets them, so a new mirror into
# the same collection does not resend them: the late write of the dropped mirror's
# request overwrites the new mirror's newer state for good.
#
# Sequence: timeout 8 s, late_proxy 'upsert+hold' (the armed upsert gets no answer; it
# is forwarded to Chroma when a file appears); rows 1..10 synced; arm; UPDATE id 1 to
# state 1 (its upsert held); DROP TABLE d (commits at once); the worker times out.
# Before the fix: chroma_sync.resend holds key 1 under a mirror_id that no longer exists,
# chroma_sync.resend_collection is empty; a new table d (id 1 in state 2) mirrored into
# the same collection sends state 2; the held state 1 then lands; chroma_flush says done;
# Chroma holds state 1 for ever (chroma_verify 10|0|0|1), and the orphan resend row stays.
# Expected: the key is kept for the collection (resend_collection), the new mirror takes
# it and resends it after the late write: Chroma holds state 2, no orphan row.
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

my $coll = 'cs_t900';
my $node = new_node('t900',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

sub chroma_embedding
{
	return q1("SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])");
}

open(my $fh, '>', $arm) or die;
close($fh);
q1('UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 1 is held');
q1('DROP TABLE d');
is(q1('SELECT count(*) FROM chroma_sync.mirror'), '0', 'the dropped table\'s mirror is gone');
# the worker times out on the held request (8 s) and writes its key somewhere
ok(wait_for('the timed-out key written', 40, sub {
	q1('SELECT (SELECT count(*) FROM chroma_sync.resend) + (SELECT count(*) FROM chroma_sync.resend_collection)') ne '0' }),
	'the timed-out key is recorded');
is(q1('SELECT count(*) FROM chroma_sync.resend r WHERE NOT EXISTS '
		. '(SELECT 1 FROM chroma_sync.mirror m WHERE m.mirror_id = r.mirror_id)'),
	'0', 'no resend row of a mirror that no longer exists');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1', 'the key is kept for the collection');

# a new table into the same collection, row 1 in a newer state
q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
q1('UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
if ($ret != 0)
{
	diag("chroma_mirror without adopt: $err");
	q1("SELECT chroma_mirror('d', collection => '$coll', adopt => true)");
}
ok(wait_for('state 2 in Chroma', 30, sub { chroma_embedding() eq '{2,2,2}' }), 'the new mirror sent state 2');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 1 reached Chroma');
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('state 2 again', 30, sub { chroma_embedding() eq '{2,2,2}' }), 'Chroma holds state 2, the table\'s');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('d')}), '10|0|0|0', 'chroma_verify: exact');
is(q1('SELECT count(*) FROM chroma_sync.resend r WHERE NOT EXISTS '
		. '(SELECT 1 FROM chroma_sync.mirror m WHERE m.mirror_id = r.mirror_id)'),
	'0', 'no orphan resend row at the end');
finish($node, $log0);
