# Red team: in a database where some session runs DDL regularly (here: an application
# that creates and drops a temporary table every 10 ms, as ETL jobs and ORMs do), a
# 0.4 text filter paused for "DDL ran after ALTER EXTENSION chroma_sync UPDATE" is bound
# only if the worker wins a race. chroma_resume() (the advice of the pause reason) clears
# the flag (now: confirms the text at the current DDL epoch), but the next DROP TABLE of any temporary table, in any schema,
# by any role, sets it again before the worker loads the mirror: the worker pauses it
# again with the same reason and the same advice. The mirror stays stuck with no working
# advice (short of stopping the application or unmirroring).
#
# Steps: 0.4 mirror of public.s with filter 'pub'; ALTER EXTENSION chroma_sync UPDATE
# and CREATE SCHEMA other in the same transaction (DDL after the update: flagged); the
# mirror pauses for it. A background session loops CREATE TEMP TABLE / DROP TABLE /
# COMMIT / pg_sleep(0.01). chroma_resume('public.s') is run four times, 20 s apart.
# What happens (3 runs of 3): the first resume is withdrawn
# by the next DROP TABLE and the mirror pauses again with the same reason and advice; a
# second resume happened to bind in these runs (a race: the user's confirmation holds only
# if the worker loads the mirror before any DDL commits).
# What should happen: the confirmed text is bound (DDL on temporary objects, or DDL
# that cannot change what the text names, should not withdraw the user's confirmation
# before the worker has acted on it). Fixed: DDL on temporary objects only does not
# advance the DDL epoch (no worker binds a name to another session's temporary objects).
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

my $node = new_node('redteam_unbound_filter_resume_churn', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t171');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.s VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.s', collection => 'cs_t171', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
CREATE SCHEMA other;
COMMIT;
});
is($ret, 0, 'the update and a CREATE SCHEMA commit') or diag($err);
my $row = sub { q1(q{SELECT (filter_node IS NOT NULL)::text || ' ' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}) };
ok(wait_for('the mirror pauses for the DDL', 60, sub { $row->() =~ /^false true DDL ran after ALTER EXTENSION/ }),
	'the mirror pauses for the DDL before the binding');

# an application's routine temporary tables
my ($in, $o, $e) = ('', '', '');
my $churn = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', q{
DO $$
BEGIN
	FOR i IN 1..20000 LOOP
		CREATE TEMP TABLE scratch (x int);
		DROP TABLE scratch;
		COMMIT;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
$$;} ], \$in, \$o, \$e);
sleep 1;

my $bound = 0;
my $first = 0;
for my $try (1 .. 4)
{
	my ($r, $so, $se) = $node->psql('postgres', q{SELECT chroma_resume('public.s')});
	note("resume $try: rc=$r $se");
	if (wait_for("the worker binds the confirmed filter (try $try)", 20, sub { $row->() =~ /^true/ }))
	{
		$bound = 1;
		$first = $try == 1;
		last;
	}
	note("after resume $try: " . $row->());
}
$churn->kill_kill;
ok($bound, 'chroma_resume() gets the confirmed filter bound while an application uses temporary tables')
	or diag('mirror: ' . $row->());
ok($first, 'the first chroma_resume() is not withdrawn by the DROP of a temporary table before the worker binds');

finish($node, $log0);
