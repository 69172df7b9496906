# chroma_upsert_query with several requests in flight (chroma_sync.max_concurrent_requests),
# against the real Chroma server: many batches with 4 in flight give exactly the query's
# rows (read back over the REST API by our own reader); an id repeated in a later batch
# while its earlier batch is in flight keeps the later row (that batch waits); a batch the
# server refuses while others are in flight raises a clear error and leaves the backend
# usable; a statement_timeout and a pg_cancel_backend with 4 requests in flight (through
# test/lib/delay_proxy.pl, 300 ms each way) end the call at once and leave the session
# usable; 4 in flight really overlap (through the proxy, 4 are faster than 1); 1 still works.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaRest;
use ChromaSyncTest;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $node = new_node('upsert_query_concurrent');
my $log0 = log_offset($node);
my $coll = 'cs_t210';
my $dim = 16;

# Runs $sql with verbose errors; returns (SQLSTATE or 'ok', seconds, stdout, stderr).
sub timed
{
	my ($sql, $timeout) = @_;
	my $t0 = time;
	my $timed_out = 0;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ], timeout => $timeout // 180,
		timed_out => \$timed_out);
	my ($state) = ($err // '') =~ /ERROR:  ([0-9A-Z]{5}):/;
	$state //= $timed_out ? 'timed out' : ($ret == 0 ? 'ok' : "exit $ret");
	return ($state, time - $t0, $out // '', $err // '');
}

$node->safe_psql('postgres', qq{
CREATE TABLE src (g int PRIMARY KEY, id text, embedding real[], doc text, meta jsonb);
INSERT INTO src
SELECT g, 'r' || g,
	ARRAY(SELECT (sin(g * 7.31 + d * 1.37) * 10)::real FROM generate_series(1, $dim) d),
	CASE WHEN g % 7 = 0 THEN NULL ELSE 'document ' || g END,
	CASE WHEN g % 11 = 0 THEN NULL ELSE jsonb_build_object('n', g, 'tag', 'k' || (g % 5), 'half', g / 2.0) END
FROM generate_series(1, 6000) g});

# The expected records: the last row (highest g) of each id among the rows $where picks.
sub expected
{
	my ($where) = @_;
	my %t;
	my $rows = $node->safe_psql('postgres', qq{
SELECT DISTINCT ON (id) id,
	(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o) FROM unnest(embedding) WITH ORDINALITY u(x, o)),
	coalesce(doc, '<NULL>'), coalesce(meta::text, '<NULL>')
FROM ($where) s ORDER BY id, g DESC});
	for my $line (split /\n/, $rows)
	{
		my ($id, $emb, $doc, $meta) = split /\|/, $line, 4;
		$t{$id} = [ $emb, $doc eq '<NULL>' ? undef : $doc,
			$meta eq '<NULL>' ? undef : JSON::PP->new->utf8->decode($meta) ];
	}
	return \%t;
}

