# Outcome-unknown requests: a gateway answers an upsert 504 at once and delivers it to
# Chroma later (the test releases the late write once the next worker is up, so the order
# does not depend on the machine's load; the request timeout is 20 s, the window the late
# write must land in). The worker must treat 504 as "may still be applied" and keep the
# key in chroma_sync.resend (a table: the worker is terminated meanwhile); the next worker
# sends nothing until the 504'd request can no longer be applied (unsettled.c), and the
# row's state is sent again once the request timeout has passed, so the late stale write
# does not win. chroma_flush waits for keys parked in chroma_sync.resend too: it returned
# "caught up" while key 1 was only parked there, and the late write of state 1 then
# overwrote state 2 in Chroma.
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

my $coll = 'cs_t027';
my $node = new_node('outcome_unknown',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 20000\n");
my $log0 = log_offset($node);
$node->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$node->safe_psql('postgres', 'INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

sub chroma_embedding
{
	return $node->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])");
}

# the stale write: state 1 goes out through the armed gateway
open(my $fh, '>', $arm) or die;
close($fh);
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 1 got the late 504');
my $t504 = time();
ok(poll_query($node, "SELECT count(*) FROM chroma_sync.resend WHERE key = '1'", '1', 10),
	'key 1 is kept in chroma_sync.resend');

# the worker goes: what it remembered must not go with it
my $off = log_offset($node);
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
# the new worker sends nothing while the 504'd request may still be applied (TAP 037,
# 250); meanwhile the gateway delivers the stale state 1
ok(wait_for('the new worker waits', 30, sub { slurp_file($node->logfile, $off) =~ /may still be applied until/ }),
	'the new worker waits for the 504\'d request');
isnt(chroma_embedding(), '{2,2,2}', 'state 2 is not sent before the 504\'d request can no longer be applied');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the gateway delivered the late write');
like(slurp_file("$release.done"), qr/^HTTP\/1\.[01] 200/, 'Chroma applied the late write');
my $late = sprintf("%.1f", time() - $t504);
ok($late < 20, "the late write landed within the request timeout ($late s after the 504)");
is(chroma_embedding(), '{1,1,1}', 'the stale state 1 is in Chroma');
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'state 2 is flushed');
# flushed means: nothing of key 1 is parked any more, and no late write can still win
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.resend"), '0',
	'chroma_flush returned only once key 1 had left chroma_sync.resend');
is(chroma_embedding(), '{2,2,2}',
	'right after chroma_flush, Chroma holds state 2 again (the key was sent again after the request timeout)');
ok(poll_query($node, "SELECT count(*) FROM chroma_sync.resend", '0', 20), 'chroma_sync.resend is empty again');
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '30 seconds')"), 't', 'flushed');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('d')"),
	'10|0|0|0', 'chroma_verify: the collection equals the table');
finish($node, $log0);
