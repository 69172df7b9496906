# Red team: a filter "refuses anything but a boolean expression over the row with immutable
# functions only (no now(), current_setting() or other stable or volatile function)" — the
# check (contain_mutable_functions) runs on the analyzed tree, before the planner inserts
# the functions' DEFAULT arguments. Since the bound tree goes through expression_planner
# before it is evaluated (TAP 122's fix), a default expression is evaluated with every
# row: app.f(tag) with f(t text, mode text DEFAULT current_setting('app.mode', true)) is
# accepted where app.f(tag, current_setting('app.mode', true)) is refused, and the row's
# place in the collection then depends on the session's settings. PostgreSQL's own
# CheckMutability (index expressions) plans the expression first for this reason.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_default_mutable');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t127');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.f(t text, mode text DEFAULT current_setting('app.mode', true)) RETURNS boolean
	LANGUAGE sql IMMUTABLE AS $$SELECT t IS NOT NULL AND mode IS DISTINCT FROM 'off'$$;
CREATE TABLE public.t127 (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.t127 VALUES (1, '{1,0}', 'a'), (2, '{0,1}', 'b');
});
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_mirror('public.t127', collection => 'cs_t127', filter => $$app.f(tag, current_setting('app.mode', true))$$)});
note("explicit current_setting: ret=$ret err=$err");
isnt($ret, 0, 'a filter passing current_setting() explicitly is refused');

($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_mirror('public.t127', collection => 'cs_t127', filter => $$app.f(tag)$$)});
note("current_setting() as a DEFAULT argument: ret=$ret err=$err");
isnt($ret, 0, 'a filter whose function has a DEFAULT current_setting() argument is refused too');

if ($ret == 0)
{
	my $m = q{SELECT count(*) FROM public.t127 t WHERE chroma_sync_filter.match(
		(SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'public.t127'::regclass), t.*)};
	my $on = q1($m);
	my $off = q1("SET app.mode = 'off'; $m");
	note("rows matching: $on; with SET app.mode = off: $off");
	is($off, $on, "the rows the stored filter matches do not depend on the session's settings");
}
finish($node, $log0);
