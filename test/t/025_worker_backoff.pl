# Workers never crash-loop and stop at once (issue 4, item 4).
#
# worker_databases lists, next to a healthy database: one that does not exist, one with
# ALLOW_CONNECTIONS false, one without the extension, and one whose worker fails at every
# start (its chroma_sync.mirror table was renamed). Worker starts are counted in the server
# log (log_min_messages = debug1 logs each start) over 60 s: a small bound per database,
# i.e. capped backoff, no fork storm; the healthy database keeps syncing meanwhile.
#
# Then SIGTERM to the worker while a request is in flight (Chroma URL pointing at a
# loopback server that accepts and never answers): the process exits within 1 s, a new
# worker comes back and, with the URL restored, the collection ends equal to the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# only postgres has a worker until the observation starts
my $node = new_node('worker_backoff', conf => "chroma_sync.worker_databases = 'postgres'\n");
my $log0 = log_offset($node);

make_table($node, 'docs', rows => 100, dim => 8);
fresh_collection($node, 'cs_t025_docs');
mirror($node, 'docs', 'cs_t025_docs');

$node->safe_psql('postgres', 'CREATE DATABASE noconn');
$node->safe_psql('noconn', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
SELECT chroma_delete_collection('cs_t025_noconn', true);
SELECT chroma_mirror('t', collection => 'cs_t025_noconn');});
$node->safe_psql('postgres', 'ALTER DATABASE noconn ALLOW_CONNECTIONS false');
$node->safe_psql('postgres', 'CREATE DATABASE noext');
$node->safe_psql('postgres', 'CREATE DATABASE broken');
$node->safe_psql('broken', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
SELECT chroma_delete_collection('cs_t025_broken', true);
SELECT chroma_mirror('t', collection => 'cs_t025_broken');});
# (the DDL event triggers, which read that table, are disabled for the rename: they fire
# ALWAYS, also under session_replication_role = replica)
$node->safe_psql('broken', q{ALTER EVENT TRIGGER chroma_sync_ddl_end DISABLE;
ALTER EVENT TRIGGER chroma_sync_unbound_filters DISABLE;
ALTER TABLE chroma_sync.mirror RENAME TO mirror_renamed;
ALTER EVENT TRIGGER chroma_sync_unbound_filters ENABLE ALWAYS;
ALTER EVENT TRIGGER chroma_sync_ddl_end ENABLE ALWAYS});

my %oid = map {
	$_ => $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = '$_'")
} qw(postgres noconn noext broken);

set_conf($node, 'log_min_messages', 'debug1');
my $count_from = log_offset($node);
set_conf($node, 'chroma_sync.worker_databases', 'postgres,nosuchdb,noconn,noext,broken');

# 60 s of observation; the healthy mirror gets changes meanwhile
my $t_end = time() + 60;
my $round = 0;
while (time() < $t_end)
{
	$round++;
	$node->safe_psql('postgres',
		"UPDATE docs SET doc = 'round $round' WHERE id % 12 = $round % 12");
	sleep 5;
}
set_conf($node, 'log_min_messages', 'warning');

my %starts;
my $total = 0;
for my $line (split /\n/, slurp_file($node->logfile, $count_from))
{
	next unless $line =~ /starting background worker process "chroma_sync worker for database (\d+)"/;
	$starts{$1}++;
	$total++;
}
note('worker starts in 60 s: '
	  . join(', ', map { "$_ (oid $oid{$_}): " . ($starts{ $oid{$_} } // 0) } sort keys %oid)
	  . ", total $total");
for my $db (qw(postgres noconn noext broken))
{
	my $n = $starts{ $oid{$db} } // 0;
	ok($n <= 10, "$db: $n worker starts in 60 s (<= 10)");
}
ok($total <= 30, "$total worker starts in all (<= 30): no fork storm");
is($starts{ $oid{noconn} } // 0, 0, 'no worker is started for a database that refuses connections');
is($starts{ $oid{noext} } // 0, 1, "a database without the extension gets one start (its worker goes dormant)");
ok(($starts{ $oid{broken} } // 0) >= 2,
	'the worker that fails at start is retried (' . ($starts{ $oid{broken} } // 0) . ' starts)');
like(slurp_file($node->logfile, $count_from), qr/chroma_sync\.mirror.* does not exist/,
	"the broken database's error is in the log");

assert_equal($node, 'docs', 'cs_t025_docs', name => 'the healthy database kept syncing');

# ---- SIGTERM while a request is in flight
my $fake = $ENV{CHROMA_ROOT} . '/test/lib/fake_chroma.pl';
my $port_file = $PostgreSQL::Test::Utils::tmp_check . '/t025_hang.port';
unlink $port_file;
my $fake_pid = fork();
die "fork: $!" unless defined $fake_pid;
if ($fake_pid == 0)
{
	exec('perl', $fake, 'hang', $port_file) or die "exec: $!";
}
ok(wait_for('the hanging server writes its port', 30, sub { -s $port_file }),
	'a loopback server that never answers is listening');
my $hang_port = slurp_file($port_file);
chomp $hang_port;

set_conf($node, 'chroma_sync.timeout', '120000');
set_conf($node, 'chroma_sync.url', "http://127.0.0.1:$hang_port");
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'sent to a server that never answers' WHERE id <= 20});
ok( poll_query($node, q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres' AND state = 'active'
	AND wait_event_type = 'Extension'}, '1', 60),
	'the worker waits on a request in flight');
sleep 1;
my $pid = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'});
like($pid, qr/^\d+$/, "worker pid $pid");
# The URL is restored before the SIGTERM, and seen by a new session (so the postmaster has
# reloaded it): a worker forked while the postmaster's SIGHUP is on its way can miss it
# (PostgreSQL ignores SIGHUP in a background worker until its main function sets a handler).
$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.url');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.timeout');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.worker_databases');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(wait_for('the URL restored', 10, sub {
	$node->safe_psql('postgres', "SELECT setting FROM pg_settings WHERE name = 'chroma_sync.url'")
	  !~ /:$hang_port/ }), 'the URL is restored (the worker still waits on its request)');
my $t0 = time();
kill 'TERM', $pid;
my $gone;
while (time() - $t0 < 10)
{
	if (!kill(0, $pid)) { $gone = time() - $t0; last; }
	sleep 0.01;
}
ok(defined $gone && $gone < 1,
	sprintf('SIGTERM mid-request: the worker exits within 1 s (%s)',
		defined $gone ? sprintf('%.2f s', $gone) : 'still running after 10 s'));

kill 'TERM', $fake_pid;
waitpid($fake_pid, 0);
like(wait_for_new_worker($node, $pid, 90), qr/^\d+$/, 'a new worker comes back');
assert_equal($node, 'docs', 'cs_t025_docs', name => 'after the SIGTERM, with the URL restored');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
