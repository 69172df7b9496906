# A randomized workload with an oracle (Jepsen's shape): several sessions run seeded random
# transactions (test/t/RandomWorkload.pm) over twelve mirrors: plain tables with int, text,
# char(5) and composite (text, int) keys, filters, two mirrors of one table, jsonb and scalar metadata, NULL
# embeddings; the five leaf partitions of a partitioned parent (one partition is itself
# partitioned), written through the parent (partition-key updates move rows between
# them); an inheritance parent and child, written through the parent. The transactions mix
# INSERT/UPDATE/DELETE, key changes, COPY, INSERT ... ON CONFLICT, MERGE, TRUNCATE, nested
# savepoints released or rolled back, PL/pgSQL blocks whose EXCEPTION handler undoes part of
# their work, whole-transaction ROLLBACK, prepared transactions (COMMIT/ROLLBACK PREPARED),
# asynchronous commits, and writes to two mirrored tables with the statements on one inside
# a savepoint of the other. Meanwhile a nemesis terminates the chroma_sync worker and
# launcher (and checks that they come back), SIGKILLs Chroma and restarts it, sets
# chroma_sync.test_stall for a moment, resyncs or pauses and resumes a mirror, and
# crash-restarts the cluster once. Then the checker: chroma_flush, and for every mirror
# chroma_verify and an independent read of the collection over Chroma's REST API
# (test/t/ChromaRest.pm) compared both ways with the rows the table says it must hold: ids,
# float32 bytes, documents, typed metadata. The oracle is the table itself. Some statements
# write more than 1,000 keys (the trigger's buffer flushes within the statement).
#
# Environment:
#   CHROMA_SYNC_SEED=N      the seed (printed by every run and in every failure). The same
#                           seed gives every session the same transactions, byte for byte
#                           (their digests are printed); the interleaving of the sessions,
#                           the moments of the faults and so which transactions fail differ.
#   CHROMA_SYNC_TXNS=N      transactions in all (default 5000; `make soak` runs 100000)
#   CHROMA_SYNC_SESSIONS=N  concurrent sessions (default 4)
#   CHROMA_SYNC_NEMESIS=0   no faults at all (with CHROMA_SYNC_SESSIONS=1, a run whose only
#                           variation is the worker's timing: for minimizing a failure)
#   CHROMA_SYNC_CRASHES=N   crash restarts of the cluster at most (default 1; 0: none), the
#                           first 3 to 11 s into the run, the next ones 60 to 180 s apart
# TAP 203 runs this file with $main::PARTITIONED_WORKLOAD set: a partitioned table mirrored
# as one (issue 17) joins the mirrors, and the nemesis detaches and attaches its partitions
# (plainly or CONCURRENTLY, a pending detach FINALIZEd) while the sessions write; its
# collections are cs_t203_*, its session files 203_session_N.sql.
# Each session's SQL is written to tmp_check/log/050_session_N.sql (up to 10,000
# transactions; RandomWorkload.pm's header shows how to print it for any run).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use RandomWorkload;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Encode qw(decode);
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);

my $seed = $ENV{CHROMA_SYNC_SEED} // (int(time() * 1000) + $$) % 2_147_483_647;
die "CHROMA_SYNC_SEED must be a whole number\n" unless $seed =~ /^\d+$/;
my $ntxns = $ENV{CHROMA_SYNC_TXNS} // 5000;
die "CHROMA_SYNC_TXNS must be a whole number\n" unless $ntxns =~ /^\d+$/;
my $nsessions = $ENV{CHROMA_SYNC_SESSIONS} // 4;
my $nemesis = $ENV{CHROMA_SYNC_NEMESIS} // 1;
my $crashes = $ENV{CHROMA_SYNC_CRASHES} // 1;
die "CHROMA_SYNC_CRASHES must be a whole number\n" unless $crashes =~ /^\d+$/;
# every check names what replays the run
my $tag = "[seed $seed" . ($ntxns == 5000 ? '' : ", CHROMA_SYNC_TXNS=$ntxns")
  . ($nsessions == 4 ? '' : ", CHROMA_SYNC_SESSIONS=$nsessions") . ']';
