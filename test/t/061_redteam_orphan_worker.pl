# Red team: after a launcher restart, a database left out of worker_databases keeps the
# worker the previous launcher started (the new launcher has no handle for it, so it
# frees the slot without stopping the worker); put back, it gets a second worker: two
# workers drain one database's queue. Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $node = new_node('redteam_orphan');
my $log0 = log_offset($node);

my $workers_sql = q{SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'};
my $launcher_sql = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync launcher'};

make_table($node, 'docs', rows => 50, dim => 8);
fresh_collection($node, 'cs_t061_docs');
mirror($node, 'docs', 'cs_t061_docs');
ok(poll_query($node, $workers_sql, '1', 30), 'postgres has its worker');

my $old = $node->safe_psql('postgres', $launcher_sql);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
ok(wait_for('a new launcher', 15, sub {
	my $p = $node->safe_psql('postgres', $launcher_sql); $p ne '' && $p ne $old }),
	'the launcher is back');
sleep 1;

set_conf($node, 'chroma_sync.worker_databases', '');
ok(poll_query($node, $workers_sql, '0', 15),
	"worker_databases = '' after a launcher restart: the worker stops");

set_conf($node, 'chroma_sync.worker_databases', '*');
ok(poll_query($node, $workers_sql, '1', 15), "worker_databases = '*': a worker again");
# watch a few seconds: never two workers on one database
my $max = 0;
for (1 .. 20)
{
	my $n = $node->safe_psql('postgres', $workers_sql);
	$max = $n if $n > $max;
	sleep 0.3;
}
is($max, 1, 'never more than one worker for the database');
diag($node->safe_psql('postgres', q{SELECT pid, datname, backend_start FROM pg_stat_activity
WHERE backend_type LIKE 'chroma_sync%'})) if $max != 1;

insert_rows($node, 'docs', 51, 50, 8);
ok(assert_equal($node, 'docs', 'cs_t061_docs'), 'the collection equals the table');
finish($node, $log0);
