# Any process of the extension may be terminated at any time, any number of times:
# the launcher alone, a worker alone, both together (the repro of a slot left RUNNING
# with pid 0 for a new launcher), during a backfill and during a TRUNCATE barrier. Each
# time a worker is back and the queue drains within 10 s; at the end the collection
# equals the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $coll = 'cs_t018_docs';
my $node = new_node('terminate_any', conf => "chroma_sync.batch_size = 200\n");
my $log0 = log_offset($node);

make_table($node, 'docs', rows => 2000, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150),
	't', 'backfilled');

sub pids_of
{
	my ($type) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = '$type'");
}

# Terminates the processes named by $what, changes a row, and measures how long until
# the change is in Chroma (chroma_flush waits on the worker's progress).
sub round
{
	my ($what, $n) = @_;
	my $types = $what eq 'launcher and worker' ? "backend_type LIKE 'chroma_sync%'"
	  : $what eq 'launcher' ? "backend_type = 'chroma_sync launcher'"
	  : "backend_type = 'chroma_sync worker'";
	my $pids = $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE $types");
	ok($pids ne '', "round $n: the $what runs ($pids)");
	$pids = '0' if $pids eq '';
	$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN ($pids)");
	ok(wait_for("round $n: $pids gone", 10, sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids)") eq '0' }),
		"round $n: terminated the $what");
	my $t0 = time();
	$node->safe_psql('postgres', "UPDATE docs SET doc = 'round $n' WHERE id % 50 = $n % 50");
	my $ok = $node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '10 seconds')", timeout => 30);
	is($ok, 't', sprintf("round %d (%s): the change reached Chroma within 10 s (%.1f s)", $n, $what, time() - $t0))
	  or diagnostics($node);
	like(pids_of('chroma_sync launcher'), qr/^\d+$/, "round $n: a launcher runs")
	  if wait_for("round $n: a launcher", 10, sub { pids_of('chroma_sync launcher') ne '' });
}

my $n = 0;
round('worker', ++$n) for 1 .. 3;
round('launcher', ++$n) for 1 .. 2;
round('launcher and worker', ++$n) for 1 .. 4;
# the launcher first, then the worker it did not start
round('launcher', ++$n);
round('worker', ++$n);
round('worker', ++$n);

# during a backfill: resync makes the worker send every row again
$node->safe_psql('postgres', "INSERT INTO docs SELECT id + 100000, embedding, doc, meta FROM docs");
$node->safe_psql('postgres', "SELECT chroma_resync('docs')");
for my $i (1 .. 3)
{
	sleep 0.5;
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%'");
}
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150),
	't', 'the backfill interrupted three times finishes') or diagnostics($node);

# during a TRUNCATE barrier
$node->safe_psql('postgres', q{
BEGIN;
TRUNCATE docs;
INSERT INTO docs SELECT i, ARRAY[i, 1, 2, 3, 4, 5, 6, 7]::real[], 'after truncate ' || i, '{}' FROM generate_series(1, 300) AS i;
COMMIT;});
sleep 0.2;
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%'");
sleep 0.3;
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'");
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')", timeout => 90),
	't', 'the TRUNCATE barrier interrupted twice completes') or diagnostics($node);

assert_equal($node, 'docs', $coll);
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0', 'nothing failed');
finish($node, $log0);
