# Red-team repro (partitioned mirrors, hostile partition owner): the owner of one partition
# of someone else's mirrored partitioned table replaces the partition's BEFORE TRUNCATE
# trigger chroma_sync_N_truncate (a plain trigger of the partition, which its owner may
# drop) by a trigger of the same name that does nothing, ENABLE ALWAYS, then TRUNCATEs
# the partition.
#
# Why it matters: the worker's check (mirror_check.c, trigger_problem) looks only at the
# name and the enabled state of each leaf's triggers, not at what they run (function,
# argument, BEFORE/TRUNCATE), so the mirror stays "syncing" and not paused while the
# truncated rows' records stay in the collection forever (chroma_verify: extra = 5). A
# DISABLE or a DROP of the same trigger is detected and pauses the mirror with the reason;
# the substitution is not. The collection no longer converges to the table, silently.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt212');
my $log0 = log_offset($node);
fresh_collection($node, 'rt212_hv');
$node->safe_psql('postgres', q{
CREATE ROLE bob LOGIN;
CREATE SCHEMA bobs AUTHORIZATION bob;
CREATE TABLE hv (id int, k int, embedding real[], doc text, meta jsonb, PRIMARY KEY (id, k))
	PARTITION BY LIST (k);
CREATE TABLE hv1 PARTITION OF hv FOR VALUES IN (1);
CREATE TABLE hv2 PARTITION OF hv FOR VALUES IN (2);
INSERT INTO hv SELECT g, 1 + g % 2, ARRAY[g, 1]::real[], 'doc ' || g, NULL
	FROM generate_series(1, 10) g;
SELECT chroma_mirror('hv', collection => 'rt212_hv', document_column => 'doc');
-- bob's tenant partition
ALTER TABLE hv2 OWNER TO bob;
});
is($node->safe_psql('postgres', "SELECT chroma_flush('hv', interval '60 seconds')"), 't', 'backfilled');
my $mid = $node->safe_psql('postgres', q{SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'hv'::regclass});

$node->safe_psql('postgres', qq{
SET ROLE bob;
CREATE FUNCTION bobs.noop() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN RETURN NULL; END\$\$;
BEGIN;
DROP TRIGGER chroma_sync_${mid}_truncate ON hv2;
CREATE TRIGGER chroma_sync_${mid}_truncate BEFORE TRUNCATE ON hv2
	FOR EACH STATEMENT EXECUTE FUNCTION bobs.noop();
ALTER TABLE hv2 ENABLE ALWAYS TRIGGER chroma_sync_${mid}_truncate;
COMMIT;
TRUNCATE hv2;
});

# either the truncated rows leave the collection, or the mirror pauses saying why
ok(wait_for('the mirror converges or pauses', 30, sub {
	$node->safe_psql('postgres', q{SELECT paused FROM chroma_sync.mirror WHERE source = 'hv'::regclass}) eq 't'
	  || $node->safe_psql('postgres', q{SELECT extra FROM chroma_verify('hv')}) eq '0' }),
	'a substituted TRUNCATE trigger of a partition does not leave records of truncated rows unnoticed')
  or diag('chroma_verify: ' . $node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('hv')})
	  . ', paused: ' . $node->safe_psql('postgres', q{SELECT paused FROM chroma_sync.mirror WHERE source = 'hv'::regclass}));

finish($node, $log0);
