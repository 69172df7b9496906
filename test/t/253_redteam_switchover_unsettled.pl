# Red team (79b9cfa): the unsettled-request bound lives in one data directory's
# chroma_sync_unsettled.<db>, so a planned switchover (the primary stopped while a request
# is unanswered, its streaming standby promoted) loses it: the promoted node's worker
# sends at once, and the old primary's request, applied late by Chroma within its
# chroma_sync.timeout, overwrites the newer state with nothing left to send it again.
#
# Sequence: primary (timeout 8 s) + streaming standby, both through late_proxy
# ('upsert+hold': no answer until a file appears); UPDATE id 1 to state 1 on the primary
# (its upsert held); primary stopped (fast); standby promoted; UPDATE id 1 to state 2
# there; chroma_flush true (state 2 sent); the held state 1 is delivered (a few seconds
# after it was sent, within its 8 s); wait 12 s.
# Before the fix: Chroma kept state 1 (verify 10|0|0|1).
# Expected: state 2 (the promoted node's worker waits for, or resends after, the bound of
# the requests the previous worker of the database left unanswered — as after a restart
# of the same node, TAP 037).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert+hold');
my $coll = 'cs_t253';

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = 'http://127.0.0.1:$pport'
chroma_sync.timeout = 8000
chroma_sync.retry_max_delay = 2000
log_line_prefix = '%m [%p] %b '
});
$primary->start;
my $plog0 = log_offset($primary);
$primary->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
$primary->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$primary->safe_psql('postgres', 'INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($primary, $coll);
$primary->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($primary->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
my $slog0 = log_offset($standby);

open(my $fh, '>', $arm) or die;
close($fh);
$primary->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 1 is held, unanswered');
sleep 0.3;
$primary->wait_for_catchup($standby, 'replay');
$primary->stop('fast');
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'the standby was promoted');
$standby->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
# the late write lands while the promoted node's worker may still be waiting
ok(wait_for('the promoted worker waits, or sent state 2', 30, sub {
	slurp_file($standby->logfile, $slog0) =~ /this server is on timeline \d+, the worker.s last record is from timeline \d+: nothing is sent for/
	  || $standby->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])") eq '{2,2,2}' }),
	'the promoted node\'s worker started');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 1 reached Chroma');
is($standby->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'flushed again');
is($standby->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"),
	'{2,2,2}', "Chroma holds state 2, the table's");
is($standby->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('d')}),
	'10|0|0|0', 'chroma_verify: exact');

finish($standby, $slog0);
