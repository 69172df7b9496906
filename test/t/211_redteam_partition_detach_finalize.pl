# Red-team repro (partitioned mirrors): a DETACH PARTITION ... CONCURRENTLY interrupted
# between its two transactions (pg_terminate_backend while it waits for older snapshots,
# as the README itself describes) and completed later by DETACH ... FINALIZE.
#
# What it shows:
#  1. while the partition is "detach pending", a plain UPDATE of it (by its owner,
#     directly on the partition) fails: "trigger of mirror N fired on table ev1, which it
#     does not mirror". capture_info's is_partition_of() uses get_partition_ancestors(),
#     which stops at a detach-pending link, so the partition's cloned trigger refuses it
#     (writes blocked needlessly);
#  2. ALTER TABLE ... DETACH PARTITION ... FINALIZE queues nothing: partition_utility_before
#     calls partition_mirrors_of(), which again finds no ancestor of a detach-pending
#     partition, so the leaving partition's keys are never queued. The records of its rows
#     stay in the collection forever (chroma_verify: extra = 5), although the README says
#     "its records stay until ALTER TABLE ... DETACH PARTITION ... FINALIZE". Committed
#     change lost: the collection does not converge to the table's rows;
#  3. the BEFORE TRUNCATE trigger chroma_sync_N_truncate stays on the now stand-alone
#     table: TRUNCATE of a table no mirror covers fails with the same error.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = new_node('rt211');
my $log0 = log_offset($node);
fresh_collection($node, 'rt211_ev');
$node->safe_psql('postgres', q{
CREATE TABLE ev (id int, k int, embedding real[], doc text, meta jsonb, PRIMARY KEY (id, k))
	PARTITION BY LIST (k);
CREATE TABLE ev1 PARTITION OF ev FOR VALUES IN (1);
CREATE TABLE ev2 PARTITION OF ev FOR VALUES IN (2);
INSERT INTO ev SELECT g, 1 + g % 2, ARRAY[g, 1]::real[], 'doc ' || g, NULL
	FROM generate_series(1, 10) g;
SELECT chroma_mirror('ev', collection => 'rt211_ev', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('ev', interval '60 seconds')"), 't', 'backfilled');

# an open transaction that read ev: the DETACH CONCURRENTLY's second transaction waits for it
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN; SELECT count(*) FROM ev;');
my $det = $node->background_psql('postgres', on_error_stop => 0);
$det->query_until(qr/started/, q{\echo started
ALTER TABLE ev DETACH PARTITION ev1 CONCURRENTLY;
});
ok(wait_for('the DETACH CONCURRENTLY waits', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE ev DETACH%' AND wait_event_type = 'Lock'}) eq '1' }),
	'DETACH CONCURRENTLY is waiting between its two transactions');
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE query LIKE 'ALTER TABLE ev DETACH%'});
eval { $det->quit };
$holder->query_safe('COMMIT');
$holder->quit;
is($node->safe_psql('postgres', q{SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'ev1'::regclass}),
	't', 'ev1 is detach pending');

# 1. the partition's owner writes to it while it is detach pending
my ($rc, $out, $err) = $node->psql('postgres', q{UPDATE ev1 SET doc = 'while pending' WHERE id = 2});
is($rc, 0, 'an UPDATE of the detach-pending partition succeeds')
  or diag("UPDATE ev1 failed: $err");

# 2. FINALIZE completes the detach: ev1's rows leave ev, their records must leave the collection
$node->safe_psql('postgres', 'ALTER TABLE ev DETACH PARTITION ev1 FINALIZE');
is($node->safe_psql('postgres', q{SELECT relispartition FROM pg_class WHERE oid = 'ev1'::regclass}),
	'f', 'ev1 is detached');
assert_equal($node, 'ev', 'rt211_ev', name => 'after DETACH ... FINALIZE', id => q{id::text || ',' || k::text});

# 3. the stand-alone table is no longer mirrored: its TRUNCATE is none of the mirror's business
($rc, $out, $err) = $node->psql('postgres', 'TRUNCATE ev1');
is($rc, 0, 'TRUNCATE of the detached table succeeds') or diag("TRUNCATE ev1 failed: $err");
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'ev1'::regclass
	AND tgname LIKE 'chroma_sync%'}), '0', 'no chroma_sync trigger is left on the detached table');

finish($node, $log0);
