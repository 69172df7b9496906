# RED TEAM REPRO (c09a072, lent steps): a lent step runs on the configuration the worker
# read when its pass began (worker.c lend_mirror: the pass's MirrorConfig list; lent_step
# and lend_candidate test m->paused of that list; sync_mirror_step does not read the row
# again). While mirror a's step waits for a request that does not come back (a's upserts
# held at a proxy in front of the real Chroma server, up to chroma_sync.timeout), every
# lent step of mirror c keeps sending c's changes although c was paused by chroma_pause()
# after the pass began: the pause is ignored for as long as a's step waits (here 90 s),
# lent step after lent step.
#
# Steps: tables a and c (5 rows each), mirrors a -> cs_t304_a, c -> cs_t304_c, both
# backfilled. Hold a's upserts; UPDATE a (a's step waits, held). UPDATE c row 1: reaches
# Chroma through a lent step (lending works). SELECT chroma_pause('c') (committed, status
# says paused). UPDATE c rows 2 and 3 (two commits, 2 s apart). Wait 4 s.
# Observed on c09a072: rows 2 and 3 of c reach cs_t304_c while c is paused (lent steps).
# Expected: a paused mirror sends nothing ("chroma_pause: stop sending, keep queueing");
# its changes stay queued until chroma_resume. (Before c09a072 nothing of c was sent while
# a's step waited; at most one step of c ran on the stale pass configuration after it.)
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

my ($ca, $cc) = ('cs_t304_a', 'cs_t304_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t304',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 90000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);

sub hold_on { unlink("$hold.held"); hold_requests($hold, "$_[0]/upsert"); return; }

fresh_collection($node, $_) for ($ca, $cc);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'c', rows => 5, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'c', $cc);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'c', $cc, name => 'c after its backfill');
my $ida = $node->safe_psql('postgres', "SELECT collection_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");

hold_on($ida);
$node->safe_psql('postgres', q{UPDATE a SET doc = 'a held' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held at the proxy");
$node->safe_psql('postgres', q{UPDATE c SET doc = 'c live' WHERE id = 1});
ok(poll_query($node, qq{SELECT document FROM chroma_get('$cc', ids => ARRAY['1'])}, 'c live', 30),
	"c's change reached Chroma in a lent step while a's request was held");

$node->safe_psql('postgres', q{SELECT chroma_pause('c')});
is($node->safe_psql('postgres', q{SELECT paused FROM chroma_sync.mirror WHERE source = 'c'::regclass}),
	't', 'c is paused');
$node->safe_psql('postgres', q{UPDATE c SET doc = 'c while paused' WHERE id = 2});
sleep(2);
$node->safe_psql('postgres', q{UPDATE c SET doc = 'c while paused' WHERE id = 3});
sleep(4);
ok(-e "$hold.held", "a's request is still held");
my ($d2, $d3) = (direct_document($node, $cc, 2), direct_document($node, $cc, 3));
diag("c rows 2, 3 in Chroma while c is paused: '$d2', '$d3'");
isnt($d2, 'c while paused', "paused c's change of row 2 did not reach Chroma");
isnt($d3, 'c while paused', "paused c's change of row 3 did not reach Chroma");
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.queue q JOIN chroma_sync.mirror m USING (mirror_id) WHERE m.source = 'c'::regclass AND q.key IN ('2', '3')}),
	'2', "paused c's changes stay queued");

release_requests($hold);
is($node->safe_psql('postgres', "SELECT chroma_flush('a', interval '60 seconds')", timeout => 90), 't',
	'a flushed once its request is let go');
$node->safe_psql('postgres', q{SELECT chroma_resume('c')});
is($node->safe_psql('postgres', "SELECT chroma_flush('c', interval '60 seconds')", timeout => 90), 't',
	'c flushed after chroma_resume');
assert_equal($node, 'a', $ca, name => 'a at the end');
assert_equal($node, 'c', $cc, name => 'c at the end');
finish($node, $log0);
