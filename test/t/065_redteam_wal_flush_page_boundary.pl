# Red team: the worker flushes the WAL up to GetXLogInsertRecPtr() before sending what
# it read (src/sync_txn.c). When the insert position is exactly at the start of a WAL
# page, that pointer lies past the page header, which is not written yet, and
# XLogFlush fails: "xlog flush request X is not satisfied --- flushed only to Y". The
# step fails and is backed off (seen in a random workload as a mirror's last_error).
# Here the WAL is filled with non-transactional logical messages up to a page boundary
# while no worker runs, then the worker starts and reads a queued change.
# Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_walpage', conf => "autovacuum = off\n");
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 10, dim => 4);
fresh_collection($node, 'cs_t065');
mirror($node, 'docs', 'cs_t065');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't', 'backfilled');

set_conf($node, 'chroma_sync.worker_databases', '');
ok(poll_query($node, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'", '0', 30),
	'no worker runs');
$node->safe_psql('postgres', "UPDATE docs SET doc = 'queued' WHERE id = 1");

# fill the current WAL page exactly: the next insert position is the next page's start
my $off = $node->safe_psql('postgres', q{
DO $$
DECLARE
	l pg_lsn;
	d numeric;
	ovh int;
	rem int;
BEGIN
	l := pg_current_wal_insert_lsn();
	PERFORM pg_logical_emit_message(false, 'x', repeat('x', 304));
	ovh := (pg_current_wal_insert_lsn() - l) - 304;
	-- a record that crossed a page boundary also carried that page's header: measure
	-- again (two short records in a row cannot both cross one), keep the smaller
	l := pg_current_wal_insert_lsn();
	PERFORM pg_logical_emit_message(false, 'x', repeat('x', 304));
	ovh := least(ovh, (pg_current_wal_insert_lsn() - l) - 304);
	FOR i IN 1 .. 40 LOOP
		rem := 8192 - ((pg_current_wal_insert_lsn() - '0/0'::pg_lsn) % 8192)::int;
		IF rem = 8192 - 24 THEN EXIT; END IF;
		IF rem - ovh >= 304 THEN
			PERFORM pg_logical_emit_message(false, 'x', repeat('x', rem - ovh));
		ELSE
			PERFORM pg_logical_emit_message(false, 'x', repeat('x', rem + 400));
		END IF;
	END LOOP;
END $$;
SELECT ((pg_current_wal_insert_lsn() - '0/0'::pg_lsn) % 8192)::int;});
is($off, '24', 'the WAL insert position is just past a page header (nothing written on that page)');

set_conf($node, 'chroma_sync.worker_databases', '*');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')"), 't', 'the change is synced');
my @errs = grep { /xlog flush request .* is not satisfied/ } split /\n/, slurp_file($node->logfile, $log0);
ok(!@errs, 'the worker never failed its WAL flush') or diag(join("\n", @errs));
finish($node, $log0);
