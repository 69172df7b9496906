# TLS and the API key for real: nginx on loopback terminates TLS with certificates made
# here by openssl (a throwaway CA and a server certificate it signed, a second CA, and a
# self-signed certificate), requires the header x-chroma-token (401 without it, 403 with a
# wrong one) and proxies to the test's real Chroma server.
# - with the right key and chroma_sync.ca_file: chroma_upsert, chroma_get, and a mirror
#   synced by the worker;
# - a wrong or missing key: SQLSTATE 28000 with the HTTP status; a mirror pauses with the
#   reason in chroma_sync.status and catches up after the key is fixed and it is resumed;
# - a CA that did not sign the server's certificate (or the system's CAs): 08001;
# - a self-signed certificate: 08001 with tls_verify on, works with tls_verify off;
# - chroma_sync.ca_file replaces the system's trust: a second server started in a private
#   mount namespace (test/lib/private_ns.pl) sees a system CA directory holding only the
#   second CA; a certificate signed by it is accepted without ca_file and refused with
#   ca_file naming the first CA; SSLKEYLOGFILE in that server's environment writes nothing;
# - the key never appears in the server log.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($nginx) = grep { -x $_ } ('/usr/sbin/nginx', map { "$_/nginx" } split /:/, $ENV{PATH});
plan skip_all => 'nginx is not installed (Debian package nginx)' unless $nginx;
my ($openssl) = grep { -x $_ } (map({ "$_/openssl" } split /:/, $ENV{PATH}), '/usr/bin/openssl');
BAIL_OUT('openssl is not installed') unless $openssl;

my $dir = PostgreSQL::Test::Utils::tempdir('tls');
my $key = 'h6-tls-key-' . join('', map { ('a' .. 'z')[ int(rand(26)) ] } 1 .. 16);

# ---------------------------------------------------------------- certificates
sub run_openssl
{
	my @cmd = ($openssl, @_);
	my ($out, $err);
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or BAIL_OUT("openssl failed: @_\n$err");
	return;
}
my @ec = ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes');
for my $ca ('ca', 'other_ca')
{
	run_openssl('req', '-x509', @ec, '-keyout', "$dir/$ca.key", '-out', "$dir/$ca.pem",
		'-days', '2', '-subj', "/CN=chroma_sync test $ca",
		'-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
}
run_openssl('req', @ec, '-keyout', "$dir/server.key", '-out', "$dir/server.csr", '-subj', '/CN=127.0.0.1');
PostgreSQL::Test::Utils::append_to_file("$dir/server.ext",
	"subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n"
	  . "keyUsage = critical, digitalSignature\nextendedKeyUsage = serverAuth\n");
run_openssl('x509', '-req', '-in', "$dir/server.csr", '-CA', "$dir/ca.pem", '-CAkey', "$dir/ca.key",
	'-CAcreateserial', '-out', "$dir/server.pem", '-days', '2', '-extfile', "$dir/server.ext");
# a server certificate signed by the second CA (the "system" CA of the second server)
run_openssl('req', @ec, '-keyout', "$dir/server2.key", '-out', "$dir/server2.csr", '-subj', '/CN=127.0.0.1');
run_openssl('x509', '-req', '-in', "$dir/server2.csr", '-CA', "$dir/other_ca.pem", '-CAkey', "$dir/other_ca.key",
	'-CAcreateserial', '-out', "$dir/server2.pem", '-days', '2', '-extfile', "$dir/server.ext");
run_openssl('req', '-x509', @ec, '-keyout', "$dir/self.key", '-out', "$dir/self.pem", '-days', '2',
	'-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName = IP:127.0.0.1');

# ---------------------------------------------------------------- nginx
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $self_port = PostgreSQL::Test::Cluster::get_free_port();
my $other_port = PostgreSQL::Test::Cluster::get_free_port();
my $chroma = "127.0.0.1:$ENV{CHROMA_PORT}";
mkdir "$dir/nginx_tmp";
my $location = qq{
		default_type application/json;
		if (\$http_x_chroma_token = "") {
			return 401 '{"error":"Unauthorized","message":"no x-chroma-token header"}';
		}
		if (\$token_ok = 0) {
			return 403 '{"error":"Forbidden","message":"the x-chroma-token is not valid"}';
		}
		proxy_pass http://$chroma;
		proxy_http_version 1.1;
		proxy_set_header Connection "";
		proxy_read_timeout 120s;
};
PostgreSQL::Test::Utils::append_to_file("$dir/nginx.conf", qq{
worker_processes 1;
daemon on;
pid $dir/nginx.pid;
error_log $dir/nginx_error.log info;
events { worker_connections 128; }
http {
	access_log $dir/nginx_access.log;
	client_body_temp_path $dir/nginx_tmp/body;
	proxy_temp_path $dir/nginx_tmp/proxy;
	fastcgi_temp_path $dir/nginx_tmp/fastcgi;
	uwsgi_temp_path $dir/nginx_tmp/uwsgi;
	scgi_temp_path $dir/nginx_tmp/scgi;
	client_max_body_size 64m;
	keepalive_timeout 60s;
	map \$http_x_chroma_token \$token_ok {
		default 0;
		"$key" 1;
	}
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $dir/server.pem;
		ssl_certificate_key $dir/server.key;
		location / { $location }
	}
	server {
		listen 127.0.0.1:$other_port ssl;
		ssl_certificate $dir/server2.pem;
		ssl_certificate_key $dir/server2.key;
		location / { $location }
	}
	server {
		listen 127.0.0.1:$self_port ssl;
		ssl_certificate $dir/self.pem;
		ssl_certificate_key $dir/self.key;
		location / { $location }
	}
}
});

