# chroma_sync.upsert_progress has 32 slots for the whole cluster. A chroma_upsert_query
# that fails inside a savepoint (psql's ON_ERROR_ROLLBACK, ORMs) gives its slot back at
# ROLLBACK TO SAVEPOINT: after 40 such failures in one session a succeeding call still
# shows up, alone. A backend that exits (its session ends, or pg_terminate_backend in
# the middle of an upsert) leaves no slot, and no dead pid is ever listed.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

use ChromaSyncTest;

my $node = new_node('progress_slots', conf => "max_connections = 50\n");
my $coll = 'tap_progress_slots';
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_create_collection('$coll')");

# A call that fails after it took its slot: the query has no embedding column.
my $failing = "SELECT chroma_upsert_query('$coll', 'SELECT 1 AS id')";
# A call that runs for a while: 400 rows, 20 ms each, in batches of 50.
my $slow = "SELECT chroma_upsert_query('$coll', \$q\$SELECT i AS id, ARRAY[i, 1]::real[] AS embedding "
  . "FROM generate_series(1, 400) AS i WHERE pg_sleep(0.02) IS NOT NULL\$q\$)";

# Starts psql on $sql (a script file) in the background; returns (harness, \stdout, \stderr).
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $nscript = 0;
sub start_psql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $file = "$tmp/script" . $nscript++ . '.sql';
	PostgreSQL::Test::Utils::append_to_file($file, "SET chroma_sync.batch_size = 50;\n$sql");
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres'),
		  '-f', $file ],
		'<', \undef, '>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

sub progress_rows
{
	return $node->safe_psql('postgres',
		'SELECT pid, collection FROM chroma_sync.upsert_progress ORDER BY pid');
}

# ---- 40 failures inside savepoints, then a call that succeeds, in one session
my $script = "BEGIN;\n"
  . join('', map { "SAVEPOINT s$_;\n$failing;\nROLLBACK TO SAVEPOINT s$_;\n" } 1 .. 40)
  . "SELECT 'failures done', pg_backend_pid();\n$slow;\nCOMMIT;\n";
my ($h, $out, $err) = start_psql($script);
ok(wait_for('the 40 failures', 60, sub { $h->pump_nb; $$out =~ /failures done/ }),
	'the session went through 40 failing calls inside savepoints');
my ($pid) = $$out =~ /failures done\|(\d+)/;
my $errors = () = $$err =~ /ERROR:  query has no column named "embedding"/g;
is($errors, 40, 'each of the 40 calls failed with its own error');
ok(wait_for('the slow call in upsert_progress', 30,
		sub { progress_rows() eq "$pid|$coll" }),
	'the succeeding call shows up in upsert_progress, alone (the 40 failures left no slot)')
  or diag('upsert_progress: ' . progress_rows());
$h->finish;
like($$out, qr/^400$/m, 'the call sent its 400 rows');
is(progress_rows(), '', 'nothing is listed once the call is done');

# ---- failures that leave the session: no slot survives its backend
($h, $out, $err) = start_psql(join('', map { "BEGIN;\nSAVEPOINT a;\n$failing;\nROLLBACK TO SAVEPOINT a;\n" } 1 .. 3)
	  . "SELECT 'left open';\n");
$h->finish;
is(progress_rows(), '', 'a session that ends inside a transaction leaves no slot (no dead pid listed)');

# ---- pg_terminate_backend in the middle of an upsert
($h, $out, $err) = start_psql("SELECT 'started', pg_backend_pid();\n$slow;\n");
ok(wait_for('the slow call starts', 30, sub { $h->pump_nb; $$out =~ /started\|\d+/ }),
	'a second session started a slow upsert');
($pid) = $$out =~ /started\|(\d+)/;
ok(wait_for('its progress row', 30, sub { progress_rows() eq "$pid|$coll" }),
	'it is listed in upsert_progress');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$h->finish;
ok(wait_for('its slot is gone', 10, sub { progress_rows() eq '' }),
	'after pg_terminate_backend its slot is gone')
  or diag('upsert_progress: ' . progress_rows());

# ---- all 32 slots still serve the cluster
my @many;
for my $i (1 .. 32)
{
	push @many, [ start_psql("SELECT 'started';\n$slow;\n") ];
}
ok(wait_for('32 calls listed', 60, sub {
			$node->safe_psql('postgres', 'SELECT count(DISTINCT pid) FROM chroma_sync.upsert_progress') eq '32';
		}),
	'32 concurrent calls are all listed: every slot was free again');
$_->[0]->kill_kill for @many;
ok(wait_for('the killed clients\' backends end', 120, sub { progress_rows() eq '' }),
	'their slots are released when their backends exit');

assert_no_crash($node, 0);
$node->safe_psql('postgres', "SELECT chroma_delete_collection('$coll')");
$node->stop;
done_testing();
