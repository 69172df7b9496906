# Red-team repro (partitioned mirrors): partition_utility_before runs outside the utility
# hook's PG_TRY, and for a DROP TABLE it appends each named partitioned table to
# dropping_roots (TopMemoryContext) before looking up the next name. A later name whose
# lookup errors (a cross-database reference, nodb.public.x) leaves the earlier names in
# dropping_roots for the rest of the session: partition_utility_done never truncates it,
# and each later statement's "saved" length keeps the stale entry. Any later drop of a leaf
# of that table in the session is then taken for one "dropped with its partitioned table":
# its keys are not queued. For DROP TABLE / DROP SCHEMA the after step pauses the mirror
# (a false reason, but loud); DROP OWNED is not a DropStmt: nothing is queued and nothing
# pauses.
#
# Sequence (root t owned by role app, leaf t_1 owned by alice, a member of app; t mirrored;
# t_1 holds ids 1..5, t_2 ids 6..10), one session of alice:
#   DROP TABLE t, nodb.public.x;   -- ERROR: cross-database references are not implemented
#   DROP OWNED BY alice;           -- drops t_1 (and nothing else of the tree)
# Observed: t_1's keys are never queued, the mirror stays unpaused, and the collection
# keeps the 5 records of t_1's rows (chroma_verify 5|0|5|0).
# Expected: as without the failed DROP (the control, mirror c): t_1's keys queued in the
# DROP OWNED's transaction, chroma_verify 5|0|0|0, not paused.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt261');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE app NOLOGIN;
CREATE ROLE alice LOGIN IN ROLE app;
GRANT CREATE ON SCHEMA public TO app, alice;
});

sub setup
{
	my ($t) = @_;
	fresh_collection($node, "rt261_$t");
	$node->safe_psql('postgres', qq{
SET ROLE app;
CREATE TABLE $t (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE ${t}_2 PARTITION OF $t FOR VALUES IN (2);
SET ROLE alice;
CREATE TABLE ${t}_1 PARTITION OF $t FOR VALUES IN (1);
INSERT INTO $t SELECT g, CASE WHEN g <= 5 THEN 1 ELSE 2 END, ARRAY[g, 1]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
RESET ROLE;
SELECT chroma_mirror('$t', collection => 'rt261_$t', document_column => 'doc');
});
	is($node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')"), 't', "$t: backfilled");
	is($node->safe_psql('postgres', "SELECT relowner::regrole FROM pg_class WHERE relname = '${t}_1'"),
		'alice', "$t: ${t}_1 is alice's");
	return;
}

sub outcome
{
	my ($t) = @_;
	sleep 2;
	$node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')");
	return $node->safe_psql('postgres', qq{
SELECT v.rows || '|' || v.missing || '|' || v.extra || '|' || v.different || ' paused=' || m.paused
FROM chroma_verify('$t') v, chroma_sync.mirror m WHERE m.source = '$t'::regclass});
}

# control: DROP OWNED alone
setup('c');
$node->safe_psql('postgres', 'SET ROLE alice; DROP OWNED BY alice;');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname IN ('c_1', 'c_2', 'c')"), '2',
	'control: DROP OWNED dropped c_1 only');
is(outcome('c'), '5|0|0|0 paused=false', 'control: exact, not paused');

# the repro: a DROP TABLE that failed in its name lookup, earlier in the session
setup('t');
my ($out, $err) = ('', '');
$node->psql('postgres', q{SET ROLE alice;
DROP TABLE t, nodb.public.x;
SELECT 'between';
DROP OWNED BY alice;}, stdout => \$out, stderr => \$err, on_error_stop => 0);
like($err, qr/cross-database references are not implemented/, 'the first DROP failed in its lookup');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname IN ('t_1', 't_2', 't')"), '2',
	'DROP OWNED dropped t_1 only');
my $o = outcome('t');
ok($o =~ /^5\|0\|0\|0 / || $o =~ /paused=true/,
	"t_1's records deleted (or the mirror paused) after DROP OWNED") or diag("observed: $o");

finish($node, $log0);