my $nginx_started = 0;
sub stop_nginx
{
	return unless $nginx_started;
	my $pid = -r "$dir/nginx.pid" ? slurp_file("$dir/nginx.pid") : '';
	chomp $pid;
	kill 'TERM', $pid if $pid =~ /^\d+$/;
	$nginx_started = 0;
	return;
}
# stopped at the end, whatever happened (a signal, such as the harness's timeout, ends
# the test through exit, so END runs)
$SIG{TERM} = $SIG{INT} = sub { exit 1 };
END
{
	my $rc = $?;
	stop_nginx();
	$? = $rc;
}
{
	my ($out, $err);
	my $ok = IPC::Run::run([ $nginx, '-e', "$dir/nginx_error.log", '-p', $dir, '-c', "$dir/nginx.conf" ],
		'>', \$out, '2>', \$err);
	$nginx_started = 1;
	ok($ok, "nginx starts (TLS on port $port, self-signed on port $self_port)")
	  or BAIL_OUT("nginx did not start: $err\n" . (-r "$dir/nginx_error.log" ? slurp_file("$dir/nginx_error.log") : ''));
}
wait_for('nginx answers', 20, sub {
	system('curl', '-s', '-o', '/dev/null', '--cacert', "$dir/ca.pem", "https://127.0.0.1:$port/") == 0;
}) or BAIL_OUT('nginx does not answer');

# the proxy itself: no key 401, a wrong key 403, the right key reaches Chroma
sub curl_status
{
	my (@args) = @_;
	my $s = `curl -s -o /dev/null -w '%{http_code}' --cacert '$dir/ca.pem' @args`;
	return $s;
}
is(curl_status("https://127.0.0.1:$port/api/v2/heartbeat"), '401', 'the proxy answers 401 without a key');
is(curl_status('-H', "'x-chroma-token: wrong'", "https://127.0.0.1:$port/api/v2/heartbeat"), '403',
	'the proxy answers 403 with a wrong key');
is(curl_status('-H', "'x-chroma-token: $key'", "https://127.0.0.1:$port/api/v2/heartbeat"), '200',
	'the proxy passes the right key through to Chroma');

# ---------------------------------------------------------------- PostgreSQL through the proxy
my $url = "https://127.0.0.1:$port";
my $node = new_node('tls', conf => qq{
chroma_sync.connect_timeout = 2000
});
# the worker reads the connection settings from the configuration (not from ALTER SYSTEM:
# the statement log would show the key)
$node->append_conf('postgresql.conf', qq{
chroma_sync.url = '$url'
chroma_sync.ca_file = '$dir/ca.pem'
chroma_sync.api_key = '$key'
});
$node->reload;
my $log0 = log_offset($node);
ok(poll_query($node, 'SELECT chroma_heartbeat() > 0', 't', 20), 'chroma_heartbeat through TLS with the key');

sub verbose_error
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return ($ret, $err);
}

# sync with the right key and CA
fresh_collection($node, 'cs_t043_direct');
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t043_direct')});
is($node->safe_psql('postgres', q{
SELECT chroma_upsert('cs_t043_direct', ARRAY['a', 'b'], ARRAY[[1, 2, 3], [4, 5, 6.5]]::real[],
	ARRAY['first', 'second'], ARRAY['{"k": 1}', '{"k": 2}']::jsonb[])}), '2',
	'chroma_upsert through the TLS proxy');
