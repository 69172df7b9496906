# Red team: "renaming a function, type, operator, collation or schema rewrites every bound
# filter's text and references in the same transaction" — by the event trigger
# chroma_sync_ddl_end, which is created ENABLE (origin): it does not fire while
# session_replication_role is replica, the mode in which replication tools apply DDL on a
# subscriber. A rename done so is not followed, silently: the text and filter_refs keep the
# old name, and a dump's chroma_adopt binds whatever takes that name (as in TAP 096).
# The row triggers are required to be ENABLE ALWAYS for the same reason.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_replica_role_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t109');
q1(q{
CREATE FUNCTION public.keep(n int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT n > 10';
CREATE TABLE public.rr (id int PRIMARY KEY, embedding real[]);
INSERT INTO public.rr SELECT g, ARRAY[g, 1]::real[] FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.rr', collection => 'cs_t109', filter => 'public.keep(id)');
});
is(q1(q{SELECT evtenabled FROM pg_event_trigger WHERE evtname = 'chroma_sync_ddl_end'}), 'A',
	'chroma_sync_ddl_end is ENABLE ALWAYS');

q1(q{
SET session_replication_role = replica;
ALTER FUNCTION public.keep(int) RENAME TO keep_v1;
});
note('stored after the rename: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));
like(q1(q{SELECT filter FROM chroma_sync.mirror}), qr/keep_v1/,
	'a rename applied with session_replication_role = replica is followed by the stored text');
like(q1(q{SELECT filter_refs::text FROM chroma_sync.mirror}), qr/keep_v1/, 'and by the recorded references');

finish($node, $log0);
