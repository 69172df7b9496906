# Mirrors of one database are served concurrently: a mirror whose request to its
# collection does not come back (held at a proxy in front of the real Chroma server)
# does not hold back another mirror's live changes. While mirror a's request is held,
# changes to mirror b reach Chroma (b's step runs in a's wait: a lent step), a's queue
# entry stays until its own request is acknowledged, and once the request is let go both
# tables equal their collections. Then the same with a's backfill held, with
# chroma_unmirror of a waiting for a's request while b goes on, and with a TRUNCATE of b
# during a's wait (left to b's own step: a clear is many requests).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $hold = "$dir/hold";

my ($ca, $cb) = ('cs_t303_a', 'cs_t303_b');
my $pport = start_proxy('delay_proxy.pl', $dir, 0, $hold);
my $node = new_node('lent_wait',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\n"
	  . "chroma_sync.timeout = 90000\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);

# holds the collection's upserts (the proxy reads what to hold from the file)
sub hold_on { unlink("$hold.held"); hold_requests($hold, "$_[0]/upsert"); return; }

sub collection_id
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT collection_id FROM chroma_sync.mirror WHERE source = '$table'::regclass");
}

fresh_collection($node, $_) for ($ca, $cb);
make_table($node, 'a', rows => 30, dim => 8);
make_table($node, 'b', rows => 30, dim => 8);
mirror($node, 'a', $ca);
mirror($node, 'b', $cb);
assert_equal($node, 'a', $ca, name => 'a after its backfill');
assert_equal($node, 'b', $cb, name => 'b after its backfill');
my $mida = $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'a'::regclass");
my $ida = collection_id('a');
ok($ida =~ /^[0-9a-f-]{36}$/, "a's collection has an id ($ida)");

# --- a's drain request held: b's changes go on
hold_on($ida);
my $loga = log_offset($node);
$node->safe_psql('postgres', q{UPDATE a SET doc = 'a held' WHERE id = 1});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's request is held at the proxy");
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', qq{UPDATE b SET doc = 'b live $i' WHERE id = $i});
	ok(poll_query($node, qq{SELECT document FROM chroma_get('$cb', ids => ARRAY['$i'])}, "b live $i", 30),
		"b's change $i reached Chroma while a's request was held");
}
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $mida"), '1',
	"a's queue entry stays while its request is in flight");
ok(-e "$hold.held" && direct_document($node, $ca, 1) ne 'a held', "a's change has not reached Chroma");
like(slurp_file($node->logfile, $loga), qr/mirror $mida lends its wait to mirror \d+/,
	"a's step lent its wait");
release_requests($hold);
is($node->safe_psql('postgres', "SELECT chroma_flush('a', interval '60 seconds')", timeout => 90), 't',
	'a flushed once its request is let go');
assert_equal($node, 'a', $ca, name => 'a after its held request');
assert_equal($node, 'b', $cb, name => 'b after a lent step');

# --- a TRUNCATE of b and more writes while a's request is held
hold_on($ida);
$node->safe_psql('postgres', q{UPDATE a SET doc = 'a held again' WHERE id <= 5});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's second request is held");
$node->safe_psql('postgres', q{
BEGIN;
UPDATE b SET doc = 'before truncate';
TRUNCATE b;
COMMIT});
insert_rows($node, 'b', 200, 5, 8, 4);
# a lent step leaves a TRUNCATE's clear (many requests) to b's own step (red-team TAP 310)
release_requests($hold);
is($node->safe_psql('postgres', "SELECT chroma_flush('a', interval '60 seconds')", timeout => 90), 't',
	'a flushed');
assert_equal($node, 'a', $ca, name => 'a after its second held request');
ok(poll_query($node, "SELECT string_agg(id, ',' ORDER BY id::int) FROM chroma_get('$cb')",
		'200,201,202,203,204', 30),
	"b's TRUNCATE and new rows reached Chroma in b's own step");
assert_equal($node, 'b', $cb, name => 'b after its TRUNCATE');

# --- chroma_unmirror of a waits for a's held request; b goes on meanwhile
hold_on($ida);
$node->safe_psql('postgres', q{UPDATE a SET doc = 'a before unmirror' WHERE id = 2});
ok(wait_for("a's request held", 30, sub { -e "$hold.held" }), "a's third request is held");
my $unmirror = $node->background_psql('postgres', on_error_stop => 0);
$unmirror->query_until(qr/started/, q{\echo started
SELECT chroma_unmirror('a');
\echo unmirrored
});
$node->safe_psql('postgres', q{UPDATE b SET doc = 'b during unmirror' WHERE id = 200});
ok(poll_query($node, qq{SELECT document FROM chroma_get('$cb', ids => ARRAY['200'])}, 'b during unmirror', 30),
	"b's change reached Chroma while chroma_unmirror('a') waited");
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror WHERE source = 'a'::regclass"), '1',
	'chroma_unmirror waits while a request of the mirror is in flight');
release_requests($hold);
$unmirror->query_until(qr/unmirrored/, '');
$unmirror->quit;
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror WHERE source = 'a'::regclass"), '0',
	'a is unmirrored once its request came back');
is(direct_document($node, $ca, 2), 'a before unmirror', "a's last change reached Chroma before the unmirror");

# --- a's backfill page held (a fresh collection): b's changes go on
$node->safe_psql('postgres', "SELECT chroma_delete_collection('$ca', true)");
$node->safe_psql('postgres', 'DROP TABLE a');
make_table($node, 'a', rows => 400, dim => 8);
my $ida2 = $node->safe_psql('postgres', "SELECT chroma_create_collection('$ca')");
hold_on($ida2);
my $logb = log_offset($node);
mirror($node, 'a', $ca);
is(collection_id('a'), $ida2, 'a mirrors the collection made for it');
ok(wait_for("a's backfill page held", 30, sub { -e "$hold.held" }), "a's backfill page is held");
$node->safe_psql('postgres', q{UPDATE b SET doc = 'b during backfill' WHERE id = 201});
ok(poll_query($node, qq{SELECT document FROM chroma_get('$cb', ids => ARRAY['201'])}, 'b during backfill', 30),
	"b's change reached Chroma while a's backfill page was held")
  or diag(join("\n", grep { /chroma_sync|ERROR/ } split /\n/, slurp_file($node->logfile, $logb)));
release_requests($hold);
assert_equal($node, 'a', $ca, name => 'a after its held backfill');
assert_equal($node, 'b', $cb, name => 'b at the end');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0', 'nothing failed');
finish($node, $log0);