is($node->safe_psql('postgres', q{SELECT string_agg(id || ':' || embedding::text || ':' || document || ':' || metadata::text, ' ' ORDER BY id)
FROM chroma_get('cs_t043_direct')}),
	'a:{1,2,3}:first:{"k": 1} b:{4,5,6.5}:second:{"k": 2}', 'chroma_get reads them back through the proxy');
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY distance) FROM chroma_query('cs_t043_direct', ARRAY[1, 2, 3]::real[], 2)}),
	'a,b', 'chroma_query through the proxy');

# a mirror synced by the worker through the proxy
make_table($node, 'docs', rows => 300, dim => 8);
fresh_collection($node, 'cs_t043_docs');
mirror($node, 'docs', 'cs_t043_docs');
insert_rows($node, 'docs', 301, 50, 8);
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'changed' WHERE id <= 10; DELETE FROM docs WHERE id BETWEEN 20 AND 29});
assert_equal($node, 'docs', 'cs_t043_docs', name => 'mirror through TLS');
like(slurp_file("$dir/nginx_access.log"), qr{POST /api/v2/tenants/default_tenant/databases/default_database/collections/[0-9a-f-]+/upsert HTTP/1.1" 200},
	'the upserts went through nginx');

# ---------------------------------------------------------------- wrong or missing key
my ($ret, $err) = verbose_error(q{SET chroma_sync.api_key = 'wrong-key'; SELECT chroma_count('cs_t043_direct')});
like($err, qr/ERROR:\s+28000: Chroma denied the request/, 'a wrong key: SQLSTATE 28000');
like($err, qr/DETAIL:\s+HTTP 403 Forbidden: the x-chroma-token is not valid/, 'with the HTTP status and the proxy\'s message');
like($err, qr/HINT:\s+Check chroma_sync.api_key/, 'and a hint about the key');
($ret, $err) = verbose_error(q{SET chroma_sync.api_key = ''; SELECT chroma_upsert('cs_t043_direct', ARRAY['c'], ARRAY[7, 8, 9]::real[])});
like($err, qr/ERROR:\s+28000:.*\n.*DETAIL:\s+HTTP 401 Unauthorized/, 'no key: SQLSTATE 28000, HTTP 401');
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_get('cs_t043_direct')}), '2',
	'nothing was written without the key');
($ret, $err) = verbose_error(q{SET chroma_sync.api_key = ''; SELECT chroma_server_info() ->> 'reachable'});
note("chroma_server_info without a key: $err");

# a mirror with a wrong key pauses with the reason, and catches up after the fix
$node->append_conf('postgresql.conf', "chroma_sync.api_key = 'wrong-key'\n");
$node->reload;
sleep 1;
$node->safe_psql('postgres', q{INSERT INTO docs VALUES (1000, '{1,2,3,4,5,6,7,8}', 'written with a wrong key', '{"w": 1}');
UPDATE docs SET doc = 'updated with a wrong key' WHERE id = 1});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'docs'::regclass}, 'paused', 60),
	'a mirror whose requests are refused with 403 pauses');
like(status_row($node, 'docs', 'last_error'), qr/403/, 'chroma_sync.status shows the 403 in last_error');
note('last_error: ' . status_row($node, 'docs', 'last_error'));
is(status_row($node, 'docs', 'pending'), '2', 'the changes stay queued');
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.failed}), '0',
	'no row is blamed for a key error');
$node->append_conf('postgresql.conf', "chroma_sync.api_key = '$key'\n");
$node->reload;
sleep 1;
$node->safe_psql('postgres', q{SELECT chroma_resume('docs')});
assert_equal($node, 'docs', 'cs_t043_docs', name => 'after the key is fixed and the mirror resumed');

# ---------------------------------------------------------------- certificates that do not verify
($ret, $err) = verbose_error("SET chroma_sync.ca_file = '$dir/other_ca.pem'; SELECT chroma_heartbeat()");
like($err, qr/ERROR:\s+08001: could not connect to Chroma at "\Q$url\E"/, 'a CA that did not sign the certificate: 08001');
like($err, qr/DETAIL:\s+.*(certificate|SSL)/i, 'the detail names the certificate problem');
like($err, qr/HINT:\s+Check chroma_sync.ca_file/, 'the hint points at chroma_sync.ca_file');
note("unknown CA: $err");
($ret, $err) = verbose_error("SET chroma_sync.ca_file = ''; SELECT chroma_count('cs_t043_direct')");
like($err, qr/ERROR:\s+08001:/, 'the system\'s CAs do not know the test CA: 08001');
($ret, $err) = verbose_error("SET chroma_sync.ca_file = '$dir/no_such_file.pem'; SELECT chroma_heartbeat()");
like($err, qr/ERROR:\s+08001:/, 'a CA file that does not exist: 08001');
note("missing CA file: $err");

