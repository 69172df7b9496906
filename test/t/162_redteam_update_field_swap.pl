# Red team: a 0.4 filter reading a field of a composite column ((f).pub) is bound by the
# worker to ANOTHER field when the composite type's attributes are swapped by renames
# between the update and the bind; the mirror is not paused and filters on the field that
# 0.4 did not read.
#
# The update records the filter's columns by attnum (column f) and check_04_text refuses
# a text that now binds a column renamed since (TAP 140: a swap of column names). It
# checks nothing below the column: the recorded type name of f (public.flags) is unchanged
# by ALTER TYPE ... RENAME ATTRIBUTE, so neither mirror_columns_resolve nor check_04_text
# sees the swap, and (f).pub binds to field 2 (the one 0.4 read as arch). A bound 0.5
# filter follows the same renames by field number (TAP 123).
#
# Steps: 0.4; type public.flags (pub bool, arch bool); table public.e (id, embedding,
# f public.flags); filter (f).pub (0.4 text); row 1 (true,false) sent by 0.4, row 2
# (false,true) not. In one transaction ALTER EXTENSION chroma_sync UPDATE and the swap
# of pub and arch (three ALTER TYPE ... RENAME ATTRIBUTE). What happens: the worker binds
# (f).pub to field 2: the stored filter selects row 2, the mirror is not paused. What
# should happen: the bound filter reads field 1 (now called arch), as 0.4 did, or the
# text is refused and the mirror paused (as for a swap of column names, TAP 140).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_field_swap', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t162');
q1(q{
CREATE TYPE public.flags AS (pub bool, arch bool);
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], f public.flags);
INSERT INTO public.e VALUES (1, '{1,0}', ROW(true, false)), (2, '{0,1}', ROW(false, true));
SELECT chroma_mirror('public.e', collection => 'cs_t162', filter => '(f).pub');
UPDATE chroma_sync.mirror SET filter = '(f).pub';
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t162')}), '1', '0.4 sends row 1 (field pub)');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TYPE public.flags RENAME ATTRIBUTE pub TO tmp;
ALTER TYPE public.flags RENAME ATTRIBUTE arch TO pub;
ALTER TYPE public.flags RENAME ATTRIBUTE tmp TO arch;
COMMIT;
});
is($ret, 0, 'the update and the swap commit') or diag($err);

ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' filter=' || filter || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') FROM chroma_sync.mirror}));

if (q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true')
{
	is(q1(q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM public.e
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), e.*)}),
		'1', 'the bound filter selects row 1: the field 0.4 read (now called arch)');
	q1(q{INSERT INTO public.e VALUES (3, '{1,1}', ROW(false, true))});
	ok(wait_for('the worker handles row 3', 20, sub { q1(q{SELECT count(*) FROM chroma_sync.queue}) eq '0' }), 'row 3 handled');
	sleep 1;
	is(q1(q{SELECT count(*) FROM chroma_get('cs_t162') WHERE id = '3'}), '0',
		'row 3 (0.4\'s field false, now called arch) is not sent');
}
else
{
	pass('the text is not bound to the other field');
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the DDL before the binding');
	pass('(not bound)');
}

finish($node, $log0);
