# chroma_get reads in pages: reading 20,000 records with 4 kB documents (an 85 MB result)
# keeps the backend's peak memory (VmHWM) bounded and hardly above reading 2,000; the
# paged result is the set Chroma holds, in the order Chroma returns it in one request
# (asked here over HTTP, as the oracle), with limit and offset cutting it where asked.
# Then misbehaving servers (test/lib/fake_chroma.pl): a response over
# chroma_sync.max_response_size is SQLSTATE 54000 with a hint, and a server that ignores offset is an error, never an
# endless read.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use ChromaSyncTest;

my $root = $ENV{CHROMA_ROOT} // $ENV{CHROMA_SYNC_ROOT}
  or BAIL_OUT('CHROMA_ROOT is not set: run the TAP tests through test/run_all.sh');
my $fake = "$root/test/lib/fake_chroma.pl";
my $url = $ENV{CHROMA_URL};

# Bounds (kB): reading 20,000 records stays under an absolute cap, and within a ratio of
# reading 2,000 (one request for the whole result took ~500 MB here).
my $cap_kb = 100 * 1024;
my $ratio = 1.5;
my $slack_kb = 20 * 1024;
my $records = 20_000;

my $node = new_node('get_memory');
my $coll = 'tap_get_memory';
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_create_collection('$coll')");

# document i: 4,096 bytes from md5(i); embedding (i, i % 7, ...); metadata {"i": i}
my $doc_sql = 'repeat(md5(i::text), 128)';
my $emb_sql = 'ARRAY[i, i % 7, i % 11, 1, 2, 3, 4, -0.0]::real[]';
my $t = time;
is($node->safe_psql('postgres', qq{
	SELECT chroma_upsert_query('$coll', \$q\$
		SELECT 'r' || i AS id, $emb_sql AS embedding, $doc_sql AS document,
			jsonb_build_object('i', i) AS metadata
		FROM generate_series(1, $records) AS i \$q\$)}, timeout => 300),
	$records, "$records records written");
note(sprintf('written in %.1f s', time - $t));

sub status_kb
{
	my ($status, $field) = @_;
	return $status =~ /^$field:\s+(\d+) kB/m ? $1 : undef;
}

# Reads chroma_get's result in a fresh backend: (summary line, VmHWM kB).
sub read_all
{
	my ($args) = @_;
	my $t = time;
	my $out = $node->safe_psql('postgres', qq{
		SELECT count(*), sum(length(document)), count(embedding)
		FROM chroma_get('$coll'$args);
		SELECT pg_read_file('/proc/self/status');
	}, timeout => 300);
	my ($summary, $status) = split /\n/, $out, 2;
	my $hwm = status_kb($status, 'VmHWM');
	note(sprintf("chroma_get('$coll'$args): $summary in %.1f s, VmHWM $hwm kB", time - $t));
	return ($summary, $hwm);
}

my ($s2k, $hwm_2k) = read_all(', "limit" => 2000');
is($s2k, '2000|8192000|2000', 'limit 2000: 2,000 records with their documents and embeddings');
my ($sall, $hwm_all) = read_all('');
is($sall, "$records|" . (4096 * $records) . "|$records",
	"no limit: all $records records with their documents and embeddings");
cmp_ok($hwm_all, '<', $cap_kb,
	"peak memory reading $records records is under " . ($cap_kb / 1024) . " MB ($hwm_all kB)");
cmp_ok($hwm_all, '<', $ratio * $hwm_2k + $slack_kb,
	"peak memory does not grow with the result ($records: $hwm_all kB, 2,000: $hwm_2k kB)");

# Every record is the one written, bit for bit (embeddings through float4send, -0 included).
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM chroma_get('$coll') AS g
	JOIN generate_series(1, $records) AS i ON g.id = 'r' || i
	WHERE g.document = $doc_sql AND g.metadata = jsonb_build_object('i', i)
		AND array_send(g.embedding) = array_send($emb_sql)}, timeout => 300),
	$records, 'every record read back equals the one written');

# The oracle: the ids of one get asking for everything, straight from Chroma.
my $uuid = $node->safe_psql('postgres',
	"SELECT id FROM chroma_list_collections() WHERE name = '$coll'");
