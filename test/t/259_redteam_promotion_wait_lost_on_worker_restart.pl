# RED TEAM REPRO (664e035): after a promotion the first worker waits one request timeout
# (unsettled_check_timeline), but only in its memory: the check rewrites the unsettled
# file with the new timeline and the file's old value (unsettled_written, 0 here), not
# with the end of that wait. A worker that ends during the wait (terminated, a crash of
# the worker, a restart of the server) leaves a file naming the current timeline and no
# bound, so the next worker sends at once, while the old primary's unanswered request may
# still be applied: it overwrites the newer state, nothing sends it again. (unsettled_begin
# keeps its own bound in the file "while this worker waits for it (a kill meanwhile leaves
# it for the next one)"; the timeline's wait does not.)
#
# Sequence: primary (timeout 8 s) + streaming standby, both through late_proxy
# ('upsert+hold'); UPDATE id 1 to state 1 on the primary (its upsert held); primary
# stopped; standby promoted; its worker logs "nothing is sent for 8000 ms"; that worker is
# terminated at once; UPDATE id 1 to state 2; the next worker starts.
# Before the fix: the next worker sends state 2 at once (within the old primary's 8 s), the held
# state 1 then lands, chroma_flush says done, Chroma keeps state 1 (verify 10|0|0|1).
# Expected: the next worker waits out the same bound (as after a kill during
# unsettled_begin's wait, TAP 037): Chroma holds state 2.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert+hold');
my $coll = 'cs_t902';

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

sub emb { return $standby->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])"); }

open(my $fh, '>', $arm) or die;
close($fh);
$primary->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 1 is held, unanswered');
my $sent = time();
sleep 0.3;
$primary->wait_for_catchup($standby, 'replay');
$primary->stop('fast');
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'the standby was promoted');
ok(wait_for('the promoted worker waits', 30, sub {
	slurp_file($standby->logfile, $slog0) =~ /this server is on timeline \d+, the worker.s last record is from timeline \d+: nothing is sent for/ }),
	'the promoted node\'s worker waits one timeout');
my $w = worker_pid($standby);
$standby->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
$standby->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
ok(wait_for_new_worker($standby, $w) ne '', 'the next worker runs');
# that worker should not send before the old primary's request is settled (8 s after it
# was sent): look until then whether state 2 went out
my $early = 0;
while (time() < $sent + 7)
{
	if (emb() eq '{2,2,2}') { $early = 1; last; }
	sleep 0.2;
}
diag(sprintf('state 2 sent %s %.1f s after the held request', $early ? 'already' : 'not yet', time() - $sent));
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 1 reached Chroma');
is($standby->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'flushed');
sleep 3;
is(emb(), '{2,2,2}', "Chroma holds state 2, the table's");
is($standby->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('d')}),
	'10|0|0|0', 'chroma_verify: exact');
ok(!$early, 'the next worker did not send within the old primary\'s timeout');
finish($standby, $slog0);
