# Red-team repro (partitioned mirrors): the owner of a leaf (not a superuser, no USAGE on
# schema chroma_sync) renames the leaf's TRUNCATE trigger, disables it under its new name,
# truncates the leaf unseen, enables it and gives it its name back, in one transaction:
#
#   BEGIN;
#   ALTER TRIGGER chroma_sync_N_truncate ON tr_1 RENAME TO mine;
#   ALTER TABLE tr_1 DISABLE TRIGGER mine;
#   TRUNCATE tr_1;
#   ALTER TABLE tr_1 ENABLE ALWAYS TRIGGER mine;
#   ALTER TRIGGER mine ON tr_1 RENAME TO chroma_sync_N_truncate;
#   COMMIT;
#
# on_ddl_end (TAP 216) looks for a disabled capture trigger by its name only
# (chroma_sync_N, chroma_sync_N_truncate, chroma_sync_N_flush), so the DISABLE of "mine"
# goes unreported; ALTER TRIGGER ... RENAME is not an ALTER TABLE; the worker's check
# (mirror_check.c) sees the committed catalog, where the trigger is back as it was.
# Observed: the mirror stays unpaused while the collection keeps the 5 records of the
# truncated rows (chroma_verify: 5|0|5|0). Expected: the mirror paused (as for the DISABLE
# of the trigger under its own name, TAP 216), exact after chroma_resume and chroma_resync.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt218');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
});
fresh_collection($node, 'rt218_tr');
$node->safe_psql('postgres', q{
SET ROLE alice;
CREATE TABLE tr (id int, k int, embedding real[], doc text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE tr_1 PARTITION OF tr FOR VALUES IN (1);
CREATE TABLE tr_2 PARTITION OF tr FOR VALUES IN (2);
INSERT INTO tr SELECT g, CASE WHEN g <= 5 THEN 1 ELSE 2 END, ARRAY[g, 1]::real[], 'doc ' || g
	FROM generate_series(1, 10) g;
RESET ROLE;
SELECT chroma_mirror('tr', collection => 'rt218_tr', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('tr', interval '60 seconds')"), 't', 'backfilled');
my $m = $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'tr'::regclass");

my ($out, $err) = ('', '');
$node->psql('postgres', qq{SET ROLE alice;
BEGIN;
ALTER TRIGGER chroma_sync_${m}_truncate ON tr_1 RENAME TO mine;
ALTER TABLE tr_1 DISABLE TRIGGER mine;
TRUNCATE tr_1;
ALTER TABLE tr_1 ENABLE ALWAYS TRIGGER mine;
ALTER TRIGGER mine ON tr_1 RENAME TO chroma_sync_${m}_truncate;
COMMIT;}, stdout => \$out, stderr => \$err, on_error_stop => 1);
unlike($err, qr/ERROR|FATAL/, 'alice ran it');
is($node->safe_psql('postgres', 'SELECT count(*) FROM tr_1'), '0', 'tr_1 truncated');

my $state;
my $paused = wait_for('tr paused', 30, sub {
	$state = $node->safe_psql('postgres',
		q{SELECT paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror WHERE source = 'tr'::regclass});
	$state =~ /^true /;
});
$node->safe_psql('postgres', "SELECT chroma_flush('tr', interval '60 seconds')");
my $verify = $node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('tr')");
ok($paused, 'the mirror is paused (the TRUNCATE of tr_1 did not reach the queue)')
	or diag("state: $state; chroma_verify: $verify");
if ($paused)
{
	$node->safe_psql('postgres', "SELECT chroma_resume('tr'); SELECT chroma_resync('tr');");
	$node->safe_psql('postgres', "SELECT chroma_flush('tr', interval '60 seconds')");
	is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('tr')"),
		'5|0|0|0', 'exact after chroma_resume and chroma_resync');
}

finish($node, $log0);
