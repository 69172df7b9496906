# Chaos: 4 writers change 10,000 keys at random for 60 s (inserts, upserts, updates of
# the embedding, the document and the metadata, deletes, primary-key changes, rollbacks)
# while Chroma is killed with SIGKILL and restarted twice, the database's chroma_sync
# worker is terminated once (pg_terminate_backend) and the cluster is crash-restarted once
# (kill -9 of a writer's backend: the postmaster reinitializes). Writers reconnect and go
# on; a transaction that failed is not counted. Then chroma_flush, and the collection is
# compared with the table both ways, through an independent path: the collection is read
# with HTTP::Tiny from Chroma's REST API (test/t/ChromaRest.pm, float32 bytes rebuilt from
# the JSON floats), and compared with the table's rows read with float4send: every id,
# embedding (bit-exact), document and metadata, and no id in Chroma that is not a row.
# A last check corrupts one record behind the mirror's back to show the comparison sees it.
# The collection is created with a large hnsw sync_threshold: see create_collection_for_kills
# in ChromaRest.pm (Chroma itself can corrupt a collection when killed while it persists its index).
#
# Environment:
#   CHROMA_SYNC_SOAK_SECONDS=N  run the writers for N seconds instead of 60 (a soak); the
#                               chaos cycle (2 Chroma kills, 1 worker termination, 1 crash
#                               restart) repeats once per started minute. Raise the
#                               harness's TAP_TIMEOUT (seconds per TAP file, 900) to match.
#   CHROMA_SYNC_CHAOS_SEED=N    the random seed (printed by every run) to replay a run's
#                               operations; the interleaving of the writers still varies.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use PostgreSQL::Test::Utils;
use Test::More;
use Encode qw(decode encode);
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);

my $coll = 'cs_t040_chaos';
my $nkeys = 10_000;
my $dim = 10;    # 40 bytes: base64 with padding
my $nwriters = 4;
my $duration = $ENV{CHROMA_SYNC_SOAK_SECONDS} // 60;
die "CHROMA_SYNC_SOAK_SECONDS must be a whole number of seconds >= 20\n"
  unless $duration =~ /^\d+$/ && $duration >= 20;
