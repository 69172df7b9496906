# Red-team repro (partitioned mirrors), the DETACH ... CONCURRENTLY form of TAP 262: no
# DEFAULT partition needed. The hook checks the leaves of a partitioned partition x
# (check_leaving_leaves) in the first transaction, holding only x's ShareUpdateExclusive
# lock; while the DETACH waits for the other lockers of t, the owner drops the TRUNCATE trigger of
# x's leaf x_1 and truncates it (locks on x_1 alone). The after step (second transaction)
# queues x's rows (x_1 now empty) and checks nothing again.
#
# Sequence (alice owns everything; t mirrored, LIST (k): x = PARTITION OF t FOR VALUES
# IN (1) PARTITION BY LIST (k) with leaf x_1 (ids 1..5), leaf t_2 (ids 6..10)):
#   session B: BEGIN; SELECT count(*) FROM t;
#   session A: ALTER TABLE t DETACH PARTITION x CONCURRENTLY;  -- waits for B, a locker of t
#   session B: DROP TRIGGER chroma_sync_N_truncate ON x_1; TRUNCATE x_1; COMMIT;
#   (session A's DETACH completes)
# Observed: mirror not paused; the collection keeps x_1's 5 records (chroma_verify
# 5|0|5|0).
# Expected: the mirror paused (a leaf left the tree without its TRUNCATE trigger, as in
# TAP 217 H), or x_1's records deleted.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt266');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
});
fresh_collection($node, 'rt266_t');
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE x PARTITION OF t FOR VALUES IN (1) PARTITION BY LIST (k);
CREATE TABLE x_1 PARTITION OF x FOR VALUES IN (1);
CREATE TABLE t_2 PARTITION OF t FOR VALUES IN (2);
INSERT INTO t SELECT g, CASE WHEN g <= 5 THEN 1 ELSE 2 END, ARRAY[g, 1]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
RESET ROLE;
SELECT chroma_mirror('t', collection => 'rt266_t', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');
my $m = $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = 't'::regclass");

my $b = $node->background_psql('postgres', on_error_stop => 0);
$b->query_safe(q{SET ROLE alice; BEGIN; SELECT count(*) FROM t;});
my $a = $node->background_psql('postgres', on_error_stop => 0);
$a->query_until(qr/started/, q{\echo started
SET ROLE alice;
ALTER TABLE t DETACH PARTITION x CONCURRENTLY;
});
ok(wait_for('the DETACH waits', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE t DETACH%' AND wait_event_type = 'Lock'}) eq '1' }),
	'the DETACH waits for the lockers of t');
$b->query(qq{DROP TRIGGER chroma_sync_${m}_truncate ON x_1});
my $berr1 = $b->{stderr};
$b->query('TRUNCATE x_1');
my $berr2 = $b->{stderr};
$b->query('COMMIT');
$b->quit;
is($berr1 . $berr2, '', 'session B dropped the trigger and truncated x_1');
ok(wait_for('the DETACH is done', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE t DETACH%' AND state = 'active'}) eq '0' }), 'the DETACH is done');
$a->quit;
is($node->safe_psql('postgres', q{SELECT relispartition FROM pg_class WHERE oid = 'x'::regclass}), 'f',
	'x was detached');
is($node->safe_psql('postgres', 'SELECT count(*) FROM x_1'), '0', 'x_1 was truncated');

my $state;
my $paused = wait_for('t paused', 20, sub {
	$state = $node->safe_psql('postgres',
		q{SELECT paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror WHERE source = 't'::regclass});
	$state =~ /^true /;
});
my $verify = '';
unless ($paused)
{
	$node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')");
	$verify = $node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('t')");
}
ok($paused || $verify eq '5|0|0|0', 'the mirror is paused or exact')
	or diag("state: $state; chroma_verify: $verify");

finish($node, $log0);
