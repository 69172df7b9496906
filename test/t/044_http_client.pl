# The HTTP client against what surrounds it: DNS that never answers, the server's
# environment, the API key file, and servers whose answers are not UTF-8, never end, or
# are larger than allowed.
# - DNS: a server started in private namespaces (test/lib/private_ns.pl) whose resolver
#   reads queries and never answers; statement_timeout, chroma_sync.connect_timeout,
#   pg_cancel_backend, pg_terminate_backend (of a backend and of the worker) and a fast
#   shutdown each take effect within seconds, not after the resolver's 30 s;
# - http_proxy, https_proxy and ALL_PROXY in the server's environment are ignored (the
#   request, and its x-chroma-token, go to Chroma directly); chroma_sync.proxy, which only
#   a superuser sets, names a proxy that is used;
# - chroma_sync.api_key_file naming a FIFO, a directory or a device: a clear error at once,
#   never a backend blocked in open();
# - invalid UTF-8 in a response: 22021, nothing stored;
# - a collection list that ignores offset, or never ends: an error, not an endless loop;
# - a response larger than chroma_sync.max_response_size: 54000 with a hint.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX qw(mkfifo);
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $fake = "$root/test/lib/fake_chroma.pl";
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $dns_pid_file = "$tmp/dns.pid";

# Misbehaving servers; the sink also records every request (the "proxy" below).
my (%fake, @servers);
for my $mode (qw(sink badutf8 nooffset endless))
{
	my $port_file = "$tmp/$mode.port";
	local $ENV{FAKE_CHROMA_REQUEST_LOG} = "$tmp/$mode.requests";
	push @servers, IPC::Run::start([ 'perl', $fake, $mode, $port_file, "$tmp/$mode.count" ]);
	my $t0 = time;
	usleep(50_000) until -s $port_file || time - $t0 > 20;
	my $port = slurp_file($port_file);
	chomp $port;
	$fake{$mode} = "http://127.0.0.1:$port";
}
END { $_->kill_kill for @servers; }
sub requests_seen
{
	my ($mode) = @_;
	return -e "$tmp/$mode.requests" ? slurp_file("$tmp/$mode.requests") : '';
}

# Runs $sql with verbose errors; returns (SQLSTATE or 'ok', seconds, stderr).
sub timed
{
	my ($node, $sql, $timeout) = @_;
	my $t0 = time;
	my $timed_out = 0;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => $timeout // 60,
		timed_out => \$timed_out);
	my $secs = time - $t0;
	my ($state) = ($err // '') =~ /ERROR:  ([0-9A-Z]{5}):/;
	$state //= $timed_out ? 'timed out' : ($ret == 0 ? 'ok' : "exit $ret");
	return ($state, $secs, $err // '', $out // '');
}

# ---------------------------------------------------------------- the server's environment
my $key = 'h2-env-key-' . join('', map { ('a' .. 'z')[ int(rand(26)) ] } 1 .. 12);
my $proxy = $fake{sink};
my $envnode;
{
	local $ENV{http_proxy} = $proxy;
	local $ENV{HTTP_PROXY} = $proxy;
	local $ENV{https_proxy} = $proxy;
	local $ENV{HTTPS_PROXY} = $proxy;
	local $ENV{ALL_PROXY} = $proxy;
	local $ENV{all_proxy} = $proxy;
	$envnode = new_node('http_env', conf => "chroma_sync.api_key = '$key'\n");
}
my ($state, $secs, $err, $out) = timed($envnode, 'SELECT chroma_heartbeat()');
ok($state eq 'ok' && $out > 1, "proxy variables in the server's environment: the heartbeat comes from Chroma ($state $out)");
is(requests_seen('sink'), '', 'the proxy named by the environment saw no request (and no key)');

$envnode->safe_psql('postgres', q{CREATE ROLE cs_t044_user LOGIN});
($state) = timed($envnode, qq{SET ROLE cs_t044_user; SET chroma_sync.proxy = '$proxy'});
is($state, '42501', 'chroma_sync.proxy is superuser-only');
($state) = timed($envnode, q{SET chroma_sync.proxy = 'ftp://127.0.0.1:21'});
is($state, '22023', 'chroma_sync.proxy must be an http(s) or socks URL');
unlink "$tmp/sink.requests";
($state, $secs, $err, $out) = timed($envnode, qq{SET chroma_sync.proxy = '$proxy'; SELECT chroma_heartbeat()});
is("$state $out", 'ok 1', 'chroma_sync.proxy names a proxy that is used (the fake proxy answered the heartbeat)');
like(requests_seen('sink'), qr{^GET http://127\.0\.0\.1:$ENV{CHROMA_PORT}/api/v2/heartbeat token=yes$}m,
	'the request went through chroma_sync.proxy');
$envnode->stop;

my $node = new_node('http_client');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE ROLE cs_t044_user LOGIN});

