# Backpressure with several requests in flight (chroma_sync.max_concurrent_requests = 4,
# batches of 5), real Chroma behind a proxy that answers writes with 429 on demand
# (test/lib/throttle_proxy.pl): a 429 halves the mirror's requests in flight (4 -> 2,
# then 2 -> 1), besides the back-off; acknowledged requests raise it again one at a time
# (after as many acknowledgements as are allowed in flight) up to 4. A 429 is not an
# unknown outcome: nothing is parked for resending; the collection ends equal to the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $control = "$dir/control";
my $plog = "$dir/proxy.log";
my $pport = start_proxy('throttle_proxy.pl', $dir, $control, $plog);

my $coll = 'cs_t236';
my $node = new_node('concurrent_backpressure',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.retry_max_delay = 300\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);

sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

sub arm
{
	my ($n, $value) = @_;
	open(my $c, '>', "$control.tmp") or die;
	print $c "$n $value\n";
	close($c);
	rename("$control.tmp", $control) or die;
}

sub statuses
{
	return () unless -e $plog;
	return map { (split ' ')[1] } split /\n/, slurp_file($plog);
}

make_table($node, 'docs', rows => 200, dim => 8);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'doc ' || id WHERE doc IS NULL});
fresh_collection($node, $coll);

# --- the backfill's first write gets 429: 2 in flight at most, then back to 4
arm(1, '-');
my $loga = log_offset($node);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after a backfill that got a 429');
is((grep { $_ eq '429' } statuses()), 1, 'one write got 429');
ok(log_count($loga, qr/mirror \d+: the server sheds load: at most 2 requests in flight/) == 1,
	'the 429 halved the requests in flight to 2');
my $slow = slurp_file($node->logfile, $loga);
ok($slow =~ /at most 3 requests in flight again.*at most 4 requests in flight again/s,
	'acknowledgements raised it to 3, then 4');
ok($slow =~ /at most 4 requests in flight again.*mirror \d+: 4 requests in flight/s,
	'then 4 requests were in flight again');
my ($before_raise) = split /at most 3 requests in flight again/, (split /the server sheds load/, $slow, 2)[1] // '';
unlike($before_raise // '', qr/mirror \d+: [34] requests in flight/,
	'no more than 2 were in flight before it was raised');

# --- two 429s in a row during a drain: 4 -> 2 -> 1
my $logb = log_offset($node);
arm(2, '-');
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v2 ' || id, embedding[1] = id * 3});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '90 seconds')", timeout => 100), 't',
	'the drain completes after two 429s');
is((grep { $_ eq '429' } statuses()), 3, 'two more writes got 429');
my $c2 = log_count($logb, qr/the server sheds load: at most 2 requests in flight/);
my $c1 = log_count($logb, qr/the server sheds load: at most 1 requests in flight/);
# both 429s may come back in one step (two concurrent requests): one halving then
ok(($c2 == 1 && $c1 <= 1), "halved to 2 (and to 1 if the 429s were in two steps): $c2, $c1");
assert_equal($node, 'docs', $coll, name => 'after the throttled drain');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.resend'), '0',
	'nothing parked for resending (a 429 is not an unknown outcome)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
finish($node, $log0);
