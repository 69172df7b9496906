# Red team: a 0.4 filter calling a schema-qualified function (app.is_on(pub)) is bound by
# the worker to ANOTHER function when two functions swap names by renames between the
# update and the bind; the mirror is not paused. A bound 0.5 filter follows such renames
# (it calls the function by OID: TAP 049), and a swap of column names is refused for a
# 0.4 text (TAP 140); only columns are recorded by the update, so a swap of any other
# name the text uses (functions, operators, enum labels via ALTER TYPE ... RENAME VALUE)
# goes unnoticed.
#
# Steps: 0.4; functions app.is_on(bool) (returns its argument) and app.is_off(bool)
# (returns NOT its argument); mirror of public.e with filter app.is_on(pub) (0.4 text);
# row 1 (pub true) sent by 0.4. In one transaction ALTER EXTENSION chroma_sync UPDATE and
# the swap of the two functions' names (three ALTER FUNCTION ... RENAME). What happens:
# the worker binds app.is_on(pub) to the function 0.4 knew as is_off: the stored filter
# selects row 2, the mirror is not paused. What should happen: the bound filter calls the
# function 0.4 called (now named is_off), or the text is refused and the mirror paused.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_function_swap', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t168');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.is_on(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE FUNCTION app.is_off(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT NOT b';
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.e VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.e', collection => 'cs_t168', filter => 'app.is_on(pub)');
UPDATE chroma_sync.mirror SET filter = 'app.is_on(pub)';
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t168')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER FUNCTION app.is_on(bool) RENAME TO tmp;
ALTER FUNCTION app.is_off(bool) RENAME TO is_on;
ALTER FUNCTION app.tmp(bool) RENAME TO is_off;
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
		'1', 'the bound filter selects row 1: it calls the function 0.4 called (now named is_off)');
	q1(q{INSERT INTO public.e VALUES (3, '{1,1}', false)});
	ok(wait_for('the worker handles row 3', 20, sub { q1(q{SELECT count(*) FROM chroma_sync.queue}) eq '0' }), 'row 3 handled');
	sleep 1;
	is(q1(q{SELECT count(*) FROM chroma_get('cs_t168') WHERE id = '3'}), '0', 'row 3 (pub false) is not sent');
}
else
{
	pass('the text is not bound to the other function');
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}),
		qr/^DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/,
		'the mirror is paused for the DDL before the binding');
	pass('(not bound)');
}

finish($node, $log0);
