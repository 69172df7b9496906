# chroma_sync.worker_databases (issue 4, item 4): changing it and reloading starts and
# stops workers: 'postgres' -> only postgres has a worker; 'postgres,db2' -> db2 gets one;
# '' -> every worker stops (changes wait in the queue); '*' again -> workers return and
# drain the queue; the collection ends equal to the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('worker_databases');
my $log0 = log_offset($node);

my $workers_sql = q{
SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '') FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker'};

make_table($node, 'docs', rows => 100, dim => 8);
fresh_collection($node, 'cs_t024_docs');
mirror($node, 'docs', 'cs_t024_docs');

# db2 and db3 have a mirror each, so their workers stay (a worker without one goes dormant)
for my $db ('db2', 'db3')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t SELECT g, ARRAY[g, 1, 2]::real[] FROM generate_series(1, 20) g;
SELECT chroma_delete_collection('cs_t024_$db', true);
SELECT chroma_mirror('t', collection => 'cs_t024_$db');});
}
ok(poll_query($node, $workers_sql, 'db2,db3,postgres', 60),
	"with the default '*' every database with a mirror has a worker");

set_conf($node, 'chroma_sync.worker_databases', 'postgres');
ok(poll_query($node, $workers_sql, 'postgres', 60),
	"worker_databases = 'postgres': only postgres keeps its worker");

set_conf($node, 'chroma_sync.worker_databases', 'postgres,db2');
ok(poll_query($node, $workers_sql, 'db2,postgres', 60),
	"worker_databases = 'postgres,db2': db2 gets a worker, db3 none");

set_conf($node, 'chroma_sync.worker_databases', '');
ok(poll_query($node, $workers_sql, '', 60), "worker_databases = '': every worker stops");

# with no worker, changes wait in the queue
$node->safe_psql('postgres', q{
UPDATE docs SET doc = 'while no worker runs' WHERE id <= 30;
DELETE FROM docs WHERE id > 90;});
$node->safe_psql('db3', q{INSERT INTO t VALUES (100, '{9,9,9}')});
sleep 3;
is($node->safe_psql('postgres', $workers_sql), '', 'a commit does not start a worker');
is(status_row($node, 'docs', 'pending'), '40', 'the changes wait in the queue (40 keys)');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '1 second')"), 'f',
	'chroma_flush times out while no worker runs');

set_conf($node, 'chroma_sync.worker_databases', '*');
ok(poll_query($node, $workers_sql, 'db2,db3,postgres', 60),
	"worker_databases = '*' again: every database gets its worker back");
assert_equal($node, 'docs', 'cs_t024_docs', name => 'after the workers came back');
is($node->safe_psql('db3', "SELECT chroma_flush('t', interval '60 seconds')"), 't',
	'db3: its queued change is flushed');
is($node->safe_psql('db3', "SELECT rows, missing, extra, different FROM chroma_verify('t')"),
	'21|0|0|0', 'db3: chroma_verify reports 21 rows, none missing, extra or different');

# names are matched exactly as written: a mixed-case database is selected by its name,
# an entry that names no database is logged
$node->safe_psql('postgres', 'CREATE DATABASE "RT2Mixed"');
$node->safe_psql('RT2Mixed', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t SELECT g, ARRAY[g, 1, 2]::real[] FROM generate_series(1, 5) g;
SELECT chroma_delete_collection('cs_t024_mixed', true);
SELECT chroma_mirror('t', collection => 'cs_t024_mixed');});
my $log1 = log_offset($node);
set_conf($node, 'chroma_sync.worker_databases', 'postgres, RT2Mixed ,nosuchdb');
ok(poll_query($node, $workers_sql, 'RT2Mixed,postgres', 60),
	"worker_databases = 'postgres, RT2Mixed ,nosuchdb': the mixed-case database gets its worker");
is($node->safe_psql('RT2Mixed', "SELECT chroma_flush('t', interval '60 seconds')"), 't',
	'RT2Mixed: its mirror is flushed');
ok(wait_for('the log names nosuchdb', 10, sub {
	slurp_file($node->logfile, $log1) =~ /worker_databases names "nosuchdb", which is no database/ }),
	'an entry that names no database is logged');
set_conf($node, 'chroma_sync.worker_databases', '"RT2Mixed",postgres');
ok(poll_query($node, $workers_sql, 'RT2Mixed,postgres', 60), 'a quoted name selects the same database');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
