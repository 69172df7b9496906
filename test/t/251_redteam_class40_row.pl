# Red team (fd3161a): sync_try_subxact now re-raises every error of class 40 (transaction
# rollback) and 55P03 from a row read "so the step is retried" — also when the error is
# the row's own and permanent. One such row stops the whole mirror forever: every step
# (the backfill page, then the row alone) fails the same way and is retried with
# back-off, the row never reaches chroma_sync.failed, the other rows never sync; and
# chroma_verify in a backend ERRORs instead of counting the row as unreadable.
#
# Sequence: table d (id, embedding myvec) with a cast myvec -> real[] whose function
# raises SQLSTATE 40001 for row 5 only (the same for 40P01 or 55P03, e.g. a lock_timeout
# or NOWAIT inside the function); rows 1..10; chroma_mirror('d'); wait 40 s;
# chroma_verify('d').
# Observed: no row reaches Chroma (the backfill retries forever), row 5 not in
# chroma_sync.failed; chroma_verify ERRORs "row 5 cannot be read".
# Expected (as before fd3161a for this error, and for any other error a row's read
# raises, e.g. division by zero): row 5 in chroma_sync.failed with its reason, the 9
# other rows in the collection; chroma_verify returns, row 5 counted as unreadable.
# (Note: a FILTER that raises on one row stalls the backfill also before fd3161a — a
# separate, older problem; this test uses the embedding's cast instead.)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('t251');
my $log0 = log_offset($node);
my $coll = 'cs_t251';
$node->safe_psql('postgres', q{
CREATE TYPE myvec AS (a real, b real, c real);
CREATE FUNCTION public.myvec_arr(v myvec) RETURNS real[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF v.a = 5 THEN
		RAISE EXCEPTION 'row % cannot be read', v.a USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN ARRAY[v.a, v.b, v.c];
END $$;
CREATE CAST (myvec AS real[]) WITH FUNCTION public.myvec_arr(myvec);
CREATE TABLE d (id int PRIMARY KEY, embedding myvec);
INSERT INTO d SELECT i, ROW(i, 0, 0)::myvec FROM generate_series(1, 10) i;
});
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");

my $ok = wait_for('the 9 good rows in Chroma, row 5 failed', 40, sub {
	$node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.failed") eq '1'
	  && $node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll', ARRAY['1','2','3','4','6','7','8','9','10'])") eq '9' });
diag('failed: ' . $node->safe_psql('postgres', 'SELECT count(*), string_agg(error, \'; \') FROM chroma_sync.failed'));
diag('in Chroma: ' . $node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll', ARRAY['1','2','3','4','6','7','8','9','10'])"));
diag('mirror: ' . $node->safe_psql('postgres', 'SELECT in_error, last_error FROM chroma_sync.mirror'));
ok($ok, 'a row whose read always fails with 40001 is failed; the other rows sync');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.failed WHERE id = '5'"), '1',
	'row 5 is in chroma_sync.failed');

my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT rows, missing, extra, different FROM chroma_verify('d')});
is($ret, 0, 'chroma_verify returns (the row counted as unreadable), no ERROR') or diag($err);
diag("verify: $out");

finish($node, $log0);
