# RED TEAM REPRO (8b1ce11, flight_budget): the worker's batches in flight are meant to share
# the 32 MB byte budget (SYNC_BATCH_BYTES / max_concurrent_requests each) "so that the
# worker's memory does not grow with chroma_sync.max_concurrent_requests". But a row larger
# than a batch's share is still read, alone: with rows of 16 MB and max_concurrent_requests
# = 10 (3.2 MB a batch), every one of the 10 requests in flight holds a 16 MB row (plus its
# request body), 160 MB of rows where one request with the whole budget holds two. The
# peak grows with max_concurrent_requests, as before the commit.
#
# Sequence: records go to test/lib/fake_chroma.pl sink behind test/lib/delay_proxy.pl
# (1 s each way, so requests overlap); table big: 12 rows of 16 MB md5 text (storage
# external); max_concurrent_requests = 1: mirror, backfill, worker VmHWM; restart with
# max_concurrent_requests = 10: mirror into another collection, backfill, worker VmHWM.
# Observed (two runs, same): worker peak 208 MB with 1 in flight, 433 MB with 10 in flight
# (above TAP 033's 250 MB cap, 2.1 x the peak with 1).
# Expected: the batches in flight share 32 MB: the peak with 10 in flight stays within
# TAP 033's cap (and near the peak with 1 in flight).
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $rows = 12;
my $cap_kb = 250 * 1024;

my $dir = PostgreSQL::Test::Utils::tempdir();
my $sink = IPC::Run::start([ 'perl', "$root/test/lib/fake_chroma.pl", 'sink', "$dir/port", "$dir/count" ]);
my $t0 = time;
usleep(50_000) until -s "$dir/port" || time - $t0 > 10;
my $sport = slurp_file("$dir/port");
chomp $sport;
my $delay = IPC::Run::start([ 'perl', "$root/test/lib/delay_proxy.pl", $sport, "$dir/dport", 1000 ]);
$t0 = time;
usleep(50_000) until -s "$dir/dport" || time - $t0 > 10;
my $port = slurp_file("$dir/dport");
chomp $port;

my $node = PostgreSQL::Test::Cluster->new('t299');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = 'http://127.0.0.1:$port'
chroma_sync.embedding_encoding = 'json'
chroma_sync.max_concurrent_requests = 1
shared_buffers = '32MB'
max_wal_size = '4GB'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
$node->safe_psql('postgres', qq{
CREATE TABLE big (id int PRIMARY KEY, embedding real[], doc text);
ALTER TABLE big ALTER COLUMN doc SET STORAGE EXTERNAL;
INSERT INTO big SELECT i, ARRAY[i, 1, 2, 3]::real[],
	(SELECT string_agg(md5(i::text || '-' || j::text), '') FROM generate_series(1, 524288) j)
FROM generate_series(1, $rows) i;}, timeout => 900);

sub received
{
	return 0 unless -e "$dir/count";
	my $n = 0;
	$n += $_ for split /\n/, slurp_file("$dir/count");
	return $n;
}

sub worker_hwm_kb
{
	my $pid = $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'");
	return undef unless $pid =~ /^\d+$/ && -r "/proc/$pid/status";
	my $st = slurp_file("/proc/$pid/status");
	return $st =~ /^VmHWM:\s+(\d+) kB/m ? $1 : undef;
}

sub backfill
{
	my ($coll) = @_;
	my $before = received();
	$node->safe_psql('postgres', "SELECT chroma_mirror('big', collection => '$coll', document_column => 'doc')");
	my $deadline = time + 400;
	usleep(200_000) while received() < $before + $rows && time < $deadline;
	ok(received() >= $before + $rows, "$coll: the sink received the $rows rows");
	return worker_hwm_kb() // 0;
}

my $hwm1 = backfill('cs_t299a');
diag(sprintf('max_concurrent_requests = 1: worker peak %.0f MB', $hwm1 / 1024));
$node->safe_psql('postgres', "SELECT chroma_unmirror('big')");
$node->append_conf('postgresql.conf', "chroma_sync.max_concurrent_requests = 10\n");
$node->restart;
my $hwm10 = backfill('cs_t299b');
diag(sprintf('max_concurrent_requests = 10: worker peak %.0f MB', $hwm10 / 1024));
ok($hwm10 < $cap_kb, sprintf('10 in flight: the worker peaked at %.0f MB (< %d MB)', $hwm10 / 1024, $cap_kb / 1024));
ok($hwm10 < 1.5 * $hwm1, 'the peak does not grow with max_concurrent_requests (10 in flight < 1.5 x 1 in flight)');

$node->stop;
$delay->kill_kill;
$sink->kill_kill;
done_testing();
