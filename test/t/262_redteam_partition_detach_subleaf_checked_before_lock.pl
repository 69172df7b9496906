# Red-team repro (partitioned mirrors): DETACH of a partitioned partition checks its leaves'
# TRUNCATE triggers in partition_utility_before (check_leaving_leaves, find_all_inheritors
# with NoLock) before the statement has locked them, and nothing checks them again. The
# hook locks only the detached table x itself; PostgreSQL's DETACH then waits for the
# parent's DEFAULT partition, and meanwhile another transaction drops the trigger of x's
# leaf x_1 and truncates it (neither needs a lock on x). The DETACH then completes: the
# leaf left the tree without its trigger, nothing pauses, and the truncated rows' keys are
# never queued (x_1 is empty when the after step queues x's rows).
#
# Sequence (alice owns everything; t mirrored, LIST (k): x = PARTITION OF t FOR VALUES
# IN (1) PARTITION BY LIST (k) with leaf x_1 (ids 1..5), leaf t_2 (ids 6..10), DEFAULT
# partition t_def):
#   session B: BEGIN; SELECT count(*) FROM t_def;
#   session A: ALTER TABLE t DETACH PARTITION x;        -- hook checks x_1 (has its
#              trigger), then waits for t_def
#   session B: DROP TRIGGER chroma_sync_N_truncate ON x_1; TRUNCATE x_1; COMMIT;
#   (session A's DETACH completes)
# Observed: mirror not paused; the collection keeps x_1's 5 records (chroma_verify
# 5|0|5|0).
# Expected: the mirror paused (a leaf left the tree without its TRUNCATE trigger, as in
# TAP 217 E), or x_1's records deleted: never 5 extra records and no pause.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt262');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
});
fresh_collection($node, 'rt262_t');
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE x PARTITION OF t FOR VALUES IN (1) PARTITION BY LIST (k);
CREATE TABLE x_1 PARTITION OF x FOR VALUES IN (1);
CREATE TABLE t_2 PARTITION OF t FOR VALUES IN (2);
CREATE TABLE t_def PARTITION OF t DEFAULT;
INSERT INTO t SELECT g, CASE WHEN g <= 5 THEN 1 ELSE 2 END, ARRAY[g, 1]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
RESET ROLE;
SELECT chroma_mirror('t', collection => 'rt262_t', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');
my $m = $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = 't'::regclass");

my $b = $node->background_psql('postgres', on_error_stop => 0);
$b->query_safe(q{SET ROLE alice; BEGIN; SELECT count(*) FROM t_def;});
my $a = $node->background_psql('postgres', on_error_stop => 0);
$a->query_until(qr/started/, q{\echo started
SET ROLE alice;
ALTER TABLE t DETACH PARTITION x;
});
ok(wait_for('the DETACH waits', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE t DETACH%' AND wait_event_type = 'Lock'}) eq '1' }),
	'the DETACH waits for the default partition');
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