my $seed = $ENV{CHROMA_SYNC_CHAOS_SEED} // (time() * 1000 + $$) % 2_147_483_647;
die "CHROMA_SYNC_CHAOS_SEED must be a whole number\n" unless $seed =~ /^\d+$/;
diag("chaos: seed $seed (replay with CHROMA_SYNC_CHAOS_SEED=$seed), $duration s, "
	  . "$nwriters writers, $nkeys keys, dimension $dim, server " . ($ENV{CHROMA_SERVER} // 'old'));
srand($seed);

my $node = new_node('chaos', conf => qq{
restart_after_crash = on
chroma_sync.batch_size = 200
chroma_sync.connect_timeout = 1000
chroma_sync.timeout = 10000
});
my $log0 = log_offset($node);

# ------------------------------------------------------------------ random values

# A float32 as text that float4in reads back to the same bits: ordinary values, signed
# zeros, subnormals, values near the top of the range; never NaN or infinity.
sub random_float
{
	my $r = rand();
	my $sign = rand() < 0.5 ? 0x80000000 : 0;
	my $bits;
	if ($r < 0.70)    # about 1e-8 .. 1e8
	{
		$bits = $sign | ((100 + int(rand(54))) << 23) | int(rand(1 << 23));
	}
	elsif ($r < 0.80) { $bits = $sign; }    # 0.0 and -0.0
	elsif ($r < 0.87) { $bits = $sign | (1 + int(rand((1 << 23) - 1))); }    # subnormal
	elsif ($r < 0.92) { $bits = $sign | ((240 + int(rand(15))) << 23) | int(rand(1 << 23)); }
	elsif ($r < 0.94) { $bits = $sign | 0x7f7fffff; }    # largest float32
	else { return sprintf('%d', int(rand(2001)) - 1000); }
	return sprintf('%.9g', unpack('f>', pack('L>', $bits)));
}

sub random_embedding
{
	return 'NULL' if rand() < 0.04;
	return "'{" . join(',', map { random_float() } 1 .. $dim) . "}'::real[]";
}

my @words = ('alpha', 'beta', 'gamma', "it's", 'say "hi"', 'back\\slash', "tab\there",
	"new\nline", 'ünïcödé', '日本語', "emoji \x{1F642}", 'a|b', '{"json": 1}', '%s %d', '$1');

sub random_text
{
	my $n = 1 + int(rand(6));
	return join(' ', map { $words[ rand @words ] } 1 .. $n) . ' ' . int(rand(1_000_000));
}

sub sql_literal
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

sub random_document
{
	my $r = rand();
	return 'NULL' if $r < 0.10;
	return sql_literal(random_text());
}

my $json = JSON::PP->new->canonical;
my @meta_keys = ('a', 'b', 'c', 'tag', 'n', 'score', 'flag', 'key with space', 'ключ');

sub random_meta_value
{
	my $r = rand();
	return int(rand(2_000_000_001)) - 1_000_000_000 if $r < 0.30;
	return \1 if $r < 0.38;
	return \0 if $r < 0.45;
	return JSON::PP::null if $r < 0.50;    # a key with a JSON null is not sent
	# floats with a decimal point (sent as floats); written as JSON numbers below
	return 'FLOAT:' . sprintf('%.4f', rand(2000) - 1000) if $r < 0.70;
	return random_text();
}

# A jsonb literal: an object of some of the keys, or NULL, or {}.
sub random_meta
{
	my $r = rand();
	return 'NULL' if $r < 0.08;
	return "'{}'" if $r < 0.12;
	my %m;
	for my $k (@meta_keys)
	{
		next if rand() < 0.6;
		$m{$k} = random_meta_value();
	}
	my $text = $json->encode(\%m);
	# floats keep a decimal point, so that they stay floats in jsonb and in Chroma
	$text =~ s/"FLOAT:([-0-9.]+)"/$1/g;
	return sql_literal($text) . '::jsonb';
}

sub random_key
{
	# a quarter of the operations hit 200 hot keys
	return rand() < 0.25 ? 1 + int(rand(200)) : 1 + int(rand($nkeys));
}

# One statement changing key $k (some change others: primary-key moves, small ranges).
sub random_statement
{
	my ($k) = @_;
	my $r = rand();
	if ($r < 0.20)
	{
		return sprintf(
			'INSERT INTO docs VALUES (%d, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET '
			  . 'embedding = excluded.embedding, doc = excluded.doc, meta = excluded.meta',
			$k, random_embedding(), random_document(), random_meta());
	}
	if ($r < 0.25)
	{
		return sprintf('INSERT INTO docs VALUES (%d, %s, %s, %s) ON CONFLICT (id) DO NOTHING',
			$k, random_embedding(), random_document(), random_meta());
	}
	return sprintf('UPDATE docs SET embedding = %s WHERE id = %d', random_embedding(), $k)
	  if $r < 0.40;
	return sprintf('UPDATE docs SET doc = %s WHERE id = %d', random_document(), $k)
	  if $r < 0.51;
	if ($r < 0.66)
	{
		my $m = rand();
		return sprintf('UPDATE docs SET meta = %s WHERE id = %d', random_meta(), $k)
		  if $m < 0.5;
		return sprintf(q{UPDATE docs SET meta = coalesce(meta, '{}') || %s WHERE id = %d},
			random_meta() =~ s/^NULL$/'{}'::jsonb/r, $k)
		  if $m < 0.8;
		return sprintf(q{UPDATE docs SET meta = meta - %s WHERE id = %d},
			sql_literal($meta_keys[ rand @meta_keys ]), $k);
	}
	if ($r < 0.72)
	{
		return sprintf('UPDATE docs SET embedding = %s, doc = %s, meta = %s WHERE id = %d',
			random_embedding(), random_document(), random_meta(), $k);
	}
	return sprintf('UPDATE docs SET doc = doc, meta = meta WHERE id = %d', $k) if $r < 0.74;
	return sprintf('DELETE FROM docs WHERE id = %d', $k) if $r < 0.85;
	if ($r < 0.96)
	{
		my $to = random_key();
		return sprintf('UPDATE docs SET id = %d WHERE id = %d '
			  . 'AND NOT EXISTS (SELECT 1 FROM docs WHERE id = %d)', $to, $k, $to);
	}
	if ($r < 0.98)
	{
		return sprintf(q{UPDATE docs SET meta = coalesce(meta, '{}') || '{"bulk": %d}' }
			  . 'WHERE id BETWEEN %d AND %d', int(rand(1000)), $k, $k + 15);
	}
	return sprintf('DELETE FROM docs WHERE id BETWEEN %d AND %d', $k, $k + 3);
}

# A transaction of 1 to 3 statements (often on the same key); 5% end in ROLLBACK. A
# committed transaction prints "ok N" before its COMMIT (nothing when it failed).
sub random_transaction
{
	my $n = 1 + int(rand(3));
	my $k = random_key();
	my @s;
	for (1 .. $n)
	{
		push @s, random_statement($k);
		$k = random_key() if rand() < 0.5;
	}
	my $rollback = rand() < 0.05;
	return ("BEGIN;\n" . join(";\n", @s) . ";\n"
		  . ($rollback ? "ROLLBACK;\n" : "SELECT 'ok $n';\nCOMMIT;\n"), $rollback);
}

# ------------------------------------------------------------------ writers

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $stop_file = "$tmp/stop";

# Errors that chaos explains: conflicts between writers and lost connections.
my $expected_error = qr/duplicate key value violates unique constraint|deadlock detected|current transaction is aborted|terminating connection|server closed the connection|connection to server|no connection to the server|could not connect|the database system is|could not send data|could not receive data|SSL SYSCALL|Connection refused|canceling statement due to conflict/;

sub writer
{
	my ($w, $wseed, $deadline) = @_;
	srand($wseed);
	$ENV{PGAPPNAME} = "chaos_writer_$w";
	my %c = (committed => 0, operations => 0, failed => 0, rolled_back => 0,
		reconnects => 0, unexpected => 0);
	my %unexpected;
	while (time() < $deadline && !-e $stop_file)
	{
		my ($sql, $tx, $statements) = ('', 0, 0);
		my $rollbacks = 0;
		for (1 .. 20)
		{
			my ($t, $rb) = random_transaction();
			$sql .= $t;
			$tx++;
			$rollbacks += $rb;
		}
		my ($out, $err) = ('', '');
		my $rc = eval {
			$node->psql('postgres', encode('UTF-8', $sql),
				on_error_stop => 0, stdout => \$out, stderr => \$err, timeout => 300);
		};
		$rc = -1 unless defined $rc;
		my $ok = 0;
		for my $line (split /\n/, $out)
		{
			next unless $line =~ /^ok (\d+)$/;
			$ok++;
			$c{operations} += $1;
		}
		$c{committed} += $ok;
		$c{rolled_back} += $rollbacks;
		$c{failed} += $tx - $rollbacks - $ok if $rc == 0;
		for my $line (split /\n/, $err)
		{
			next unless $line =~ /(?:ERROR|FATAL):\s+(.*)/;
			next if $1 =~ $expected_error;
			$c{unexpected}++;
			$unexpected{$1}++;
		}
		if ($rc != 0)
		{
			# the connection went away (crash restart): whatever it did not print is lost
			$c{reconnects}++;
			sleep 0.5;
		}
	}
	open my $fh, '>', "$tmp/writer_$w" or die "writer $w: $!";
	print $fh $json->encode({ %c, unexpected_errors => \%unexpected });
	close $fh;
	return;
}

# ------------------------------------------------------------------ chaos actions

sub note_status
{
	my ($when) = @_;
	my ($ret, $out) = $node->psql('postgres',
		"SELECT state, pending, synced, backfill_sent || '/' || backfill_total FROM chroma_sync.status WHERE source = 'docs'::regclass");
	note(sprintf('%5.1f s, %s: state|pending|synced|backfilled %s', time() - $^T, $when, $out // ''));
	return;
}

my %chaos = (chroma_kills => 0, worker_terminations => 0, crash_restarts => 0);

sub chroma_kill_and_restart
{
	chroma_kill_restart();
	$chaos{chroma_kills}++;
	return;
}

sub terminate_worker
{
	my $old = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'");
	my $done = $node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'");
	is($done, 't', "pg_terminate_backend of the worker (pid $old)");
	isnt(wait_for_new_worker($node, $old, 120), '', 'a new worker runs');
	$chaos{worker_terminations}++;
	return;
}

sub crash_restart
{
	crash_restart_cluster($node, 'chaos_writer%');
	$chaos{crash_restarts}++;
	return;
}

# ------------------------------------------------------------------ the run

fresh_collection($node, $coll);
# a large hnsw sync_threshold: see create_collection_for_kills in ChromaRest.pm
create_collection_for_kills($coll);
$node->safe_psql('postgres',
	'CREATE TABLE docs (id int PRIMARY KEY, embedding real[], doc text, meta jsonb)');
# 6,000 of the 10,000 keys exist at the start (the writers begin during the backfill)
{
	my $sql = '';
	for my $k (1 .. $nkeys)
	{
		next if rand() < 0.4;
		$sql .= sprintf("INSERT INTO docs VALUES (%d, %s, %s, %s);\n",
			$k, random_embedding(), random_document(), random_meta());
	}
	$node->safe_psql('postgres', encode('UTF-8', "BEGIN;\n${sql}COMMIT;\n"));
}
mirror($node, 'docs', $coll);

my $t0 = time();
my $deadline = $t0 + $duration;
my @pids;
for my $w (1 .. $nwriters)
{
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		eval { writer($w, $seed + $w, $deadline) };
		print STDERR "writer $w: $@" if $@;
		POSIX::_exit($@ ? 1 : 0);    # no END blocks: the node belongs to the parent
	}
	push @pids, $pid;
}

# Per started minute: Chroma kill, worker termination, crash restart, Chroma kill.
my $cycles = int(($duration + 59) / 60);
my $cycle = $duration / $cycles;
my @plan;
for my $c (0 .. $cycles - 1)
{
	push @plan, [ $c * $cycle + 0.12 * $cycle, \&chroma_kill_and_restart ],
	  [ $c * $cycle + 0.32 * $cycle, \&terminate_worker ],
	  [ $c * $cycle + 0.50 * $cycle, \&crash_restart ],
	  [ $c * $cycle + 0.70 * $cycle, \&chroma_kill_and_restart ];
}
for my $step (@plan)
{
	my ($at, $action) = @$step;
	my $wait = $t0 + $at - time();
	sleep($wait) if $wait > 0;
	note_status('before the next action');
	$action->();
}
my $log_after_chaos = log_offset($node);

my $writer_failed = 0;
for my $pid (@pids)
{
	waitpid($pid, 0);
	$writer_failed++ if $? != 0;
}
is($writer_failed, 0, 'every writer ran to the end');
note_status('when the writers stopped');
my %total;
my %unexpected;
for my $w (1 .. $nwriters)
{
	my $r = eval { $json->decode(slurp_file("$tmp/writer_$w")) } // {};
	note("writer $w: " . join(', ', map { "$_ $r->{$_}" } grep { !ref $r->{$_} } sort keys %$r));
	$total{$_} += $r->{$_} // 0 for qw(committed operations failed rolled_back reconnects unexpected);
	$unexpected{$_} += $r->{unexpected_errors}{$_} for keys %{ $r->{unexpected_errors} // {} };
}
my $elapsed = time() - $t0;
diag(sprintf('chaos: %d operations in %d committed transactions in %.0f s '
	  . '(%d failed, %d rolled back on purpose, %d writer reconnects)',
	$total{operations}, $total{committed}, $elapsed, $total{failed},
	$total{rolled_back}, $total{reconnects}));
diag(sprintf('chaos: restarts: %d Chroma SIGKILLs, %d worker terminations, %d crash restarts',
	$chaos{chroma_kills}, $chaos{worker_terminations}, $chaos{crash_restarts}));
ok($total{committed} > 0, 'the writers committed transactions');
is($total{unexpected}, 0, 'the writers met only conflicts and lost connections')
  or diag("unexpected errors:\n" . join("\n", map { "$unexpected{$_} x $_" } sort keys %unexpected));
# the crash restarts in the log are exactly the ones caused here
my $restarts = () = slurp_file($node->logfile, $log0) =~ /all server processes terminated; reinitializing/g;
is($restarts, $chaos{crash_restarts}, "the server log shows $chaos{crash_restarts} crash restart(s), no other");

# ------------------------------------------------------------------ flush and compare

my $flushed = $node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '300 seconds')",
	timeout => 360);
is($flushed, 't', 'chroma_flush returns true');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'no row in chroma_sync.failed');
is($node->safe_psql('postgres',
		"SELECT state, pending FROM chroma_sync.status WHERE source = 'docs'::regclass"),
	'syncing|0', 'the mirror is syncing with nothing pending');

# The table: id -> [embedding bytes (hex), document (UTF-8 bytes, or undef), metadata].
sub read_table
{
	my %table;
	for my $line (split /\n/, $node->safe_psql('postgres', q{
SELECT id,
	(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o)
		FROM unnest(embedding) WITH ORDINALITY u(x, o)),
	CASE WHEN doc IS NULL THEN 'N' ELSE 'T' || encode(convert_to(doc, 'UTF8'), 'hex') END,
	coalesce(meta::text, 'null')
FROM docs WHERE embedding IS NOT NULL}, timeout => 300))
	{
		my ($id, $emb, $doc, $meta) = split /\|/, $line, 4;
		$table{$id} = [ $emb, $doc eq 'N' ? undef : pack('H*', substr($doc, 1)),
			JSON::PP->new->utf8->decode($meta) ];
	}
	return \%table;
}

