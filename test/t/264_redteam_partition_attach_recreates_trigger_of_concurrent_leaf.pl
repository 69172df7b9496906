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
# an ATTACH that did not wait (TAP 217 A). Fixed by serializing partition DDL under one
# mirrored table (the partition-set lock comes first): C's ATTACH now waits for A's.
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
# Now: partition DDL under one mirrored table is serialized by the mirror's partition-set
# lock, taken before any table lock, so C's ATTACH waits for A's to end and no partition
# can come under t while A waits (its trigger cannot be made again by A).
my $c = $node->background_psql('postgres', on_error_stop => 0);
$c->query_until(qr/started/, q{\echo started
SET ROLE alice;
ALTER TABLE m ATTACH PARTITION y FOR VALUES IN (3);
});
ok(wait_for('the ATTACH of y waits', 30, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE m ATTACH%' AND wait_event_type = 'Lock'}) eq '1' }),
	'the ATTACH of y under m waits for the ATTACH of x under t');
$b->query('COMMIT');
$b->quit;
ok(wait_for('both ATTACHes are done', 60, sub {
	$node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE query LIKE 'ALTER TABLE _ ATTACH%' AND state = 'active'}) eq '0' }), 'both ATTACHes are done');
$a->quit;
$c->quit;
unlike($a->{stderr} . $c->{stderr}, qr/ERROR/, 'both ATTACHes succeeded');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_trigger
	WHERE tgrelid IN ('x'::regclass, 'y'::regclass) AND tgname = 'chroma_sync_${m}_truncate'}), '2',
	'x and y have their TRUNCATE trigger');
is($node->safe_psql('postgres', "SELECT chroma_flush('t', interval '60 seconds')", timeout => 70), 't', 'flushed');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('t')}), '11|0|0|0',
	'exact with x and y');
is($node->safe_psql('postgres', q{SELECT paused FROM chroma_sync.mirror WHERE source = 't'::regclass}), 'f',
	'not paused');

finish($node, $log0);
