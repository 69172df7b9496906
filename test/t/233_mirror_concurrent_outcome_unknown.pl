# An outcome-unknown request among 4 in flight (chroma_sync.max_concurrent_requests = 4,
# batches of 5): a gateway answers one upsert 504 at once and delivers it to Chroma only
# when the test says so, while the three requests in flight with it succeed. Their
# success proves nothing about the late one: its keys stay in chroma_sync.resend (queued
# again only once every request in flight with it has completed and the request timeout
# has passed), the worker sends the rows' newer state, the late stale write lands on top
# of it, and chroma_flush returns only after the keys were sent again: Chroma ends equal
# to the table.
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

my $coll = 'cs_t223';
my $node = new_node('concurrent_outcome_unknown',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 20000\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

sub chroma_docs
{
	my ($keys) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(coalesce(document, '<null>'), ',' ORDER BY id::int) FROM chroma_get('$coll', '$keys'::text[])");
}

# four batches go out at once; the first upsert to reach the gateway gets the late 504
open(my $fh, '>', $arm) or die;
close($fh);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1'});
ok(wait_for('the 504', 30, sub { !-e $arm }), 'one upsert got the late 504');
my $t504 = time();
ok(poll_query($node, 'SELECT count(*) FROM chroma_sync.resend', '5', 20),
	'the 5 keys of that request (and no other) are kept in chroma_sync.resend');
my $keys = '{' . $node->safe_psql('postgres',
	"SELECT string_agg(key, ',' ORDER BY key::int) FROM chroma_sync.resend") . '}';
like(slurp_file($node->logfile, $loga), qr/mirror \d+: 4 requests in flight/,
	'the request was one of 4 in flight');

# the newer state of every row, sent by the worker after its backoff
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2'});
ok(wait_for('Chroma holds v2', 60, sub { chroma_docs($keys) eq 'v2,v2,v2,v2,v2' }),
	'the worker sent v2 of the keys whose request had the unknown outcome');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.resend"), '5',
	'the later successes did not take the keys out of chroma_sync.resend');
# now the gateway delivers the stale v1
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the gateway delivered the late write');
like(slurp_file("$release.done"), qr/^HTTP\/1\.[01] 200/, 'Chroma applied the late write');
my $late = sprintf("%.1f", time() - $t504);
ok($late < 20, "the late write landed within the request timeout ($late s after the 504)");
is(chroma_docs($keys), 'v1,v1,v1,v1,v1', 'the stale v1 overwrote v2 in Chroma');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 70), 't',
	'flushed');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.resend"), '0',
	'chroma_flush returned only once the keys had left chroma_sync.resend');
is(chroma_docs($keys), 'v2,v2,v2,v2,v2', 'Chroma holds v2 again (the keys were sent again)');
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
