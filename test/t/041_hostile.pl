# Hostile input catalogue: every case is a row of @cases (name, optional setup, the SQL,
# and either the SQLSTATE it must fail with or a check of its defined behaviour), run
# with one ok() each. Inputs: NULL in every argument, huge ids, embeddings and documents,
# NaN, mismatched arrays, bytes that are not UTF-8 in LATIN1 and SQL_ASCII databases,
# table and column names that need quoting, DDL on mirrored tables, bad settings, and
# servers that answer garbage, redirect, trickle bytes or present an unknown TLS CA.
# At the end: the postmaster never restarted and no backend died. doc/hostile_inputs.md
# lists the same cases with their outcome.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $fake = "$root/test/lib/fake_chroma.pl";
my $tmp = PostgreSQL::Test::Utils::tempdir();

my $node = new_node('hostile');
my $log0 = log_offset($node);
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $pm_pid = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];

# ---------------------------------------------------------------- fixtures
$node->safe_psql('postgres', q{
CREATE ROLE cs_t041_user LOGIN;
GRANT EXECUTE ON FUNCTION chroma_upsert(text, text[], real[], text[], jsonb[], boolean) TO cs_t041_user;
GRANT EXECUTE ON FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text,
	name[], jsonb) TO cs_t041_user;
CREATE DATABASE cs_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE cs_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;});
$node->safe_psql($_, 'CREATE EXTENSION chroma_sync') for qw(cs_latin1 cs_ascii);

my @colls = qw(cs_t041_bad cs_t041_big cs_t041_dim cs_t041_meta cs_t041_odd cs_t041_null
  cs_t041_lat cs_t041_utf cs_t041_asc cs_t041_quoted cs_t041_ddl_drop cs_t041_ddl_ren
  cs_t041_ddl_type cs_t041_ddl_gone cs_t041_nan cs_t041_ascmirror cs_t041_nullmirror
  cs_t041_quoted2 cs_t041_unl cs_t041_x cs_t041_cfg cs_t041_cfg2);
fresh_collection($node, $_) for @colls;
$node->safe_psql('postgres', qq{SELECT chroma_create_collection('$_')})
  for qw(cs_t041_bad cs_t041_big cs_t041_dim cs_t041_meta cs_t041_odd cs_t041_null
  cs_t041_lat cs_t041_utf cs_t041_asc cs_t041_quoted2);
# the probe collection: every rejected call must leave it exactly as it is
$node->safe_psql('postgres', q{
SELECT chroma_upsert('cs_t041_bad', ARRAY['base1', 'base2'], ARRAY[[1, 2], [3, 4]]::real[],
	ARRAY['orig', 'orig'])});
my $unchanged = q{SELECT chroma_count('cs_t041_bad') = 2 AND (SELECT string_agg(id || document
	|| embedding::text, ',' ORDER BY id) FROM chroma_get('cs_t041_bad')) = 'base1orig{1,2},base2orig{3,4}'};

# an API key file whose first line is too long to be a key
open(my $kf, '>', "$tmp/long.key") or die "$tmp/long.key: $!";
print $kf 'k' x 5000, "\n";
close($kf);

# Misbehaving servers (test/lib/fake_chroma.pl) and a TLS listener with a throwaway CA.
my %fake;
my @servers;
for my $mode (qw(garbage wrongjson redirect trickle truncated))
{
	my $port_file = "$tmp/$mode.port";
	push @servers, IPC::Run::start([ 'perl', $fake, $mode, $port_file, "$tmp/$mode.count" ]);
	my $t0 = time;
	usleep(50_000) until -s $port_file || time - $t0 > 20;
	my $port = slurp_file($port_file);
	chomp $port;
	$fake{$mode} = "http://127.0.0.1:$port";
}

sub free_port
{
	my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
		Listen => 1) or die "socket: $!";
	my $p = $s->sockport;
	$s->close;
	return $p;
}
my $closed_url = 'http://127.0.0.1:' . free_port();

system('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', "$tmp/tls.key",
	'-out', "$tmp/tls.crt", '-days', '1', '-subj', '/CN=127.0.0.1',
	'-addext', 'subjectAltName=IP:127.0.0.1') == 0
  or BAIL_OUT('openssl could not make a certificate');
my $tls_port = free_port();
my ($tls_in, $tls_out) = ('', '');
push @servers, IPC::Run::start(
	[ 'openssl', 's_server', '-accept', "127.0.0.1:$tls_port", '-cert', "$tmp/tls.crt",
		'-key', "$tmp/tls.key", '-www', '-quiet' ],
	\$tls_in, \$tls_out, \$tls_out);
wait_for('the TLS listener', 20, sub {
	IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $tls_port, Proto => 'tcp');
});
my $tls_url = "https://127.0.0.1:$tls_port";

# The NULL sweep: each argument of each function replaced by NULL in turn. Expected per
# argument: a SQLSTATE, or 'ok' (NULL means the argument's default or "none").
my $mirror_nt = q{SELECT chroma_mirror('nt', 'cs_t041_nullmirror') FROM (SELECT 1) x
	WHERE NOT EXISTS (SELECT 1 FROM chroma_sync.mirror WHERE source = 'nt'::regclass)};
