# Red team: ALTER DATABASE ... SET (and ALTER ROLE ... SET) run after ALTER EXTENSION
# chroma_sync UPDATE and before the sync worker binds a 0.4 text filter change what the
# text means, and fire no event trigger (database and role settings are global objects:
# PostgreSQL runs no event trigger for them), so filter_ddl_after_update stays false.
# The rule "any ALTER ... run between the update and the binding pauses the mirror" does
# not hold for them: the worker, started after the ALTER, reads the text with the new
# database setting and binds it silently to another constant.
#
# Steps: database db170 with DateStyle 'ISO, MDY'; 0.4 mirror of public.dt with filter
# d >= '03/04/2024' (0.4 reads March 4: row 1, dated 2024-03-20, is sent). db170's worker
# is left out of chroma_sync.worker_databases; ALTER EXTENSION chroma_sync UPDATE; then
# ALTER DATABASE db170 SET DateStyle = 'SQL, DMY'; the worker comes back.
# What happens: no flag is set, the worker binds d >= '2024-04-03' (April 3), the mirror
# is not paused and row 1 is no longer selected. What should happen: the mirror pauses
# with the "DDL ran after ALTER EXTENSION chroma_sync UPDATE" reason (or the text is bound
# as 0.4 read it, March 4).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_update_alter_database_set', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'db170', $_[0]); }

$node->safe_psql('postgres', q{CREATE DATABASE db170});
$node->safe_psql('postgres', q{ALTER DATABASE db170 SET DateStyle = 'ISO, MDY'});
$node->safe_psql('postgres', q{CREATE EXTENSION chroma_sync});
q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t170');
q1(q{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], d date);
INSERT INTO public.dt VALUES (1, '{1,0}', '2024-03-20'), (2, '{0,1}', '2024-01-01');
SELECT chroma_mirror('public.dt', collection => 'cs_t170', filter => $$d >= '03/04/2024'$$);
UPDATE chroma_sync.mirror SET filter = $$d >= '03/04/2024'$$;
});
is(q1(q{SELECT chroma_flush('public.dt', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t170')}, 'postgres'), '1',
	'the 0.4 worker reads 03/04/2024 as March 4: row 1 is sent');

$node->safe_psql('postgres', q{ALTER SYSTEM SET chroma_sync.worker_databases = 'postgres'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%' AND datname = 'db170'},
	'0', 30), "db170's worker has exited");
my ($ret, $out, $err) = $node->psql('db170', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);

# a DBA changes the database's DateStyle: an ALTER, but no event trigger fires for it
$node->safe_psql('postgres', q{ALTER DATABASE db170 SET DateStyle = 'SQL, DMY'});
note('flag after ALTER DATABASE: ' . q1(q{SELECT filter_ddl_after_update::text FROM chroma_sync.mirror}));

$node->safe_psql('postgres', q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' filter=' || filter || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') FROM chroma_sync.mirror}));

if (q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true')
{
	is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-03-04'::date)},
		'the bound filter is the one 0.4 evaluated (March 4)');
	is(q1(q{SELECT coalesce(string_agg(id::text, ','), '') FROM public.dt
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
		'1', 'the bound filter still selects row 1');
}
else
{
	pass('the text is not bound under the new DateStyle');
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the ALTER before the binding');
}

finish($node, $log0);