# The collection read over the REST API equals the expected records, both ways.
sub collection_is
{
	my ($table, $name) = @_;
	my ($chroma, $count) = read_collection($coll);
	my ($n, $examples) = compare_records($table, $chroma);
	my $ok = is($n->{mismatches}, 0,
		"$name: the collection read over the REST API holds exactly the expected records ("
		  . scalar(keys %$table) . ' expected, ' . scalar(keys %$chroma) . " in Chroma; only expected "
		  . "$n->{only_table}, only in Chroma $n->{only_chroma}, embedding $n->{embedding}, "
		  . "document $n->{document}, metadata $n->{metadata})");
	diag(join("\n", @$examples[ 0 .. ($#$examples < 9 ? $#$examples : 9) ])) unless $ok;
	return $ok;
}

sub fresh
{
	fresh_collection($node, $coll);
	$node->safe_psql('postgres', "SELECT chroma_create_collection('$coll')");
}

my $query = q{$$SELECT id, embedding, doc AS document, meta AS metadata FROM src ORDER BY g$$};

# ---------------------------------------------------------------- many batches, 4 in flight
fresh();
my ($state, $secs, $out, $err) = timed(qq{
SET chroma_sync.max_concurrent_requests = 4; SET chroma_sync.batch_size = 100;
SELECT chroma_upsert_query('$coll', $query)});
is("$state $out", 'ok 6000', '4 in flight, 60 batches of 100: the call returns the 6000 records sent')
  or diag($err);
collection_is(expected('SELECT * FROM src'), '4 in flight, 60 batches');

# ---------------------------------------------------------------- the same ids in several batches
# ids repeat every 250 rows and batches hold 100: each batch shares ids with the one two
# before it, often still in flight. Batches 1, 4, 7, ... carry 40 kB documents (slow to
# send and store), so a batch racing ahead of an earlier one holding the same ids would land
# first and lose to it. Every row has a document and the same metadata keys (an upsert
# keeps a stored document or key that the new record leaves out).
fresh();
my $rep = q{SELECT g, 'r' || (g % 250) AS id, embedding,
	CASE WHEN (g - 1) / 100 % 3 = 0 THEN repeat('big ', 10000) || g ELSE 'row ' || g END AS doc,
	jsonb_build_object('n', g, 'tag', 'k' || (g % 5)) AS meta
	FROM src WHERE g <= 3000};
($state, $secs, $out, $err) = timed(qq{
SET chroma_sync.max_concurrent_requests = 4; SET chroma_sync.batch_size = 100;
SELECT chroma_upsert_query('$coll', \$\$SELECT id, embedding, doc AS document, meta AS metadata FROM ($rep) s ORDER BY g\$\$)});
is("$state $out", 'ok 3000', 'ids repeated across 30 batches, 4 in flight: 3000 records sent (a record per row)')
  or diag($err);
collection_is(expected($rep), 'ids repeated across batches: the last row of each id wins');

# ---------------------------------------------------------------- the server refuses batches
# The query's first row writes a 3-dimensional record into the fresh collection: Chroma
# then refuses every batch of 16-dimensional ones (HTTP 400), with 4 of them in flight.
fresh();
my $log1 = log_offset($node);
($state, $secs, $out, $err) = timed(qq{
SET chroma_sync.max_concurrent_requests = 4; SET chroma_sync.batch_size = 100;
SELECT chroma_upsert_query('$coll', \$\$
	SELECT id, embedding, doc AS document,
		CASE WHEN g = 1 THEN (SELECT jsonb_build_object('first', chroma_upsert('$coll', ARRAY['three'], ARRAY[1, 2, 3]::real[])))
		ELSE meta END AS metadata
	FROM src ORDER BY g\$\$)});
ok($state eq '22023' && $err =~ /Chroma refused the request to upsert records in collection "$coll" \(Chroma acknowledged 0 records of this call\)/,
	'a batch refused while others are in flight: 22023, Chroma refused the request, 0 records acknowledged')
  or diag("$state: $err");
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll')"), '1',
	'nothing of the refused call is in the collection (only the 3-d record)');
($state, $secs, $out, $err) = timed(q{SELECT 1});
is("$state $out", 'ok 1', 'the backend is usable after the refusal');
assert_no_crash($node, $log1, 'no crash after the refusal');

# a bad row in a later batch: the batches in flight before it land, then the error
fresh();
($state, $secs, $out, $err) = timed(qq{
SET chroma_sync.max_concurrent_requests = 4; SET chroma_sync.batch_size = 100;
SELECT chroma_upsert_query('$coll', \$\$SELECT id, CASE WHEN g = 550 THEN NULL ELSE embedding END AS embedding
	FROM src ORDER BY g\$\$)});
is($state, '22004', 'a NULL embedding in batch 6: 22004') or diag($err);
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('$coll')"), '500',
	'the 5 batches before it (up to 4 of them in flight at the error) are all in Chroma, none after');

# ---------------------------------------------------------------- 4 in flight overlap, and cancels
my $dir = PostgreSQL::Test::Utils::tempdir();
mkdir "$dir/d300";
my $p300 = start_proxy('delay_proxy.pl', "$dir/d300", 300);
my $via300 = qq{SET chroma_sync.url = 'http://127.0.0.1:$p300'; SET chroma_sync.batch_size = 100;};

my %took;
for my $n (1, 4)
{
	fresh();
	($state, $secs, $out, $err) = timed(qq{$via300 SET chroma_sync.max_concurrent_requests = $n;
SELECT chroma_upsert_query('$coll', \$\$SELECT id, embedding, doc AS document, meta AS metadata FROM src WHERE g <= 1200 ORDER BY g\$\$)});
	is("$state $out", 'ok 1200', "through a 600 ms round trip, $n in flight: 1200 records sent") or diag($err);
	$took{$n} = $secs;
	collection_is(expected('SELECT * FROM src WHERE g <= 1200'), "600 ms round trip, $n in flight");
}
# 12 requests: one at a time at least 12 round trips (7.2 s), 4 at a time about 3
ok($took{1} >= 7.2 && $took{4} < 0.6 * $took{1},
	sprintf('4 requests in flight overlap: %.2f s against %.2f s with 1', $took{4}, $took{1}));

# statement_timeout with 4 in flight (each takes 600 ms or more through the proxy)
fresh();
my $log2 = log_offset($node);
($state, $secs, $out, $err) = timed(qq{$via300 SET chroma_sync.max_concurrent_requests = 4;
SET statement_timeout = '1500ms';
SELECT chroma_upsert_query('$coll', $query)});
ok($state eq '57014' && $secs < 4, sprintf('statement_timeout with 4 requests in flight ends the call (%s after %.1f s)', $state, $secs))
  or diag($err);

# pg_cancel_backend of a call with 4 in flight, then the same session goes on
my ($pout, $perr) = ('', '');
my $h = IPC::Run::start([ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'),
	'-c', qq{SET application_name = 'cs_t210_cancel'; $via300 SET chroma_sync.max_concurrent_requests = 4},
	'-c', qq{SELECT chroma_upsert_query('$coll', $query)},
	'-c', qq{SELECT 'after ' || chroma_upsert_query('$coll', \$\$SELECT id, embedding FROM src WHERE g <= 800 ORDER BY g\$\$)} ],
	'>', \$pout, '2>', \$perr);
my $pid = '';
wait_for('the call runs', 30, sub {
	$pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'cs_t210_cancel' AND query LIKE '%chroma_upsert_query%' AND state = 'active'");
	$pid ne '';
});
sleep 1.5;    # every request takes 600 ms or more: 4 are in flight
my $t0 = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)") if $pid ne '';
$h->finish;
ok($perr =~ /57014/ && $pout =~ /^after 800$/m,
	sprintf('pg_cancel_backend with 4 in flight cancels the call; the same session then sends 800 records (%.1f s)', time - $t0))
  or diag("stdout: $pout\nstderr: $perr");
assert_no_crash($node, $log2, 'no crash after the cancels');
fresh();
($state, $secs, $out, $err) = timed(qq{$via300 SET chroma_sync.max_concurrent_requests = 4;
SELECT chroma_upsert_query('$coll', \$\$SELECT id, embedding, doc AS document, meta AS metadata FROM src WHERE g <= 2000 ORDER BY g\$\$)});
is("$state $out", 'ok 2000', 'after the cancels, 4 in flight through the proxy send 2000 records') or diag($err);
collection_is(expected('SELECT * FROM src WHERE g <= 2000'), 'after the cancels');

# ---------------------------------------------------------------- one at a time still works
fresh();
($state, $secs, $out, $err) = timed(qq{
SET chroma_sync.max_concurrent_requests = 1; SET chroma_sync.batch_size = 100;
SELECT chroma_upsert_query('$coll', $query)});
is("$state $out", 'ok 6000', '1 in flight: 6000 records sent') or diag($err);
collection_is(expected('SELECT * FROM src'), '1 in flight');

($state) = timed(q{SET chroma_sync.max_concurrent_requests = 11});
is($state, '22023', 'max_concurrent_requests is at most 10');
($state) = timed(q{SET chroma_sync.max_concurrent_requests = 0});
is($state, '22023', 'max_concurrent_requests is at least 1');
is($node->safe_psql('postgres', 'SHOW chroma_sync.max_concurrent_requests'), '4', 'the default is 4 (Chroma Cloud allows 10 concurrent writes per collection)');

fresh_collection($node, $coll);
finish($node, $log0);
