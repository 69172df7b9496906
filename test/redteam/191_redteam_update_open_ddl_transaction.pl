# Red team: DDL run in a transaction open across ALTER EXTENSION chroma_sync UPDATE (run
# before the update committed, committed after it) does not advance the DDL epoch: its
# statements ran before the event trigger existed. The worker then binds the 0.4 text to
# what that DDL made of its names, unpaused, although the DDL committed after the update
# (the update read the text's names without it: it recorded the columns as they were).
#
# Steps: 0.4; functions app.is_on(bool) (returns its argument) and app.is_off(bool)
# (returns NOT its argument); mirror of public.e with filter app.is_on(pub) (0.4 text);
# row 1 (pub true) sent by 0.4. The database's worker left out (chroma_sync.worker_databases).
# Session T: BEGIN, swap of the two functions' names (three ALTER FUNCTION ... RENAME),
# stays open. ALTER EXTENSION chroma_sync UPDATE commits (it does not wait for T). T
# commits. The worker is let back into the database.
# What happens: the worker binds app.is_on(pub) to the function 0.4 knew as is_off: the
# stored filter selects row 2, the mirror is not paused (the epoch is still 0).
# What should happen: DDL committed after the update counts as DDL after it: the mirror
# pauses for it (or the bound filter calls the function 0.4 called).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_open_ddl_transaction', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t191');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.is_on(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE FUNCTION app.is_off(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT NOT b';
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.e VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.e', collection => 'cs_t191', filter => 'app.is_on(pub)');
UPDATE chroma_sync.mirror SET filter = 'app.is_on(pub)';
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t191')}), '1', '0.4 sends row 1');

q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');

# session T: a migration swapping the two names, open across the update
my $t = $node->background_psql('postgres');
$t->query_safe(q{BEGIN;
ALTER FUNCTION app.is_on(bool) RENAME TO tmp;
ALTER FUNCTION app.is_off(bool) RENAME TO is_on;
ALTER FUNCTION app.tmp(bool) RENAME TO is_off;});

my ($ret, $out, $err) = $node->psql('postgres', q{SET statement_timeout = '30s'; ALTER EXTENSION chroma_sync UPDATE},
	timeout => 60);
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE commits while T is open') or diag($err);
is(q1(q{SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'}), '0.5', 'the extension is at 0.5');

$t->query_safe('COMMIT');
$t->quit;
is(q1(q{SELECT app.is_on(true)::text}), 'false', 'T committed after the update: app.is_on is now the other function');
note('epoch: ' . q1(q{SELECT coalesce(pg_sequence_last_value('chroma_sync.ddl_epoch'), 0)}));

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
		'the mirror is paused for the DDL committed after the update');
}

finish($node, $log0);
