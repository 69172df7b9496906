# Failure paths of the HTTP layer: Chroma down (closed port, or a port that never
# completes the TCP handshake), a server that accepts requests but never answers
# (statement_timeout, chroma_sync.timeout, pg_cancel_backend, pg_terminate_backend).
# Calls fail promptly with the right SQLSTATE, backends stay usable, nothing crashes.
use strict;
use warnings;

use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $fake = "$root/test/lib/fake_chroma.pl";

my $node = PostgreSQL::Test::Cluster->new('unreachable');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'chroma_sync'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

# Runs $sql in a fresh session with verbose errors, going on after errors; returns
# (stdout, stderr, seconds).
sub timed_psql
{
	my ($sql) = @_;
	my $t = time;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($out, $err, time - $t);
}

# ---- a closed port: refused at once
my $closed = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
	Listen => 1) or die "socket: $!";
my $closed_port = $closed->sockport;
$closed->close;
my $closed_url = "http://127.0.0.1:$closed_port";

my ($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$closed_url';
	SET chroma_sync.connect_timeout = 1000;
	SELECT chroma_heartbeat();
	SELECT 'still usable';
});
like($err, qr/ERROR:  08001: could not connect to Chroma at "\Q$closed_url\E"/,
	'closed port: class 08 error naming the URL');
cmp_ok($secs, '<', 3, sprintf('closed port: fails within connect_timeout + 2 s (%.2f s)', $secs));
like($out, qr/still usable/, 'closed port: the session goes on');

($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$closed_url';
	SET chroma_sync.connect_timeout = 1000;
	SELECT chroma_upsert('tap_down', ARRAY['a'], ARRAY[1, 2]::real[]);
});
like($err, qr/ERROR:  08001: could not connect to Chroma at "\Q$closed_url\E"/,
	'closed port: chroma_upsert fails with class 08 too');
like($out . $err, qr/HINT:  Check that the server is running/, 'closed port: with a hint')
  or diag($err);

# ---- a listener whose accept queue is full: the handshake never completes
my $full = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
	Listen => 1) or die "socket: $!";
my $full_port = $full->sockport;
my @fillers;
for (1 .. 16)
{
	my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $full_port,
		Proto => 'tcp', Timeout => 1);
	last unless $c;
	push @fillers, $c;
}
my $full_url = "http://127.0.0.1:$full_port";
($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$full_url';
	SET chroma_sync.connect_timeout = 1000;
	SET chroma_sync.timeout = 600000;
	SELECT chroma_heartbeat();
});
like($err, qr/ERROR:  08001: could not connect to Chroma at "\Q$full_url\E"/,
	'no handshake: class 08 error naming the URL');
cmp_ok($secs, '>=', 0.8, sprintf('no handshake: waits for connect_timeout (%.2f s)', $secs));
cmp_ok($secs, '<', 3, sprintf('no handshake: fails within connect_timeout + 2 s (%.2f s)', $secs));

# ---- a server that accepts requests and never answers
my $dir = PostgreSQL::Test::Utils::tempdir();
my $port_file = "$dir/hang.port";
my $hang = IPC::Run::start([ 'perl', $fake, 'hang', $port_file ]);
my $t0 = time;
usleep(50_000) until -s $port_file || time - $t0 > 10;
my $hang_port = slurp_file($port_file);
chomp $hang_port;
my $hang_url = "http://127.0.0.1:$hang_port";

($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$hang_url';
	SET chroma_sync.timeout = 600000;
	SET statement_timeout = '2s';
	SELECT chroma_heartbeat();
	SELECT 'still usable';
	RESET statement_timeout;
	SELECT 'after ' || count(*) FROM pg_class WHERE relname = 'pg_class';
});
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/,
	'no answer: statement_timeout cancels the request (57014)');
cmp_ok($secs, '<', 4, sprintf('no answer: cancelled within 4 s (%.2f s)', $secs));
like($out, qr/still usable\nafter 1/, 'no answer: the backend stays usable');

