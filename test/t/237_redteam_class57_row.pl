# Red team (83ed4a6): sync_try_subxact now re-raises every error of class 57 (operator
# intervention) from a row read, "a cancel or a shutdown says nothing of the rows" — also
# when the error is the row's own and permanent, and with no bound (the class-40 path,
# TAP 251, gives up after TRANSIENT_RETRIES and records the row; this one never does).
# A row whose read raises 57014 (query_canceled) without any cancel pending — e.g. a cast
# or function that reads through dblink/postgres_fdw, whose remote statement_timeout comes
# back as SQLSTATE 57014, or a plain RAISE ... USING ERRCODE — stops the whole mirror
# forever: every step fails and is retried with back-off, the row never reaches
# chroma_sync.failed, the other rows never sync; chroma_verify ERRORs too.
#
# Sequence: table d (id, embedding myvec) with a cast myvec -> real[] whose function
# raises SQLSTATE 57014 for row 5 only; rows 1..10; chroma_mirror('d'); wait 40 s;
# chroma_verify('d').
# Expected (as for 40001 since TAP 251, and for any other error a row's read raises):
# row 5 in chroma_sync.failed with its reason, the 9 other rows in the collection.
# Cause: src/sync_txn.c sync_try_subxact, the ERRCODE_OPERATOR_INTERVENTION re-raise
# looks at the SQLSTATE only, not at whether an interrupt is actually pending
# (QueryCancelPending/ProcDiePending), and has no retry bound.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('t237');
my $log0 = log_offset($node);
my $coll = 'cs_t237';
$node->safe_psql('postgres', q{
CREATE TYPE myvec AS (a real, b real, c real);
CREATE FUNCTION public.myvec_arr(v myvec) RETURNS real[] LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF v.a = 5 THEN
		RAISE EXCEPTION 'remote: canceling statement due to statement timeout' USING ERRCODE = 'query_canceled';
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
ok($ok, 'a row whose read always fails with 57014 is failed; the other rows sync');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.failed WHERE id = '5'"), '1',
	'row 5 is in chroma_sync.failed');

my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT rows, missing, extra, different FROM chroma_verify('d')});
is($ret, 0, 'chroma_verify returns (the row counted as unreadable), no ERROR') or diag($err);
diag("verify: $out");

finish($node, $log0);
