# The worker is terminated (pg_terminate_backend) in the middle of a 50,000-row backfill:
# a new worker comes back, the backfill resumes from its watermark instead of starting
# over, and the collection ends equal to the table with nothing in chroma_sync.failed.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = 50_000;
my $batch = 500;
my $coll = 'cs_t010_docs';

my $node = new_node('worker_restart', conf => "chroma_sync.batch_size = $batch\n");
my $log0 = log_offset($node);

make_table($node, 'docs', rows => $rows, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);

ok( poll_query($node,
		"SELECT coalesce(backfill_sent, -1) >= 5000 FROM chroma_sync.status WHERE source = 'docs'::regclass",
		't', 90),
	'the backfill is under way');
is(status_row($node, 'docs', 'state'), 'backfilling', 'the backfill is not finished yet')
  or diagnostics($node);

# live changes during the backfill: sent by the queue and by the backfill, both converge
$node->safe_psql('postgres', q{
UPDATE docs SET doc = 'changed ' || id, meta = meta - 'tag' || '{"live": true}'
	WHERE id BETWEEN 40001 AND 40100;
DELETE FROM docs WHERE id BETWEEN 45001 AND 45050;
UPDATE docs SET embedding = NULL WHERE id BETWEEN 3 AND 5;});

my $old = worker_pid($node);
like($old, qr/^\d+$/, 'a chroma_sync worker runs');
my $sent_before = status_row($node, 'docs', 'backfill_sent');
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old)"), 't',
	"pg_terminate_backend on the worker (pid $old) after $sent_before rows");

my $t0 = time();
my $new = wait_for_new_worker($node, $old, 15);
like($new, qr/^\d+$/, 'a new worker appears within 15 s');
note(sprintf('new worker %s after %d s', $new, time() - $t0));

ok(poll_query($node, "SELECT state FROM chroma_sync.status WHERE source = 'docs'::regclass",
		'syncing', 120),
	'the backfill finishes') or diagnostics($node);

assert_equal($node, 'docs', $coll);

my $synced = status_row($node, 'docs', 'synced');
my $live = 100 + 50 + 3;
my $limit = $rows + 2 * $batch + $live + 50;
ok($synced >= $rows - 50 - 3 && $synced < $limit,
	"synced ($synced) shows the backfill resumed from its watermark (< $limit)")
  or diagnostics($node);
is(status_row($node, 'docs', 'failed'), '0', 'status.failed is 0');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
is(status_row($node, 'docs', 'pending') . '|' . status_row($node, 'docs', 'lag IS NULL'),
	'0|t', 'nothing pending, lag is NULL');

finish($node, $log0);
