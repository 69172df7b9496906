# A partition locked by another session (LOCK TABLE, a long DDL on it) never blocks the
# worker, and partition DDL in that session never deadlocks with the worker's read.
#
# Before: the worker took the partitioned table's locks without waiting, then read through
# it and waited for the locked partition while holding them; the session's next partition
# DDL (CREATE TABLE ... PARTITION OF a partitioned partition) then waited for the worker: a
# deadlock, which failed the worker's read and put the rows it was reading in
# chroma_sync.failed ("could not read the row: deadlock detected", seen in TAP 201), and
# meanwhile every other mirror of the database waited too.
#
# Now: every partition is locked without waiting before the read (else the mirror is
# skipped for now), and a deadlock or lock failure in a read retries the step.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('t205');
my $log0 = log_offset($node);
fresh_collection($node, 't205_pt');
fresh_collection($node, 't205_other');
$node->safe_psql('postgres', q{
CREATE TABLE pt (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2, 3) PARTITION BY LIST (k);
CREATE TABLE pt_2a PARTITION OF pt_2 FOR VALUES IN (2);
INSERT INTO pt SELECT g, 1 + g % 2, ARRAY[g, 1]::real[], 'doc ' || g FROM generate_series(1, 20) g;
CREATE TABLE other (id int PRIMARY KEY, embedding real[], doc text);
SELECT chroma_mirror('pt', collection => 't205_pt', document_column => 'doc');
SELECT chroma_mirror('other', collection => 't205_other', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush(NULL, interval '60 seconds')"), 't', 'backfilled');

for my $round (1 .. 3)
{
	my $s = $node->background_psql('postgres');
	$s->query_safe(q{BEGIN; LOCK TABLE pt_2a IN ACCESS EXCLUSIVE MODE;});
	# changes to the locked partition's table and to another mirror, committed elsewhere
	# (the INSERT into pt_1 goes through pt, which the LOCK does not block)
	$node->safe_psql('postgres', qq{
INSERT INTO pt VALUES (100 + $round, 1, '{$round,2}', 'while pt_2a is locked');
INSERT INTO other VALUES ($round, '{$round,3}', 'while pt_2a is locked');});
	is($node->safe_psql('postgres', "SELECT chroma_flush('other', interval '15 seconds')"), 't',
		"round $round: another mirror syncs while a partition is locked");
	# the session's partition DDL, while the worker may be reading pt
	my ($ok, $err) = (1, '');
	eval {
		$s->query_safe(qq{CREATE TABLE pt_2b$round PARTITION OF pt_2 FOR VALUES IN (3)
			PARTITION BY LIST (id);
CREATE TABLE pt_2b${round}x PARTITION OF pt_2b$round DEFAULT;
INSERT INTO pt VALUES (200 + $round, 3, '{$round,4}', 'new partition');
COMMIT;});
		1;
	} or do { $ok = 0; $err = $@; };
	ok($ok, "round $round: the session's partition DDL commits (no deadlock)") or diag($err);
	$s->quit;
	is($node->safe_psql('postgres', "SELECT chroma_flush('pt', interval '30 seconds')"), 't',
		"round $round: pt flushed");
	is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('pt')}),
		$node->safe_psql('postgres', 'SELECT count(*) FROM pt') . '|0|0|0', "round $round: pt exact");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.failed}), '0',
		"round $round: no row failed");
	$node->safe_psql('postgres', "DROP TABLE pt_2b$round");
}

finish($node, $log0);
