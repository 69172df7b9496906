# Red team: the update records a 0.4 filter's columns with a raw-parse-tree walker
# (mirror_columns.c text_columns_walker) that misreads two ColumnRef forms the parser
# accepts; the worker then refuses (and pauses) mirrors that 0.4 synced fine.
#
# text_columns_walker takes the column of a ColumnRef from field 0, 1 (rel.col) or 2
# (nsp.rel.col). It does not know
#  - catalog.nsp.rel.col (the parser accepts the current database's name first): the walker
#    looks up "postgres" as the column and records nothing;
#  - rel.* (A_Star), which ROW(rel.*) expands into every column: the walker records nothing.
# check_04_text then compares the bound columns ({d}; all columns) with the recorded ones
# ({}) and refuses: the mirror is paused "the stored filter ... is refused (re-create the
# mirror)", though the text binds to exactly the columns it named under 0.4.
#
# Steps: extension 0.4; mirrors of public.dt with filter postgres.public.dt.d >= '2024-03-04'
# and of public.dr with filter ROW(dr.*) IS NOT NULL, stored as 0.4 text; both sync;
# ALTER EXTENSION chroma_sync UPDATE. What happens: the worker refuses both filters and
# pauses the mirrors. What should happen: the update records the columns the text names
# (d; every column of dr) and the worker binds both filters; the mirrors keep syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_record_colref_forms', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t150a');
fresh_collection($node, 'cs_t150b');
q1(q{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], d date);
INSERT INTO public.dt VALUES (1, '{1,0}', '2024-03-10'), (2, '{0,1}', '2024-01-01');
CREATE TABLE public.dr (id int PRIMARY KEY, embedding real[], doc text);
INSERT INTO public.dr VALUES (1, '{1,0}', 'one'), (2, '{0,1}', NULL);
SELECT chroma_mirror('public.dt', collection => 'cs_t150a', filter => $$postgres.public.dt.d >= '2024-03-04'$$);
SELECT chroma_mirror('public.dr', collection => 'cs_t150b', filter => $$ROW(dr.*) IS NOT NULL$$);
-- as 0.4 stored them: the text as written
UPDATE chroma_sync.mirror SET filter = $$postgres.public.dt.d >= '2024-03-04'$$ WHERE collection = 'cs_t150a';
UPDATE chroma_sync.mirror SET filter = $$ROW(dr.*) IS NOT NULL$$ WHERE collection = 'cs_t150b';
});
is(q1(q{SELECT chroma_flush('public.dt', interval '60 seconds') AND chroma_flush('public.dr', interval '60 seconds')}),
	't', 'the 0.4 mirrors flush');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t150a')}), '1', '0.4: dt sends row 1');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t150b')}), '1', '0.4: dr sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'the update commits') or diag($err);
note("the update said: $err");

ok(wait_for('the worker binds or pauses both', 60, sub {
	q1(q{SELECT bool_and(filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirrors');
sleep 2;
note('stored: ' . q1(q{SELECT string_agg(collection || ': bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text
	|| ' ' || coalesce(paused_reason, '') || ' / ' || coalesce(last_error, ''), E'\n') FROM chroma_sync.mirror}));
for my $c ('cs_t150a', 'cs_t150b')
{
	is(q1(qq{SELECT (filter_node IS NOT NULL AND NOT paused)::text FROM chroma_sync.mirror WHERE collection = '$c'}),
		'true', "$c: the 0.4 filter is bound and the mirror not paused");
}
q1(q{INSERT INTO public.dt VALUES (3, '{1,1}', '2024-05-01'); INSERT INTO public.dr VALUES (3, '{1,1}', 'three')});
ok(wait_for('rows 3 arrive', 30, sub {
	q1(q{SELECT count(*) FROM chroma_get('cs_t150a') WHERE id = '3'}) eq '1'
	  && q1(q{SELECT count(*) FROM chroma_get('cs_t150b') WHERE id = '3'}) eq '1' }),
	'the mirrors keep syncing after the update');

finish($node, $log0);
