# The worker reads a batch within a byte budget, not only a row count: 120 rows of 2 MB
# documents (240 MB) with batch_size 500 are read and sent some 16 at a time, in the
# backfill and in the drain, and the worker's peak memory stays far below what reading
# them all at once takes.
#
# The records go to test/lib/fake_chroma.pl in sink mode (it counts the ids it gets):
# this measures the worker, not Chroma's ingest of large documents.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $rows = 120;
my $cap_kb = 250 * 1024;

my $dir = PostgreSQL::Test::Utils::tempdir();
my $sink = IPC::Run::start([ 'perl', "$root/test/lib/fake_chroma.pl", 'sink', "$dir/port", "$dir/count" ]);
my $t0 = time;
usleep(50_000) until -s "$dir/port" || time - $t0 > 10;
my $port = slurp_file("$dir/port");
chomp $port;

my $node = PostgreSQL::Test::Cluster->new('worker_memory');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = 'http://127.0.0.1:$port'
chroma_sync.embedding_encoding = 'json'
shared_buffers = '32MB'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
# 2 MB of md5 text per row: TOAST cannot compress it much
$node->safe_psql('postgres', qq{
CREATE TABLE big (id int PRIMARY KEY, embedding real[], doc text);
ALTER TABLE big ALTER COLUMN doc SET STORAGE EXTERNAL;
INSERT INTO big SELECT i, ARRAY[i, 1, 2, 3]::real[],
	(SELECT string_agg(md5(i::text || '-' || j::text), '') FROM generate_series(1, 65536) j)
FROM generate_series(1, $rows) i;}, timeout => 600);

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

sub wait_received
{
	my ($n, $what) = @_;
	my $deadline = time + 300;
	usleep(200_000) while received() < $n && time < $deadline;
	ok(received() >= $n, "$what: the sink received $n records (" . received() . ')');
}

$node->safe_psql('postgres', "SELECT chroma_mirror('big', collection => 'cs_t033', document_column => 'doc')");
wait_received($rows, 'backfill');
my $hwm = worker_hwm_kb();
ok(defined $hwm && $hwm < $cap_kb, sprintf('backfill: the worker peaked at %.0f MB (< %d MB)', ($hwm // 0) / 1024, $cap_kb / 1024));

# the drain: every row changes, all 120 keys wait in the queue at once
$node->safe_psql('postgres', "SELECT chroma_pause('big')");
$node->safe_psql('postgres', "UPDATE big SET doc = 'x' || doc");
my $before = received();
$node->safe_psql('postgres', "SELECT chroma_resume('big')");
wait_received($before + $rows, 'drain');
is($node->safe_psql('postgres', "SELECT chroma_flush('big', interval '120 seconds')", timeout => 150), 't',
	'the drain is flushed');
$hwm = worker_hwm_kb();
ok(defined $hwm && $hwm < $cap_kb, sprintf('drain: the worker peaked at %.0f MB (< %d MB)', ($hwm // 0) / 1024, $cap_kb / 1024));
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.queue'), '0', 'nothing is left in the queue');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0', 'nothing failed');

$node->stop;
$sink->kill_kill;
done_testing();
