# Red team (79b9cfa): for a request timed out by libcurl, chroma_sync_unsettled.<db> keeps
# only its start + chroma_sync.timeout (+1 s) — already past when the timeout fires — while
# the worker itself (sync_unknown.c) holds the keys back until the timeout + chroma_sync.timeout
# (the server may still apply it until then). A worker that exits between the timeout and
# the commit of the keys into chroma_sync.resend leaves the next worker no wait at all:
# it sends the newer state at once and the stale request, applied within the bound the
# worker itself assumes, wins.
#
# Sequence: rows 1..10 synced (timeout 8 s); late_proxy 'upsert+hold' armed (no answer
# until a file appears); another session holds LOCK chroma_sync.resend IN EXCLUSIVE MODE
# (only to hold the worker between the timeout and the resend commit; a kill at any
# instant of that window is the same); UPDATE id 1 to state 1 -> held -> libcurl times
# out after 8 s -> worker waits to write resend -> pg_terminate_backend; lock released;
# UPDATE id 1 to state 2; chroma_flush true (state 2 sent: the next worker did not wait);
# the held state 1 is delivered (~1-2 s after the timeout, within the 8 s the worker's
# resend assumes); wait 12 s.
# Observed: Chroma keeps state 1, chroma_verify 10|0|0|1.
# Expected: state 2, 10|0|0|0 (the file's bound for a timed-out request should match
# resend's: the time-out + chroma_sync.timeout).
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
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert+hold');

my $coll = 'cs_t255';
my $node = new_node('t255',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
$node->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$node->safe_psql('postgres', 'INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

sub chroma_embedding
{
	return $node->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])");
}

my $s = $node->background_psql('postgres');
$s->query_safe('BEGIN; LOCK TABLE chroma_sync.resend IN EXCLUSIVE MODE;');

open(my $fh, '>', $arm) or die;
close($fh);
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the held upsert', 20, sub { !-e $arm }), 'the upsert of state 1 is held');
my $w = worker_pid($node);
ok(wait_for('the worker writes the timed-out keys to resend', 40, sub {
	$node->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE pid = $w AND NOT granted "
		  . "AND relation = 'chroma_sync.resend'::regclass") eq '1' }),
	'the worker is between the time-out and the resend commit');
my $off = log_offset($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
ok(wait_for('the worker exits', 20, sub {
	$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $w") eq '0' }),
	'worker terminated');
$s->query_safe('COMMIT;');
$s->quit;

$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
# the late write lands while the next worker may still be waiting (within the timeout)
ok(wait_for('the next worker waits, or sent state 2', 30, sub {
	slurp_file($node->logfile, $off) =~ /may still be applied until/ || chroma_embedding() eq '{2,2,2}' }),
	'the next worker started');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the held state 1 reached Chroma');
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'flushed again');
is(chroma_embedding(), '{2,2,2}', 'Chroma holds state 2, the table\'s');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('d')}),
	'10|0|0|0', 'chroma_verify: exact');

finish($node, $log0);
