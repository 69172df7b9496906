# Red team: a 0.4 filter (not yet bound) reading a column whose type is another table's
# row type pauses its mirror when that other table is renamed between the update and the
# worker's bind (the row type is renamed with it); a renamed type of a mirrored column is
# otherwise followed (TAP 130 for bound filters and other columns, TAP 152 for a 0.4
# filter's column of an enum type).
#
# ALTER TABLE public.other RENAME TO other2 runs chroma_sync.filters_renamed(false) (only
# row types are followed there). mirror_columns_follow_type_renames skips a 0.4 filter's
# column whenever rowtypes_only is set ("if (rowtypes_only || typed || ...) continue"), so
# the recorded type name stays public.other; mirror_columns_resolve then finds the
# filter column's type "changed: was public.other, is now public.other2" and the mirror
# pauses (undo the change...), though the column's type is the same type (same OID).
#
# Steps: 0.4; table public.other (pub bool); table public.e (id, embedding,
# f public.other); filter (f).pub (0.4 text), row 1 sent by 0.4. In one transaction
# ALTER EXTENSION chroma_sync UPDATE and ALTER TABLE public.other RENAME TO other2. What
# happens: the mirror pauses for the filter column's "changed" type; row 3 is not sent.
# What should happen: the rename is followed (same type OID), the worker binds the filter
# and the mirror keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_filter_rowtype_rename', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t164');
q1(q{
CREATE TABLE public.other (pub bool, note text);
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], f public.other);
INSERT INTO public.e VALUES (1, '{1,0}', ROW(true, 'a')), (2, '{0,1}', ROW(false, 'b'));
SELECT chroma_mirror('public.e', collection => 'cs_t164', filter => '(f).pub');
UPDATE chroma_sync.mirror SET filter = '(f).pub';
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t164')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.other RENAME TO other2;
COMMIT;
});
is($ret, 0, 'the update and the rename of the other table commit') or diag($err);

ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') || ' types=' || column_type_names::text FROM chroma_sync.mirror}));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'false', 'renaming the column type\'s table does not pause the mirror');
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', ROW(true, 'c'))});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t164') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
