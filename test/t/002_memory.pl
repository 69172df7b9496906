# chroma_upsert_query streams through a cursor: the backend's peak memory (VmHWM) after
# streaming 1,000,000 rows is bounded, and hardly more than after 100,000 rows.
#
# VmHWM counts the shared buffers a backend touched: the rows are read by a sequential
# scan of a table larger than a quarter of shared_buffers, which goes through a small
# ring of buffers whatever the row count.
#
# The rows go to test/lib/fake_chroma.pl in sink mode, which counts the ids it receives:
# this measures the backend, not Chroma's ingest speed (the regression suite streams
# 20,000 rows through a real server and compares them).
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $fake = "$root/test/lib/fake_chroma.pl";

# Bounds (kB): the 1M figure is under an absolute cap, and within a ratio of the 100k one.
my $cap_kb = 150 * 1024;
my $ratio = 1.5;
my $slack_kb = 20 * 1024;

my $dir = PostgreSQL::Test::Utils::tempdir();
my $port_file = "$dir/sink.port";
my $count_file = "$dir/sink.count";
my $sink = IPC::Run::start([ 'perl', $fake, 'sink', $port_file, $count_file ]);
my $t0 = time;
usleep(50_000) until -s $port_file || time - $t0 > 10;
my $sink_port = slurp_file($port_file);
chomp $sink_port;
ok($sink_port =~ /^\d+$/, 'the sink listens');

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = 'http://127.0.0.1:$sink_port'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
$node->safe_psql('postgres', q{
	CREATE TABLE mem AS
	SELECT i AS id, ARRAY[i, i % 7, i % 11, 1, 2, 3, 4, 5]::real[] AS embedding
	FROM generate_series(1, 1000000) AS i;
	ALTER TABLE mem ADD PRIMARY KEY (id);
	VACUUM ANALYZE mem;
});

sub status_kb
{
	my ($status, $field) = @_;
	return $status =~ /^$field:\s+(\d+) kB/m ? $1 : undef;
}

sub received
{
	return 0 unless -e $count_file;
	my $n = 0;
	$n += $_ for split /\n/, slurp_file($count_file);
	return $n;
}

# Streams the first $rows rows in a fresh backend; returns (sent, VmHWM kB, status).
sub stream
{
	my ($rows) = @_;
	my $before = received();
	my $t = time;
	my $out = $node->safe_psql(
		'postgres', qq{
		SET chroma_sync.batch_size = 2000;
		SET enable_indexscan = off;
		SET enable_bitmapscan = off;
		SELECT chroma_upsert_query('tap_memory', 'SELECT id, embedding FROM mem WHERE id <= $rows');
		SELECT pg_read_file('/proc/self/status');
	});
	my ($sent, $status) = split /\n/, $out, 2;
	note(sprintf('%d rows streamed in %.1f s', $rows, time - $t));
	is($sent, $rows, "chroma_upsert_query returns $rows");
	is(received() - $before, $rows, "the server received $rows ids");
	my $hwm = status_kb($status, 'VmHWM');
	note("$rows rows: VmHWM $hwm kB, RssAnon " . (status_kb($status, 'RssAnon') // '?')
		  . ' kB, RssShmem ' . (status_kb($status, 'RssShmem') // '?') . ' kB');
	return $hwm;
}

my $idle = status_kb($node->safe_psql('postgres', q{SELECT pg_read_file('/proc/self/status')}),
	'VmHWM');
note("an idle backend: VmHWM $idle kB");

my $hwm_100k = stream(100_000);
my $hwm_1m = stream(1_000_000);
ok(defined $hwm_100k && defined $hwm_1m, 'VmHWM was read from /proc');

cmp_ok($hwm_1m, '<', $cap_kb, "peak memory for 1,000,000 rows is under " . ($cap_kb / 1024) . ' MB');
cmp_ok($hwm_1m, '<', $ratio * $hwm_100k + $slack_kb,
	"peak memory does not grow with the row count (1M: $hwm_1m kB, 100k: $hwm_100k kB)");

# No backend crashed on the way.
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|server process .* was terminated|reinitializing/,
	'no backend crashed');

$node->stop;
$sink->kill_kill;
done_testing();
