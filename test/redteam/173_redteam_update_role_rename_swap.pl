# Red team: ALTER ROLE ... RENAME fires no event trigger (roles are global objects), so
# two roles swapping names by renames after ALTER EXTENSION chroma_sync UPDATE and before
# the sync worker binds a 0.4 text filter that names a role ('alice'::regrole) leave
# filter_ddl_after_update false: the worker binds the text to the OID of the role now
# called alice, silently, and the mirror now selects the other role's rows.
#
# Steps: roles alice and bob; 0.4 mirror of public.s (reviewer regrole) with filter
# reviewer = 'alice'::regrole (0.4 sends row 1, reviewed by alice). The database's worker
# is left out of chroma_sync.worker_databases; ALTER EXTENSION chroma_sync UPDATE; ALTER
# ROLE alice RENAME TO tmp, bob TO alice, tmp TO bob; the worker comes back.
# What happens: the mirror is not paused; the bound filter compares with the OID of the
# role 0.4 knew as bob: it selects row 2. What should happen: the mirror pauses with the
# "DDL ran after ALTER EXTENSION chroma_sync UPDATE" reason (or the text is bound to the
# role 0.4 read: row 1).
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
sub q1 { return $node->safe_psql($_[1] // 'db173', $_[0]); }

$node->safe_psql('postgres', q{CREATE DATABASE db173});
$node->safe_psql('postgres', q{CREATE ROLE alice; CREATE ROLE bob});
$node->safe_psql('postgres', q{CREATE EXTENSION chroma_sync});
q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t173');
q1(q{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], reviewer regrole);
INSERT INTO public.dt VALUES (1, '{1,0}', 'alice'), (2, '{0,1}', 'bob');
SELECT chroma_mirror('public.dt', collection => 'cs_t173', filter => $$reviewer = 'alice'::regrole$$);
UPDATE chroma_sync.mirror SET filter = $$reviewer = 'alice'::regrole$$;
});
is(q1(q{SELECT chroma_flush('public.dt', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t173')}, 'postgres'), '1',
	'the 0.4 worker sends row 1 (alice)');

$node->safe_psql('postgres', q{ALTER SYSTEM SET chroma_sync.worker_databases = 'postgres'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%' AND datname = 'db173'},
	'0', 30), "db173's worker has exited");
my ($ret, $out, $err) = $node->psql('db173', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);

# two roles swap names: ALTERs, but no event trigger fires for them
$node->safe_psql('postgres', q{ALTER ROLE alice RENAME TO tmp; ALTER ROLE bob RENAME TO alice; ALTER ROLE tmp RENAME TO bob});
note('flag after the renames: ' . q1(q{SELECT filter_ddl_after_update::text FROM chroma_sync.mirror}));

$node->safe_psql('postgres', q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' filter=' || filter || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') FROM chroma_sync.mirror}));

if (q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true')
{
	is(q1(q{SELECT coalesce(string_agg(id::text, ','), '') FROM public.dt
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
		'1', 'the bound filter still selects row 1 (the role 0.4 compared with, now called bob)');
}
else
{
	pass('the text is not bound to the role that took the name');
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the renames before the binding');
}

finish($node, $log0);