my $resp = HTTP::Tiny->new(timeout => 120)->post(
	"$url/api/v2/tenants/default_tenant/databases/default_database/collections/$uuid/get",
	{ headers => { 'Content-Type' => 'application/json' }, content => '{"include":[]}' });
ok($resp->{success}, 'Chroma answers one get for all ids') or diag($resp->{content});
my @oracle = @{ decode_json($resp->{content})->{ids} };
is(scalar @oracle, $records, "Chroma's own get returns $records ids");
my @paged = split /\n/, $node->safe_psql('postgres',
	"SELECT id FROM chroma_get('$coll', include_embeddings => false)", timeout => 300);
is_deeply(\@paged, \@oracle, 'the paged result is in the order of Chroma\'s single get');

# limit and offset cut the same sequence, across page boundaries.
sub slice
{
	my ($from, $n) = @_;
	my $to = $from + $n - 1;
	$to = $#oracle if $to > $#oracle;
	return $from > $#oracle ? '' : join("\n", @oracle[ $from .. $to ]);
}
for my $case ([ 250, 1000 ], [ 299, 2 ], [ 19_999, 5 ], [ 0, 301 ], [ 20_000, 10 ])
{
	my ($offset, $limit) = @$case;
	is($node->safe_psql('postgres',
			"SELECT id FROM chroma_get('$coll', \"limit\" => $limit, \"offset\" => $offset)"),
		slice($offset, $limit), "limit $limit offset $offset: the same records, in order");
}
is($node->safe_psql('postgres', "SELECT id FROM chroma_get('$coll', \"offset\" => 19990)"),
	slice(19_990, 100), 'offset without limit: the rest of the collection');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll', \"limit\" => 0)"),
	'0', 'limit 0: no record');
is($node->safe_psql('postgres', qq{
	SELECT count(*), count(embedding), count(document), count(metadata)
	FROM chroma_get('$coll', include_embeddings => false)}, timeout => 300),
	"$records|0|$records|$records", 'include_embeddings => false: documents and metadata, no embedding');
is($node->safe_psql('postgres', qq{
	SELECT string_agg(id, ',' ORDER BY id)
	FROM chroma_get('$coll', ids => ARRAY['r5', 'r17', 'missing'], "where" => '{"i": {"\$gte": 10}}')}),
	'r17', 'ids and where still filter');

$node->safe_psql('postgres', "SELECT chroma_delete_collection('$coll')");

# ---- misbehaving servers
sub start_fake
{
	my ($mode) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $port_file = "$dir/$mode.port";
	my $h = IPC::Run::start([ 'perl', $fake, $mode, $port_file, "$dir/$mode.count" ]);
	my $t0 = time;
	usleep(50_000) until -s $port_file || time - $t0 > 10;
	my $port = slurp_file($port_file);
	chomp $port;
	return ($h, "http://127.0.0.1:$port");
}

sub psql_err
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => 120);
	return $err;
}

my ($huge, $huge_url) = start_fake('huge');
my $err = psql_err(qq{SET chroma_sync.url = '$huge_url';
	SET chroma_sync.max_response_size = '1MB';
	SELECT * FROM chroma_query('tap_huge', ARRAY[1, 2]::real[])});
like($err, qr/ERROR:  54000: the response from Chroma is larger than chroma_sync.max_response_size while trying to query records/,
	'a response over the limit: 54000, not an outcome-unknown connection failure');
like($err, qr/HINT:  Ask for fewer records/, 'with a hint');
$err = psql_err(qq{SET chroma_sync.url = '$huge_url';
	SET chroma_sync.max_response_size = '1MB';
	SELECT count(*) FROM chroma_get('tap_huge')});
like($err, qr/ERROR:  54000: record 1 of the result is too large to read/,
	'chroma_get: a page over the limit is asked again one record at a time, then 54000');
like($err, qr/HINT:  Leave its embedding out/, 'with a hint');
$huge->kill_kill;

my ($nooffset, $nooffset_url) = start_fake('samepage');
$err = psql_err(qq{SET chroma_sync.url = '$nooffset_url';
	SET statement_timeout = '60s';
	SELECT count(*) FROM chroma_get('tap_nooffset')});
like($err, qr/ERROR:  38000: Chroma sent the same page of records twice while trying to get records/,
	'a server that ignores offset: an error at the second page, not an endless read');
$nooffset->kill_kill;

assert_no_crash($node, 0);
$node->stop;
done_testing();