my $json = JSON::PP->new->canonical;
diag("random workload: seed $seed (replay with CHROMA_SYNC_SEED=$seed), $ntxns transactions "
	  . "from $nsessions sessions, server " . ($ENV{CHROMA_SERVER} // 'old')
	  . '; a replay repeats every session\'s transactions, not their interleaving');

# The worker's settings vary with the seed too: batch sizes from a few records (many
# requests, keys of one transaction in several) to 500, JSON or base64 embeddings, and
# request timeouts short enough for some requests to end with their outcome unknown.
srand($seed);
my %conf = (batch_size => (20, 100, 250, 500)[ int(rand(4)) ],
	embedding_encoding => (qw(auto json))[ int(rand(2)) ],
	timeout => (10000, 10000, 1500)[ int(rand(3)) ]);
# a file that runs this one may fix some (TAP 224: 4 requests in flight per mirror)
our %CONF_OVERRIDE;
%conf = (%conf, max_concurrent_requests => 1, %CONF_OVERRIDE);
diag("$tag worker settings: " . join(', ', map { "chroma_sync.$_ = $conf{$_}" } sort keys %conf));
my $node = new_node('random', conf => qq{
restart_after_crash = on
max_prepared_transactions = 20
deadlock_timeout = '200ms'
chroma_sync.batch_size = $conf{batch_size}
chroma_sync.embedding_encoding = '$conf{embedding_encoding}'
chroma_sync.connect_timeout = 1000
chroma_sync.timeout = $conf{timeout}
chroma_sync.max_concurrent_requests = $conf{max_concurrent_requests}
});
my $log0 = log_offset($node);

# ------------------------------------------------------------------ schema, rows, mirrors

our $PARTITIONED_WORKLOAD;
my $partitioned = $PARTITIONED_WORKLOAD // 0;
our $TEST_NUMBER;
my $test = $partitioned ? '203' : ($TEST_NUMBER // '050');
RandomWorkload::enable_partitioned_mirror() if $partitioned;
my @mirrors = @RandomWorkload::MIRRORS;
sub collection_of { return "cs_t${test}_" . ($_[0]{name} // $_[0]{table}); }
sub name_of { return $_[0]{name} // $_[0]{table}; }

$node->safe_psql('postgres', $RandomWorkload::SCHEMA);
srand($seed);
$node->safe_psql('postgres', "BEGIN;\n" . RandomWorkload::populate_sql() . "COMMIT;\n");
for my $m (@mirrors)
{
	fresh_collection($node, collection_of($m));
	create_collection_for_kills(collection_of($m));
	$node->safe_psql('postgres', RandomWorkload::mirror_sql($m, collection_of($m)));
}

# ------------------------------------------------------------------ sessions

my $gid_prefix = RandomWorkload::gid_prefix($seed);
my @streams;
for my $w (1 .. $nsessions)
{
	my @txns = RandomWorkload::session_transactions($seed, $w, $ntxns, $nsessions);
	my $all = join('', map { $_->{sql} } @txns);
	if ($ntxns <= 10_000)
	{
		open my $fh, '>', "$PostgreSQL::Test::Utils::log_path/${test}_session_$w.sql" or die $!;
		print $fh $all;
		close $fh;
	}
	diag(sprintf('session %d: %d transactions, %d bytes of SQL, md5 %s', $w, scalar @txns,
		length $all, md5_hex($all)));
	push @streams, \@txns;
}

my $tmp = PostgreSQL::Test::Utils::tempdir;

# Errors that concurrency and the faults explain; any other one fails the test.
my $expected_error = qr/duplicate key value violates unique constraint|deadlock detected|current transaction is aborted|canceling statement due to (lock|statement) timeout|could not serialize access|prepared transaction with identifier .* does not exist|savepoint ".*" does not exist|already moved to another partition|terminating connection|server closed the connection|connection to server|no connection to the server|could not connect|the database system is|could not send data|could not receive data|Connection refused|SSL SYSCALL/;
# TAP 203: a row routed to a partition detached at that moment
$expected_error = qr/$expected_error|no partition of relation "q_parent" found for row|no partition of relation "q_r2" found for row/
  if $partitioned;

# Commits or rolls back (as its gid says) what a lost connection left prepared.
sub resolve_prepared
{
	my ($like) = @_;
	my $n = 0;
	for my $gid (split /\n/, $node->safe_psql('postgres',
		"SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '$like' ORDER BY gid"))
	{
		$node->safe_psql('postgres', ($gid =~ /_c$/ ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'");
		$n++;
	}
	return $n;
}

sub run_session
{
	my ($w, $txns) = @_;
	$ENV{PGAPPNAME} = "rw_session_$w";
	my %c = (committed => 0, batches => 0, lost_connections => 0, resolved_prepared => 0,
		errors => 0, unexpected => 0);
	my (%kinds, %unexpected);
	my $dirty = 0;
	for (my $i = 0; $i < @$txns; $i += 10)
	{
		# after a crash restart, wait until the server takes connections again
		wait_for('the server accepts connections', 180,
			sub { $node->safe_psql('postgres', 'SELECT 1') eq '1' });
		$c{resolved_prepared} += resolve_prepared("${gid_prefix}_${w}_%") if $dirty;
		my $last = $i + 9 > $#$txns ? $#$txns : $i + 9;
		my $sql = "SET lock_timeout = '5s';\nSET statement_timeout = '60s';\n"
		  . join('', map { $_->{sql} } @$txns[ $i .. $last ]);
		my ($out, $err) = ('', '');
		my $rc = eval {
			$node->psql('postgres', $sql, on_error_stop => 0, stdout => \$out, stderr => \$err,
				timeout => 300);
		};
		$rc = -1 unless defined $rc;
		$c{batches}++;
		for my $line (split /\n/, $out)
		{
			next unless $line =~ /^ok (\d+)$/;
			$c{committed}++;
			$kinds{ $txns->[ $1 - 1 ]{kind} }++;
		}
		for my $line (split /\n/, $err)
		{
			next unless $line =~ /(?:ERROR|FATAL):\s+(.*)/;
			$c{errors}++;
			next if $1 =~ $expected_error;
			$c{unexpected}++;
			$unexpected{$1}++;
		}
		$dirty = $rc != 0;
		if ($dirty)
		{
			$c{lost_connections}++;
			sleep 0.5;
		}
	}
	if ($dirty)
	{
		wait_for('the server accepts connections', 180,
			sub { $node->safe_psql('postgres', 'SELECT 1') eq '1' });
		$c{resolved_prepared} += resolve_prepared("${gid_prefix}_${w}_%");
	}
	open my $fh, '>', "$tmp/session_$w" or die "session $w: $!";
	print $fh $json->encode({ %c, kinds => \%kinds, unexpected_errors => \%unexpected });
	close $fh;
	return;
}

my %running;
for my $w (1 .. $nsessions)
{
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		eval { run_session($w, $streams[ $w - 1 ]) };
		print STDERR "session $w: $@" if $@;
		POSIX::_exit($@ ? 1 : 0);    # no END blocks: the node belongs to the parent
	}
	$running{$pid} = $w;
}

# ------------------------------------------------------------------ the nemesis

my %faults = (terminations => 0, chroma_kills => 0, stalls => 0, crash_restarts => 0,
	resyncs => 0, pauses => 0, detaches => 0, concurrent_detaches => 0, finalized => 0, attaches => 0,
	detached_writes => 0, partition_ddl_errors => 0);
my $sessions_failed = 0;

sub reap
{
	for my $pid (keys %running)
	{
		next unless waitpid($pid, POSIX::WNOHANG()) == $pid;
		$sessions_failed++ if $? != 0;
		delete $running{$pid};
	}
	return scalar keys %running;
}

sub chroma_pids
{
	return $node->safe_psql('postgres', q{
SELECT coalesce((SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'chroma_sync launcher'), '')
	|| '|' || coalesce((SELECT string_agg(pid::text, ',') FROM pg_stat_activity
		WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'), '')});
}

# Terminates the worker, the launcher or both; both must run again (new pids) within 20 s.
sub terminate_processes
{
	my $which = (qw(worker launcher both))[ int(rand(3)) ];
	my $type = { worker => "= 'chroma_sync worker'", launcher => "= 'chroma_sync launcher'",
		both => "LIKE 'chroma_sync%'" }->{$which};
	my $what = $which eq 'both' ? 'launcher and the worker' : $which;
	my $before = chroma_pids();
	my $n = $node->safe_psql('postgres',
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type $type");
	my ($l0, $w0) = split /\|/, $before, -1;
	my $now = '';
	my $back = wait_for("a launcher and a worker after terminating the $what", 20, sub {
		$now = chroma_pids();
		my ($l, $wk) = split /\|/, $now, -1;
		$l ne '' && $wk ne '' && ($which eq 'worker' || $l ne $l0) && ($which eq 'launcher' || $wk ne $w0);
	});
	ok($back, "$tag nemesis: terminated the $what ($n processes; launcher|worker pids were "
		  . "$before), both run again within 20 s (now $now)");
	$faults{terminations}++;
	return;
}

# An administrator's call in the middle of the traffic: a resync, or a pause and a resume.
sub admin_call
{
	my $mirror = $mirrors[ int(rand(@mirrors)) ];
	my $m = "'$mirror->{table}', collection => '" . collection_of($mirror) . "'";
	if (rand() < 0.5)
	{
		$node->safe_psql('postgres', "SELECT chroma_resync($m)");
		$faults{resyncs}++;
	}
	else
	{
		$node->safe_psql('postgres', "SELECT chroma_pause($m)");
		sleep(0.5 + rand(2));
		$node->safe_psql('postgres', "SELECT chroma_resume($m)");
		$faults{pauses}++;
	}
	return;
}

sub stall
{
	my $ms = 200 + int(rand(1300));
	set_conf($node, 'chroma_sync.test_stall', $ms);
	sleep(1 + rand(3));
	set_conf($node, 'chroma_sync.test_stall', 0);
	$faults{stalls}++;
	return;
}

# TAP 203: the partitions of q_parent as the catalog has them: name -> 'attached',
# 'pending' (a DETACH ... CONCURRENTLY that did not finish) or 'detached'
sub q_partitions
{
	my %state = map { $_->[0] => 'detached' } @RandomWorkload::Q_PARTITIONS;
	for my $line (split /\n/, $node->safe_psql('postgres', q{
SELECT c.relname, i.inhdetachpending FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'q_parent'::regclass}))
	{
		my ($name, $pending) = split /\|/, $line;
		$state{$name} = $pending eq 't' ? 'pending' : 'attached';
	}
	return \%state;
}

# Finishes a detach left pending (by a lock timeout or a crash in its second transaction).
sub q_finalize
{
	my $state = q_partitions();
	for my $name (grep { $state->{$_} eq 'pending' } sort keys %$state)
	{
		$node->safe_psql('postgres', "SET lock_timeout = '10s'; ALTER TABLE q_parent DETACH PARTITION $name FINALIZE");
		$faults{finalized}++;
	}
	return;
}

# Detaches an attached partition of q_parent (plainly or CONCURRENTLY), or attaches a
# detached one again (written to while detached now and then). Two stay attached at least.
sub partition_churn
{
	q_finalize();
	my $state = q_partitions();
	my @attached = grep { $state->{$_} eq 'attached' } sort keys %$state;
	my @detached = grep { $state->{$_} eq 'detached' } sort keys %$state;
	if (@detached && (@attached <= 2 || rand() < 0.5))
	{
		my $name = $detached[ rand @detached ];
		my ($bounds) = map { $_->[1] } grep { $_->[0] eq $name } @RandomWorkload::Q_PARTITIONS;
		if (rand() < 0.5)
		{
			$node->safe_psql('postgres', "UPDATE $name SET doc = 'written while detached' WHERE id % 5 = 1");
			$faults{detached_writes}++;
		}
		$node->safe_psql('postgres', "SET lock_timeout = '10s'; ALTER TABLE q_parent ATTACH PARTITION $name FOR VALUES $bounds");
		$faults{attaches}++;
	}
	else
	{
		my $name = $attached[ rand @attached ];
		my $concurrently = rand() < 0.4;
		$node->safe_psql('postgres', "SET lock_timeout = '10s'; ALTER TABLE q_parent DETACH PARTITION $name"
			  . ($concurrently ? ' CONCURRENTLY' : ''), timeout => 120);
		$faults{ $concurrently ? 'concurrent_detaches' : 'detaches' }++;
	}
	return;
}

srand($seed ^ 0x5bd1e995);
my $t0 = time();
my $crash_after = 3 + rand(8);
my $nemesis_errors = 0;
while (reap())
{
	my $until = time() + 0.5 + rand(2.5);
	sleep 0.2 while time() < $until && reap();
	last unless reap();
	next unless $nemesis;
	if ($partitioned && rand() < 0.35)
	{
		# TAP 203: the partition tree changes; a step that fails (a lock timeout behind a
		# session) is counted apart from the other faults
		unless (eval { partition_churn(); 1 })
		{
			$faults{partition_ddl_errors}++;
			note("partition DDL: $@");
		}
		next;
	}
	my $r = rand();
	my $ok = eval {
		if ($faults{crash_restarts} < $crashes && time() - $t0 > $crash_after)
		{
			crash_restart_cluster($node, 'rw_session%');
			$faults{crash_restarts}++;
			$crash_after = time() - $t0 + 60 + rand(120);
		}
		elsif ($r < 0.40) { terminate_processes(); }
		elsif ($r < 0.65) { chroma_kill_restart(); $faults{chroma_kills}++; }
		elsif ($r < 0.85) { stall(); }
		else { admin_call(); }
		1;
	};
	unless ($ok)
	{
		$nemesis_errors++;
		note("nemesis: $@");
		sleep 1;
	}
}
my $elapsed = time() - $t0;
my $log_after_faults = log_offset($node);
is($sessions_failed, 0, "$tag every session ran to the end");
ok($nemesis_errors <= 3, "$tag the nemesis could act ($nemesis_errors of its steps failed)");

my (%total, %kinds, %unexpected);
for my $w (1 .. $nsessions)
{
	my $r = eval { $json->decode(slurp_file("$tmp/session_$w")) } // {};
	note("session $w: " . join(', ', map { "$_ $r->{$_}" } grep { !ref $r->{$_} } sort keys %$r));
	$total{$_} += $r->{$_} // 0 for qw(committed errors lost_connections resolved_prepared unexpected);
	$kinds{$_} += $r->{kinds}{$_} for keys %{ $r->{kinds} // {} };
	$unexpected{$_} += $r->{unexpected_errors}{$_} for keys %{ $r->{unexpected_errors} // {} };
}
diag(sprintf('%s %d of %d transactions committed in %.0f s (%s); %d statement errors, '
	  . '%d lost connections, %d prepared transactions resolved after one',
	$tag, $total{committed}, $ntxns, $elapsed,
	join(', ', map { "$_ $kinds{$_}" } sort keys %kinds), $total{errors},
	$total{lost_connections}, $total{resolved_prepared}));
diag(sprintf('%s faults: %d terminations of chroma_sync processes, %d Chroma SIGKILLs, '
	  . '%d stalls, %d crash restarts, %d resyncs, %d pauses', $tag, $faults{terminations},
	$faults{chroma_kills}, $faults{stalls}, $faults{crash_restarts}, $faults{resyncs},
	$faults{pauses}));
if ($partitioned)
{
	eval { q_finalize(); 1 } or diag("$tag finishing a pending detach failed: $@");
	my $state = q_partitions();
	diag(sprintf('%s partitions of q_parent: %d detaches, %d concurrent detaches, %d finalized, '
		  . '%d attaches, %d written while detached, %d partition DDL steps failed; at the end: %s', $tag,
		map({ $faults{$_} } qw(detaches concurrent_detaches finalized attaches detached_writes partition_ddl_errors)),
		join(', ', map { "$_ $state->{$_}" } sort keys %$state)));
	ok($faults{detaches} + $faults{concurrent_detaches} + $faults{attaches} > 0 || !$nemesis,
		"$tag the nemesis detached and attached partitions of q_parent");
	ok($faults{partition_ddl_errors} <= $faults{detaches} + $faults{concurrent_detaches} + $faults{attaches} + 3,
		"$tag most partition DDL steps worked ($faults{partition_ddl_errors} failed)");
	is(join(',', grep { $state->{$_} eq 'pending' } sort keys %$state), '', "$tag no partition is left detach pending");
}
ok($total{committed} > $ntxns / 3, "$tag the sessions committed transactions");
is($total{unexpected}, 0, "$tag the sessions met only conflicts, timeouts and lost connections")
  or diag("$tag unexpected errors:\n" . join("\n", map { "$unexpected{$_} x $_" } sort keys %unexpected));
my $restarts = () = slurp_file($node->logfile, $log0) =~ /all server processes terminated; reinitializing/g;
is($restarts, $faults{crash_restarts}, "$tag the server log shows $faults{crash_restarts} crash restart(s), no other");
is(resolve_prepared("${gid_prefix}%"), 0, "$tag no prepared transaction was left behind");

# ------------------------------------------------------------------ the checker

# What explains a flush that timed out (printed once per mirror that timed out): the
# locks held or awaited in the database, what the chroma_sync processes do (wait event,
# state, how long), every mirror's status row, the head of the mirror's queue (a
# TRUNCATE barrier shows as key NULL) and its keys parked in chroma_sync.resend, and the
# prepared transactions.
sub flush_timeout_diagnostics
{
	my ($t, $c) = @_;
	my @aligned = (extra_params => [ '-P', 'format=aligned', '-P', 'footer=off', '-P', 'tuples_only=off' ]);
	my $mirror = "(SELECT mirror_id FROM chroma_sync.mirror WHERE collection = '$c')";
	for my $q (
		[ 'pg_locks of the database (not this session\'s)', q{
SELECT l.pid, a.backend_type, l.locktype, coalesce(l.relation::regclass::text, '') AS relation,
	l.mode, l.granted, l.virtualtransaction, l.transactionid, a.wait_event_type, a.wait_event,
	left(a.query, 60) AS query
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE (l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		OR l.database IS NULL)
	AND l.pid IS DISTINCT FROM pg_backend_pid()
ORDER BY l.granted, l.pid, l.locktype, relation} ],
		[ 'chroma_sync processes (pg_stat_activity)', q{
SELECT pid, backend_type, datname, state, wait_event_type, wait_event,
	now() - backend_start AS running_for, now() - state_change AS in_state_for,
	now() - xact_start AS in_xact_for, backend_xid, backend_xmin, left(query, 80) AS query
FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%' ORDER BY backend_type, pid} ],
		[ 'chroma_sync.status', q{
SELECT source, collection, state, pending, failed, synced, last_sync_at, last_error_at,
	left(last_error, 100) AS last_error, lag, backfill_sent, backfill_total
FROM chroma_sync.status ORDER BY collection} ],
		[ "chroma_sync.mirror of $t", qq{
SELECT mirror_id, paused, in_error, backfill_done, reconcile, backfill_after, backfill_started_at,
	left(paused_reason, 60) AS paused_reason, collection_id
FROM chroma_sync.mirror WHERE mirror_id = $mirror} ],
		[ "the head of the queue of $t (key NULL: a TRUNCATE barrier)", qq{
SELECT qid, key IS NULL AS barrier, key, enqueued_at FROM chroma_sync.queue
WHERE mirror_id = $mirror ORDER BY qid LIMIT 5} ],
		[ "the TRUNCATE barriers queued for $t", qq{
SELECT count(*), min(qid), max(qid), min(enqueued_at), max(enqueued_at) FROM chroma_sync.queue
WHERE mirror_id = $mirror AND key IS NULL} ],
		[ "the keys of $t parked in chroma_sync.resend", qq{
SELECT count(*), min(not_before), max(not_before), now() AS now FROM chroma_sync.resend
WHERE mirror_id = $mirror} ],
		[ 'prepared transactions', q{
SELECT gid, prepared, owner, database FROM pg_prepared_xacts ORDER BY prepared} ])
	{
		my ($title, $sql) = @$q;
		my ($ret, $out, $err) = $node->psql('postgres', $sql, @aligned);
		diag("$tag $t: $title:\n$out$err");
	}
	return;
}

set_conf($node, 'chroma_sync.test_stall', 0);
my $worker = '';
my $worker_runs = ok( wait_for('the worker of database postgres', 30, sub {
			$worker = $node->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'");
			$worker ne '';
		}),
	"$tag a chroma_sync worker runs for database postgres (launcher|worker: " . chroma_pids() . ')');

my $divergent = 0;
# A backlog left by a long run drains at the worker's pace: the flush waits as long as
# the mirror's queue shrinks (240 s at a time, 2 hours at most), and fails when it did
# not shrink in 240 s (a stall). Without a worker, or once a flush failed, the others
# wait 10 s.
my $flush_timeout = $worker_runs ? 240 : 10;
for my $m (@mirrors)
{
	my ($t, $c) = (name_of($m), collection_of($m));
	my $queued_sql = "SELECT count(*) FROM chroma_sync.queue q JOIN chroma_sync.mirror USING (mirror_id) WHERE collection = '$c'";
	my $queued = $node->safe_psql('postgres', $queued_sql);
	my ($started, $flushed) = (time(), 'f');
	while (1)
	{
		$flushed = $node->safe_psql('postgres',
			"SELECT chroma_flush('$m->{table}', interval '$flush_timeout seconds', '$c')", timeout => 300);
		last if $flushed eq 't' || $flush_timeout < 240 || time() - $started > 7200;
		my $now = $node->safe_psql('postgres', $queued_sql);
		last if $now >= $queued;
		note("$tag $t: still draining: $now queue entries left, from $queued " . ($flush_timeout) . ' s before');
		$queued = $now;
	}
	note(sprintf("%s %s: flushed after %d s", $tag, $t, time() - $started)) if $flushed eq 't' && time() - $started > 10;
	unless (is($flushed, 't', "$tag $t: chroma_flush returns true (its queue shrinking at least every $flush_timeout s)"))
	{
		$flush_timeout = 10;
		my ($ret, $out) = $node->psql('postgres',
			"SELECT state, pending, failed, last_error FROM chroma_sync.status WHERE collection = '$c'");
		diag("$tag $t: chroma_flush timed out; state|pending|failed|last_error: $out");
		flush_timeout_diagnostics($t, $c);
	}
}
for my $m (@mirrors)
{
	my ($t, $c) = (name_of($m), collection_of($m));
	my %table;
	for my $line (split /\n/, $node->safe_psql('postgres', RandomWorkload::expected_rows_sql($m)))
	{
		my ($id, $row) = RandomWorkload::parse_expected_row($m, $line);
		$table{$id} = $row;
	}
	my $nrows = scalar keys %table;
	my $verify = $node->safe_psql('postgres',
		"SELECT rows, missing, extra, different FROM chroma_verify('$m->{table}', '$c')", timeout => 300);
	my $ok = is($verify, "$nrows|0|0|0",
		"$tag $t: chroma_verify reports $nrows rows, 0 missing, 0 extra, 0 different");
	my ($chroma, $count) = read_collection($c);
	my ($n, $examples) = compare_records(\%table, $chroma);
	$ok &= is($n->{mismatches}, 0,
		"$tag $t: the collection read over the REST API equals the table ($nrows rows, "
		  . scalar(keys %$chroma) . ' records; only in table ' . $n->{only_table}
		  . ", only in Chroma $n->{only_chroma}, embedding $n->{embedding}, document "
		  . "$n->{document}, metadata $n->{metadata}, duplicate ids $n->{duplicate})");
	diag("$tag $t: first differences (expected = the table, actual = Chroma):\n"
		  . join("\n", map { decode('UTF-8', $_) =~ s/\n/\\n/gr =~ s/\t/\\t/gr }
			  @$examples[ 0 .. ($#$examples < 9 ? $#$examples : 9) ]))
	  if @$examples;
	$divergent++ unless $ok;
}
is($node->safe_psql('postgres',
		"SELECT count(*) || coalesce(': ' || string_agg(source || ' ' || id || ' ' || error, '; '), '') FROM (SELECT * FROM chroma_sync.failed LIMIT 5) f"),
	'0', "$tag no row in chroma_sync.failed");
diag("$tag $divergent of " . scalar(@mirrors) . ' mirrors diverge') if $divergent;

finish($node, $log_after_faults);
