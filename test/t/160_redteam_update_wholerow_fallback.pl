# Red team: a 0.4 filter naming a column called like its table (t IS NOT NULL on table t,
# column t) is bound by the worker, while the mirror is paused for that column's rename,
# to the table's WHOLE ROW (t IS NOT NULL: every column non-null), and keeps that meaning
# after the user follows the pause's advice (undo the rename, chroma_resume).
#
# The update records the filter's columns (column t, attnum 3). The rename of column t
# pauses the mirror ("column t named by the mirror's filter was renamed to u; undo the
# change and run chroma_resume()"). The worker binds a paused mirror's 0.4 text once per
# configuration (sync.c paused_filter_bindable), which checks only that no recorded
# filter column was dropped (mirror_columns_filter_intact), not renamed. The text "t" no
# longer names a column, so the parser takes it as the table's whole row (a Var with
# attno 0); check_04_text compares the bound columns with the recorded ones through
# mirror_filter_attnums, which drops attno 0: no column bound, the empty set is a subset,
# the tree is stored. Undoing the rename changes nothing any more: the filter is bound.
#
# Steps: 0.4; table public.t (id, embedding, t int, note text), filter t IS NOT NULL (0.4
# text); row 1 (t 1, note NULL) is sent by 0.4. In one transaction ALTER EXTENSION
# chroma_sync UPDATE and ALTER TABLE t RENAME t TO u; the worker binds the paused mirror;
# then ALTER TABLE t RENAME u TO t and chroma_resume. What happens: the stored filter is
# the whole-row test: row 1 no longer matches, row 3 (t 1, note NULL) is not sent. What
# should happen: the text is not bound while the column it named is renamed (or bound
# only to it), so after the undo the filter reads column t as 0.4 did.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_wholerow_fallback', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t160');
q1(q{
CREATE TABLE public.t (id int PRIMARY KEY, embedding real[], t int, note text);
INSERT INTO public.t VALUES (1, '{1,0}', 1, NULL), (2, '{0,1}', NULL, 'x');
SELECT chroma_mirror('public.t', collection => 'cs_t160', filter => 't IS NOT NULL');
UPDATE chroma_sync.mirror SET filter = 't IS NOT NULL';
});
is(q1(q{SELECT chroma_flush('public.t', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t160')}), '1',
	'0.4 sends row 1 (column t is not null)');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.t RENAME t TO u;
COMMIT;
});
is($ret, 0, 'the update and the column rename commit') or diag($err);
note('after the update: ' . q1(q{SELECT 'paused=' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}));

# the worker tries the paused mirror's bind once for this configuration
# the paused mirror's filter is not bound meanwhile: DDL ran since the update
sleep 3;
is(q1(q{SELECT (filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true',
	'the paused mirror\'s filter is not bound while renamed (t would mean the whole row)');

q1(q{ALTER TABLE public.t RENAME u TO t});
is(resume_04_filter($node, 'public.t'), 'bound', 'confirmed after the undo, the filter is bound');
sleep 1;
note('stored: ' . q1(q{SELECT 'filter=' || filter || ' paused=' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}));
is(q1(q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM public.t
	WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), t.*)}),
	'1', 'the bound filter selects row 1 (column t not null), as 0.4 did');
q1(q{INSERT INTO public.t VALUES (3, '{1,1}', 1, NULL)});
ok(wait_for('row 3 arrives', 20, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t160') WHERE id = '3'}) eq '1' }),
	'row 3 (column t not null) is sent');

finish($node, $log0);
