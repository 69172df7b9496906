# Red team: the event trigger advances the DDL epoch only if it sees an unbound 0.4 filter,
# and it looks in the DDL transaction's snapshot. DDL of a REPEATABLE READ (or SERIALIZABLE)
# transaction whose snapshot predates the mirror (or its filter) does not see it, so does
# not advance the epoch, although it runs after ALTER EXTENSION chroma_sync UPDATE: the
# worker binds the 0.4 text to what that DDL made of its names, unpaused.
#
# Steps: 0.4; functions app.is_on(bool) (returns its argument) and app.is_off(bool)
# (returns NOT its argument); the database's worker left out (chroma_sync.worker_databases).
# Session T: BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 (its snapshot). Then, in
# another session, the mirror of public.e with filter app.is_on(pub) (0.4 text) is made
# and ALTER EXTENSION chroma_sync UPDATE commits. T then swaps the two functions' names
# (three ALTER FUNCTION ... RENAME) and commits. The worker is let back into the database.
# What happened: the epoch was not advanced (T's event trigger saw no mirror); the worker
# binds app.is_on(pub) to the function 0.4 knew as is_off: the stored filter selects row 2,
# the mirror is not paused.
# What should happen: the mirror pauses for the DDL run after the update (or the bound
# filter calls the function 0.4 called).
# Fixed: every DDL statement advances the epoch, whatever its snapshot sees.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_repeatable_read_ddl', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t192');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.is_on(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE FUNCTION app.is_off(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT NOT b';
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.e VALUES (1, '{1,0}', true), (2, '{0,1}', false);
});
q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');

# session T: a REPEATABLE READ transaction (a migration tool's, a long report's)
my $t = $node->background_psql('postgres');
$t->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;});

q1(q{
SELECT chroma_mirror('public.e', collection => 'cs_t192', filter => 'app.is_on(pub)');
UPDATE chroma_sync.mirror SET filter = 'app.is_on(pub)';
});
my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
is(q1(q{SELECT (filter IS NOT NULL AND filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true',
	'the 0.4 text is unbound');

$t->query_safe(q{
ALTER FUNCTION app.is_on(bool) RENAME TO tmp;
ALTER FUNCTION app.is_off(bool) RENAME TO is_on;
ALTER FUNCTION app.tmp(bool) RENAME TO is_off;
COMMIT;});
$t->quit;
is(q1(q{SELECT app.is_on(true)::text}), 'false', 'T swapped the names after the update');
my $epoch = q1(q{SELECT coalesce(pg_sequence_last_value('chroma_sync.ddl_epoch'), 0)});
note("epoch: $epoch");

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
		'1', 'the bound filter selects row 1: it calls the function 0.4 called (now named is_off)');
}
else
{
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the DDL run after the update');
}

finish($node, $log0);
