# RED TEAM REPRO (c09a072, lent steps): after a takeover in the same database
# (chroma_mirror(b, collection, adopt => true)) the previous mirror of the collection is to
# pause "before it writes again" (README; red-team TAP 301: the worker resets every
# mirror's owner check when the configuration generation changes, at the start of a pass).
# A lent step runs in the pass that began before the takeover (worker.c lent_step, the
# pass's MirrorConfig and MirrorState, owner_checked_at not reset), so while another
# mirror's step waits, the previous owner's changes keep going into the collection the
# new mirror now owns: a DELETE in the old table deletes the id of a row the new owner's
# table has.
#
# Steps: tables a, c, b (ids 1..5); mirrors a -> cs_t308_a, c -> cs_t308_c. Hold a's
# upserts at the proxy; UPDATE a (a's step waits). UPDATE c row 2 (reaches Chroma in a
# lent step). chroma_mirror('b', collection => 'cs_t308_c', ..., adopt => true) (committed).
# DELETE FROM c WHERE id = 1. Wait 4 s (a still held).
# Observed on c09a072: id 1 is deleted from cs_t308_c, the collection b owns (b's table
# has row 1); mirror c is not paused.
# Expected: c does not write into cs_t308_c after b took it over (it pauses first, as
# TAP 301 checks for the worker's own steps); id 1 stays in Chroma. (Here b's backfill,
# which can only run after a's step ends, sends row 1 again, so the end is repaired; the
# window is the whole wait of a's step, up to chroma_sync.timeout per request. On
# c09a072~1 with this delay_proxy.pl, c's change waits for a's step and id 1 stays.)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $hold = "$dir/hold";

my ($ca, $cc) = ('cs_t308_a', 'cs_t308_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t308',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 90000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub direct_count
{
	my ($coll, $id) = @_;
	return q1("SET chroma_sync.url = '$ENV{CHROMA_URL}'; "
		  . "SELECT count(*) FROM chroma_get('$coll', ids => ARRAY['$id'])");
}

fresh_collection($node, $_) for ($ca, $cc);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'c', rows => 5, dim => 8);
make_table($node, 'b', rows => 5, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'c', $cc);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'c', $cc, name => 'c after its backfill');
my $ida = q1("SELECT collection_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");

unlink("$hold.held");
hold_requests($hold, "$ida/upsert");
q1(q{UPDATE a SET doc = 'a held' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held");
q1(q{UPDATE c SET doc = 'c live' WHERE id = 2});
ok(poll_query($node, qq{SELECT document FROM chroma_get('$cc', ids => ARRAY['2'])}, 'c live', 30),
	"c's change reached Chroma in a lent step");

q1("SELECT chroma_mirror('b', collection => '$cc', document_column => 'doc', metadata_columns => '{meta}', adopt => true)");
is(q1("SELECT count(*) FROM chroma_sync.mirror WHERE source = 'b'::regclass"), '1', 'b took cs_t308_c over');
q1('DELETE FROM c WHERE id = 1');
sleep(4);
ok(-e "$hold.held", "a's request is still held");
my $cstate = q1(q{SELECT state FROM chroma_sync.status WHERE source = 'c'::regclass});
is(direct_count($cc, 1), '1', "id 1 (a row of b, the collection's owner) is still in Chroma: c wrote nothing after the takeover (c's state: $cstate)");

release_requests($hold);
is(q1("SELECT chroma_flush('a', interval '60 seconds')", timeout => 90), 't', 'a flushed');
is(q1("SELECT chroma_flush('b', interval '60 seconds')", timeout => 90), 't', 'b flushed');
my $v = q1(q{SELECT rows || '|' || missing || '|' || extra || '|' || different FROM chroma_verify('b')});
my $ids = q1("SET chroma_sync.url = '$ENV{CHROMA_URL}'; SELECT string_agg(id || '=' || coalesce(document, ''), ',' ORDER BY id) FROM chroma_get('$cc')");
my $st = q1(q{SELECT string_agg(source::text || ':' || state || ':' || coalesce(last_error, ''), '; ' ORDER BY source::text) FROM chroma_sync.status});
is($v, '5|0|0|0', "chroma_verify('b') at the end (Chroma: $ids; status: $st)");
assert_equal($node, 'b', $cc, name => 'b at the end');
finish($node, $log0);
