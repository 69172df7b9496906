# Chroma is stopped for 20 s while writes continue: the mirror shows state 'error' with the
# error meanwhile, nothing goes to chroma_sync.failed, and once Chroma is back (same port,
# same data) the collection catches up and ends equal to the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $coll = 'cs_t012_docs';
my $node = new_node('outage', conf => "chroma_sync.connect_timeout = 1000\n");
my $log0 = log_offset($node);

make_table($node, 'docs', rows => 1000, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'before the outage');

chroma_stop();
note("Chroma stopped at " . localtime());
my $t0 = time();
my ($i, $seen_error, $error) = (0, 0, '');
while (time() - $t0 < 20)
{
	$i++;
	my $id = 5000 + $i;
	$node->safe_psql('postgres', qq{
INSERT INTO docs VALUES ($id, ARRAY[$i, -$i, 0.5, 1e-3, -0.0, 3.4e38, 1.4e-45, $i]::real[],
	'written during the outage $i', '{"outage": $i}');
UPDATE docs SET doc = 'updated during the outage $i', meta = meta - 'tag' WHERE id = $i;
DELETE FROM docs WHERE id = 500 + $i;});
	my ($state, $err) = split /\|/, $node->safe_psql('postgres',
		"SELECT state, coalesce(last_error, '') FROM chroma_sync.status WHERE source = 'docs'::regclass"), 2;
	if ($state eq 'error' && $err ne '')
	{
		$seen_error = 1;
		$error = $err;
	}
	sleep 0.4;
}
ok($seen_error, 'status showed state error with last_error during the outage')
  or diagnostics($node);
note("last_error during the outage: $error");
is(status_row($node, 'docs', 'failed'), '0', 'an outage moves no row to failed');
is(status_row($node, 'docs', 'pending'), 3 * $i, 'changes wait in the queue (pending counts the ' . 3 * $i . ' distinct keys)');
is(status_row($node, 'docs', 'lag IS NOT NULL'), 't', 'lag is set while changes wait');

chroma_start();
note("Chroma started again at " . localtime());

assert_equal($node, 'docs', $coll, name => 'after the outage', timeout => 120);
is($node->safe_psql('postgres', 'SELECT count(*) FROM docs WHERE id > 5000'), $i,
	"all $i rows written during the outage are in the table");
is($node->safe_psql('postgres',
		"SELECT state, pending, failed, lag IS NULL FROM chroma_sync.status WHERE source = 'docs'::regclass"),
	'syncing|0|0|t', 'the mirror is back to syncing, nothing pending or failed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
