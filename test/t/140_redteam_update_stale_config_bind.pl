# Red team: a 0.4 filter is bound by the worker with a configuration it loaded before
# ALTER EXTENSION UPDATE, without the update's column guard.
#
# The sync worker loads every mirror at the top of its loop, then steps them one after
# the other. check_04_text (mirror_filter.c) refuses to bind a 0.4 text whose columns
# (attnums) differ from the FILTER columns the update recorded, but it skips that check
# when the loaded MirrorConfig has no recorded columns ("not recorded by the update: the
# text alone"). A MirrorConfig loaded from the 0.4 catalog has none, and
# mirror_filter_binds() is read when the filter is used, not when it was loaded. So if the
# update commits while the worker is busy with an earlier mirror of the same loop
# iteration (here mirror A, whose filter is slow; in production any long step), the later
# 0.4 mirror B is bound from its text by its current names with no guard at all.
#
# Steps: 0.4; mirror A (filter public.slow(id), which sleeps) and mirror B of table s
# (filter 'pub', 0.4 text); 0.4 sends row 1 (pub true). Rows queued for A make the worker
# sleep inside A's step; meanwhile one transaction runs ALTER EXTENSION chroma_sync UPDATE
# and swaps the names of s.pub and s.arch (the update records the filter column by attnum:
# attnum 3, the column now called arch; the DDL trigger pauses B). When the worker reaches
# B with its stale configuration it binds 'pub' to attnum 4 (the column that took the
# name) and stores that tree; on the next load the rename counts as harmless (the filter is
# bound), so the mirror's status and recorded columns look consistent.
#
# What happens: the stored filter selects row 2 (the column that was arch). What should
# happen: the bound filter reads attnum 3 (row 1, what 0.4 read), or the mirror stays
# unbound and paused (as TAP 138 has it when the worker loads the mirror after the update).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_stale_config_bind', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t140a');
fresh_collection($node, 'cs_t140b');
q1(q{
CREATE TABLE public.flag (slow bool);
INSERT INTO public.flag VALUES (false);
CREATE FUNCTION public.slow(i int) RETURNS bool IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT slow FROM public.flag) THEN
		PERFORM pg_catalog.pg_sleep(1);
	END IF;
	RETURN true;
END $$;
CREATE TABLE public.a (id int PRIMARY KEY, embedding real[]);
SELECT chroma_mirror('public.a', collection => 'cs_t140a', filter => 'public.slow(id)');
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1'), (2, '{0,1}', false, true, 'B2');
SELECT chroma_mirror('public.s', collection => 'cs_t140b', document_column => 'body', filter => 'pub');
-- as 0.4 stored them: the texts as written
UPDATE chroma_sync.mirror SET filter = 'public.slow(id)' WHERE source = 'public.a'::regclass;
UPDATE chroma_sync.mirror SET filter = 'pub' WHERE source = 'public.s'::regclass;
});
is(q1(q{SELECT string_agg(mirror_id::text || source::text, ',' ORDER BY mirror_id) FROM chroma_sync.mirror}),
	'1a,2s', 'mirror A comes before mirror B in the worker\'s loop');
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror of s flushes');
is(q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t140b')}),
	'1:B1', '0.4 sends row 1 (pub)');

# the worker sleeps inside mirror A's step (a configuration loaded from the 0.4 catalog)
q1(q{UPDATE public.flag SET slow = true;
INSERT INTO public.a SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 12) g});
ok(wait_for('the worker in A\'s filter', 30, sub {
	q1(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND wait_event = 'PgSleep'}) eq '1' }),
	'the worker is busy with mirror A');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE s RENAME pub TO tmp; ALTER TABLE s RENAME arch TO pub; ALTER TABLE s RENAME tmp TO arch;
COMMIT;
}, timeout => 120);
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE and the swap commit') or diag($err);
note('right after the update: ' . q1(q{SELECT (filter_node IS NULL)::text || ' ' || filter || ' ' || column_names::text || ' ' || column_attnums::text FROM chroma_sync.mirror WHERE source = 'public.s'::regclass}));

q1(q{UPDATE public.flag SET slow = false});
# the worker finishes A's step, then steps B (bound or refused), then loads again
ok(wait_for('B\'s filter bound or the worker past it', 90, sub {
	q1(q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror WHERE source = 'public.s'::regclass}) eq 't'
	  || q1(q{SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = 1}) eq '0' }), 'the worker got past mirror A');
sleep 3;
note('stored: ' . q1(q{SELECT (filter_node IS NULL)::text || ' ' || filter || ' ' || column_names::text || ' ' || column_attnums::text || ' paused=' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror WHERE source = 'public.s'::regclass}));

if (q1(q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror WHERE source = 'public.s'::regclass}) eq 't')
{
	is(q1(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.s
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'public.s'::regclass), s.*)}),
		'1', 'the bound filter selects row 1, the column 0.4 read (now named arch), not the one that took its name');
	like(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.s'::regclass}), qr/^\(?arch\)?$/,
		'the bound text names the column 0.4 read by its new name');
}
else
{
	pass('the filter stays unbound (no binding to the swapped column)');
	pass('(no text to check)');
}

finish($node, $log0);
