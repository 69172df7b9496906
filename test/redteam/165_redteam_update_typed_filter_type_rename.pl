# Red team: on a typed table (CREATE TABLE ... OF type), a type rename of a column that a
# 0.4 filter (not yet bound) reads pauses the mirror; TAP 152's fix follows it only on
# tables with no typed ancestor, though README says a renamed type of a mirrored column is
# followed, "typed tables included".
#
# mirror_columns_follow_type_renames skips a 0.4 filter's column of a table with a typed
# ancestor ("if (rowtypes_only || typed || ...) continue"), even when the recorded type
# name no longer names any type (named_type() is InvalidOid: a rename, not the typmod
# change of ALTER TYPE ... ALTER ATTRIBUTE ... CASCADE that the check is there for);
# mirror_columns_resolve then pauses the mirror: the type "changed: was public.mood, is
# now public.feeling".
#
# Steps: 0.4; type public.row_t (id int, embedding real[], m public.mood); table public.e
# OF public.row_t (id primary key); filter m = 'happy' (0.4 text), row 1 sent by 0.4. In
# one transaction ALTER EXTENSION chroma_sync UPDATE and ALTER TYPE public.mood RENAME TO
# feeling. What happens: the mirror pauses; row 3 is not sent. What should happen: the
# rename is followed (same type OID), the worker binds the filter, the mirror keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_typed_filter_type_rename', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t165');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TYPE public.row_t AS (id int, embedding real[], m public.mood);
CREATE TABLE public.e OF public.row_t (PRIMARY KEY (id));
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t165', filter => $$m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t165')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TYPE public.mood RENAME TO feeling;
COMMIT;
});
is($ret, 0, 'the update and the type rename commit') or diag($err);

ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') || ' types=' || column_type_names::text FROM chroma_sync.mirror}));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'false', 'a type rename does not pause the mirror');
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t165') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
