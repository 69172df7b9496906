# A worker that exits while a request is in flight (terminated, killed with the server's
# crash restart, or stopped with the server) leaves a request whose answer never came: the
# server may still apply it, after the next worker sent a newer state of the same row,
# and the stale state would win with nothing left to send the row again (the queue entry
# of the newer state is gone once it was acknowledged).
#
# A proxy holds the upsert of state 1 without answering; the worker exits; the row gets
# state 2; the held request is delivered to Chroma once the next worker had its chance to
# send state 2 first (its log says it waits, or Chroma holds state 2). The next worker must
# send nothing before the previous worker's requests can no longer be applied (their start
# plus chroma_sync.timeout, 8 s here, kept in a file of the data directory), so Chroma ends
# with state 2. A worker that exits with every answer in must not make the next one wait.
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
my $pport = start_proxy('late_proxy.pl', $dir, $arm, "$dir/release", 'upsert+hold');

my $coll = 'cs_t037';
my $node = new_node('t037',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\nrestart_after_crash = on\n");
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

my $n = 0;
for my $how ('terminated', 'killed (crash restart)', 'stopped with the server')
{
	$n++;
	my $release = "$dir/release";
	unlink($release, "$release.done");
	my $off = log_offset($node);
	my $s1 = "[$n, 1, 1]";
	my $s2 = "[$n, 2, 2]";

	open(my $fh, '>', $arm) or die;
	close($fh);
	$node->safe_psql('postgres', "UPDATE d SET embedding = ARRAY$s1 WHERE id = 1");
	ok(wait_for('the held upsert', 20, sub { !-e $arm }), "$how: the upsert of state 1 is held, unanswered");
	sleep 0.3;

	my $w = worker_pid($node);
	if ($how eq 'terminated')
	{
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
	}
	elsif ($how =~ /killed/)
	{
		kill('KILL', $w);
		ok(wait_for('the crash restart', 60, sub {
			slurp_file($node->logfile, $off) =~ /database system is ready to accept connections/ }),
			"$how: the server restarted");
	}
	else
	{
		$node->restart(fail_ok => 0);
	}
	$node->safe_psql('postgres', "UPDATE d SET embedding = ARRAY$s2 WHERE id = 1");
	(my $want2 = $s2) =~ s/[\[\] ]//g;
	(my $want1 = $s1) =~ s/[\[\] ]//g;
	# the next worker's chance to send state 2 before the held state 1 lands
	ok(wait_for('the next worker waits, or state 2 was sent', 30, sub {
		slurp_file($node->logfile, $off) =~ /may still be applied until/
		  || chroma_embedding() eq "{$want2}" }), "$how: the next worker started");
	like(slurp_file($node->logfile, $off), qr/requests of the previous worker of this database may still be applied until/,
		"$how: the next worker says it waits for the previous worker's requests");
	isnt(chroma_embedding(), "{$want2}", "$how: state 2 was not sent before the held request landed");
	open($fh, '>', $release) or die;
	close($fh);
	ok(wait_for('the late write', 30, sub { -e "$release.done" }), "$how: the held state 1 reached Chroma");
	is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
		"$how: flushed");
	sleep 0.5;
	is(chroma_embedding(), "{$want2}", "$how: Chroma holds state 2, the table's");
	is($node->safe_psql('postgres', 'SELECT rows, missing, extra, different FROM chroma_verify(\'d\')'),
		'10|0|0|0', "$how: chroma_verify: exact");
	$log0 = log_offset($node) if $how =~ /killed/;	# that crash was the test's own
}

# every answer in: the next worker does not wait
{
	my $off = log_offset($node);
	$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[7, 7, 7] WHERE id = 2');
	is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '20 seconds')"), 't', 'idle: flushed');
	my $w = worker_pid($node);
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
	$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[8, 8, 8] WHERE id = 2');
	is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '20 seconds')"), 't',
		'idle worker terminated: the next one flushed');
	unlike(slurp_file($node->logfile, $off), qr/may still be applied until/,
		'a worker that exited with every answer in does not make the next one wait');
}

finish($node, $log0);
