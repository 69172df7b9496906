# Red team: DDL "on temporary objects only" does not advance the DDL epoch, on the ground
# that no worker binds a name to another session's temporary objects. But a permanent
# table may have a column of a temporary type (PostgreSQL allows it): the worker binds the
# names of that type's labels or fields through the permanent table. A swap of two enum
# labels of a temporary type (ALTER TYPE pg_temp.mood RENAME VALUE, reported in schema
# pg_temp) between the update and the binding leaves the epoch at 0: the 0.4 text
# m = 'happy' on the permanent table is bound to the other label, unpaused.
#
# Steps: session S: CREATE TYPE pg_temp.mood AS ENUM ('sad', 'happy'); CREATE TABLE
# public.e (..., m pg_temp.mood); rows 1 (happy), 2 (sad); 0.4 mirror of public.e with
# filter m = 'happy' (0.4 text); row 1 sent by 0.4. The database's worker left out.
# ALTER EXTENSION chroma_sync UPDATE. S swaps the labels happy and sad (three ALTER TYPE
# ... RENAME VALUE). The worker is let back into the database (S still connected).
# What happened: the epoch is still 0; the worker binds m = 'happy' to the label 0.4 knew as
# 'sad' (the stored filter selects row 2, not row 1). The mirror is paused, but for another
# reason ("the type of a column named by the mirror's filter changed: "m" was
# pg_temp_N.mood, is now pg_temp.mood; undo the change and run chroma_resume()"), whose
# chroma_resume() then syncs with the filter bound to the other label.
# What should happen: DDL that changes a name the worker binds through a permanent table
# advances the epoch: the mirror pauses for it.
# Fixed: altering a temporary object advances the epoch (only creating or dropping
# temporary objects only does not; a drop that cascades to a permanent column counts).
# The mirror pauses before the text is read (here for the column's type, whose temporary
# schema the update named pg_temp_N), and chroma_resume() says it confirms the text.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_temp_type_of_permanent_table', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t194');
my $s = $node->background_psql('postgres');
$s->query_safe(q{
CREATE TYPE pg_temp.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m pg_temp.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t194', filter => $$m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t194')}), '1', '0.4 sends row 1');

q1(q{ALTER SYSTEM SET chroma_sync.worker_databases = 'nosuchdb'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}, '0', 30),
	'the worker has exited');
my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);

$s->query_safe(q{
ALTER TYPE pg_temp.mood RENAME VALUE 'happy' TO 'x';
ALTER TYPE pg_temp.mood RENAME VALUE 'sad' TO 'happy';
ALTER TYPE pg_temp.mood RENAME VALUE 'x' TO 'sad';
});
is(q1(q{SELECT string_agg(id || ':' || m, ',' ORDER BY id) FROM public.e}), '1:sad,2:happy',
	'the labels of the permanent table\'s rows are swapped');
my $epoch = q1(q{SELECT coalesce(pg_sequence_last_value('chroma_sync.ddl_epoch'), 0)});
note("epoch: $epoch");

q1(q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') FROM chroma_sync.mirror}));

if (q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true')
{
	is(q1(q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM public.e
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), e.*)}),
		'1', 'the bound filter selects row 1: the label 0.4 meant (now named sad)');
}
else
{
	# paused before the filter is read: for the column's type, named pg_temp_N.mood by the
	# update and pg_temp.mood now, or for the DDL
	is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'true', 'the mirror is paused, the text not bound');
	cmp_ok($epoch, '>', 0, 'the DDL on the temporary type advanced the epoch');
	my ($r, $o, $e2) = $node->psql('postgres', q{SELECT chroma_resume('public.e')});
	like($e2, qr/NOTICE:  the sync worker binds the filter .* stored by chroma_sync 0\.4, as its names read now/,
		'chroma_resume(), whatever the reason, says it confirms the text as its names read now');
}
$s->quit;

finish($node, $log0);
