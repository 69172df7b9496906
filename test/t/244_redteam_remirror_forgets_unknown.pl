# RED TEAM REPRO: chroma_unmirror (keeping the collection) and chroma_mirror again into
# the same collection while a request of the old mirror has an unknown outcome. One of 4
# concurrent upserts (N = 4, batches of 5) gets a gateway's 504 while the gateway still
# delivers it later (late_proxy.pl); its 5 keys are parked in chroma_sync.resend, the
# guard against exactly that late write. chroma_unmirror deletes them
# (sync_unknown_forget_mirror, src/mirror.c chroma_unmirror), the table changes, the
# mirror is created again: its backfill sends the current rows (within seconds); then the
# stale request lands (8 s after the 504) (within chroma_sync.timeout of the 504, the bound the design
# assumes) and nothing ever sends those 5 rows again: the worker's own unsettled
# bound (http.c unsettled_until) is consulted only when a worker starts, and the new
# mirror has no resend keys.
#
# Before chroma_sync.resend_collection: chroma_verify 20|0|0|5 at the end, queue and resend empty.
# Expected: Chroma equals the table (20|0|0|0): the new mirror's backfill (or its first
# sends into the collection) waits for the old mirror's unsettled requests, or the keys
# are sent again after the timeout.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release);

my $coll = 'cs_t244';
my $timeout_s = 15;
my $node = new_node('rt_remirror_unknown',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = ${timeout_s}000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

open(my $fh, '>', $arm) or die;
close($fh);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1'});
ok(wait_for('the 504', 30, sub { !-e $arm }), 'one upsert got the late 504');
my $t504 = time();
ok(poll_query($node, 'SELECT count(*) FROM chroma_sync.resend', '5', 20),
	'its 5 keys are parked in chroma_sync.resend');
like(slurp_file($node->logfile, $loga), qr/mirror \d+: 4 requests in flight/,
	'the request was one of 4 in flight');

# the mirror is replaced (to change an option, say), the collection kept
$node->safe_psql('postgres', q{SELECT chroma_unmirror('docs')});
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
mirror($node, 'docs', $coll);
# the current code backfills the new mirror within a few seconds
sleep(0.2) while time() - $t504 < 8;
diag('info: before the late write chroma_verify says '
	  . $node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"));

# now the gateway delivers the old mirror's stale v1
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the gateway delivered the late write');
like(slurp_file("$release.done"), qr/^HTTP\/1\.[01] 200/, 'Chroma applied the late write');
my $late = sprintf("%.1f", time() - $t504);
ok($late < $timeout_s, "the late write landed within the request timeout ($late s after the 504)");
# past the timeout: whatever waits for it has had its chance
sleep(0.5) while time() - $t504 < $timeout_s + 3;
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed after the request timeout');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	'20|0|0|0', 'Chroma equals the table after the late delivery');
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
