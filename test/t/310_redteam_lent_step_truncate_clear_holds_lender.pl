# RED TEAM REPRO (8709b55, lent steps): a lent step is documented as "limited to 250 ms of
# reading and one request in flight" (doc/concurrency.md, "Lent steps"); only its reading
# is bounded. A lent step whose drain meets a TRUNCATE barrier clears the whole collection
# inside the lender's wait (send_alone -> sync_clear_collection: get 1000 ids, delete
# them, again until empty): tens of requests, none of them slow (not 307's slow
# collection: the server answers each at once). The lending mirror's request has come
# back meanwhile, but its step cannot finish its acknowledged batch (delete its queue
# entries, go on) until the other mirror's whole clear is done.
#
# Steps: proxy with 25 ms each way (a cloud region) that holds requests containing
# 'zz310'. Table c with 20000 rows mirrored (backfilled), table a with 5 rows. UPDATE a
# row 1 to 'a zz310' (a's request held). TRUNCATE c (a lent step of c in a's wait: its
# drain meets the barrier and clears 20000 records, 20 pages). Release a's request.
# Observed on 8709b55: a's acknowledged entry stays in the queue until c's clear is over
# (several seconds; printed), chroma_flush('a', 2 s) returns false.
# Expected: a's step finishes within about the lent step's bound (250 ms of reading plus
# one request): a's entry gone and chroma_flush('a') true within 2 s; c's clear goes on
# in c's own step (or the lent step stops at the barrier).
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

my ($ca, $cc) = ('cs_t310_a', 'cs_t310_c');
my $pport = start_proxy('delay_proxy.pl', $dir, 25, $hold);
my $node = new_node('t310',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 60000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

fresh_collection($node, $_) for ($ca, $cc);
make_table($node, 'a', rows => 5, dim => 8);
make_table($node, 'c', rows => 20000, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'c', $cc);
is(q1("SELECT chroma_flush(NULL, interval '240 seconds')", timeout => 300), 't', 'both backfilled');
my $ma = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");
my $mc = q1("SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'c'::regclass");
poll_query($node, "SELECT backfill_done FROM chroma_sync.mirror WHERE mirror_id = $mc", 't', 120);
is(q1("SELECT chroma_count('$cc')"), '20000', "c's collection holds 20000 records");

unlink("$hold.held");
hold_requests($hold, 'zz310');
my $logw = log_offset($node);
q1(q{UPDATE a SET doc = 'a zz310' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held");
q1(q{TRUNCATE c});
ok(wait_for('a lent step of c', 20, sub { slurp_file($node->logfile, $logw) =~ /mirror $ma lends its wait to mirror $mc/ }),
	"a's step lent its wait to c (its TRUNCATE)");
unlink($hold);	# a's request goes on now
my $t0 = time;
my $gone = wait_for("a's queue entry gone", 2, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $ma") eq '0' });
my $ta = time - $t0;
wait_for("a's queue entry gone at last", 120, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $ma") eq '0' }) unless $gone;
$ta = time - $t0 unless $gone;
my $cleared = wait_for("c's queue empty", 120, sub {
	q1("SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $mc") eq '0' });
diag(sprintf("a's acknowledged entry left the queue %.1f s after its request was let go; c's clear over %.1f s after", $ta, time - $t0));
ok($gone, sprintf("a's step finishes its batch within 2 s of its answer (took %.1f s, under c's lent clear of 20000 records)", $ta));
ok($cleared, "c's TRUNCATE reached Chroma");
is(q1("SELECT chroma_flush(NULL, interval '60 seconds')", timeout => 90), 't', 'all flushed at the end');
is(q1("SELECT chroma_count('$cc')"), '0', "c's collection empty after its TRUNCATE");
assert_equal($node, 'a', $ca, name => 'a at the end');
finish($node, $log0);
