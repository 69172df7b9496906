# Red team: TAP 153's fix (bind a 0.4 filter under the table name the update recorded)
# reads that name from the configuration the worker loaded, not from the catalog: a
# configuration loaded before ALTER EXTENSION UPDATE has no filter_relname, so a filter
# qualified with the table's name (e.m = 'happy') is refused and the mirror paused for
# good when the update and a table rename commit while the worker is busy with an earlier
# mirror of the same pass (TAP 140's window).
#
# mirror_filter_derive takes the alias from m->filter_relname (NULL in a MirrorConfig
# loaded from the 0.4 catalog: load_where reads to_jsonb(m)->>'filter_relname'), while
# check_04_text reads the recorded columns again (mirror_load) for exactly this reason
# (TAP 140). Without the alias the text binds as SELECT ... FROM ONLY public.e2 WHERE
# (e.m = 'happy'): "missing FROM-clause entry for table e"; the mirror is paused "the
# stored filter ... is refused (re-create the mirror)".
#
# Steps: 0.4; mirror A (filter public.slow(id), which sleeps) and mirror B of public.e
# (filter e.m = 'happy', 0.4 text); rows queued for A keep the worker in A's step while
# one transaction runs ALTER EXTENSION chroma_sync UPDATE and ALTER TABLE public.e RENAME
# TO e2. What happens: B is paused, its filter refused; row 3 is not sent. What should
# happen: B's filter is bound under the recorded name e, as when the worker loads the
# mirror after the update (TAP 153), and B keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_stale_relname', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t166a');
fresh_collection($node, 'cs_t166b');
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
SELECT chroma_mirror('public.a', collection => 'cs_t166a', filter => 'public.slow(id)');
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t166b', filter => $$e.m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = 'public.slow(id)' WHERE source = 'public.a'::regclass;
UPDATE chroma_sync.mirror SET filter = $$e.m = 'happy'$$ WHERE source = 'public.e'::regclass;
});
is(q1(q{SELECT string_agg(mirror_id::text || source::text, ',' ORDER BY mirror_id) FROM chroma_sync.mirror}),
	'1a,2e', 'mirror A comes before mirror B in the worker\'s loop');
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror of e flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t166b')}), '1', '0.4 sends row 1');

q1(q{UPDATE public.flag SET slow = true;
INSERT INTO public.a SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 12) g});
ok(wait_for('the worker in A\'s filter', 30, sub {
	q1(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND wait_event = 'PgSleep'}) eq '1' }),
	'the worker is busy with mirror A');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.e RENAME TO e2;
COMMIT;
}, timeout => 120);
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE and the table rename commit') or diag($err);
q1(q{UPDATE public.flag SET slow = false});

# DDL ran before the binding: confirmed, the text is bound under the name the update
# recorded, though the worker's configuration was loaded before the update committed
is(confirm_04_filter($node, 'public.e2'), 'bound', 'confirmed, the filter of mirror B is bound');
is(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.e2'::regclass}),
	q{(m = 'happy'::public.mood)}, 'to column m of the renamed table');
q1(q{INSERT INTO public.e2 VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t166b') WHERE id = '3'}) eq '1' }),
	'mirror B keeps syncing');

finish($node, $log0);
