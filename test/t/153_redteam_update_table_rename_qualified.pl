# Red team: a 0.4 filter that qualifies its columns with the table's name (e.m = 'happy')
# is refused, and the mirror paused, when the table is renamed between the update and the
# worker's bind; a table rename is otherwise followed by every mirror, and 0.4 had the
# filter working.
#
# The update records the filter's columns by attnum (text_columns_walker takes "e.m" as
# column m of the table named e), but keeps the text, which the worker later binds as
# SELECT ... FROM ONLY public.e2 WHERE (e.m = 'happy'): "missing FROM-clause entry for
# table e"; the failure pauses the mirror "the stored filter ... is refused (re-create the
# mirror)".
#
# Steps: 0.4; mirror of public.e with filter e.m = 'happy' (0.4 text); in one transaction
# ALTER EXTENSION chroma_sync UPDATE and ALTER TABLE public.e RENAME TO e2. What happens: the
# mirror is paused, row 3 is not sent. What should happen: the filter is bound to the
# table under its new name (the recorded columns match), the mirror keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_table_rename_qualified', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t153');
fresh_collection($node, 'cs_t153f');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t153', filter => $$e.m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$e.m = 'happy'$$;
CREATE TABLE public.f (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.f VALUES (1, '{1,0}', 'happy');
SELECT chroma_mirror('public.f', collection => 'cs_t153f', filter => $$public.f.m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$public.f.m = 'happy'$$ WHERE source = 'public.f'::regclass;
});
is(q1(q{SELECT chroma_flush('public.f', interval '60 seconds')}), 't', 'the 0.4 mirror of f flushes');
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t153')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.e RENAME TO e2;
ALTER TABLE public.f RENAME TO f2;
COMMIT;
});
is($ret, 0, 'the update and the table rename commit') or diag($err);

# DDL ran before the binding (the renames): each mirror pauses until the user confirms
is(confirm_04_filter($node, 'public.e2'), 'bound', 'confirmed, the filter of e2 is bound');
is(q1(q{SELECT paused::text FROM chroma_sync.mirror WHERE source = 'public.e2'::regclass}), 'false',
	'the mirror of e2 runs');
is(q1(q{SELECT (filter_node IS NOT NULL)::text || ' ' || filter FROM chroma_sync.mirror WHERE source = 'public.e2'::regclass}),
	q{true (m = 'happy'::public.mood)}, 'the text is bound to column m of the renamed table');
# a schema-qualified column reference cannot name the table under its old name: paused, with why
like(confirm_04_filter($node, 'public.f2'), qr/^paused: the stored filter .* is refused \(re-create the mirror\)/,
	'a filter qualifying its columns with schema and table pauses the mirror, saying to re-create it');
q1(q{INSERT INTO public.e2 VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t153') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
