# RED TEAM REPRO (c09a072, lent steps): a lent step's outcome-unknown keys are dropped,
# not handed on, when its table is dropped while its request is in flight. worker.c
# lent_step runs a step of a mirror without sync_unknown_note_mirror(st, m), which the
# worker's loop calls before each mirror's own step: in the first pass after a worker
# starts, a mirror lent to before its own turn has st->collection_id and st->collection
# empty. Its request times out (outcome unknown), sync_unknown_persist finds the mirror
# row gone (DROP TABLE does not wait for the worker) and calls hand_over(mirror, '', ''),
# i.e. chroma_sync.resend_hand_over(mirror, NULL, NULL), which hands nothing on and
# deletes the keys. The late request can still be applied: nothing sends the key again.
#
# Steps: tables a and y (ids 1..5), mirrors a -> cs_t306_a (mirror_id lower), y ->
# cs_t306_y; chroma_sync.timeout = 8 s. The proxy holds every request whose bytes contain
# 'stale306'. Terminate the worker; UPDATE a row 1 to 'stale306 a' (the new worker's first
# pass: a's request held). UPDATE y row 1 to 'stale306 y': a lent step of y (a's wait),
# its request held too. DROP TABLE y. y's request times out (8 s): outcome unknown.
# Observed on c09a072: chroma_sync.resend_collection is empty and chroma_sync.resend has
# no key of y: key 1 of y's collection, whose request may still be applied late, is
# forgotten (a mirror created into the collection afterwards takes nothing to resend).
# Expected (as for a dropped table's keys in TAP 256, and for the same drop during y's own
# step, where the worker noted y's collection first): key 1 is kept for the collection in
# chroma_sync.resend_collection, for the next mirror of the collection to send again.
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

my ($ca, $cy) = ('cs_t306_a', 'cs_t306_y');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t306',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 8000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

fresh_collection($node, $_) for ($ca, $cy);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'y', rows => 5, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'y', $cy);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'y', $cy, name => 'y after its backfill');
my $my = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'y'::regclass");
my $ma = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");
my $idy = q1("SELECT collection_id FROM chroma_sync.mirror WHERE source = 'y'::regclass");
ok($ma < $my, "a's mirror comes first in the worker's pass ($ma < $my)");

hold_requests($hold, 'stale306');
unlink("$hold.held");

my $old = worker_pid($node);
q1("SELECT pg_terminate_backend($old)");
my $logw = log_offset($node);
q1(q{UPDATE a SET doc = 'stale306 a' WHERE id = 1});
my $new = wait_for_new_worker($node, $old, 30);
ok($new ne '', "a new worker ($new)");
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held (the new worker's first pass)");
q1(q{UPDATE y SET doc = 'stale306 y' WHERE id = 1});
ok(wait_for('a lent step of y', 20, sub { slurp_file($node->logfile, $logw) =~ /mirror $ma lends its wait to mirror $my/ }),
	"a's step lent its wait to y");
sleep(1);
is(q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $my"), '1', "y's change is in flight (its entry stays)");
q1('DROP TABLE y');
sleep(11);	# y's request times out (chroma_sync.timeout 8 s): its outcome is unknown
ok(-e $hold, "y's request was held until it timed out");
my $kept = q1("SELECT coalesce(string_agg(collection_id || ':' || key, ','), '(none)') FROM chroma_sync.resend_collection");
my $rs = q1("SELECT coalesce(string_agg(mirror_id || ':' || key, ','), '(none)') FROM chroma_sync.resend");
diag("resend_collection: $kept; resend: $rs");
is($kept, "$idy:1", "key 1 of y's collection, whose request may still be applied, is kept for the collection (resend_collection: $kept; resend: $rs)");

# a mirror created into the collection now would take nothing to send again after the
# timeout (sync_unknown_adopt_collection reads resend_collection): the held request, let
# go, can overwrite what it sent (the late writes of TAP 254/256)
release_requests($hold);
q1(q{UPDATE a SET doc = 'a again' WHERE id = 1});
is(q1("SELECT chroma_flush('a', interval '60 seconds')", timeout => 90), 't', 'a flushed');
assert_equal($node, 'a', $ca, name => 'a at the end');
finish($node, $log0);
