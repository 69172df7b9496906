# Red-team repro (partitioned mirrors): CREATE TABLE ... PARTITION OF run from PL/pgSQL
# (a DO block, a function, a migration tool's procedure) in a session that has a
# temporary table of the same name.
#
# Sequence:
#   CREATE TEMP TABLE ts4 (x int);
#   DO $$ BEGIN CREATE TABLE ts4 PARTITION OF ts FOR VALUES IN (4); END $$;
#   -- public.ts4 is a new leaf of the mirrored ts
#
# partition_utility_after resolves the statement's RangeVar again after the statement ran.
# From PL/pgSQL the utility tree is read-only (standard_ProcessUtility works on a copy),
# so the name is still unqualified and RangeVarGetRelid finds pg_temp.ts4 first: the
# hook sees a table that is no partition, and public.ts4 never gets the mirror's BEFORE
# TRUNCATE trigger (nor the logged-table check: CREATE UNLOGGED TABLE ... PARTITION OF
# passes the same way). Observed: within seconds the worker pauses the whole mirror with
# "partition ts4: trigger chroma_sync_N_truncate was dropped: ... unmirror and mirror the
# table again" -- nothing of ts is synced any more until it is mirrored again from scratch.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt215');
my $log0 = log_offset($node);
fresh_collection($node, 'rt215_ts');
$node->safe_psql('postgres', q{
CREATE TABLE ts (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE ts1 PARTITION OF ts FOR VALUES IN (1);
INSERT INTO ts SELECT g, 1, ARRAY[g, 1]::real[], 'doc ' || g FROM generate_series(1, 5) g;
SELECT chroma_mirror('ts', collection => 'rt215_ts', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('ts', interval '60 seconds')"), 't', 'backfilled');

$node->safe_psql('postgres', q{
CREATE TEMP TABLE ts4 (x int);
DO $$ BEGIN CREATE TABLE ts4 PARTITION OF ts FOR VALUES IN (4); END $$;
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_inherits WHERE inhrelid = 'public.ts4'::regclass}),
	'1', 'public.ts4 is a partition of ts');
my $mid = $node->safe_psql('postgres', q{SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'ts'::regclass});
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pg_trigger
	WHERE tgrelid = 'public.ts4'::regclass AND tgname = 'chroma_sync_${mid}_truncate'}),
	'1', 'the new leaf has the mirror\'s TRUNCATE trigger');

$node->safe_psql('postgres', q{INSERT INTO ts VALUES (400, 4, '{4,4}', 'four'), (6, 1, '{6,1}', 'six')});
is($node->safe_psql('postgres', "SELECT chroma_flush('ts', interval '20 seconds')"), 't', 'flushed');
is($node->safe_psql('postgres', q{SELECT state || coalesce(': ' || last_error, '') FROM chroma_sync.status WHERE source = 'ts'::regclass}),
	'syncing', 'the mirror keeps syncing');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('ts')}),
	'7|0|0|0', 'the collection holds every row');

finish($node, $log0);
