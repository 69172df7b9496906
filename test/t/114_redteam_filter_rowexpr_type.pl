# Red team: "what a filter refers to is tracked like a CHECK constraint's" — PostgreSQL's
# find_expr_references also records the type of a ROW(...) constructor cast to a composite
# (RowExpr.row_typeid), which appears in the tree nowhere else. The filter's walker has no
# case for RowExpr: `ROW(id, tag)::public.pair IS NOT NULL` records no reference at all
# (filter_refs = {}), and DROP TYPE public.pair succeeds where a CHECK constraint refuses
# it. The stored tree then names a type that is gone: every later ALTER TABLE, ALTER TYPE,
# ALTER FUNCTION ... of the database, on any object, fails with "type with OID ... does not
# exist" (the DDL event trigger deparses every filter again), until the mirror is dropped.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_rowexpr_type');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t114');
q1(q{
CREATE TYPE public.pair AS (a int, b text);
CREATE TABLE public.r (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.r VALUES (1, '{1,0}', 'x'), (2, '{0,1}', 'y');
CREATE TABLE public.unrelated (id int);
SELECT chroma_mirror('public.r', collection => 'cs_t114', filter => $$ROW(id, tag)::public.pair IS NOT NULL$$);
-- what PostgreSQL does for the same expression in a CHECK constraint
CREATE TABLE public.ref (id int, tag text, CHECK (ROW(id, tag)::public.pair IS NOT NULL));
});
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));
is($node->safe_psql('postgres', q{SELECT chroma_flush(NULL, interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{DROP TYPE public.pair});
like($err, qr/depend/, 'PostgreSQL refuses to drop a composite type a CHECK constraint casts a ROW to');
q1(q{DROP TABLE public.ref});

($ret, $out, $err) = $node->psql('postgres', q{DROP TYPE public.pair});
note("DROP TYPE public.pair: ret=$ret err=$err");
isnt($ret, 0, 'dropping the composite type the filter casts ROW(...) to is refused (the trigger depends on it)');

($ret, $out, $err) = $node->psql('postgres', q{ALTER TABLE public.unrelated RENAME TO unrelated2});
note("ALTER TABLE on an unrelated table: ret=$ret err=$err");
is($ret, 0, 'DDL on an unrelated table still works');
unlike($err, qr/does not exist|cache lookup failed/, 'no error about a type that is gone');

finish($node, $log0);
