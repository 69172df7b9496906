# Keys whose request may still be applied late (chroma_sync.resend) outlive their mirror
# when its collection stays: chroma_unmirror without drop_collection, and a mirrored table
# dropped, hand them on (chroma_sync.resend_hand_over): to another mirror of the
# collection, or else to the collection (chroma_sync.resend_collection), and a mirror
# created into that collection takes them into resend. A mirror into another collection
# takes none; chroma_unmirror with drop_collection keeps none (the collection is gone); a
# key past its time is kept all the same (its late write may have landed while no mirror
# wrote the collection); a key no row of the new table can have is deleted, not failed.
# TAP 254, 244, 257, 258, 280-283 show the late writes this guards against.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('resend_collection');
my $log0 = log_offset($node);
make_table($node, 'a', rows => 10, dim => 4);
make_table($node, 'b', rows => 10, dim => 4);
fresh_collection($node, 'cs_t256_a');
fresh_collection($node, 'cs_t256_b');
mirror($node, 'a', 'cs_t256_a');
is($node->safe_psql('postgres', "SELECT chroma_flush(NULL, interval '60 seconds')"), 't', 'backfilled');

sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub mirror_id { return q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = '$_[0]'::regclass"); }
my $coll_a = q1("SELECT collection_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");

# two keys of a parked (as after a 504), one already due, one not
my $ma = mirror_id('a');
q1("SELECT chroma_pause('a')");	# the worker leaves the parked keys where they are
q1("INSERT INTO chroma_sync.resend VALUES ($ma, '3', clock_timestamp() + interval '10 minutes'), "
	. "($ma, '4', clock_timestamp() - interval '1 second')");
q1("SELECT chroma_unmirror('a')");
is(q1('SELECT count(*) FROM chroma_sync.resend'), '0', 'unmirror: no key of the mirror left in resend');
is(q1("SELECT string_agg(collection_id || ' ' || key || ' ' || (not_before > clock_timestamp() + interval '9 minutes'), "
		. "',' ORDER BY key) FROM chroma_sync.resend_collection"),
	"$coll_a 3 true,$coll_a 4 false", 'both keys are kept for the collection, with their time');

# a mirror into another collection takes nothing
mirror($node, 'b', 'cs_t256_b');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '2', 'another collection\'s mirror leaves them');
is(q1('SELECT count(*) FROM chroma_sync.resend'), '0', 'and takes nothing');

# a mirror into the collection takes it
mirror($node, 'a', 'cs_t256_a');
my $ma2 = mirror_id('a');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '0', 'the new mirror of the collection took them');
ok(poll_query($node, "SELECT string_agg(mirror_id || ' ' || key || ' ' || (not_before > clock_timestamp() + interval '9 minutes'), ',' ORDER BY key) "
		. 'FROM chroma_sync.resend', "$ma2 3 true", 20),
	'key 3 in chroma_sync.resend, for the new mirror, with its time; key 4, due, was queued at once');

# drop_collection keeps nothing
q1("SELECT chroma_pause('b')");
my $mb = mirror_id('b');
q1("INSERT INTO chroma_sync.resend VALUES ($mb, '5', clock_timestamp() + interval '10 minutes')");
q1("SELECT chroma_unmirror('b', drop_collection => true)");
# kept until the worker finds the collection gone: the drop at commit may fail (TAP 294)
ok(wait_for('the keys of the dropped collection dropped', 30,
		sub { q1('SELECT count(*) FROM chroma_sync.resend_collection') eq '0' }),
	'unmirror dropping the collection keeps nothing once it is gone');

# a key kept from a table with another key type is taken too: no row of the new table can
# have it, so its id is deleted (not a failed row)
fresh_collection($node, 'cs_t256_b');
q1("INSERT INTO chroma_sync.resend_collection SELECT chroma_create_collection('cs_t256_b'), 'x', clock_timestamp()");
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '1', 'a text key kept for b\'s collection');
mirror($node, 'b', 'cs_t256_b');
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '0', 'a mirror with an integer id takes it');
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'flushed: the key was resent');
is(q1('SELECT count(*) FROM chroma_sync.failed'), '0', 'no failed row: the key is no row of b');
assert_equal($node, 'b', 'cs_t256_b', name => 'b');

# a dropped table hands its mirror's waiting keys to the collection too
q1("SELECT chroma_pause('b')");
$mb = mirror_id('b');
my $coll_b = q1("SELECT collection_id FROM chroma_sync.mirror WHERE source = 'b'::regclass");
q1("INSERT INTO chroma_sync.resend VALUES ($mb, '7', clock_timestamp() + interval '10 minutes')");
q1('DROP TABLE b');
ok(poll_query($node, 'SELECT count(*) FROM chroma_sync.mirror', '1', 30), 'the dropped table\'s mirror is gone');
is(q1('SELECT count(*) FROM chroma_sync.resend WHERE key = \'7\''), '0', 'its key left resend');
is(q1('SELECT collection_id || \' \' || key FROM chroma_sync.resend_collection'), "$coll_b 7",
	'and is kept for its collection');

# the mirror that took key 3 resends it once due: make it due now (a new worker looks at
# once; the running one next looks when the key was due)
q1("UPDATE chroma_sync.resend SET not_before = clock_timestamp() WHERE mirror_id = $ma2");
my $w = worker_pid($node);
q1("SELECT pg_terminate_backend($w)");
ok(wait_for_new_worker($node, $w) ne '', 'a new worker runs');
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'flushed: the taken key was resent');
is(q1('SELECT count(*) FROM chroma_sync.resend'), '0', 'resend is empty');
assert_equal($node, 'a', 'cs_t256_a', name => 'a after the resend');
finish($node, $log0);
