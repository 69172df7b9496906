# Red team: a REPEATABLE READ (or SERIALIZABLE) transaction whose snapshot predates the
# flagging of an unbound 0.4 text filter fails its own, unrelated DDL with "could not
# serialize access due to concurrent update": the event trigger chroma_sync_unbound_filters
# UPDATEs the chroma_sync.mirror row that another session's DDL (or the worker) updated
# after the snapshot. Any role's DDL, on temporary tables too, fails because of a hidden
# extension row it never asked to write.
#
# Steps: 0.4 mirror of public.s with filter 'pub'; the database's worker left out; ALTER
# EXTENSION chroma_sync UPDATE. Session A (role app): BEGIN ISOLATION LEVEL REPEATABLE
# READ; SELECT 1; pg_sleep; meanwhile session B runs ALTER TABLE public.other ADD COLUMN
# (commits, flags the filter); then A: CREATE TEMP TABLE scratch / DROP TABLE scratch.
# What happened: A's CREATE TEMP TABLE failed (SQLSTATE 40001, in the event trigger's
# UPDATE). What should happen: A's DDL succeeds. Fixed: DDL advances a sequence (the DDL
# epoch) and updates no row; DDL on temporary objects only does not advance it.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_ddl_lock_wait', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t174');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.s VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.s', collection => 'cs_t174', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
CREATE TABLE public.other (x int);
CREATE ROLE app LOGIN;
CREATE SCHEMA AUTHORIZATION app;
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');

q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);

# session A: an application's REPEATABLE READ transaction with a temporary table
my ($in, $o, $e) = ('', '', '');
my $a = IPC::Run::start(
	[ 'psql', '-X', '-q', '-U', 'app', '-d', $node->connstr('postgres'), '-c',
	  q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; SELECT pg_sleep(4); CREATE TEMP TABLE scratch (x int); DROP TABLE scratch; CREATE TABLE app.t (x int); ALTER TABLE app.t ADD COLUMN y int; DROP TABLE app.t; COMMIT;} ],
	\$in, \$o, \$e);
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND wait_event = 'PgSleep'}, '1', 30),
	'session A has its snapshot');
# session B: a DBA's DDL, committed
q1(q{ALTER TABLE public.other ADD COLUMN y int});
my $flagged = q{SELECT (filter_confirmed_epoch < COALESCE(pg_sequence_last_value('chroma_sync.ddl_epoch'), 0))::text FROM chroma_sync.mirror};
is(q1($flagged), 'true', "B's DDL flags the filter");
$a->finish;
my $rc = $a->result(0);
is($rc, 0, "A's DDL (on temporary and on its own tables) succeeds in its REPEATABLE READ transaction")
	or diag($e);
is(q1($flagged), 'true', 'the filter stays flagged');

finish($node, $log0);