my @null_sweep = (
	[ 'chroma_create_collection', [ q{'cs_t041_null'}, q{'{"k": 1}'::jsonb}, q{'l2'}, 'true' ],
		[qw(22004 ok ok ok)] ],
	[ 'chroma_delete_collection', [ q{'cs_t041_nonexistent'}, 'true' ], [qw(22004 42704)] ],
	[ 'chroma_upsert', [ q{'cs_t041_null'}, q{ARRAY['a']}, 'ARRAY[1, 2]::real[]', q{ARRAY['d']},
			q{ARRAY['{}']::jsonb[]} ], [qw(22004 22004 22004 ok ok)] ],
	[ 'chroma_add', [ q{'cs_t041_null'}, q{ARRAY['b']}, 'ARRAY[1, 2]::real[]', q{ARRAY['d']},
			q{ARRAY['{}']::jsonb[]} ], [qw(22004 22004 22004 ok ok)] ],
	[ 'chroma_update', [ q{'cs_t041_null'}, q{ARRAY['a']}, 'ARRAY[1, 2]::real[]', q{ARRAY['d']},
			q{ARRAY['{}']::jsonb[]} ], [qw(22004 22004 ok ok ok)] ],
	[ 'chroma_upsert_query', [ q{'cs_t041_null'}, q{'SELECT ''a'' AS id, ARRAY[1, 2]::real[] AS embedding'} ],
		[qw(22004 22004)] ],
	[ 'chroma_delete', [ q{'cs_t041_null'}, q{ARRAY['zz']} ], [qw(22004 22004)] ],
	[ 'chroma_count', [q{'cs_t041_null'}], [qw(22004)] ],
	[ 'chroma_get', [ q{'cs_t041_null'}, q{ARRAY['a']}, q{'{}'::jsonb}, '1', '0' ],
		[qw(22004 ok ok ok ok)], 'set' ],
	[ 'chroma_query', [ q{'cs_t041_null'}, 'ARRAY[1, 2]::real[]', '1', q{'{}'::jsonb} ],
		[qw(22004 22004 ok ok)], 'set' ],
	[ 'chroma_query_batch', [ q{'cs_t041_null'}, 'ARRAY[[1, 2]]::real[]', '1', q{'{}'::jsonb},
			q{'{"$contains": "a"}'::jsonb} ], [qw(22004 22004 ok ok ok)], 'set' ],
	[ 'chroma_delete_where', [ q{'cs_t041_null'}, q{'{"k": "none"}'::jsonb},
			q{'{"$contains": "no such text"}'::jsonb} ], [qw(22004 ok ok)] ],
	[ 'chroma_modify_collection', [ q{'cs_t041_null'}, q{'cs_t041_null'}, q{'{"k": 2}'::jsonb},
			q{'{"hnsw": {"ef_search": 50}}'::jsonb} ], [qw(22004 ok ok ok)] ],
	[ 'chroma_collection', [q{'cs_t041_null'}], [qw(22004)] ],
	[ 'chroma_mirror', [ q{'nt'}, q{'cs_t041_nullmirror'}, q{'id'}, q{'embedding'}, q{'doc'},
			q{'{meta}'::name[]}, 'true', 'false', q{'id > 0'}, 'NULL' ],
		[qw(22004 42602 ok 22004 ok ok ok ok ok)] ],
	[ 'chroma_pause', [ q{'nt'}, 'NULL' ], [qw(22004)], 0, $mirror_nt ],
	[ 'chroma_resume', [ q{'nt'}, 'NULL' ], [qw(22004)], 0, $mirror_nt ],
	# NULL source: every mirror (a paused one makes it return false at the timeout)
	[ 'chroma_flush', [ q{'nt'}, q{'3 s'::interval}, 'NULL' ], [qw(ok ok)], 0, $mirror_nt ],
	[ 'chroma_resync', [ q{'nt'}, 'NULL' ], [qw(22004)], 0, $mirror_nt ],
	[ 'chroma_verify', [ q{'nt'}, 'NULL' ], [qw(22004)], 'set', $mirror_nt ],
	[ 'chroma_retry_failed', [ q{'nt'}, 'NULL' ], [qw(ok)], 0, $mirror_nt ],
	[ 'chroma_adopt', [ q{'nt'}, 'NULL' ], [qw(22004)], 0, $mirror_nt ],
	[ 'chroma_unmirror', [ q{'nt'}, 'false', 'NULL' ], [qw(22004 ok)], 0, $mirror_nt ],
);
$node->safe_psql('postgres', q{
CREATE TABLE nt (id int PRIMARY KEY, embedding real[], doc text, meta jsonb);
INSERT INTO nt VALUES (1, '{1, 2}', 'one', '{"k": 1}');
SELECT chroma_upsert('cs_t041_null', ARRAY['a'], ARRAY[1, 2]::real[]);});