my $self_url = "https://127.0.0.1:$self_port";
($ret, $err) = verbose_error("SET chroma_sync.url = '$self_url'; SELECT chroma_heartbeat()");
like($err, qr/ERROR:\s+08001: could not connect to Chroma at "\Q$self_url\E"/,
	'a self-signed certificate with tls_verify on: 08001');
# libcurl 7 says "SSL certificate problem: self-signed certificate", 8 "SSL certificate OpenSSL
# verify result: self-signed certificate (18)"
like($err, qr/DETAIL:\s+SSL certificate (problem|OpenSSL verify result): self.signed certificate/,
	'the detail says the certificate is self-signed');
note("self-signed: $err");
is($node->safe_psql('postgres', "SET chroma_sync.url = '$self_url'; SET chroma_sync.tls_verify = off;
SELECT chroma_heartbeat() > 0;
SELECT chroma_upsert('cs_t043_direct', ARRAY['c'], ARRAY[7, 8, 9]::real[]);
SELECT chroma_count('cs_t043_direct')"), "t\n1\n3", 'the same with tls_verify off works');
# a certificate for another host name (it names only 127.0.0.1): signed by the CA, refused
($ret, $err) = verbose_error("SET chroma_sync.url = 'https://localhost:$port'; SELECT chroma_heartbeat()");
like($err, qr/ERROR:\s+08001:.*\n.*DETAIL:.*(host ?name|subject name)/i, 'a certificate that does not name the host: 08001');
note("wrong host: $err");

# ---------------------------------------------------------------- ca_file replaces the system's CAs
# A second server whose system CA directory (/etc/ssl/certs, libcurl's CApath and the
# directory of its CAfile) holds only other_ca, in a private mount namespace.
my $certs = "$dir/system_certs";
mkdir $certs;
my $hash = `$openssl x509 -hash -noout -in '$dir/other_ca.pem'`;
chomp $hash;
PostgreSQL::Test::Utils::append_to_file("$certs/$hash.0", slurp_file("$dir/other_ca.pem"));
PostgreSQL::Test::Utils::append_to_file("$certs/ca-certificates.crt", slurp_file("$dir/other_ca.pem"));
my $sys = PostgreSQL::Test::Cluster->new('tls_system_ca');
$sys->init;
$sys->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.api_key = '$key'
chroma_sync.connect_timeout = 2000
});
my $keylog = "$dir/sslkeylog.txt";
{
	local $ENV{SSLKEYLOGFILE} = $keylog;
	PostgreSQL::Test::Utils::system_or_bail('perl', "$ENV{CHROMA_SYNC_ROOT}/test/lib/private_ns.pl",
		'--bind', "$certs:/etc/ssl/certs", '--', 'pg_ctl', '-w', '-D', $sys->data_dir, '-l', $sys->logfile,
		'-o', '--cluster-name=tls_system_ca', 'start');
}
$sys->_update_pid(1);
$sys->safe_psql('postgres', 'CREATE EXTENSION chroma_sync');
sub sys_error
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $sys->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return ($ret, $out, $err);
}
my $other_url = "https://127.0.0.1:$other_port";
my $out;
($ret, $out, $err) = sys_error("SET chroma_sync.url = '$other_url'; SELECT chroma_heartbeat() > 0");
is($out, 't', 'without ca_file, a certificate signed by a CA of the (private) system store is accepted')
  or diag($err);
($ret, $out, $err) = sys_error("SET chroma_sync.url = '$other_url'; SET chroma_sync.ca_file = '$dir/ca.pem'; SELECT chroma_heartbeat() > 0");
like($err, qr/ERROR:\s+08001:/, 'with ca_file naming another CA, the system store is no longer trusted: 08001')
  or diag("stdout: $out");
($ret, $out, $err) = sys_error("SET chroma_sync.url = '$url'; SET chroma_sync.ca_file = '$dir/ca.pem'; SELECT chroma_heartbeat() > 0");
is($out, 't', 'and the CA that ca_file names is trusted') or diag($err);
ok(!-e $keylog || -s $keylog == 0, 'SSLKEYLOGFILE in the server\'s environment: no TLS secret was written')
  or diag(slurp_file($keylog));
$sys->stop;

# ---------------------------------------------------------------- the key stays secret
my $log = slurp_file($node->logfile, $log0);
ok(index($log, $key) < 0, 'the server log never shows the key');

stop_nginx();
finish($node, $log0);
