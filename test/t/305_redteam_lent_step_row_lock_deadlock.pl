# Red team (c09a072, lent steps; fixed: a lent step's transactions wait at most 200 ms for
# a lock, sync_txn_lock_timeout_ms; the session below locks c's row with FOR UPDATE, as
# chroma_pause now changes the configuration and ends lending for the pass): a lent step made the waiting mirror's step wait
# for another mirror's locks. A session that holds mirror c's row (chroma_pause('c') in an
# open transaction) and then waits for mirror a (chroma_flush('a'), or chroma_unmirror('a')
# through wait_for_inflight) now deadlocks with the worker: a's step waits for a request,
# lends its wait to c (c has a change queued), c's lent step sends it and then blocks in
# finish_batch on c's mirror row (UPDATE chroma_sync.mirror ... WHERE mirror_id = c),
# held by the session. a's request comes back, but a's step is under c's lent step and
# cannot finish it; the session waits for a until its timeout. Nothing detects it (the
# session polls, the worker waits on a row lock); the worker serves no mirror meanwhile.
#
# Steps: tables a and c, mirrors a -> cs_t305_a, c -> cs_t305_c. Hold a's upserts at the
# proxy; UPDATE a (a's step waits). Session S: BEGIN; SELECT chroma_pause('c'). UPDATE c
# (committed: a lent step of c, which blocks on c's row: the worker waits on a Lock).
# S: SELECT chroma_flush('a', interval '40 seconds'). Let a's request go.
# Observed on c09a072: chroma_flush('a') returns false after 40 s; a's queue entry stays
# although its request was acknowledged at once (the worker waited on c's row lock).
# Expected (as before c09a072, where a's step does not depend on c): a's step finishes
# once its request comes back, chroma_flush('a') returns true within seconds; c's step
# waits for S's commit afterwards, which only holds c back.
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

my ($ca, $cc) = ('cs_t305_a', 'cs_t305_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('t305',
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

# (chroma_pause would change the configuration: no lent step then; a row lock does not)
my $logc = log_offset($node);
my $s = $node->background_psql('postgres', on_error_stop => 0);
$s->query_safe('BEGIN');
$s->query_safe(q{SELECT 1 FROM chroma_sync.mirror WHERE source = 'c'::regclass FOR UPDATE});
$node->safe_psql('postgres', q{UPDATE c SET doc = 'c live' WHERE id = 1});
ok(wait_for("c's lent step gives up on the row lock", 30, sub {
	slurp_file($node->logfile, $logc) =~ /mirror of "$cc" failed: canceling statement due to lock timeout/ }),
	"c's lent step (in a's wait) gives up on c's row, locked by the session (lock timeout)");

$s->query_until(qr/flushing/, q{\echo flushing
SELECT 'flush=' || chroma_flush('a', interval '40 seconds');
\echo flushed
});
sleep(1);
release_requests($hold);
my $t0 = time;
ok(wait_for("a's queue entry gone", 20, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.queue q JOIN chroma_sync.mirror m
		USING (mirror_id) WHERE m.source = 'a'::regclass}) eq '0' }),
	"a's step finishes once its request comes back (while the session waits for it)");
my $out = $s->query_until(qr/flushed/, '');
my $secs = time - $t0;
diag(sprintf("chroma_flush('a') returned after %.1f s: %s", $secs, $out));
(my $res) = $out =~ /(flush=\w+)/;
like($out, qr/flush=true/, sprintf("chroma_flush('a') in the session that paused c returns true (got %s after %.0f s)", $res // '?', $secs));
$s->query_safe('COMMIT');
$s->quit;
is($node->safe_psql('postgres', "SELECT chroma_flush('c', interval '60 seconds')", timeout => 90), 't',
	'c flushed once the session committed');
assert_equal($node, 'a', $ca, name => 'a at the end');
assert_equal($node, 'c', $cc, name => 'c at the end');
finish($node, $log0);
