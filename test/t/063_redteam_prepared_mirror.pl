# Red team: a mirror created in a prepared transaction, in a database whose worker has
# gone dormant (no mirror before), is never backfilled after COMMIT PREPARED: the wake-up
# of COMMIT PREPARED is only for a worker that runs (chroma_wake_running_worker), and
# nothing else starts a dormant slot. Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_prepared', conf => "max_prepared_transactions = 5\n");
my $log0 = log_offset($node);
my $wsql = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'd063'";

$node->safe_psql('postgres', 'CREATE DATABASE d063');
$node->safe_psql('d063', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t SELECT g, ARRAY[g, 1, 2]::real[] FROM generate_series(1, 20) g;
SELECT chroma_delete_collection('cs_t063', true);});
# the worker of d063 finds no mirror and goes dormant
ok(poll_query($node, "SELECT pg_catalog.now() - pg_postmaster_start_time() > interval '12 s'", 't', 30), 'a while later');
ok(poll_query($node, $wsql, '0', 30), 'd063 has no worker (dormant)');

$node->safe_psql('d063', q{
BEGIN;
SELECT chroma_mirror('t', collection => 'cs_t063');
PREPARE TRANSACTION 'p063';});
# a worker the mirror's slot claim may have started sees no committed mirror and goes again
sleep 12;
ok(poll_query($node, $wsql, '0', 30), 'd063 has no worker before COMMIT PREPARED');
$node->safe_psql('d063', "COMMIT PREPARED 'p063'");
ok(poll_query($node, $wsql, '1', 15), 'COMMIT PREPARED of a new mirror starts the worker of d063');
ok(poll_query($node, "SELECT chroma_count('cs_t063')", '20', 30), 'and the mirror is backfilled (no chroma_flush)');
finish($node, $log0);
