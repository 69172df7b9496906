# Red team: a 0.4 filter is bound by the worker while its mirror is paused because the
# type of the filter's column changed, to the column's NEW type; following the pause's
# advice (undo the change, chroma_resume) then leaves a mirror whose stored filter no
# longer fits its table: paused for good ("re-create the mirror").
#
# ALTER TABLE e ALTER m TYPE text pauses the mirror of e ("the type of a column named by
# the mirror's filter changed: m was public.mood, is now text; undo the change and run
# chroma_resume()"). The worker binds a paused mirror's 0.4 text once per configuration
# (sync.c paused_filter_bindable): mirror_columns_filter_intact checks only that no
# recorded filter column was dropped, and check_04_text only that the bound columns keep
# their recorded names, not their recorded types. So m = 'happy' is bound as text = text
# and stored. After the undo (ALTER m TYPE public.mood) the stored tree reads m as text:
# check_bound refuses it and the mirror pauses "the stored filter ... is refused
# (re-create the mirror)".
#
# Steps: 0.4; mirror of public.e (m public.mood) with filter m = 'happy' (0.4 text), in
# sync; ALTER EXTENSION chroma_sync UPDATE; ALTER TABLE e ALTER m TYPE text (the mirror
# pauses); the worker binds; ALTER TABLE e ALTER m TYPE public.mood USING m::public.mood;
# chroma_resume. What happens: the mirror is paused again, its filter refused, row 3 is
# not sent. What should happen: a 0.4 text is bound only to columns of the recorded types
# (the paused mirror is left unbound), so after the undo it binds to m as public.mood and
# the mirror syncs.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_paused_type_change_bind', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t161');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t161', filter => $$m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t161')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.e ALTER m TYPE text;
COMMIT;
});
is($ret, 0, 'the update and the type change commit') or diag($err);
note('after the change: ' . q1(q{SELECT 'paused=' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'true', 'the type change pauses the mirror');

sleep 3;
is(q1(q{SELECT (filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true',
	'the paused mirror\'s filter is not bound to the changed type');

q1(q{ALTER TABLE public.e ALTER m TYPE public.mood USING m::public.mood});
is(resume_04_filter($node, 'public.e'), 'bound', 'confirmed, the filter is bound');
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(m = 'happy'::public.mood)}, 'to the enum, as 0.4 read it');
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 20, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t161') WHERE id = '3'}) eq '1' }),
	'the mirror syncs again (row 3 is sent)');
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' filter=' || filter || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') || ' / ' || coalesce(last_error, '') FROM chroma_sync.mirror}));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'false', 'the mirror is not paused');

finish($node, $log0);