# The collection, read over the REST API (test/t/ChromaRest.pm): id -> {emb, doc, meta, dup}.
sub read_chroma
{
	my ($chroma, $count) = read_collection($coll);
	is($count, scalar(keys %$chroma), 'the count endpoint agrees with the records read');
	return $chroma;
}

my $table = read_table();
my $chroma = read_chroma();
my ($n, $examples) = compare_records($table, $chroma);
my $compared = scalar(keys %$table);
diag("chaos: rows compared $compared (table rows with an embedding), Chroma records "
	  . scalar(keys %$chroma) . ", identical $n->{matched}, mismatches $n->{mismatches} "
	  . "(only in table $n->{only_table}, only in Chroma $n->{only_chroma}, embedding $n->{embedding}, "
	  . "document $n->{document}, metadata $n->{metadata}, duplicate ids $n->{duplicate})");
ok($compared > 1000, "the table has rows to compare ($compared)");
is($n->{mismatches}, 0, 'the collection equals the table, both ways, bit for bit')
  or diag("first differences:\n" . join("\n", @$examples[ 0 .. ($#$examples < 19 ? $#$examples : 19) ]));
is($n->{matched}, $compared, 'every table row matched');

# chroma_verify agrees (the extension's own view of the same comparison)
is($node->safe_psql('postgres',
		"SELECT rows, missing, extra, different FROM chroma_verify('docs')", timeout => 300),
	"$compared|0|0|0", 'chroma_verify agrees');

# The comparison is not blind: change one record behind the mirror's back (its first float
# by one ulp, a metadata key added, its document changed) and add a stray id.
my ($victim) = grep { defined $table->{$_}[1] } sort { $a <=> $b } keys %$table;
my @floats = map { unpack('f>', pack('H*', $_)) } unpack('(A8)*', $table->{$victim}[0]);
$floats[0] = unpack('f>', pack('L>', unpack('L>', pack('f>', $floats[0])) ^ 1));
my $cid = collection_id($coll);
chroma_post("$cid/upsert", { ids => [ "$victim", 'chaos-stray' ],
	embeddings => [ [ map { 0 + sprintf('%.9g', $_) } @floats ], [ map { 0.5 } 1 .. $dim ] ],
	documents => [ 'changed', 'stray' ],
	metadatas => [ { stray_key => 1 }, undef ] });
($n) = compare_records($table, read_chroma());
is(join(' ', map { "$_=$n->{$_}" } qw(only_table only_chroma embedding document metadata)),
	'only_table=0 only_chroma=1 embedding=1 document=1 metadata=1',
	"the comparison sees a one-ulp change, a changed document, a stale key and a stray id (id $victim)");

finish($node, $log_after_chaos);
