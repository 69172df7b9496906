# Red team: a 0.4 filter that qualifies its columns with the table's schema and name
# (public.e.m = 'happy') is refused, and the mirror paused for good, when the table is
# renamed between the update and the worker's bind; TAP 153's fix covers only rel.col.
#
# The update records the filter's columns (text_columns_walker takes nsp.rel.col) and the
# table's name (filter_relname). When the table was renamed since, mirror_filter_derive
# binds the text with that name as the table's alias. An alias hides the relation from a
# schema-qualified reference (PostgreSQL matches nsp.rel only against an unaliased range
# table entry), and public.e no longer exists: "missing FROM-clause entry for table e";
# the failure pauses the mirror "the stored filter ... is refused (re-create the mirror)".
#
# Steps: 0.4; mirror of public.e with filter public.e.m = 'happy' (0.4 text); in one
# transaction ALTER EXTENSION chroma_sync UPDATE and ALTER TABLE public.e RENAME TO e2.
# What happens: the mirror is paused, row 3 is not sent. What should happen: the filter is
# bound to the table under its new name (the recorded columns match), as for e.m (TAP 153),
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

my $node = new_node('redteam_update_table_rename_schema_qualified', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t163');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t163', filter => $$public.e.m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$public.e.m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t163')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.e RENAME TO e2;
COMMIT;
});
is($ret, 0, 'the update and the table rename commit') or diag($err);

# DDL ran before the binding: confirmed, the text is read as its names read now, where
# public.e names no table: refused, the mirror paused saying to re-create it
like(confirm_04_filter($node, 'public.e2'),
	qr/^paused: the stored filter "public\.e\.m = 'happy'" is refused \(re-create the mirror\)/,
	'a text naming the table by its old qualified name cannot be bound: re-create the mirror');
is(q1(q{SELECT (filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true', 'nothing is bound');

finish($node, $log0);
