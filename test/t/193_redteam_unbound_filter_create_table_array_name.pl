# Red team: CREATE TABLE (CREATE VIEW, CREATE MATERIALIZED VIEW, CREATE FOREIGN TABLE,
# CREATE TABLE AS, SELECT INTO, IMPORT FOREIGN SCHEMA) is not among the commands that
# advance the DDL epoch, yet it can change what a type name in a 0.4 text means: a
# relation named like an existing array type (app._mood, the array type of enum app.mood)
# takes that name, and the array type is renamed away (to app.__mood). The worker binds
# the text with app._mood meaning the new table's row type: here the binding fails with
# "malformed record literal" instead of the mirror pausing with the reason and advice for
# DDL after the update.
#
# Steps: 0.4; enum app.mood ('sad', 'happy'); mirror of public.e with filter
# mood = ANY ('{happy}'::app._mood) (0.4 text); row 1 (happy) sent by 0.4. The database's
# worker left out. ALTER EXTENSION chroma_sync UPDATE; CREATE TABLE app._mood (x int).
# The worker is let back into the database.
# What happened: the epoch is still 0; the worker binds the text with app._mood naming the
# table's row type (not the array of app.mood): the mirror pauses with "the stored filter
# ... is refused (re-create the mirror): malformed record literal", not for DDL.
# What should happen: the mirror pauses for the DDL after the update (the text's name
# app._mood now means another type), with chroma_resume() as the advice.
# Fixed: every DDL statement advances the epoch (CREATE TABLE too), but the creation or
# drop of temporary objects only.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_create_table_array_name', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t193');
q1(q{
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], mood app.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t193', filter => $$mood = ANY ('{happy}'::app._mood)$$);
UPDATE chroma_sync.mirror SET filter = $$mood = ANY ('{happy}'::app._mood)$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t193')}), '1', '0.4 sends row 1');

q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');
my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);

q1(q{CREATE TABLE app._mood (x int)});
is(q1(q{SELECT 'app._mood'::regtype::oid = (SELECT reltype FROM pg_class WHERE oid = 'app._mood'::regclass)}), 't',
	'app._mood now names the new table\'s row type');
is(q1(q{SELECT a.typname FROM pg_type t JOIN pg_type a ON a.oid = t.typarray WHERE t.oid = 'app.mood'::regtype}), '__mood',
	'the array type of app.mood was renamed away');
my $epoch = q1(q{SELECT coalesce(pg_sequence_last_value('chroma_sync.ddl_epoch'), 0)});
note("epoch: $epoch");

q1(q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused OR in_error)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') || ' error=' || coalesce(last_error, '') FROM chroma_sync.mirror}));

isnt($epoch, '0', 'CREATE TABLE app._mood, which changed what app._mood names, advanced the DDL epoch');
like(q1(q{SELECT coalesce(paused_reason, '') FROM chroma_sync.mirror}),
	qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
	'the mirror is paused for the DDL after the update');

finish($node, $log0);
