# Red team regression (passes): one of 4 concurrent upserts (N = 4, batches of 5) gets 429
# with Retry-After: 6 while the three in flight with it succeed. The step settles the
# others, and nothing is written to Chroma before the Retry-After has passed (the
# back-off honours it whichever flight got it); then the rows arrive and Chroma equals
# the table.
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

my $coll = 'cs_t248';
my $node = new_node('rt_retry_after_one_of_four',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 5\n"
	  . "log_min_messages = debug1\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

open(my $fh, '>', "$control.tmp") or die;
print $fh "1 6\n";
close($fh);
rename("$control.tmp", $control) or die;
unlink($plog);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'v1'});
ok(wait_for('the 429', 20, sub { -e $plog && slurp_file($plog) =~ / 429 / }), 'one upsert got 429');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')", timeout => 40), 't',
	'flushed');
like(slurp_file($node->logfile, $loga), qr/mirror \d+: 4 requests in flight/, '4 requests were in flight');
my @lines = map { [split / /] } split /\n/, slurp_file($plog);
my ($t429) = map { $_->[0] } grep { $_->[1] eq '429' } @lines;
my @early = grep { $_->[0] > $t429 + 1 && $_->[0] < $t429 + 5.9 } @lines;
is(scalar @early, 0, 'no write between the concurrent ones and the Retry-After')
  or diag(slurp_file($plog));
ok((grep { $_->[0] >= $t429 + 5.9 } @lines) >= 1, 'the rows were sent after the Retry-After');
assert_equal($node, 'docs', $coll, name => 'at the end');
finish($node, $log0);
