# Red-team repro (partitioned mirrors): an ATTACH makes the TRUNCATE trigger on every leaf
# under the altered table that was not there when partition_utility_before listed the
# leaves (leaves_before, before the statement's waits), not on the leaves the statement
# itself attached. A leaf another transaction attached under a mid-level table while the
# ATTACH waited (the hook lists the leaves, then waits for its lock on the table it
# attaches) counts as "added": a trigger its owner dropped
# (to truncate it unseen) is made again, and the worker's check (TAP 217) finds nothing
# missing.
#
# Sequence (alice owns everything; t mirrored, LIST (k): m = PARTITION OF t FOR VALUES
# IN (3, 4) PARTITION BY LIST (k), leaf t_2 (ids 6..10); plain tables x (k = 1, id 1)
# and y (k = 3, ids 11..15)):
#   session B: BEGIN; SELECT count(*) FROM x;
#   session A: ALTER TABLE t ATTACH PARTITION x FOR VALUES IN (1);   -- hook: leaves
#              listed, then waits for x
#   session C: ALTER TABLE m ATTACH PARTITION y FOR VALUES IN (3);   -- committed;
#              chroma_flush: y's 5 records in the collection
#   session B: DROP TRIGGER chroma_sync_N_truncate ON y; TRUNCATE y; COMMIT;
#   (session A's ATTACH completes and makes y's trigger again)
# Observed: y has its trigger again, the mirror is not paused, the collection keeps y's 5
# records (chroma_verify 6|0|5|0).
# Expected: the trigger of y left missing (the worker's check pauses the mirror), as for
# an ATTACH that did not wait (TAP 217 A).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt264');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
});
fresh_collection($node, 'rt264_t');
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE m PARTITION OF t FOR VALUES IN (3, 4) PARTITION BY LIST (k);
CREATE TABLE t_2 PARTITION OF t FOR VALUES IN (2);
INSERT INTO t SELECT g, 2, ARRAY[g, 1]::real[], 'doc ' || g FROM generate_series(6, 10) g;
CREATE TABLE x (LIKE t); INSERT INTO x VALUES (1, 1, '{1,1}', 'doc 1');
CREATE TABLE y (LIKE t); INSERT INTO y SELECT g, 3, ARRAY[g, 1]::real[], 'doc ' || g FROM generate_series(11, 15) g;
RESET ROLE;
SELECT chroma_mirror('t', collection => 'rt264_t', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');
my $m = $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = 't'::regclass");

my $b = $node->background_psql('postgres', on_error_stop => 0);
$b->query_safe(q{SET ROLE alice; BEGIN; SELECT count(*) FROM x;});
my $a = $node->background_psql('postgres', on_error_stop => 0);
$a->query_until(qr/started/, q{\echo started
SET ROLE alice;
ALTER TABLE t ATTACH PARTITION x FOR VALUES IN (1);
});
ok(wait_for('the ATTACH waits', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE t ATTACH%' AND wait_event_type = 'Lock'}) eq '1' }),
	'the ATTACH of x waits for its lock on x');
$node->safe_psql('postgres', 'SET ROLE alice; ALTER TABLE m ATTACH PARTITION y FOR VALUES IN (3);');
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'y attached and sent');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('t')}), '10|0|0|0',
	'exact with y');
$b->query(qq{DROP TRIGGER chroma_sync_${m}_truncate ON y});
my $berr = $b->{stderr};
$b->query('TRUNCATE y');
$berr .= $b->{stderr};
$b->query('COMMIT');
$b->quit;
is($berr, '', 'session B dropped the trigger of y and truncated y');
ok(wait_for('the ATTACH is done', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE t ATTACH%' AND state = 'active'}) eq '0' }), 'the ATTACH is done');
$a->quit;
is($a->{stderr}, '', 'the ATTACH succeeded');
is($node->safe_psql('postgres', q{SELECT count(*) FROM y}), '0', 'y is empty');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_trigger
	WHERE tgrelid = 'y'::regclass AND tgname = 'chroma_sync_${m}_truncate'}), '0',
	'the ATTACH of x did not make the trigger of y again');

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
ok($paused || $verify eq '6|0|0|0', 'the mirror is paused or exact')
	or diag("state: $state; chroma_verify: $verify");

finish($node, $log0);
