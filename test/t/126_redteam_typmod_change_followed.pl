# Red team: "DDL that changes what would be sent (... a type or typmod changed: char(4) ->
# char(6) pads every id) pauses the mirror" and resuming needs chroma_resync (TAP 048).
# mirror_columns_follow_type_renames takes a recorded type name that differs from the
# catalog's for a rename when the column's type OID is unchanged — it never compares the
# typmod. on_ddl_end runs chroma_sync.filters_renamed() after every ALTER TABLE as soon
# as any mirror of the database has a filter, so ALTER TABLE ... ALTER COLUMN code TYPE
# char(6) has its new type name recorded as a "rename" in the same statement: the pause's
# reason is gone, and after chroma_resume (accepted in either case; without a filter in the
# database the worker pauses the mirror again and sends nothing) every changed row reaches
# Chroma under a new, padded id next to its old one.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_typmod_change_followed');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t126');
q1(q{
CREATE TABLE public.keys4 (code char(4) PRIMARY KEY, embedding real[], doc text);
INSERT INTO public.keys4 SELECT 'k' || lpad(g::text, 3, '0'), ARRAY[g, 1, 2]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
SELECT chroma_mirror('public.keys4', collection => 'cs_t126', document_column => 'doc',
	filter => $$doc <> 'skip'$$);
});
is(q1(q{SELECT chroma_flush('public.keys4', interval '60 seconds')}), 't', 'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t126')}), '10', 'it sends the 10 rows');

q1(q{ALTER TABLE public.keys4 ALTER COLUMN code TYPE char(6)});
note('recorded after ALTER COLUMN TYPE: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));
q1(q{UPDATE public.keys4 SET doc = 'after the typmod change' WHERE code <= 'k003'});
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resume('public.keys4')});
note("chroma_resume without chroma_resync: ret=$ret err=$err");
$node->psql('postgres', q{SELECT chroma_flush('public.keys4', interval '30 seconds')}, timeout => 60);
is(q1(q{SELECT count(*) || '|' || count(*) FILTER (WHERE length(id) = 6) FROM chroma_get('cs_t126')}),
	'10|0', 'no padded duplicate id reached Chroma (as without a filter in the database)');
like(q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status}), qr/^paused .*character\(4\).*character\(6\)/,
	'the mirror is paused, naming both types');
finish($node, $log0);
