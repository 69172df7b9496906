# Chroma is stopped for 20 s while writes continue: the mirror shows state 'error' with the
# error meanwhile, nothing goes to chroma_sync.failed, and once Chroma is back (same port,
# same data) the collection catches up and ends equal to the table. Then Chroma hangs
# (SIGSTOP) with requests in flight: they time out with an unknown outcome, the rows change
# again, and once Chroma resumes (and applies the stale requests late) the latest state wins.
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

# --- a hung server: requests time out with an unknown outcome
set_conf($node, 'chroma_sync.timeout', 2000);
my $cpid = $ENV{CHROMA_PID};
$node->safe_psql('postgres',
	q{UPDATE docs SET embedding = '{1,1,1,1,1,1,1,1}', doc = 'stale', meta = '{"stale": true}' WHERE id <= 50});
is(kill('STOP', $cpid), 1, "Chroma hangs (SIGSTOP to pid $cpid)");
my $hung = 1;
ok(poll_query($node,
		"SELECT state FROM chroma_sync.status WHERE source = 'docs'::regclass", 'error', 30),
	'the mirror reports an error while Chroma hangs');
note('last_error while Chroma hangs: ' . status_row($node, 'docs', 'last_error'));
$node->safe_psql('postgres',
	q{UPDATE docs SET embedding = '{2,2,2,2,2,2,2,2}', doc = 'latest', meta = '{"latest": true}' WHERE id <= 50});
sleep 3;
kill('CONT', $cpid);
$hung = 0;
assert_equal($node, 'docs', $coll, name => 'after the hang', timeout => 120);
is($node->safe_psql('postgres', q{
SELECT count(*) FROM chroma_get('cs_t012_docs', (SELECT array_agg(id::text) FROM generate_series(1, 50) id))
WHERE document = 'latest' AND metadata = '{"latest": true}'}),
	'50', 'the 50 rows changed during the hang have their latest state in Chroma');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed after the hang');

END { kill('CONT', $cpid) if $hung; }

finish($node, $log0);
