# chroma_resync during a running backfill restarts it from the first row: the worker's
# page in flight, read before the resync, must not move the watermark the resync reset
# (it was written back, so the backfill went on from where it was and rows before that
# point were never sent again).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = 20000;
my $node = new_node('resync_backfill', conf => "chroma_sync.batch_size = 200\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => $rows, dim => 4);
fresh_collection($node, 'cs_t029');
mirror($node, 'docs', 'cs_t029');

for my $round (1 .. 3)
{
	ok(poll_query($node,
			"SELECT coalesce(backfill_sent, 0) >= 2000 FROM chroma_sync.status WHERE source = 'docs'::regclass", 't', 90),
		"round $round: the backfill is under way");
	my $synced0 = status_row($node, 'docs', 'synced');
	is($node->safe_psql('postgres', "SELECT chroma_resync('docs')"), $rows,
		"round $round: chroma_resync counts $rows rows");
	ok(poll_query($node, "SELECT state FROM chroma_sync.status WHERE source = 'docs'::regclass", 'syncing', 180),
		"round $round: the restarted backfill finishes") or diagnostics($node);
	is($node->safe_psql('postgres', "SELECT backfill_sent || '/' || backfill_total FROM chroma_sync.mirror"),
		"$rows/$rows", "round $round: the restarted backfill sent every row");
	my $synced = status_row($node, 'docs', 'synced') - $synced0;
	ok($synced >= $rows, "round $round: $synced records sent since the resync (>= $rows)");
	last if $round == 3;
	# the next round starts a new backfill
	$node->safe_psql('postgres', "SELECT chroma_resync('docs')");
}
assert_equal($node, 'docs', 'cs_t029');
finish($node, $log0);
