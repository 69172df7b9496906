# Backpressure: a server that answers a write with 429 and a Retry-After header is not
# called again before that time, by the sync worker, even when it is longer than
# chroma_sync.retry_max_delay; both forms (seconds and an HTTP date) are read, a value
# beyond an hour counts as an hour, and anything else (negative, not a number) is ignored.
# The synchronous functions say how long the server asked to wait. A 429 is not an
# unknown outcome: nothing is parked for resending, and the collection ends equal to the
# table. Real Chroma behind a proxy that sheds load on demand (test/lib/throttle_proxy.pl).
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

my $coll = 'cs_t158';
# the worker's own backoff is short: only the server's Retry-After can make it wait seconds
my $node = new_node('retry_after',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.retry_max_delay = 300\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1('CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('d', collection => '$coll')");
is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled through the proxy');

sub arm
{
	my ($n, $value) = @_;
	open(my $c, '>', "$control.tmp") or die;
	print $c "$n $value\n";
	close($c);
	rename("$control.tmp", $control) or die;
}

# The proxy log's lines from line FROM on: [time, status, operation]
sub log_lines
{
	my ($from) = @_;
	return () unless -e $plog;
	my @l = map { [split ' '] } split /\n/, slurp_file($plog);
	return @l[$from .. $#l];
}

# One throttled upsert of row ID by the worker: the gap between the 429 and the next
# write, and the last_error seen meanwhile.
sub throttled_update
{
	my ($id, $value, $name) = @_;
	my $from = scalar(() = log_lines(0));
	arm(1, $value);
	q1("UPDATE d SET embedding = ARRAY[$id, $id, $id] WHERE id = $id");
	ok(wait_for("$name: the 429 and the write after it", 120, sub { my @l = log_lines($from); @l >= 2 }),
		"$name: the worker wrote again after the 429");
	my @l = log_lines($from);
	# (a success leaves last_error as it was: it tells the last failure)
	my $error = q1(q{SELECT coalesce(last_error, '') FROM chroma_sync.mirror});
	is($l[0][1], '429', "$name: the first write got 429");
	is($l[1][1], '200', "$name: the next write went through");
	return ($l[1][0] - $l[0][0], $error);
}

my ($gap, $error) = throttled_update(1, '4', 'Retry-After: 4');
cmp_ok($gap, '>=', 3.8, "the worker waited the 4 s the server asked for, not its 300 ms backoff ($gap s)");
like($error, qr/HTTP 429 TooManyRequests: slow down \(Retry-After: 4 s\)/, 'last_error names the Retry-After');

($gap) = throttled_update(2, 'date+5', 'Retry-After: an HTTP date');
# the date has whole seconds: 4 s at least
cmp_ok($gap, '>=', 3.8, "the worker waited until the date the server gave ($gap s)");

# without the header, the worker's own backoff decides (no lower bound to check)
(undef, $error) = throttled_update(3, '-', 'no Retry-After');
like($error, qr/HTTP 429 TooManyRequests: slow down$/, 'last_error names no Retry-After');
throttled_update(4, 'soon', 'Retry-After: soon');

is(q1("SELECT chroma_flush('d', interval '60 seconds')"), 't', 'the mirror caught up');
is(q1('SELECT count(*) FROM chroma_sync.resend'), '0', 'a 429 is no unknown outcome: nothing parked');
is(q1("SELECT string_agg(id || ':' || embedding::text, ' ' ORDER BY id::int) FROM chroma_get('$coll') WHERE id::int <= 5"),
	'1:{1,1,1} 2:{2,2,2} 3:{3,3,3} 4:{4,4,4} 5:{5,0,0}', 'Chroma holds every update');

# The synchronous functions: the server's wish in the hint; an hour at most; nonsense ignored.
my @cases = (
	['7', qr/asked to be called again in 7 s \(Retry-After\)/, 'seconds'],
	['99999999', qr/asked to be called again in 3600 s/, 'beyond an hour: an hour'],
	# (libcurl does not read a number beyond its integers: no Retry-After then)
	['99999999999999999999', qr/asked to be called again in 3600 s|try again later\./, 'beyond any integer'],
	['-5', qr/HINT:  The server is overloaded or unavailable; try again later\./, 'negative: ignored'],
	['1e3', qr/HINT:  The server is overloaded or unavailable; try again later\.|asked to be called again in 1 s/, 'not an integer'],
	['-', qr/HINT:  The server is overloaded or unavailable; try again later\./, 'none'],
);
for my $c (@cases)
{
	my ($value, $re, $name) = @$c;
	arm(1, $value);
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT chroma_upsert('$coll', ARRAY['x'], ARRAY[ARRAY[1, 2, 3]]::real[])");
	isnt($ret, 0, "chroma_upsert fails on a 429 ($name)");
	like($err, qr/ERROR:  Chroma could not upsert records/, "the error says Chroma could not ($name)");
	like($err, $re, "the hint ($name)");
}
arm(0, '-');
is(q1("SELECT chroma_upsert('$coll', ARRAY['x'], ARRAY[ARRAY[1, 2, 3]]::real[])"), '1',
	'chroma_upsert goes through once the server takes writes again');

finish($node, $log0);
