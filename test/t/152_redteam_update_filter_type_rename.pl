# Red team: a type rename of a column that a 0.4 filter (not yet bound) reads is not
# followed: the mirror pauses ("type ... changed") instead of binding its filter, though
# renaming a type changes nothing the filter reads (TAP 123 follows such renames for
# every other mirrored column, and for a bound filter's).
#
# mirror_columns_follow_type_renames (src/mirror_columns.c) updates a FILTER column's
# recorded type name only when the bound filter's Var has the same type (filter_var_type);
# a 0.4 filter has no bound tree yet, so the recorded name ("public.mood") is kept, and
# mirror_columns_resolve then reports the filter column's type as changed (MIRROR_FIX_UNDO).
#
# Steps: 0.4; mirror of public.e (m public.mood) with filter m = 'happy' (0.4 text); in one
# transaction ALTER EXTENSION chroma_sync UPDATE and ALTER TYPE public.mood RENAME TO
# feeling. What happens: the mirror pauses for the filter column's "changed" type, and a
# row inserted afterwards is not sent. What should happen: the rename is followed (same type
# OID), the worker binds the 0.4 filter and the mirror keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_filter_type_rename', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t152');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t152', filter => $$m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t152')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TYPE public.mood RENAME TO feeling;
COMMIT;
});
is($ret, 0, 'the update and the type rename commit') or diag($err);

# DDL ran before the binding: paused until confirmed; the type's new name is followed
is(confirm_04_filter($node, 'public.e'), 'bound', 'confirmed, the filter is bound');
is(q1(q{SELECT paused::text || ' ' || filter FROM chroma_sync.mirror}), q{false (m = 'happy'::public.feeling)},
	'a type rename does not pause the mirror once confirmed: the text reads the renamed type');
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t152') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