# ---------------------------------------------------------------- api_key_file
mkfifo("$tmp/key.fifo", 0600) or die "mkfifo: $!";
mkdir "$tmp/key.dir";
for my $c ([ 'a FIFO', "$tmp/key.fifo" ], [ 'a directory', "$tmp/key.dir" ], [ 'a device', '/dev/zero' ])
{
	my ($what, $path) = @$c;
	($state, $secs, $err) = timed($node,
		qq{SET chroma_sync.api_key = ''; SET chroma_sync.api_key_file = '$path'; SELECT chroma_heartbeat()}, 15);
	ok($state eq '22023' && $err =~ /not a regular file/ && $secs < 5,
		"api_key_file naming $what: 22023 not a regular file, at once")
	  or diag(sprintf("%s after %.1f s: %s", $state, $secs, $err));
	if ($state eq 'timed out')
	{
		# a backend stuck in open(): a writer releases it
		my $w;
		close($w) if sysopen($w, "$tmp/key.fifo", POSIX::O_WRONLY | POSIX::O_NONBLOCK);
	}
}

# ---------------------------------------------------------------- invalid UTF-8 from the server
for my $c ([ 'chroma_list_collections', 'SELECT * FROM chroma_list_collections()' ],
	[ 'chroma_heartbeat', 'SELECT chroma_heartbeat()' ],
	[ 'chroma_get', q{SELECT * FROM chroma_get('coll')} ])
{
	my ($fn, $sql) = @$c;
	($state, $secs, $err, $out) = timed($node, "SET chroma_sync.url = '$fake{badutf8}'; $sql");
	# (chroma_get's strings were already checked one by one: 22021 before the fix too)
	ok($state eq '22021' && ($fn eq 'chroma_get' || $err =~ /not valid UTF-8/),
		"$fn: a response that is not UTF-8 is 22021")
	  or diag("$state: $err$out");
}

($state, $secs, $err) = timed($node, "SET chroma_sync.url = '$fake{badutf8}'; SELECT chroma_create_collection('coll')");
ok($state eq '22023' && $err =~ /DETAIL:.*bad \?\? name/ && $err !~ /[\x80-\xff]/,
	'an error message that is not UTF-8 is shown escaped, never passed on')
  or diag("$state: $err");

# ---------------------------------------------------------------- collection lists that never end
($state, $secs, $err) = timed($node,
	"SET chroma_sync.url = '$fake{nooffset}'; SELECT count(*) FROM chroma_list_collections()", 30);
ok($state eq '38000' && $err =~ /same page/, 'a server that ignores offset: 38000 at the second page')
  or diag(sprintf("%s after %.1f s: %s", $state, $secs, $err));
($state, $secs, $err) = timed($node,
	"SET chroma_sync.url = '$fake{endless}'; SET chroma_sync.max_response_size = '256kB';
	SELECT count(*) FROM chroma_list_collections()", 60);
ok($state eq '54000' && $err =~ /HINT:.*max_response_size/, 'a list that never ends: 54000 once it exceeds max_response_size')
  or diag(sprintf("%s after %.1f s: %s", $state, $secs, $err));
my $pages = () = requests_seen('endless') =~ /collections\?limit/g;
note("pages read from the endless list: $pages");

# ---------------------------------------------------------------- responses larger than allowed
fresh_collection($node, 'cs_t044_big');
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t044_big')});
$node->safe_psql('postgres', q{
SELECT chroma_upsert('cs_t044_big', ARRAY['a', 'b'], ARRAY[[1, 2], [3, 4]]::real[],
	ARRAY[repeat('x', 200000), repeat('y', 200000)])});
($state, $secs, $err) = timed($node,
	q{SET chroma_sync.max_response_size = '100kB'; SELECT count(*) FROM chroma_get('cs_t044_big')});
ok($state eq '54000' && $err =~ /HINT:/, 'a response larger than max_response_size: 54000 with a hint')
  or diag("$state: $err");
unlike($err, qr/may or may not have applied/, 'an oversized answer is not reported as an outcome-unknown failure');
($state, $secs, $err, $out) = timed($node, q{SELECT count(*) FROM chroma_get('cs_t044_big')});
is("$state $out", 'ok 2', 'the same read under the default limit works');
($state) = timed($node, q{SET ROLE cs_t044_user; SET chroma_sync.max_response_size = '1GB'});
is($state, '42501', 'only a superuser raises max_response_size');

# ---------------------------------------------------------------- DNS that never answers
# A second server whose resolver never answers: each wait below must end in seconds.
my $resolv = "$tmp/resolv.conf";
PostgreSQL::Test::Utils::append_to_file($resolv, "nameserver 127.0.0.1\noptions timeout:30 attempts:1\n");
my $dns = PostgreSQL::Test::Cluster->new('http_dns');
$dns->init;
$dns->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = 'http://chroma.unanswered.example:8000'
log_line_prefix = '%m [%p] %b '
});
my @ns = ('perl', "$root/test/lib/private_ns.pl", '--bind', "$resolv:/etc/resolv.conf",
	'--dns-blackhole', $dns_pid_file, '--');
