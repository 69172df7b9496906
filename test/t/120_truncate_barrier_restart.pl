# A TRUNCATE barrier whose clear of the collection ends with its outcome unknown: a
# gateway answers the delete 504 at once and delivers it to Chroma 3 s later. The
# TRUNCATE ran in a prepared transaction (issue 14's soak: seed 865581889 stalled three
# mirrors after a TRUNCATE in a prepared transaction, a Chroma restart and a worker
# termination), rows with the same ids are written right after it, the worker is
# terminated while the delete is pending and Chroma restarts. Both mirrors of the table
# (one filtered) must drain (chroma_flush true) and end equal to the table: the late
# delete may not win over the rows written after the TRUNCATE. This path converges; it
# did not reproduce the soak's stall.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, 3, 'delete');

my $node = new_node('truncate_unknown',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 6000\n"
	  . "max_prepared_transactions = 4\n");
my $log0 = log_offset($node);
make_table($node, 'd', rows => 300, dim => 4);
$node->safe_psql('postgres', 'ALTER TABLE d ADD COLUMN score int');
$node->safe_psql('postgres', 'UPDATE d SET score = id % 5 - 1');
fresh_collection($node, 'cs_t120');
fresh_collection($node, 'cs_t120_pos');
mirror($node, 'd', 'cs_t120');
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => 'cs_t120_pos', "
	  . "metadata_columns => '{score}', filter => 'score > 0')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds', 'cs_t120') "
		  . "AND chroma_flush('d', interval '60 seconds', 'cs_t120_pos')"), 't', 'backfilled');

# the clear of the TRUNCATE barrier: its first delete (the first delete request since the
# backfill) gets the late 504
open(my $fh, '>', $arm) or die;
close($fh);
$node->safe_psql('postgres', q{
BEGIN;
TRUNCATE d;
PREPARE TRANSACTION 'trunc'});
$node->safe_psql('postgres', "COMMIT PREPARED 'trunc'");
ok(wait_for('the late 504 of the delete', 30, sub { !-e $arm }), 'the delete of the clear got the late 504');
my $t504 = time();
# rows with the same ids again, right after the TRUNCATE (the late delete could remove them)
insert_rows($node, 'd', 1, 50, 4, 1);
$node->safe_psql('postgres', 'UPDATE d SET score = id % 5 - 1');
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)") if $w ne '';
chroma_stop();
sleep 1;
chroma_start();
insert_rows($node, 'd', 51, 10, 4, 2);
$node->safe_psql('postgres', 'UPDATE d SET score = id % 5 - 1 WHERE id > 50');

my $ok = $node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds', 'cs_t120') "
	  . "AND chroma_flush('d', interval '30 seconds', 'cs_t120_pos')", timeout => 120);
is($ok, 't', 'both mirrors drain after the clear whose outcome was unknown');
# the gateway delivers the delete 3 s after the 504
my $left = $t504 + 4.5 - time();
sleep($left) if $left > 0;
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.resend"), '0',
	'no key is parked in chroma_sync.resend any more');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('d', 'cs_t120')"),
	$node->safe_psql('postgres', "SELECT count(*) FROM d WHERE embedding IS NOT NULL") . '|0|0|0',
	'cs_t120 equals the table after the late delete was due');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('d', 'cs_t120_pos')"),
	$node->safe_psql('postgres', "SELECT count(*) FROM d WHERE score > 0 AND embedding IS NOT NULL") . '|0|0|0',
	'cs_t120_pos equals the table after the late delete was due');
finish($node, $log0);
