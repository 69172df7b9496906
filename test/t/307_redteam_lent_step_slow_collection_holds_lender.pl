# Fixed: once the lending step's request is answered, a lent step has 1 s more for its own
# request; after that it gives it up as an interrupted request (its keys outcome-unknown,
# sent again after the timeout by the mirror's own step), and that mirror has no lent step
# for a minute (sync.c lent_step_waits).
# RED TEAM REPRO (c09a072, lent steps): a lent step is "a drain of at most 250 ms", but
# only its reading is bounded: it then waits for its own request (run_pipeline ->
# pipeline_complete, up to chroma_sync.timeout) before it returns to the step that lent
# its wait. So a mirror whose collection is slow now holds back the mirror that lent to
# it: that mirror's request came back, but its step cannot finish the batch (delete the
# queue entries, go on) until the other collection answers. chroma_flush of the lending
# mirror times out, and chroma_unmirror of it waits (lent_from) for the other mirror's
# request. Before c09a072 the lending mirror's step ended as soon as its own request came
# back (the slow collection held the worker only in its own step, afterwards).
#
# Steps: tables a and c, mirrors a -> cs_t307_a, c -> cs_t307_c, timeout 60 s. The proxy
# holds requests containing 'zz307'. UPDATE a row 1 to 'a zz307' (a's request held).
# UPDATE c row 1 to 'c zz307' (a lent step of c in a's wait; c's request held too). The
# hold is narrowed to 'c zz307': a's request goes to Chroma and is answered.
# Observed on c09a072: a's queue entry stays and chroma_flush('a', 15 s) returns false
# while c's request is held (until c's request is let go, up to chroma_sync.timeout).
# Expected: a's step finishes its acknowledged batch when its answer comes: a's entry is
# gone and chroma_flush('a') returns true within seconds, whatever c's collection does.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $hold = "$dir/hold";

my ($ca, $cc) = ('cs_t307_a', 'cs_t307_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t307',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 60000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
fresh_collection($node, $_) for ($ca, $cc);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'c', rows => 5, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'c', $cc);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'c', $cc, name => 'c after its backfill');
my $ma = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");
my $mc = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'c'::regclass");

unlink("$hold.held");
hold_requests($hold, 'zz307');
my $logw = log_offset($node);
q1(q{UPDATE a SET doc = 'a zz307' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held");
q1(q{UPDATE c SET doc = 'c zz307' WHERE id = 1});
ok(wait_for('a lent step of c', 20, sub { slurp_file($node->logfile, $logw) =~ /mirror $ma lends its wait to mirror $mc/ }),
	"a's step lent its wait to c");
sleep(1);
hold_requests($hold, 'c zz307');	# a's request goes on, c's stays held
ok(wait_for("a's change in Chroma", 15, sub { direct_document($node, $ca, 1) eq 'a zz307' }),
	"a's request reached Chroma");
my $t0 = time;
my $gone = wait_for("a's queue entry gone", 15, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $ma") eq '0' });
ok($gone, sprintf("a's step finishes its acknowledged batch while c's request is held (waited %.0f s)", time - $t0));
is(q1("SELECT chroma_flush('a', interval '15 seconds')"), 't', "chroma_flush('a') returns true while c's collection is slow");
unlink($hold);
# c's request was given up (outcome unknown): its keys are sent again after the timeout
is(q1("SELECT chroma_flush(NULL, interval '150 seconds')", timeout => 180), 't', 'all flushed once c is let go');
assert_equal($node, 'a', $ca, name => 'a at the end');
assert_equal($node, 'c', $cc, name => 'c at the end');
finish($node, $log0);
