# Live changes first, small pages (red-team check): a backfill whose page size changes between steps (live
# changes of another mirror now and then) sends every row exactly once, and its
# backfill_sent/total are right.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my ($live_coll, $bulk_coll) = ('cs_t284_live', 'cs_t284_bulk');
my $node = new_node('t284',
	conf => "chroma_sync.batch_size = 47\n"
	  . "chroma_sync.max_records_per_second = 400\nlog_min_messages = debug1\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
make_table($node, 'live', rows => 10, dim => 8);
fresh_collection($node, $live_coll);
mirror($node, 'live', $live_coll);
make_table($node, 'bulk', rows => 3000, dim => 8);
q1('DELETE FROM bulk WHERE id % 13 = 0');
fresh_collection($node, $bulk_coll);
mirror($node, 'bulk', $bulk_coll);
my $t0 = time;
my $i = 0;
while (q1("SELECT backfill_done FROM chroma_sync.mirror WHERE collection = '$bulk_coll'") ne 't' && time < $t0 + 120)
{
	$i++;
	# bursts of live changes, then quiet: the page size goes back and forth
	if (int(time - $t0) % 4 < 2)
	{
		q1("UPDATE live SET doc = 'r$i' WHERE id = " . (1 + $i % 10));
		q1("UPDATE bulk SET doc = 'u$i' WHERE id = " . (1 + ($i * 37) % 3000));
	}
	sleep 0.2;
}
is(q1("SELECT chroma_flush(NULL, interval '60 seconds')"), 't', 'flushed');
my $log = slurp_file($node->logfile, $log0);
my @small = ($log =~ /backfill pages of 4 while/g);
note('small-page steps: ' . scalar(@small));
ok(@small > 0, 'small pages were used');
is(q1("SELECT backfill_sent || '/' || backfill_total FROM chroma_sync.mirror WHERE collection = '$bulk_coll'"),
	q1('SELECT count(*) || \'/\' || count(*) FROM bulk'), 'backfill_sent/total');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('bulk')}), q1('SELECT count(*) FROM bulk') . '|0|0|0', 'bulk exact');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('live')}), '10|0|0|0', 'live exact');
finish($node, $log0);