($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$hang_url';
	SET chroma_sync.timeout = 600000;
	SET statement_timeout = '2s';
	SELECT chroma_upsert('tap_hang', ARRAY['a', 'b'], ARRAY[[1, 2], [3, 4]]::real[]);
	SELECT count(*) FROM chroma_get('tap_hang');
});
is(scalar(() = $err =~ /ERROR:  57014: canceling statement due to statement timeout/g), 2,
	'no answer: upsert and get are cancelled by statement_timeout too');
cmp_ok($secs, '<', 7, sprintf('no answer: both cancelled promptly (%.2f s)', $secs));

($out, $err, $secs) = timed_psql(qq{
	SET chroma_sync.url = '$hang_url';
	SET chroma_sync.timeout = 1000;
	SELECT chroma_heartbeat();
	SELECT 'still usable';
});
like($err, qr/ERROR:  08\d\d\d: .*Chroma at "\Q$hang_url\E"/,
	'no answer: chroma_sync.timeout gives a class 08 error naming the URL');
cmp_ok($secs, '<', 3, sprintf('no answer: chroma_sync.timeout = 1 s is honoured (%.2f s)', $secs));
like($out, qr/still usable/, 'no answer: the session goes on after the timeout');

# ---- pg_cancel_backend and pg_terminate_backend of a backend waiting for an answer
sub start_waiting_backend
{
	my ($name) = @_;
	my ($stdin, $stdout, $stderr) = ('', '', '');
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'),
			'-c', "SET application_name = '$name'",
			'-c', "SET chroma_sync.url = '$hang_url'",
			'-c', 'SET chroma_sync.timeout = 600000',
			'-c', 'SELECT chroma_heartbeat()',
			'-c', "SELECT 'session of $name goes on'"
		],
		\$stdin, \$stdout, \$stderr);
	my $pid = '';
	my $t = time;
	while (time - $t < 30)
	{
		$pid = $node->safe_psql('postgres', qq{
			SELECT pid FROM pg_stat_activity
			WHERE application_name = '$name' AND query LIKE '%chroma_heartbeat%'
				AND wait_event_type = 'Extension'});
		last if $pid ne '';
		usleep(100_000);
	}
	return ($h, $pid, \$stdout, \$stderr);
}

my ($h, $pid, $stdout, $stderr) = start_waiting_backend('tap_cancel');
isnt($pid, '', 'a backend waits for the server (wait event Extension)');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
my $finished = eval { $h->finish; 1 };
$secs = time - $t0;
like($$stderr, qr/ERROR:  57014: canceling statement due to user request/,
	'pg_cancel_backend cancels the request (57014)');
cmp_ok($secs, '<', 2, sprintf('pg_cancel_backend: cancelled within 2 s (%.2f s)', $secs));
like($$stdout, qr/session of tap_cancel goes on/, 'pg_cancel_backend: the session goes on');

($h, $pid, $stdout, $stderr) = start_waiting_backend('tap_terminate');
isnt($pid, '', 'another backend waits for the server');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
eval { $h->finish; 1 };
my $gone = 0;
while (time - $t0 < 10)
{
	$gone = $node->safe_psql('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid") eq 't';
	last if $gone;
	usleep(50_000);
}
$secs = time - $t0;
ok($gone, 'pg_terminate_backend ends the backend');
cmp_ok($secs, '<', 2, sprintf('pg_terminate_backend: gone within 2 s (%.2f s)', $secs));
like($$stderr, qr/terminating connection due to administrator command/,
	'pg_terminate_backend: the client is told why');

# ---- the cluster never restarted
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'the postmaster was not restarted');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|server process .* was terminated|reinitializing/,
	'no backend crashed');

$node->stop;
$hang->kill_kill;
$_->close for @fillers;
$full->close;
done_testing();
