# Live changes first: while one mirror backfills (4,000 rows, 4 requests in flight,
# batches of 20, slowed to 400 records/s so the backfill lasts about 10 s), a row
# changed in another mirror's table ends the backfill's step early (its requests in
# flight complete, no new page is read) and reaches Chroma while the backfill is still
# running; the backfill then goes on from where it was. Both collections end equal to
# their tables.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my ($live_coll, $bulk_coll) = ('cs_t235_live', 'cs_t235_bulk');
my $node = new_node('live_first',
	conf => "chroma_sync.max_concurrent_requests = 4\nchroma_sync.batch_size = 20\n"
	  . "chroma_sync.max_records_per_second = 400\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);

sub log_count
{
	my ($from, $re) = @_;
	my @m = (slurp_file($node->logfile, $from) =~ /$re/g);
	return scalar @m;
}

sub bulk_done
{
	return $node->safe_psql('postgres',
		"SELECT backfill_done FROM chroma_sync.mirror WHERE collection = '$bulk_coll'");
}

make_table($node, 'live', rows => 10, dim => 8);
fresh_collection($node, $live_coll);
mirror($node, 'live', $live_coll);
assert_equal($node, 'live', $live_coll, name => 'the live mirror after its backfill');

make_table($node, 'bulk', rows => 4000, dim => 8);
fresh_collection($node, $bulk_coll);
mirror($node, 'bulk', $bulk_coll);
ok(poll_query($node, qq{SELECT backfill_sent > 0 FROM chroma_sync.mirror WHERE collection = '$bulk_coll'}, 't', 30),
	'the bulk backfill is under way');

for my $round (1 .. 3)
{
	my $loga = log_offset($node);
	my $t0 = time;
	$node->safe_psql('postgres', "UPDATE live SET doc = 'round $round' WHERE id = $round");
	ok(poll_query($node, q{SELECT count(*) FROM chroma_sync.queue q JOIN chroma_sync.mirror m USING (mirror_id)
WHERE m.source = 'live'::regclass}, '0', 30),
		"round $round: the live change is sent");
	note(sprintf('round %d: the live change was acknowledged %.2f s after its commit', $round, time - $t0));
	is(bulk_done(), 'f', "round $round: while the bulk backfill still runs");
	ok(log_count($loga, qr/mirror \d+: its step ends early: another mirror has changes waiting/) >= 1,
		"round $round: the backfill's step ended early for it");
	sleep 0.5;
}

ok(poll_query($node, qq{SELECT backfill_done FROM chroma_sync.mirror WHERE collection = '$bulk_coll'}, 't', 90),
	'the bulk backfill completes');
assert_equal($node, 'bulk', $bulk_coll, name => 'the bulk mirror after its backfill');
assert_equal($node, 'live', $live_coll, name => 'the live mirror');
finish($node, $log0);
