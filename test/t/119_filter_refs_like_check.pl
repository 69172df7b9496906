# What a filter refers to is recorded like a CHECK constraint's references (TAP 049, 105,
# 114): a differential test. For each filter, a table gets the same expression as a CHECK
# constraint and as its mirror's filter; every object PostgreSQL records for the constraint
# (but the table and its own columns) must be a dependency of the mirror's trigger too.
# The filters cover the node kinds find_expr_references looks at: ROW(...)::composite, a
# composite's field, COLLATE, a row comparison (operators and their families), arrays and
# subscripts, reg* constants, domains, coercions, CASE, COALESCE, NULLIF, DISTINCT, ANY.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('filter_refs_like_check');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{
CREATE TYPE public.pair AS (a int, b text);
CREATE DOMAIN public.short_text AS text CHECK (length(VALUE) < 100);
CREATE COLLATION public.ci (provider = icu, locale = 'und');
CREATE TEXT SEARCH CONFIGURATION public.myconf (COPY = pg_catalog.simple);
CREATE FUNCTION public.twice(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
});

my @filters = (
	q{ROW(id, tag)::public.pair IS NOT NULL},
	q{(p).a > 0},
	q{tag COLLATE public.ci = 'X'},
	q{tag COLLATE "C" > 'a'},
	q{(id, tag) < (5, 'm')},
	q{ARRAY[id] <@ ARRAY[1, 2, 3]},
	q{embedding[1] > 0},
	q{to_tsvector('public.myconf'::regconfig, tag) @@ 'x'::tsquery},
	q{'public.pair'::regtype IS NOT NULL AND 'public.twice(integer)'::regprocedure IS NOT NULL},
	q{tag::public.short_text IS NOT NULL},
	q{tag::varchar(5) = 'a'},
	q{public.twice(id)::numeric::float8 > 1.5},
	q{CASE WHEN id > 1 THEN lower(tag) ELSE 'x' END = 'y'},
	q{COALESCE(tag, '') <> '' AND NULLIF(id, 3) IS NOT NULL AND id IS DISTINCT FROM 4},
	q{id = ANY ('{1,2}'::int[]) AND GREATEST(id, 2) > 1},
);

my $i = 0;
for my $f (@filters)
{
	$i++;
	my $coll = "cs_t119_$i";
	fresh_collection($node, $coll);
	my ($ret, $out, $err) = $node->psql('postgres', qq{
CREATE TABLE public.t$i (id int PRIMARY KEY, embedding real[], tag text, p public.pair, CHECK ($f));
SELECT chroma_mirror('public.t$i', collection => '$coll', filter => \$f\$$f\$f\$);
});
	is($ret, 0, "filter $i is accepted: $f") or diag($err);
	# what the constraint refers to and the trigger does not
	my $missing = q1(qq{
WITH c AS (
	SELECT d.refclassid, d.refobjid, d.refobjsubid FROM pg_depend d
		JOIN pg_constraint k ON d.classid = 'pg_constraint'::regclass AND d.objid = k.oid
	WHERE k.conrelid = 'public.t$i'::regclass AND k.contype = 'c'
		AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = 'public.t$i'::regclass)),
t AS (
	SELECT d.refclassid, d.refobjid, d.refobjsubid FROM pg_depend d
		JOIN pg_trigger g ON d.classid = 'pg_trigger'::regclass AND d.objid = g.oid
	WHERE g.tgrelid = 'public.t$i'::regclass AND g.tgname ~ '^chroma_sync_[0-9]+\$')
SELECT coalesce(string_agg(pg_describe_object(refclassid, refobjid, refobjsubid), ', '), '')
FROM (SELECT * FROM c EXCEPT SELECT * FROM t) x});
	is($missing, '', "filter $i: the trigger depends on everything the CHECK constraint does");
	my $refs = q1(qq{SELECT array_length(filter_refs, 1) FROM chroma_sync.mirror WHERE source = 'public.t$i'::regclass});
	ok($refs ne '' && $refs > 0, "filter $i: its references are recorded by name ($refs)");
}

finish($node, $log0);
