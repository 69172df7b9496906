# Red team: while a 0.4 text filter is unbound and not yet flagged (after ALTER
# EXTENSION chroma_sync UPDATE until the worker binds it; indefinitely when the database
# is left out of chroma_sync.worker_databases, or again after each chroma_resume()), the
# event trigger chroma_sync_unbound_filters makes every DDL statement of the database
# UPDATE the same chroma_sync.mirror row. The first DDL transaction holds that row lock
# until it commits, so the DDL of every other session, any role, any schema, temporary
# tables included, waits for it: a long migration transaction blocks an application's
# CREATE/DROP TEMP TABLE (here: lock_timeout fires).
#
# Steps: 0.4 mirror of public.s with filter 'pub'; the database's worker left out; ALTER
# EXTENSION chroma_sync UPDATE. Session A (superuser): ALTER TABLE public.other ADD COLUMN,
# then stays in its transaction (pg_sleep). Session B (role app, no rights on chroma_sync,
# own schema): SET lock_timeout = '3s'; CREATE TEMP TABLE / DROP TABLE.
# What happened: B's DDL failed with "canceling statement due to lock timeout" (it waited
# on A's row lock of chroma_sync.mirror). What should happen: unrelated DDL of another
# session does not wait for A. Fixed: DDL advances a sequence (the DDL epoch), which
# takes no row lock; B's DDL on its own tables advances it too, without waiting.
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
fresh_collection($node, 'cs_t172');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.s VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.s', collection => 'cs_t172', filter => 'pub');
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

# session A: a migration that takes a while
my ($in, $o, $e) = ('', '', '');
my $a = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
	  q{ALTER TABLE public.other ADD COLUMN y int; SELECT pg_sleep(15);} ], \$in, \$o, \$e);
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE public.other%' AND wait_event = 'PgSleep'}, '1', 30),
	'session A is inside its transaction');

# session B: an application role's temporary table
my ($rb, $ob, $eb) = $node->psql('postgres',
	q{SET lock_timeout = '3s'; CREATE TEMP TABLE scratch (x int); DROP TABLE scratch; CREATE TABLE app.t (x int); ALTER TABLE app.t ADD COLUMN y int; DROP TABLE app.t;},
	extra_params => [ '-U', 'app' ]);
is($rb, 0, "another role's DDL on its own and temporary objects does not wait for session A")
	or diag($eb);
$a->finish;

finish($node, $log0);