# Runs one call per argument; returns (all as expected, what happened).
sub null_sweep
{
	my ($fn, $args, $expect, $set, $setup) = @_;
	my @got;
	my $good = 1;
	for my $i (0 .. $#$args)
	{
		next if $args->[$i] eq 'NULL';
		my @a = @$args;
		$a[$i] = 'NULL';
		my $call = "$fn(" . join(', ', @a) . ')';
		my $sql = $set ? "SELECT count(*) FROM $call" : "SELECT $call IS NULL";
		$node->safe_psql('postgres', $setup) if $setup;
		# a mirror made by one call must not hide the next one's outcome
		$sql .= q{; SELECT chroma_unmirror(source, false, collection) FROM chroma_sync.mirror
			WHERE source = 'nt'::regclass AND collection = 'cs_t041_nullmirror'}
		  if $fn eq 'chroma_mirror';
		my ($ret, $out, $err) = $node->psql('postgres', $sql,
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
		my $outcome = $state // ($ret == 0 ? 'ok' : "exit $ret");
		my $want = $expect->[ scalar @got ] // '?';
		push @got, "arg " . ($i + 1) . ": $outcome" . ($outcome eq $want ? '' : " (expected $want)");
		$good = 0 if $outcome ne $want;
	}
	return ($good, join('; ', @got));
}

# ---------------------------------------------------------------- the catalogue
# Keys: name; db (default postgres); setup (SQL run first, must succeed); sql; then either
# state (SQLSTATE the sql must fail with) and optionally msg (regexp on the error), or
# result (exact stdout, or a regexp) for a call that succeeds; check (SQL that must then
# return t); code (sub returning (ok, diagnostics)) for cases that are not one call.
my @cases = (
	# ---- settings
	{ name => 'batch_size = -1', sql => 'SET chroma_sync.batch_size = -1', state => '22023' },
	{ name => 'batch_size = 0', sql => 'SET chroma_sync.batch_size = 0', state => '22023' },
	{ name => 'timeout beyond int range', sql => 'SET chroma_sync.timeout = 99999999999',
		state => '22023' },
	{ name => 'connect_timeout = 0', sql => 'SET chroma_sync.connect_timeout = 0', state => '22023' },
	{ name => 'retry_max_delay = -1 (ALTER SYSTEM)',
		sql => 'ALTER SYSTEM SET chroma_sync.retry_max_delay = -1', state => '22023' },
	{ name => 'url file://', sql => q{SET chroma_sync.url = 'file:///etc/passwd'},
		state => '22023', msg => qr/must start with http/ },
	{ name => 'url gopher://', sql => q{SET chroma_sync.url = 'gopher://127.0.0.1:70/'},
		state => '22023', msg => qr/must start with http/ },
	{ name => 'url with credentials', sql => q{SET chroma_sync.url = 'http://user:secret@127.0.0.1:8000'},
		state => '22023', msg => qr/must not contain credentials/,
		check => q{SELECT current_setting('chroma_sync.url') NOT LIKE '%secret%'} },
	{ name => 'url with a newline (header injection)',
		sql => qq{SET chroma_sync.url = E'$ENV{CHROMA_URL}\\r\\nX-Injected: 1'},
		state => '22023', msg => qr/control characters/ },
	{ name => 'url without a host', sql => q{SET chroma_sync.url = 'http:///api'}, state => '22023',
		msg => qr/no host/ },
	{ name => 'tenant empty', sql => q{SET chroma_sync.tenant = ''}, state => '22023' },
	{ name => 'tenant ".." (path traversal)', sql => q{SET chroma_sync.database = '..'},
		state => '22023' },
	{ name => 'tenant with CR LF', sql => q{SET chroma_sync.tenant = E'a\r\nb'}, state => '22023' },
	{ name => 'embedding_encoding unknown', sql => q{SET chroma_sync.embedding_encoding = 'hex'},
		state => '22023' },
	{ name => 'api_key with a newline', sql => q{SET chroma_sync.api_key = E'key\nX-Injected: 1'},
		state => '22023' },
	{ name => 'api_key per role', sql => q{ALTER ROLE cs_t041_user SET chroma_sync.api_key = 'k'},
		state => '42501' },
	{ name => 'url set by a non-superuser',
		sql => qq{SET ROLE cs_t041_user; SET chroma_sync.url = '$closed_url'}, state => '42501' },
	{ name => 'unknown chroma_sync.* setting', sql => 'SET chroma_sync.bogus = 1', state => '42602' },
	{ name => 'api_key_file that does not exist',
		sql => q{SET chroma_sync.api_key_file = '/nonexistent/key'; SELECT chroma_heartbeat()},
		state => '58P01' },
	{ name => 'api_key_file whose first line is longer than 4095 bytes',
		sql => qq{SET chroma_sync.api_key_file = '$tmp/long.key'; SELECT chroma_heartbeat()},
		state => '22023', msg => qr/longer than 4095 bytes/ },

	# ---- record functions: shapes and values
	{ name => 'ids and embeddings of different lengths',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', 'p2'], ARRAY[[1, 2], [3, 4], [5, 6]]::real[])},
		state => '2202E', check => $unchanged },
	{ name => 'documents shorter than ids',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', 'p2'], ARRAY[[1, 2], [3, 4]]::real[], ARRAY['x'])},
		state => '2202E', check => $unchanged },
	{ name => 'metadatas longer than ids',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', 'p2'], ARRAY[[1, 2], [3, 4]]::real[], NULL, ARRAY['{}', '{}', '{}']::jsonb[])},
		state => '2202E', check => $unchanged },
	{ name => '2-D ids', sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY[['p1', 'p2']], ARRAY[[1, 2], [3, 4]]::real[])},
		state => '2202E', check => $unchanged },
	{ name => '3-D embeddings',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', 'p2'], ARRAY[[[1, 2]], [[3, 4]]]::real[])},
		state => '2202E', check => $unchanged },
	{ name => 'NaN in an embedding',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', 'p2'], ARRAY[[1, 2], [3, 'NaN']]::real[])},
		state => '22023', msg => qr/non-finite value at position 2/, check => $unchanged },
	{ name => 'Infinity in an embedding',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, 'Infinity']::real[])},
		state => '22023', check => $unchanged },
	{ name => '-Infinity in chroma_update',
		sql => q{SELECT chroma_update('cs_t041_bad', ARRAY['base1'], ARRAY['-Infinity', 1]::real[])},
		state => '22023', check => $unchanged },
	{ name => 'NULL inside an embedding',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, NULL]::real[])},
		state => '22004', check => $unchanged },
	{ name => 'NaN in a query embedding',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY['NaN', 1]::real[])}, state => '22023' },
	{ name => 'query embedding of another dimension',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2, 3]::real[])}, state => '22000' },
	{ name => 'embedding of another dimension',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, 2, 3]::real[])},
		state => '22000', check => $unchanged },
	{ name => 'float8 beyond real in an embedding',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1e39::float8, 1]::real[])},
		state => '22003', check => $unchanged },
	{ name => 'n_results = 0', sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 0)},
		state => '22023' },
	{ name => 'negative limit', sql => q{SELECT * FROM chroma_get('cs_t041_bad', "limit" => -1)},
		state => '22023' },
	{ name => 'where nested 5,000 levels deep',
		sql => q{SELECT count(*) FROM chroma_get('cs_t041_bad', "where" => (repeat('{"$and": [', 5000) || '{"a": 1}' || repeat(']}', 5000))::jsonb)},
		state => '22023' },
	{ name => 'where that is not an object',
		sql => q{SELECT count(*) FROM chroma_get('cs_t041_bad', "where" => '[1]')}, state => '22023' },
	{ name => 'empty id', sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', ''], ARRAY[[1, 2], [3, 4]]::real[])},
		state => '22023', check => $unchanged },
	{ name => 'NULL id', sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1', NULL], ARRAY[[1, 2], [3, 4]]::real[])},
		state => '22004', check => $unchanged },
	{ name => 'nested metadata object',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, 2]::real[], NULL, ARRAY['{"a": {"b": 1}}']::jsonb[])},
		state => '22023', check => $unchanged },
	{ name => 'metadata that is not an object',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, 2]::real[], NULL, ARRAY['[1]']::jsonb[])},
		state => '22023', check => $unchanged },
	{ name => 'collection name "../../etc"', sql => q{SELECT chroma_count('../../etc')}, state => '42602' },
	{ name => 'collection name of 513 characters',
		sql => q{SELECT chroma_create_collection(repeat('a', 513))}, state => '42602' },
	{ name => 'collection name with a double quote',
		sql => q{SELECT chroma_create_collection('cs"t041')}, state => '42602' },
	{ name => 'unknown distance space',
		sql => q{SELECT chroma_create_collection('cs_t041_space', space => 'bogus')}, state => '22023' },
	{ name => 'chroma_upsert_query: two statements',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'SELECT 1; SELECT 2')}, state => '42809',
		check => $unchanged },
	{ name => 'chroma_upsert_query: DELETE ... RETURNING',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'DELETE FROM nt RETURNING id::text, embedding')},
		state => '0A000', check => q{SELECT count(*) = 1 FROM nt} },
	{ name => 'chroma_upsert_query: embedding of type text',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'SELECT ''p1'' AS id, ''x'' AS embedding')},
		state => '42804', check => $unchanged },
	{ name => 'chroma_upsert_query: no embedding column',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'SELECT ''p1'' AS id')}, state => '42703' },
	{ name => 'chroma_upsert_query: syntax error',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'SELEC 1')}, state => '42601' },
	{ name => 'chroma_upsert_query: error in the middle of the rows',
		sql => q{SELECT chroma_upsert_query('cs_t041_bad', 'SELECT ''p'' || g AS id, ARRAY[1, 1.0 / (g - 3)]::real[] AS embedding FROM generate_series(1, 5) g')},
		state => '22012' },
	{ name => 'duplicate ids: the last one wins',
		sql => q{SELECT chroma_upsert('cs_t041_odd', ARRAY['dup', 'dup'], ARRAY[[1, 2], [3, 4]]::real[], ARRAY['first', 'second'])},
		result => '1',
		check => q{SELECT string_agg(document || embedding::text, ',') = 'second{3,4}' FROM chroma_get('cs_t041_odd', ARRAY['dup'])} },
	{ name => 'embeddings with lower bounds other than 1',
		sql => q{SELECT chroma_upsert('cs_t041_odd', '[3:4]={lb1,lb2}'::text[], '[2:3][5:6]={{5,6},{7,8}}'::real[])},
		result => '2',
		check => q{SELECT string_agg(id || embedding::text, ',' ORDER BY id) = 'lb1{5,6},lb2{7,8}' FROM chroma_get('cs_t041_odd', ARRAY['lb1', 'lb2'])} },
	{ name => 'ids and documents with quotes, backslashes, control characters, emoji',
		sql => q{SELECT chroma_upsert('cs_t041_odd', ARRAY['q"' || chr(92) || chr(10) || chr(9) || chr(1) || '😀'], ARRAY[1, 2]::real[], ARRAY['d"' || chr(92) || chr(31) || '</script>'])},
		result => '1',
		check => q{SELECT count(*) = 1 FROM chroma_get('cs_t041_odd') WHERE id = 'q"' || chr(92) || chr(10) || chr(9) || chr(1) || '😀' AND document = 'd"' || chr(92) || chr(31) || '</script>'} },
	{ name => 'empty arrays send nothing',
		sql => q{SELECT chroma_upsert('cs_t041_bad', '{}'::text[], '{}'::real[])}, result => '0',
		check => $unchanged },

	# ---- sizes
	{ name => '1 MB id', sql => q{SELECT chroma_upsert('cs_t041_big', ARRAY[repeat('i', 1048576)], ARRAY[1, 2]::real[])},
		result => '1',
		check => q{SELECT count(*) = 1 FROM chroma_get('cs_t041_big') WHERE id = repeat('i', 1048576)} },
	{ name => '10,000-dimensional embedding round-trips bit for bit',
		sql => q{SELECT chroma_upsert('cs_t041_dim', ARRAY['d1'], ARRAY(SELECT (sin(g) * 1000)::real FROM generate_series(1, 10000) g))},
		result => '1',
		check => q{SELECT (SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o) FROM chroma_get('cs_t041_dim', ARRAY['d1']), unnest(embedding) WITH ORDINALITY u(x, o))
			= (SELECT string_agg(encode(float4send((sin(g) * 1000)::real), 'hex'), '' ORDER BY g) FROM generate_series(1, 10000) g)} },
	{ name => '10,000-dimensional embedding into a 2-dimensional collection',
		sql => q{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY(SELECT g::real FROM generate_series(1, 10000) g))},
		state => '22000', check => $unchanged },
	{ name => '100 MB document', sql => q{SELECT chroma_upsert('cs_t041_big', ARRAY['huge'], ARRAY[1, 2]::real[], ARRAY[repeat('y', 100 * 1024 * 1024)])},
		state => '54000', msg => qr/too large to send/,
		check => q{SELECT count(*) = 0 FROM chroma_get('cs_t041_big', ARRAY['huge'])} },
	{ name => '100 MB document with a 1 MB id: the error message stays short',
		sql => q{SELECT chroma_upsert('cs_t041_big', ARRAY[repeat('j', 1048576)], ARRAY[1, 2]::real[], ARRAY[repeat('y', 100 * 1024 * 1024)])},
		state => '54000', code => sub { my ($out, $err) = @_; (length($err) < 4096, 'error length ' . length($err)) } },
	{ name => '10 MB metadata value', sql => q{SELECT chroma_upsert('cs_t041_meta', ARRAY['m1'], ARRAY[1, 2]::real[], NULL, ARRAY[jsonb_build_object('big', repeat('z', 10 * 1024 * 1024))])},
		result => '1',
		check => q{SELECT length(metadata->>'big') = 10 * 1024 * 1024 FROM chroma_get('cs_t041_meta', ARRAY['m1'])} },
	{ name => '1,000 metadata keys', sql => q{SELECT chroma_upsert('cs_t041_meta', ARRAY['m2'], ARRAY[1, 2]::real[], NULL, ARRAY[(SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 1000) g)])},
		result => '1',
		check => q{SELECT (SELECT count(*) FROM jsonb_object_keys(metadata)) = 1000 FROM chroma_get('cs_t041_meta', ARRAY['m2'])} },
	{ name => 'metadata key of 100,000 characters', sql => q{SELECT chroma_upsert('cs_t041_meta', ARRAY['m3'], ARRAY[1, 2]::real[], NULL, ARRAY[jsonb_build_object(repeat('k', 100000), 1)])},
		result => '1',
		check => q{SELECT metadata ? repeat('k', 100000) FROM chroma_get('cs_t041_meta', ARRAY['m3'])} },

	# ---- encodings
	{ name => 'LATIN1 database: text is converted to UTF-8', db => 'cs_latin1',
		sql => q{SELECT chroma_upsert('cs_t041_lat', ARRAY['caf' || chr(233)], ARRAY[1, 2]::real[], ARRAY['na' || chr(239) || 've'], ARRAY[jsonb_build_object('k' || chr(233), chr(233))])},
		result => '1',
		code => sub {
			my $r = $node->safe_psql('postgres',
				q{SELECT id = 'café' AND document = 'naïve' AND metadata = '{"ké": "é"}' FROM chroma_get('cs_t041_lat')});
			($r eq 't', "seen from the UTF-8 database: $r");
		} },
	{ name => 'LATIN1 database: a character it cannot hold', db => 'cs_latin1',
		setup_db => 'postgres',
		setup => q{SELECT chroma_upsert('cs_t041_utf', ARRAY['jp'], ARRAY[1, 2]::real[], ARRAY['日本'])},
		sql => q{SELECT * FROM chroma_get('cs_t041_utf')}, state => '22P05' },
	{ name => 'SQL_ASCII database: id that is not UTF-8', db => 'cs_ascii',
		sql => q{SELECT chroma_upsert('cs_t041_asc', ARRAY[E'bad\xff'], ARRAY[1, 2]::real[])},
		state => '22021', check => q{SELECT chroma_count('cs_t041_asc') = 0} },
	{ name => 'SQL_ASCII database: document with a truncated sequence', db => 'cs_ascii',
		sql => q{SELECT chroma_upsert('cs_t041_asc', ARRAY['ok'], ARRAY[1, 2]::real[], ARRAY[E'doc\xc3'])},
		state => '22021', check => q{SELECT chroma_count('cs_t041_asc') = 0} },
	{ name => 'SQL_ASCII database: metadata key that is not UTF-8', db => 'cs_ascii',
		sql => q{SELECT chroma_upsert('cs_t041_asc', ARRAY['ok'], ARRAY[1, 2]::real[], NULL, ARRAY[jsonb_build_object(E'k\xff', 1)])},
		state => '22021', check => q{SELECT chroma_count('cs_t041_asc') = 0} },
	{ name => 'SQL_ASCII database: where filter that is not UTF-8', db => 'cs_ascii',
		sql => q{SELECT * FROM chroma_get('cs_t041_asc', "where" => jsonb_build_object('k', E'v\xfe'))},
		state => '22021' },
	{ name => 'SQL_ASCII database: chroma_upsert_query row that is not UTF-8', db => 'cs_ascii',
		sql => q{SELECT chroma_upsert_query('cs_t041_asc', $$SELECT E'q\xff' AS id, ARRAY[1, 2]::real[] AS embedding$$)},
		state => '22021', check => q{SELECT chroma_count('cs_t041_asc') = 0} },
	{ name => 'SQL_ASCII database: valid UTF-8 bytes are sent as they are', db => 'cs_ascii',
		sql => q{SELECT chroma_upsert('cs_t041_asc', ARRAY['ok2'], ARRAY[1, 2]::real[], ARRAY[E'doc\xc3\xa9'])},
		result => '1',
		code => sub {
			my $r = $node->safe_psql('postgres', q{SELECT document FROM chroma_get('cs_t041_asc')});
			($r eq 'docé', "seen from the UTF-8 database: $r");
		} },
	{ name => 'SQL_ASCII database: mirrored row that is not UTF-8 fails alone', db => 'cs_ascii',
		setup => q{CREATE TABLE t (id int PRIMARY KEY, embedding real[], doc text);
			INSERT INTO t VALUES (1, '{1, 2}', 'fine'), (2, '{3, 4}', E'bad\xff'), (3, '{5, 6}', 'fine too')},
		sql => q{SELECT chroma_mirror('t', 'cs_t041_ascmirror', document_column => 'doc') IS NOT NULL;
			SELECT chroma_flush('t', '60 s')},
		result => "t\nt",
		check => q{SELECT (SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t041_ascmirror')) = '1,3'
			AND (SELECT string_agg(id || ':' || error, ',') FROM chroma_sync.failed) LIKE '2:%invalid byte sequence%'} },

	# ---- read and collection functions of 0.5 (issue 19): where_document, ids,
	# include_embeddings, 2-D query_embeddings, configuration, new_configuration, the
	# filters of chroma_delete_where
	{ name => 'where_document that is a string (chroma_query)',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 1, NULL, '"orig"')},
		state => '22023', msg => qr/where_document must be a JSON object/ },
	{ name => 'where_document with an unknown operator (chroma_get)',
		sql => q{SELECT * FROM chroma_get('cs_t041_bad', where_document => '{"$like": "orig"}')},
		state => '22023', msg => qr/unknown where_document operator/ },
	{ name => 'where_document with an empty $and (chroma_query)',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 1, NULL, '{"$and": []}')},
		state => '22023' },
	{ name => 'where_document $contains a number (chroma_query_batch)',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[1, 2]]::real[], 1, NULL, '{"$contains": 5}')},
		state => '22023', msg => qr/must be a string/ },
	{ name => 'where_document with two operators in one object',
		sql => q{SELECT * FROM chroma_get('cs_t041_bad', where_document => '{"$contains": "a", "$regex": "b"}')},
		state => '22023', msg => qr/exactly one operator/ },
	{ name => 'where_document nested 2,000 deep with an unknown operator at the bottom',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 1, NULL,
			(repeat('{"$or": [', 2000) || '{"$like": "a"}' || repeat(']}', 2000))::jsonb)},
		state => '22023', msg => qr/unknown where_document operator/ },
	{ name => 'where_document regex Chroma cannot compile',
		sql => q{SELECT * FROM chroma_get('cs_t041_bad', where_document => '{"$regex": "("}')},
		state => '22023' },
	{ name => 'ids with a NULL (chroma_query)',
		sql => q{SELECT * FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 1, NULL, NULL, ARRAY['base1', NULL])},
		state => '22004' },
	{ name => '2-D ids (chroma_get)',
		sql => q{SELECT * FROM chroma_get('cs_t041_bad', ARRAY[['base1', 'base2']])},
		state => '2202E' },
	{ name => 'ids empty, unknown, repeated, lower bound 5 (chroma_query)',
		sql => q{SELECT (SELECT count(*) FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 5, NULL, NULL, '{}'))
			|| '|' || (SELECT string_agg(id, ',' ORDER BY id) FROM chroma_query('cs_t041_bad', ARRAY[1, 2]::real[], 5,
			NULL, NULL, '[5:8]={base2,nope,base2,base1}'::text[]))},
		result => '0|base1,base2' },
	{ name => 'include_embeddings NULL (the default) and false',
		sql => q{SELECT (SELECT count(embedding) FROM chroma_get('cs_t041_bad', include_embeddings => NULL))
			|| '|' || (SELECT count(embedding) FROM chroma_get('cs_t041_bad', include_embeddings => false))},
		result => '2|0' },
	{ name => '1-D query_embeddings (chroma_query_batch)',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[1, 2]::real[])},
		state => '2202E', msg => qr/two-dimensional/ },
	{ name => '3-D query_embeddings', sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[[1, 2]]]::real[])},
		state => '2202E' },
	{ name => 'empty query_embeddings', sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', '{}'::real[])},
		state => '2202E' },
	{ name => 'NULL inside 2-D query_embeddings',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[1, 2], [3, NULL]]::real[])},
		state => '22004', msg => qr/null/ },
	{ name => 'NaN inside 2-D query_embeddings',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[1, 2], ['NaN', 3]]::real[])},
		state => '22023', msg => qr/non-finite/ },
	{ name => '2-D query_embeddings of another dimension',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[1, 2, 3]]::real[])},
		state => '22000' },
	{ name => '2-D query_embeddings with rows of mixed lengths (PostgreSQL refuses the array)',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', '{{1,2},{3}}'::real[])},
		state => '22P02' },
	{ name => '2-D query_embeddings with lower bounds 0 and 5, n_results 2147483647',
		sql => q{SELECT string_agg(query_index || ':' || rank || ':' || id, ',' ORDER BY query_index, rank)
			FROM chroma_query_batch('cs_t041_bad', '[0:1][5:6]={{1,2},{3,4}}'::real[], 2147483647)},
		result => '1:1:base1,1:2:base2,2:1:base2,2:2:base1' },
	{ name => 'n_results = 0 (chroma_query_batch)',
		sql => q{SELECT * FROM chroma_query_batch('cs_t041_bad', ARRAY[[1, 2]]::real[], 0)}, state => '22023' },
	{ name => 'configuration that is an array',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', configuration => '[]')},
		state => '22023', check => q{SELECT NOT EXISTS (SELECT 1 FROM chroma_list_collections() WHERE name = 'cs_t041_cfg')} },
	{ name => 'configuration with an unknown index',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"flat": {}}')},
		state => '22023' },
	{ name => 'configuration with both hnsw and spann',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"hnsw": {}, "spann": {}}')},
		state => '22023' },
	{ name => 'configuration with an unknown hnsw key',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"hnsw": {"m": 16}}')},
		state => '22023', msg => qr/unknown key "m"/ },
	{ name => 'configuration: unknown space',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"hnsw": {"space": "manhattan"}}')},
		state => '22023' },
	{ name => 'configuration: counts 0, 1.5, 1e400, -0, "16", 2147483648',
		code_only => sub {
			my @bad;
			for my $v ('0', '1.5', '1e400', '-0', '"16"', '2147483648', 'null')
			{
				my ($ret, $out, $err) = $node->psql('postgres',
					qq{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"hnsw": {"ef_search": $v}}')},
					extra_params => [ '-v', 'VERBOSITY=verbose' ]);
				push @bad, "ef_search $v: " . substr($err, 0, 200) unless $err =~ /ERROR:  22023:/;
			}
			return (!@bad, join('; ', @bad));
		} },
	{ name => 'configuration: resize_factor 0 and -1e400',
		code_only => sub {
			my @bad;
			for my $v ('0', '-1e400', '"1.2"')
			{
				my ($ret, $out, $err) = $node->psql('postgres',
					qq{SELECT chroma_create_collection('cs_t041_cfg', configuration => '{"hnsw": {"resize_factor": $v}}')},
					extra_params => [ '-v', 'VERBOSITY=verbose' ]);
				push @bad, "resize_factor $v: " . substr($err, 0, 200) unless $err =~ /ERROR:  22023:/;
			}
			return (!@bad, join('; ', @bad));
		} },
	{ name => 'configuration space and space argument that differ',
		sql => q{SELECT chroma_create_collection('cs_t041_cfg', space => 'l2', configuration => '{"hnsw": {"space": "cosine"}}')},
		state => '22023' },
	{ name => 'new_configuration changing the space',
		setup => q{SELECT chroma_create_collection('cs_t041_cfg2')},
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2', new_configuration => '{"hnsw": {"space": "cosine"}}')},
		state => '0A000',
		check => q{SELECT chroma_collection('cs_t041_cfg2') #>> '{configuration,hnsw,space}' = 'l2'} },
	{ name => 'new_configuration changing ef_construction',
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2', new_configuration => '{"hnsw": {"ef_construction": 50}}')},
		state => '0A000' },
	{ name => 'new_configuration that is a string',
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2', new_configuration => '"fast"')},
		state => '22023' },
	{ name => 'chroma_modify_collection with nothing to modify',
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2')}, state => '22023' },
	{ name => 'chroma_modify_collection to the name of another collection',
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2', new_name => 'cs_t041_bad')},
		state => '42710', check => $unchanged },
	{ name => 'chroma_modify_collection to an invalid name',
		sql => q{SELECT chroma_modify_collection('cs_t041_cfg2', new_name => '../x')}, state => '42602' },
	{ name => 'chroma_collection of a collection that does not exist',
		sql => q{SELECT chroma_collection('cs_t041_nonexistent')}, state => '42704' },
	{ name => 'chroma_delete_where without a filter, and with {} for both',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', '{}', '{}')},
		state => '22023', msg => qr/needs a filter/, check => $unchanged },
	{ name => 'chroma_delete_where with "where" an array',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', '[{"k": 1}]')}, state => '22023', check => $unchanged },
	{ name => 'chroma_delete_where with where_document $contains ""',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', NULL, '{"$contains": ""}')},
		state => '22023', check => $unchanged },
	{ name => 'chroma_delete_where with where_document {"$and": []}',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', NULL, '{"$and": []}')},
		state => '22023', check => $unchanged },
	{ name => 'chroma_delete_where with where_document nested 2,000 deep, bad at the bottom',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', NULL,
			(repeat('{"$and": [', 2000) || '{"$contains": 1}' || repeat(']}', 2000))::jsonb)},
		state => '22023', check => $unchanged },
	{ name => 'chroma_delete_where with "where" Chroma refuses ($in of nothing)',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', '{"k": {"$in": []}}')},
		state => '22023', check => $unchanged },
	{ name => 'chroma_delete_where with a where_document matching nothing',
		sql => q{SELECT chroma_delete_where('cs_t041_bad', NULL, '{"$contains": "no such text"}')},
		result => '0', check => $unchanged },
	{ name => 'metadata numbers 1e400 and 1e-400 (rounded as ::float8)',
		code_only => sub {
			my @bad;
			for my $v ('1e400', '-1e400', '1e-400', '123456789012345678901234567890')
			{
				my ($ret, $out, $err) = $node->psql('postgres',
					qq{SELECT chroma_upsert('cs_t041_bad', ARRAY['p1'], ARRAY[1, 2]::real[], NULL, ARRAY['{"x": $v}']::jsonb[])},
					extra_params => [ '-v', 'VERBOSITY=verbose' ]);
				push @bad, "x $v: " . substr($err, 0, 200) unless $err =~ /ERROR:  22003:/;
			}
			push @bad, 'the collection changed' unless $node->safe_psql('postgres', $unchanged) eq 't';
			return (!@bad, join('; ', @bad));
		} },
	# ---- mirror setup
	{ name => 'mirror of a table that does not exist', sql => q{SELECT chroma_mirror('no_such_table')},
		state => '42P01' },
	{ name => 'mirror of a view',
		setup => 'CREATE VIEW ntv AS SELECT * FROM nt',
		sql => q{SELECT chroma_mirror('ntv', 'cs_t041_view')}, state => '42809' },
	{ name => 'mirror of a partitioned table with an unlogged partition',
		setup => q{CREATE TABLE parted (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
			CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
			CREATE UNLOGGED TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200)},
		sql => q{SELECT chroma_mirror('parted', 'cs_t041_parted')}, state => '0A000',
		msg => qr/partition parted_2 is not a logged table.*HINT:.*SET LOGGED/s },
	{ name => 'mirror of a temporary table',
		sql => q{CREATE TEMP TABLE tmp (id int PRIMARY KEY, embedding real[]); SELECT chroma_mirror('tmp', 'cs_t041_tmp')},
		state => '0A000' },
	{ name => 'mirror of an unlogged table',
		setup => 'CREATE UNLOGGED TABLE unl (id int PRIMARY KEY, embedding real[])',
		sql => q{SELECT chroma_mirror('unl', 'cs_t041_unl')}, state => '0A000', msg => qr/SET LOGGED/ },
	{ name => 'mirror: volatile filter',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'random() < 0.5')}, state => '22023',
		msg => qr/volatile/ },
	{ name => 'mirror: filter with a subquery',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'EXISTS (SELECT 1 FROM pg_authid)')},
		state => '22023', msg => qr/subquery/ },
	{ name => 'mirror of a table without a primary key',
		setup => 'CREATE TABLE nopk (id int, embedding real[])',
		sql => q{SELECT chroma_mirror('nopk', 'cs_t041_nopk')}, state => '42P16' },
	{ name => 'mirror: embedding column that does not exist',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', embedding_column => 'nosuch')}, state => '42703' },
	{ name => 'mirror: embedding column of type int',
		setup => 'CREATE TABLE intemb (id int PRIMARY KEY, embedding int)',
		sql => q{SELECT chroma_mirror('intemb', 'cs_t041_x')}, state => '42804' },
	{ name => 'mirror: id column of type timestamptz',
		setup => 'CREATE TABLE tsid (id timestamptz PRIMARY KEY, embedding real[])',
		sql => q{SELECT chroma_mirror('tsid', 'cs_t041_x')}, state => '0A000' },
	{ name => 'mirror: filter with a second statement',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'true; DROP TABLE nt')},
		state => '42601', check => q{SELECT count(*) = 1 FROM nt} },
	{ name => 'mirror: filter that closes its parenthesis',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'true) UNION SELECT 1 FROM pg_authid WHERE (true')},
		state => '42601' },
	{ name => 'mirror: filter that reopens its parenthesis (false) OR (true)',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'false) OR (true')}, state => '42601' },
	{ name => 'mirror: filter calling a stable function (now())',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'now() IS NOT NULL')}, state => '22023',
		msg => qr/immutable/ },
	{ name => 'mirror: filter reading a setting (current_setting)',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'current_setting(''chroma_sync.url'') <> ''''')},
		state => '22023' },
	{ name => 'mirror: filter that is a list of expressions',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'true, true')}, state => '22023' },
	{ name => 'mirror: filter with a FROM clause',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'true FROM pg_authid')}, state => '22023' },
	{ name => 'mirror: filter with a parameter',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => '$1')}, state => '42P02' },
	{ name => 'mirror: filter with a set-returning function',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'generate_series(1, 2) > 0')}, state => '0A000' },
	{ name => 'mirror: filter with a window function',
		sql => q{SELECT chroma_mirror('nt', 'cs_t041_x', filter => 'row_number() OVER () > 0')}, state => '42P20' },
	{ name => 'mirror by a user who does not own the table',
		sql => q{SET ROLE cs_t041_user; SELECT chroma_mirror('nt', 'cs_t041_x')}, state => '42501',
		msg => qr/owner/ },
	{ name => 'mirror of a table whose names need quoting',
		setup => q{CREATE SCHEMA "s p;""q";
			CREATE TABLE "s p;""q"."odd ""tbl""; drop é" ("the id; x" int PRIMARY KEY, "emb ""v""" real[], "dôc" text, "m;eta" jsonb, "plain col" int);
			INSERT INTO "s p;""q"."odd ""tbl""; drop é" SELECT g, ARRAY[g, 1, 2]::real[], 'doc ' || g, jsonb_build_object('n', g), g FROM generate_series(1, 20) g},
		sql => q{SELECT chroma_mirror('"s p;""q"."odd ""tbl""; drop é"', collection => 'cs_t041_quoted', embedding_column => 'emb "v"',
				document_column => 'dôc', metadata_columns => '{"m;eta","plain col"}') IS NOT NULL;
			UPDATE "s p;""q"."odd ""tbl""; drop é" SET "dôc" = 'changed', "plain col" = -1 WHERE "the id; x" = 3;
			DELETE FROM "s p;""q"."odd ""tbl""; drop é" WHERE "the id; x" = 4;
			SELECT chroma_flush('"s p;""q"."odd ""tbl""; drop é"', '60 s');
			SELECT rows || '|' || missing || '|' || extra || '|' || different FROM chroma_verify('"s p;""q"."odd ""tbl""; drop é"')},
		result => "t\nt\n19|0|0|0",
		check => q{SELECT string_agg(id || ' ' || document || ' ' || metadata::text, ',') = '3 changed {"n": 3, "plain col": -1}'
			FROM chroma_get('cs_t041_quoted', ARRAY['3', '4'])} },
	{ name => 'chroma_upsert_query over a table whose names need quoting',
		sql => q{SELECT chroma_upsert_query('cs_t041_quoted2', $$SELECT "the id; x"::text AS id, "emb ""v""" AS embedding,
			"dôc" AS document, "m;eta" AS metadata FROM "s p;""q"."odd ""tbl""; drop é"$$)},
		result => '19',
		check => q{SELECT count(*) = 19 AND count(*) FILTER (WHERE document = 'doc ' || id OR document = 'changed') = 19
			FROM chroma_get('cs_t041_quoted2')} },
	{ name => 'renamed mirrored column keeps syncing',
		setup => q{CREATE TABLE ren (id int PRIMARY KEY, embedding real[], doc text);
			INSERT INTO ren VALUES (1, '{1, 2}', 'a');
			SELECT chroma_mirror('ren', 'cs_t041_ddl_ren', document_column => 'doc');
			SELECT chroma_flush('ren', '60 s')},
		sql => q{ALTER TABLE ren RENAME COLUMN embedding TO "new name ""e""";
			ALTER TABLE ren RENAME COLUMN doc TO body;
			INSERT INTO ren VALUES (2, '{3, 4}', 'b');
			SELECT state FROM chroma_sync.status WHERE source = 'ren'::regclass;
			SELECT chroma_flush('ren', '60 s')},
		result => "syncing\nt",
		check => q{SELECT string_agg(id || document, ',' ORDER BY id) = '1a,2b' FROM chroma_get('cs_t041_ddl_ren')} },
	{ name => 'dropped mirrored column pauses the mirror',
		setup => q{CREATE TABLE dropc (id int PRIMARY KEY, embedding real[], doc text);
			INSERT INTO dropc VALUES (1, '{1, 2}', 'a');
			SELECT chroma_mirror('dropc', 'cs_t041_ddl_drop', document_column => 'doc');
			SELECT chroma_flush('dropc', '60 s')},
		sql => q{ALTER TABLE dropc DROP COLUMN doc;
			INSERT INTO dropc VALUES (2, '{3, 4}');
			SELECT state, last_error, pending > 0 FROM chroma_sync.status WHERE source = 'dropc'::regclass},
		result => qr/^paused\|.*doc.* was dropped.*\|t$/ },
	{ name => 'ALTER COLUMN TYPE of a mirrored column pauses the mirror',
		setup => q{CREATE TABLE retype (id int PRIMARY KEY, embedding real[], doc text);
			INSERT INTO retype VALUES (1, '{1, 2}', 'a');
			SELECT chroma_mirror('retype', 'cs_t041_ddl_type', document_column => 'doc')},
		sql => q{ALTER TABLE retype ALTER COLUMN embedding TYPE float8[];
			SELECT state, last_error FROM chroma_sync.status WHERE source = 'retype'::regclass},
		result => qr/^paused\|.*type of a mirrored column changed/ },
	{ name => 'DROP TABLE of a mirrored table removes the mirror',
		setup => q{CREATE TABLE gone (id int PRIMARY KEY, embedding real[]);
			INSERT INTO gone VALUES (1, '{1, 2}');
			SELECT chroma_mirror('gone', 'cs_t041_ddl_gone');
			SELECT chroma_flush('gone', '60 s')},
		sql => q{DROP TABLE gone;
			SELECT count(*) FROM chroma_sync.mirror WHERE collection = 'cs_t041_ddl_gone';
			SELECT chroma_count('cs_t041_ddl_gone')},
		result => "0\n1" },
	{ name => 'mirrored rows with NaN and the wrong dimension fail alone',
		setup => q{CREATE TABLE nanrows (id int PRIMARY KEY, embedding real[]);
			INSERT INTO nanrows VALUES (1, '{1, 2}'), (2, '{NaN, 1}'), (3, '{1, 2, 3}'), (4, '{Infinity, 0}'), (5, '{5, 6}')},
		sql => q{SELECT chroma_mirror('nanrows', 'cs_t041_nan') IS NOT NULL; SELECT chroma_flush('nanrows', '60 s');
			SELECT string_agg(id, ',' ORDER BY id) FROM chroma_sync.failed WHERE source = 'nanrows'::regclass},
		result => "t\nt\n2,3,4",
		check => q{SELECT string_agg(id, ',' ORDER BY id) = '1,5' FROM chroma_get('cs_t041_nan')} },

	# ---- servers that misbehave
	{ name => 'closed port', sql => qq{SET chroma_sync.url = '$closed_url'; SELECT chroma_heartbeat()},
		state => '08001' },
	{ name => 'server answers garbage (heartbeat)',
		sql => qq{SET chroma_sync.url = '$fake{garbage}'; SELECT chroma_heartbeat()}, state => '22032' },
	{ name => 'server answers garbage (upsert)',
		sql => qq{SET chroma_sync.url = '$fake{garbage}'; SELECT chroma_upsert('coll', ARRAY['a'], ARRAY[1, 2]::real[])},
		state => '22032' },
	{ name => 'server answers JSON of the wrong shape (get)',
		sql => qq{SET chroma_sync.url = '$fake{wrongjson}'; SELECT * FROM chroma_get('coll')}, state => '22032' },
	{ name => 'server answers JSON of the wrong shape (query)',
		sql => qq{SET chroma_sync.url = '$fake{wrongjson}'; SELECT * FROM chroma_query('coll', ARRAY[1, 2]::real[])},
		state => '22032' },
	{ name => 'server answers JSON of the wrong shape (count)',
		sql => qq{SET chroma_sync.url = '$fake{wrongjson}'; SELECT chroma_count('coll')}, state => '22032' },
	{ name => 'server answers a write 200 with a body of the wrong shape: acknowledged',
		sql => qq{SET chroma_sync.url = '$fake{wrongjson}'; SELECT chroma_upsert('coll', ARRAY['a', 'b'], ARRAY[[1, 2], [3, 4]]::real[])},
		result => "2" },
	{ name => 'server redirects (3xx): never followed',
		sql => qq{SET chroma_sync.url = '$fake{redirect}'; SELECT chroma_upsert('coll', ARRAY['a'], ARRAY[1, 2]::real[])},
		state => '38000', msg => qr/HTTP 302/,
		code => sub { (!-e "$tmp/redirect.count", 'the redirect target was requested') } },
	{ name => 'server trickles bytes: chroma_sync.timeout ends the request',
		sql => qq{SET chroma_sync.url = '$fake{trickle}'; SET chroma_sync.timeout = 1000; SELECT chroma_heartbeat()},
		state => '08006', msg => qr/timed out/ },
	{ name => 'server closes before the whole body',
		sql => qq{SET chroma_sync.url = '$fake{truncated}'; SELECT chroma_heartbeat()}, state => '08006' },
	{ name => 'TLS with an unknown CA',
		sql => qq{SET chroma_sync.url = '$tls_url'; SELECT chroma_heartbeat()}, state => '08001',
		msg => qr/certificate/ },
	{ name => 'TLS with the CA given: verification passes (then the listener is no Chroma)',
		sql => qq{SET chroma_sync.url = '$tls_url'; SET chroma_sync.ca_file = '$tmp/tls.crt'; SELECT chroma_heartbeat()},
		state => '22032' },
	{ name => 'TLS with a host name the certificate does not name',
		sql => qq{SET chroma_sync.url = 'https://localhost:$tls_port'; SET chroma_sync.ca_file = '$tmp/tls.crt'; SELECT chroma_heartbeat()},
		state => '08001', msg => qr/name/ },
	{ name => 'TLS with a ca_file that does not exist',
		sql => qq{SET chroma_sync.url = '$tls_url'; SET chroma_sync.ca_file = '/nonexistent/ca.pem'; SELECT chroma_heartbeat()},
		state => '08001' },
);
push @cases, map {
	my ($fn, $args, $expect, $set, $setup) = @$_;
	{ name => "NULL in each argument of $fn", code_only => sub { null_sweep($fn, $args, $expect, $set, $setup) } }
} @null_sweep;

# A worker list of garbage (SIGHUP): no worker, no crash; RESET brings the workers back.
push @cases, {
	name => 'worker_databases of garbage: no worker, the launcher stays, RESET restores',
	code_only => sub {
		my $garbage = ',, ,"unterminated,' . ('x' x 300);
		my $workers = q{SELECT count(*) FILTER (WHERE backend_type = 'chroma_sync worker') || '|'
			|| count(*) FILTER (WHERE backend_type = 'chroma_sync launcher') FROM pg_stat_activity};
		$node->safe_psql('postgres', "ALTER SYSTEM SET chroma_sync.worker_databases = '$garbage'");
		$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
		my $none = wait_for('no chroma_sync worker', 30,
			sub { $node->safe_psql('postgres', $workers) eq '0|1' });
		$node->safe_psql('postgres', 'ALTER SYSTEM RESET chroma_sync.worker_databases');
		$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
		my $back = wait_for('chroma_sync workers again', 60,
			sub { $node->safe_psql('postgres', $workers) =~ /^[1-9]\d*\|1$/ });
		return ($none && $back, 'workers|launchers now: ' . $node->safe_psql('postgres', $workers));
	} };

# ---------------------------------------------------------------- run
for my $c (@cases)
{
	my $db = $c->{db} // 'postgres';
	my ($good, $why) = (1, '');
	if ($c->{code_only})
	{
		($good, $why) = $c->{code_only}->();
		ok($good, $c->{name}) or diag($why);
		next;
	}
	$node->safe_psql($c->{setup_db} // $db, $c->{setup}, timeout => 300) if $c->{setup};
	my $t0 = time;
	my ($ret, $out, $err) = $node->psql($db, $c->{sql},
		extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => 300);
	my $secs = time - $t0;
	my ($state) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	my $expect;
	if (defined $c->{state})
	{
		$expect = "ERROR $c->{state}";
		$good = defined $state && $state eq $c->{state} && (!$c->{msg} || $err =~ $c->{msg});
	}
	else
	{
		$expect = 'success';
		$good = $ret == 0 && !defined $state
		  && (ref $c->{result} ? $out =~ $c->{result} : $out eq $c->{result});
	}
	if ($good && $c->{check})
	{
		my $r = $node->safe_psql($db, $c->{check}, timeout => 300);
		$good = $r eq 't';
		$why = "check returned '$r'";
	}
	if ($good && $c->{code})
	{
		($good, $why) = $c->{code}->($out, $err);
	}
	ok($good, sprintf('%s: %s', $c->{name}, $expect))
	  or diag(sprintf("exit %d after %.1f s, SQLSTATE %s; %s\nstdout: %s\nstderr: %s",
			$ret, $secs, $state // 'none', $why, substr($out, 0, 2000), substr($err, 0, 2000)));
}
note(scalar(@cases) . ' hostile cases');

# ---------------------------------------------------------------- the cluster survived
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
	'the postmaster was not restarted');
is((split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0], $pm_pid,
	'the postmaster pid is unchanged');
my $log = slurp_file($node->logfile, $log0);
unlike($log, qr/terminated by signal|server process .* was terminated/,
	'no backend was terminated by a signal');

$_->kill_kill for @servers;
finish($node, $log0);