my ($nsout, $nserr);
IPC::Run::run([ 'perl', "$root/test/lib/private_ns.pl", '--', 'true' ], '>', \$nsout, '2>', \$nserr);
if ($? >> 8 == 3)
{
	diag("unprivileged user namespaces are not available here: $nserr");
	fail('DNS tests need a private network namespace');
	finish($node, $log0);
	exit;
}
# the namespace's resolver, and a sink (a stand-in Chroma on the namespace's loopback)
my $ns_sink_pid_file = "$tmp/ns_sink.pid";
END
{
	for my $f ($dns_pid_file, $ns_sink_pid_file)
	{
		next unless -e $f;
		my $p = slurp_file($f);
		chomp $p;
		kill 'KILL', $p if $p =~ /^\d+$/;
	}
}
PostgreSQL::Test::Utils::system_or_bail(@ns, 'sh', '-c',
	'perl "$1" sink "$2" "$3" </dev/null >/dev/null 2>&1 & echo $! > "$4"; shift 4; exec "$@"', 'sh',
	$fake, "$tmp/ns_sink.port", "$tmp/ns_sink.count", $ns_sink_pid_file,
	'pg_ctl', '-w', '-D', $dns->data_dir, '-l', $dns->logfile, '-o', '--cluster-name=http_dns', 'start');
$dns->_update_pid(1);
$dns->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
wait_for('the sink in the namespace', 20, sub { -s "$tmp/ns_sink.port" });
my $ns_sink = 'http://127.0.0.1:' . slurp_file("$tmp/ns_sink.port");
chomp $ns_sink;

my ($t0, $t1);
($state, $secs, $err) = timed($dns, q{SET statement_timeout = '1s'; SET chroma_sync.connect_timeout = 600000;
SELECT chroma_heartbeat()});
ok($state eq '57014' && $secs < 4, sprintf('DNS never answers: statement_timeout = 1s ends the call (%s after %.1f s)', $state, $secs));
($state, $secs, $err) = timed($dns, q{SET chroma_sync.connect_timeout = 1000; SELECT chroma_heartbeat()});
ok($state eq '08001' && $secs < 4, sprintf('DNS never answers: connect_timeout = 1s ends the call (%s after %.1f s)', $state, $secs))
  or diag($err);

# a call in another session, then cancel or terminate it
sub blocked_call
{
	my ($name) = @_;
	my ($in, $out, $perr) = ('', '', '');
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $dns->connstr('postgres'),
		'-c', "SET application_name = '$name'; SET chroma_sync.connect_timeout = 600000; SELECT chroma_heartbeat()" ],
		'<', \$in, '>', \$out, '2>', \$perr);
	my $pid = '';
	wait_for("$name waits in the resolver", 20, sub {
		$pid = $dns->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE application_name = '$name' AND state = 'active'");
		$pid ne '';
	});
	sleep 1;    # well inside getaddrinfo
	return ($h, $pid, \$perr);
}
for my $how ([ 'pg_cancel_backend', '57014' ], [ 'pg_terminate_backend', '57P01' ])
{
	my ($fn, $want) = @$how;
	my ($h, $pid, $perr) = blocked_call("cs_t044_$fn");
	$t0 = time;
	$dns->safe_psql('postgres', "SELECT $fn($pid)");
	my $gone = wait_for("$fn takes effect", 40, sub {
		$dns->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND state = 'active'") eq '0';
	});
	$secs = time - $t0;
	$h->finish;
	ok($gone && $secs < 3 && $$perr =~ /$want/, sprintf('DNS never answers: %s ends the call in %.1f s', $fn, $secs))
	  or diag($$perr);
}

# the worker: a mirror synced through the sink, then the URL names a host DNS never answers
set_conf($dns, 'chroma_sync.url', $ns_sink);
$dns->safe_psql('postgres', q{CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
SELECT chroma_mirror('t', 'cs_t044_dns', backfill => false);
INSERT INTO t VALUES (1, '{1, 2}')});
is($dns->safe_psql('postgres', q{SELECT chroma_flush('t', '30 s')}), 't', 'a mirror syncs through the sink in the namespace');
set_conf($dns, 'chroma_sync.url', 'http://chroma.unanswered.example:8000');
$dns->safe_psql('postgres', q{INSERT INTO t VALUES (2, '{3, 4}')});
sleep 2;    # the worker wakes at the commit and waits in the resolver
my $wpid = worker_pid($dns);
$t0 = time;
$dns->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)");
my $wgone = wait_for('the worker exits', 40, sub {
	$dns->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $wpid") eq '0';
});
$secs = time - $t0;
ok($wgone && $secs < 3, sprintf('DNS never answers: pg_terminate_backend of the worker takes %.1f s', $secs));
my $wnew = wait_for_new_worker($dns, $wpid, 30);
ok($wnew ne '', 'a new worker starts (and waits in the resolver again)');
sleep 2;

# a fast shutdown while a backend (and the worker) wait in the resolver
my ($h) = blocked_call('cs_t044_shutdown');
$t0 = time;
$dns->stop('fast');
$secs = time - $t0;
$h->finish;
ok($secs < 5, sprintf('DNS never answers: a fast shutdown takes %.1f s', $secs));

finish($node, $log0);
