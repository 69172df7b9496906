# Red team: "chroma_mirror ... refuses anything but a boolean expression over the row ...
# the analyzed tree is stored and evaluated on the row" — the analyzed tree is not a
# planned one: a COLLATE clause stays a CollateExpr node, which only the planner removes
# (eval_const_expressions) and which the executor does not know. chroma_mirror accepts
# `tag < 'm' COLLATE "C"` (and even records the collation as a dependency), and then every
# evaluation fails with an internal error (XX000 "unrecognized node type"): the worker puts
# the mirror in error and nothing is sent; chroma_sync_filter.match fails the same way.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_collate');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t121');
q1(q{
CREATE TABLE public.co (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.co VALUES (1, '{1,0}', 'apple'), (2, '{0,1}', 'Zebra'), (3, '{1,1}', 'zoo');
});
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_mirror('public.co', collection => 'cs_t121', filter => $$tag < 'm' COLLATE "C"$$)});
note("chroma_mirror: ret=$ret err=$err");
is($ret, 0, 'chroma_mirror accepts a filter with a COLLATE clause');
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));

($ret, $out, $err) = $node->psql('postgres',
	q{SELECT string_agg(id::text, ',' ORDER BY id) FROM public.co WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), co.*)});
note("match: ret=$ret out=$out err=$err");
unlike($err, qr/unrecognized node type/, 'chroma_sync_filter.match evaluates the filter (no internal error)');
is($out, '1,2', 'the filter selects apple and Zebra (in byte order, Z sorts before m)');

$node->safe_psql('postgres', q{SELECT chroma_flush('public.co', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
note("status: $state");
unlike($state, qr/unrecognized node type/, 'the worker evaluates the filter (no internal error)');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t121')}), '1,2',
	'the worker sends the rows the filter selects');

finish($node, $log0);
