# Red team: "what a filter refers to is tracked like a CHECK constraint's" — a row
# comparison (ROW(a, b) < ROW(1, 2), a RowCompareExpr) is executed through the btree
# operator families it was resolved with (rcexpr->opfamilies: the executor takes each
# column's comparison support function from them), and find_expr_references records those
# families for a CHECK constraint. The filter's walker records the operators only: DROP
# OPERATOR FAMILY of the family the filter's row comparison was bound with succeeds where
# a CHECK constraint refuses it, and every evaluation then fails with an internal error
# (XX000 "operator ... is not a member of opfamily ..."): the mirror stops.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_rowcompare_opfamily');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t125');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.lt(a int, b int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$SELECT a < b$$;
CREATE OPERATOR app.<<< (LEFTARG = int, RIGHTARG = int, FUNCTION = app.lt);
CREATE OPERATOR FAMILY app.fam USING btree;
ALTER OPERATOR FAMILY app.fam USING btree ADD
	OPERATOR 1 app.<<< (int, int), FUNCTION 1 (int, int) pg_catalog.btint4cmp(int, int);
CREATE TABLE public.rc (id int PRIMARY KEY, embedding real[], n int);
INSERT INTO public.rc SELECT g, ARRAY[g, 1]::real[], g FROM generate_series(1, 5) g;
SELECT chroma_mirror('public.rc', collection => 'cs_t125', filter => $$ROW(id, n) OPERATOR(app.<<<) ROW(3, 3)$$);
-- what PostgreSQL does for the same expression in a CHECK constraint
CREATE TABLE public.ref (id int, n int, CHECK (ROW(id, n) OPERATOR(app.<<<) ROW(100, 100)));
});
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.rc', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t125')}), '1,2', 'it sends rows 1 and 2');

my ($ret, $out, $err) = $node->psql('postgres', q{DROP OPERATOR FAMILY app.fam USING btree});
like($err, qr/depend/, 'PostgreSQL refuses to drop the operator family a CHECK constraint\'s row comparison uses');
q1(q{DROP TABLE public.ref});

($ret, $out, $err) = $node->psql('postgres', q{DROP OPERATOR FAMILY app.fam USING btree});
note("DROP OPERATOR FAMILY: ret=$ret err=$err");
isnt($ret, 0, 'dropping the operator family the filter\'s row comparison uses is refused (the trigger depends on it)');

($ret, $out, $err) = $node->psql('postgres',
	q{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.rc WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), rc.*)});
note("match: ret=$ret out=$out err=$err");
unlike($err, qr/is not a member of opfamily|cache lookup failed/, 'the filter never fails with an internal error');

finish($node, $log0);
