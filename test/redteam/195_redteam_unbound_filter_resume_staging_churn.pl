# Red team: TAP 171 with an application's permanent staging table instead of a temporary
# one. ETL jobs commonly load through a permanent (often UNLOGGED) staging table that they
# create and drop on each run. DDL on temporary objects only no longer advances the DDL
# epoch, but DROP TABLE of any permanent table does (sql_drop), although dropping a table
# the filter does not name cannot make the text's names mean something else (it cannot
# rebind a name; at most make it fail to resolve). So while such a job runs, the
# confirmation given by chroma_resume() (the advice of the pause reason) is withdrawn by
# the next DROP TABLE before the worker binds the text: the mirror pauses again with the
# same reason and advice.
#
# Steps: 0.4 mirror of public.s with filter 'pub'; ALTER EXTENSION chroma_sync UPDATE and
# CREATE SCHEMA other in the same transaction; the mirror pauses for it. A background
# session loops CREATE UNLOGGED TABLE public.staging / DROP TABLE / COMMIT / pg_sleep(0.01).
# chroma_resume('public.s') is run up to four times, 20 s apart.
# What happens: the first resume is withdrawn (the mirror pauses again with the same reason).
# What should happen: the confirmed text is bound after the first chroma_resume() (DDL
# that cannot change what the text names does not withdraw the confirmation).
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

my $node = new_node('redteam_unbound_filter_resume_staging_churn', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t195');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.s VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.s', collection => 'cs_t195', filter => 'pub');
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

# an application's routine staging table
my ($in, $o, $e) = ('', '', '');
my $churn = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', q{
DO $$
BEGIN
	FOR i IN 1..20000 LOOP
		CREATE UNLOGGED TABLE public.staging (x int);
		DROP TABLE public.staging;
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
ok($bound, 'chroma_resume() gets the confirmed filter bound while an application uses a staging table')
	or diag('mirror: ' . $row->());
ok($first, 'the first chroma_resume() is not withdrawn by the DROP of a staging table before the worker binds');

finish($node, $log0);
