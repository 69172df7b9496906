# Red team: chroma_resume() confirms a 0.4 text at the DDL epoch as it reads then, but the
# epoch counts DDL when it runs, not when it commits. DDL of a transaction still open at the
# resume (its event trigger advanced the epoch already, its changes are not yet visible to
# the user who checks the names) is counted as confirmed: once it commits, the worker binds
# the text to what that DDL made of its names, unpaused.
#
# Steps: 0.4; functions app.is_on(bool) (returns its argument) and app.is_off(bool)
# (returns NOT its argument); mirror of public.e with filter app.is_on(pub) (0.4 text);
# row 1 (pub true) sent by 0.4. The database's worker left out (chroma_sync.worker_databases;
# as after any delay of the worker). ALTER EXTENSION chroma_sync UPDATE; CREATE SCHEMA other
# (DDL after the update: the text needs confirming). Session T: BEGIN, swap of the two
# functions' names (three ALTER FUNCTION ... RENAME), then stays open (pg_sleep). Meanwhile
# the user checks the names (app.is_on still returns its argument) and runs
# chroma_resume('public.e'). T commits; the worker is let back into the database.
# What happened: the worker bound app.is_on(pub) to the function the user did not confirm
# (0.4's is_off): the stored filter selected row 2, the mirror was not paused. Fixed: each
# DDL statement holds a shared advisory lock on the epoch until its transaction ends, and
# chroma_resume() refuses to confirm while another transaction holds it.
# What should happen: DDL that commits after the confirmation counts as DDL after it: the
# mirror pauses again (or the bound filter calls the function the user confirmed).
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

my $node = new_node('redteam_resume_open_ddl_transaction', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t190');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.is_on(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE FUNCTION app.is_off(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT NOT b';
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.e VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.e', collection => 'cs_t190', filter => 'app.is_on(pub)');
UPDATE chroma_sync.mirror SET filter = 'app.is_on(pub)';
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t190')}), '1', '0.4 sends row 1');

q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
CREATE SCHEMA other;
COMMIT;
});
is($ret, 0, 'the update and a CREATE SCHEMA commit') or diag($err);

# session T: a migration swapping the two names, still open
my ($in, $o, $e) = ('', '', '');
my $t = IPC::Run::start(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', q{
BEGIN;
ALTER FUNCTION app.is_on(bool) RENAME TO tmp;
ALTER FUNCTION app.is_off(bool) RENAME TO is_on;
ALTER FUNCTION app.tmp(bool) RENAME TO is_off;
SELECT pg_sleep(6);
COMMIT;} ], \$in, \$o, \$e);
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%SELECT pg_sleep(6)%' AND wait_event = 'PgSleep'}, '1', 30),
	'session T has swapped the names and is still open');

# the user checks the names, then confirms the text
is(q1(q{SELECT app.is_on(true)::text}), 'true', 'the user sees app.is_on returning its argument (as 0.4 read it)');
($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resume('public.e')});
isnt($ret, 0, 'chroma_resume(public.e) refuses to confirm while T is open');
like($err, qr/ERROR:  DDL of another transaction is still open: the filter of this mirror, stored by chroma_sync 0\.4, cannot be confirmed now\nDETAIL:  .*by the process \d+\).*\nHINT:  Wait for that transaction to commit or roll back/s,
	'... saying which process, and what to do');

$t->finish;
is($?, 0, 'session T commits') or diag($e);
is(q1(q{SELECT app.is_on(true)::text}), 'false', 'app.is_on is now the other function');

q1(q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' filter=' || filter || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') FROM chroma_sync.mirror}));

if (q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true')
{
	is(q1(q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM public.e
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), e.*)}),
		'1', 'the bound filter selects row 1: it calls the function the user confirmed (now named is_off)');
}
else
{
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the DDL committed after the confirmation');
}

finish($node, $log0);
