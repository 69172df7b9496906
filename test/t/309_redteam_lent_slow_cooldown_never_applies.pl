# RED TEAM REPRO (8709b55, lent steps): the fix for 307 says "a lent step over 1 s means
# no lent step of that mirror for 60 s" (worker.c lent_step sets st->lend_slow_until and
# logs "its lent step was slow: no lent step of it for 60 s"). But lend_slow_until is
# only ever written, never read: neither lent_step nor lend_candidate (sync.c) looks at
# it. A mirror whose collection is slow keeps getting lent steps, each of which holds the
# lending mirror for its own request's time (307's effect, which the cool-down was meant
# to bound to once a minute).
#
# Steps: tables a and c, mirrors a -> cs_t309_a, c -> cs_t309_c. The proxy holds requests
# containing 'zz309'. UPDATE a (its request held), UPDATE c (a lent step of c in a's
# wait, its request held too); after 3 s the hold is lifted: the lent step of c took over
# 1 s and the worker logs "mirror <c>: its lent step was slow: no lent step of it for
# 60 s".
# At once, the same again with 'yy309' (a's request held, UPDATE c: c's request would be
# held too); after 2 s only c's request stays held ('c yy309').
# Observed on 8709b55: another lent step of c runs in a's wait, its request is held, and
# a's queue entry stays although a's request was answered (a is held by c again, within
# seconds of the "no lent step of it for 60 s" message).
# Expected: no lent step of c for 60 s after its slow lent step: a's step finishes when
# its request is answered; c's change waits for c's own step.
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

my ($ca, $cc) = ('cs_t309_a', 'cs_t309_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t309',
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

# 1. a slow lent step of c
unlink("$hold.held");
hold_requests($hold, 'zz309');
my $logw = log_offset($node);
q1(q{UPDATE a SET doc = 'a zz309' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held");
q1(q{UPDATE c SET doc = 'c zz309' WHERE id = 1});
ok(wait_for('a lent step of c', 20, sub { slurp_file($node->logfile, $logw) =~ /mirror $ma lends its wait to mirror $mc/ }),
	"a's step lent its wait to c");
sleep(3);
unlink($hold);
ok(wait_for('the slow lent step noted', 30, sub {
	slurp_file($node->logfile, $logw) =~ /mirror $mc: its lent step was slow: no lent step of it for 60 s/ }),
	"the worker noted c's lent step as slow (no lent step of c for 60 s)");
my $t_slow = time;
is(q1("SELECT chroma_flush(NULL, interval '30 seconds')", timeout => 60), 't', 'all flushed');

# 2. within the minute: a's step waits again, c has a change (its request would be held too)
unlink("$hold.held");
hold_requests($hold, 'yy309');
my $log2 = log_offset($node);
q1(q{UPDATE a SET doc = 'a yy309' WHERE id = 2});
ok(wait_for("a's request held again", 30, sub { -e "$hold.held" }), "a's request is held again");
q1(q{UPDATE c SET doc = 'c yy309' WHERE id = 2});
sleep(2);	# a's step waits; a lent step of c, if any, is under way (its request held)
hold_requests($hold, 'c yy309');	# a's request goes on; c's stays held
my $t1 = time;
my $gone = wait_for("a's queue entry gone", 8, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $ma") eq '0' });
my $lent = slurp_file($node->logfile, $log2) =~ /mirror $ma lends its wait to mirror $mc/ ? 1 : 0;
diag(sprintf("second round, %.0f s after the slow lent step: lent step of c attempted: %s", $t1 - $t_slow, $lent ? 'yes' : 'no'));
ok($gone, "within 60 s of c's slow lent step, a's step is not held by another lent step of c (a's entry gone once its request is answered)");
unlink($hold);
is(q1("SELECT chroma_flush(NULL, interval '60 seconds')", timeout => 90), 't', 'all flushed at the end');
assert_equal($node, 'a', $ca, name => 'a at the end');
assert_equal($node, 'c', $cc, name => 'c at the end');
finish($node, $log0);
