# Red team: "the analyzed tree is stored ... chroma_sync_filter.match evaluates that tree"
# — an analyzed tree is not yet executable: PostgreSQL inserts a function's DEFAULT
# arguments and puts named arguments in order only when it plans an expression
# (expand_function_arguments). The stored filter tree never goes through that:
#  - `app.fsql(tag)`, fsql(t text, n int DEFAULT 3) in SQL: "no value found for parameter 2";
#  - `app.fnamed(b => 1, a => id)`: "unrecognized node type: 118" (NamedArgExpr, XX000);
#  - `app.fpl(tag)`, fpl(t text, suffix text DEFAULT 'xyz') in PL/pgSQL: the function reads
#    its second argument past the end of the call's argument array: the worker dies of
#    SIGSEGV and the postmaster restarts every backend — again each time the worker comes
#    back. Any table owner can write such a filter.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_default_args');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.fsql(t text, n int DEFAULT 3) RETURNS boolean LANGUAGE sql IMMUTABLE
	AS $$SELECT length(t) >= n$$;
CREATE FUNCTION app.fnamed(a int, b int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$SELECT a > b$$;
CREATE FUNCTION app.fpl(t text, suffix text DEFAULT 'xyz') RETURNS boolean LANGUAGE plpgsql IMMUTABLE
	AS $$BEGIN RETURN length(t || suffix) > 5; END$$;
});
my %filter = (t1 => 'app.fsql(tag)', t2 => 'app.fnamed(b => 1, a => id)', t3 => 'app.fpl(tag)');
for my $t (sort keys %filter)
{
	fresh_collection($node, "cs_t122_$t");
	q1(qq{CREATE TABLE public.$t (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.$t VALUES (1, '{1,0}', 'ab'), (2, '{0,1}', 'abcd');});
}
# the SQL function and the named arguments first (errors), the PL/pgSQL one last (crash)
for my $t (qw(t1 t2))
{
	q1(qq{SELECT chroma_mirror('public.$t', collection => 'cs_t122_$t', filter => \$\$$filter{$t}\$\$)});
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.$t
			WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'public.$t'::regclass), $t.*)});
	note("match on $t ($filter{$t}): ret=$ret out=$out err=$err");
	is($out, '2', "the filter $filter{$t} evaluates (row 2 only)");
}
q1(q{SELECT chroma_mirror('public.t3', collection => 'cs_t122_t3', filter => $$app.fpl(tag)$$)});
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_flush(NULL, interval '30 seconds')}, timeout => 60);
note("flush: ret=$ret out=$out err=$err");
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT string_agg(source::text || ' ' || state || ' ' || coalesce(last_error, ''), ' | ' ORDER BY 1) FROM chroma_sync.status});
note("status: ret=$ret out=$out err=$err");

assert_no_crash($node, $log0, 'the filter app.fpl(tag) does not crash the server');
is(q1(q{SELECT coalesce(string_agg(id, ','), '') FROM chroma_get('cs_t122_t3')}), '2',
	'the worker sends row 2 for app.fpl(tag)') if $node->psql('postgres', 'SELECT 1') == 0;
$node->stop('fast', fail_ok => 1);
done_testing();
