# Shared helpers of the mirror TAP tests (test/t/0*_mirror_*.pl).
#
#   my $node = new_node('name', conf => "extra = 'lines'");   # started, extension created
#   make_table($node, 'docs', rows => 1000, dim => 8);
#   fresh_collection($node, 'docs_t010');                      # deleted if it exists
#   mirror($node, 'docs', 'docs_t010');
#   assert_equal($node, 'docs', 'docs_t010');                  # flush, verify, bytes both ways
#
# The tables all have the same shape: id int primary key, embedding real[], doc text,
# meta jsonb; mirrors send doc as the document and meta's top-level keys as metadata.
package ChromaSyncTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw(new_node mirror_04_date_filter make_table fresh_collection mirror assert_equal
  wait_for poll_query status_row worker_pid wait_for_new_worker
  log_offset assert_no_crash diagnostics chroma_stop chroma_start chroma_kill_restart
  crash_restart_cluster set_conf insert_rows start_proxy hold_requests release_requests direct_document
  confirm_04_filter resume_04_filter finish);

my $url = $ENV{CHROMA_URL}
  or BAIL_OUT('CHROMA_URL is not set: run the TAP tests through test/run_all.sh');

# A started cluster with chroma_sync preloaded and the extension created in "postgres"
# (extension => 0: not created, for a test that installs an older version itself).
sub new_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$url'
chroma_sync.retry_max_delay = 2000
log_line_prefix = '%m [%p] %b '
# Cluster.pm's 1MB makes every backfill page read from the kernel: 3x slower
shared_buffers = '64MB'
} . ($opt{conf} // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION chroma_sync') if $opt{extension} // 1;
	return $node;
}

# The extension at 0.4 in "postgres" and a mirror of public.dt (40 dates from 2024-03-02)
# into COLLECTION whose filter 0.4 stored as raw text, d >= '03/04/2024': which date it
# means depends on the DateStyle it is read with (the update-binding tests).
sub mirror_04_date_filter
{
	my ($node, $coll) = @_;
	$node->safe_psql('postgres', q{CREATE EXTENSION chroma_sync VERSION '0.4'});
	fresh_collection($node, $coll);
	$node->safe_psql('postgres', qq{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], d date);
INSERT INTO public.dt SELECT g, ARRAY[g, 1]::real[], date '2024-03-01' + g FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.dt', collection => '$coll', filter => \$\$d >= '03/04/2024'\$\$);
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = \$\$d >= '03/04/2024'\$\$;
});
	return;
}

# Changes a sighup setting with ALTER SYSTEM and waits until this session sees it.
sub set_conf
{
	my ($node, $name, $value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $name = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# the postmaster signals its children asynchronously: give them a moment
	wait_for("$name = $value", 10,
		sub {
			$node->safe_psql('postgres', "SELECT setting FROM pg_settings WHERE name = '$name'")
			  eq $value;
		});
	sleep 0.5;
}

# The SQL expression of a deterministic embedding for row number $g (an SQL expression).
sub embedding_sql
{
	my ($g, $dim, $salt) = @_;
	$salt //= 0;
	return "ARRAY(SELECT (sin(($g) * 7.31 + d * 1.37 + $salt) * 10)::real "
	  . "FROM generate_series(1, $dim) d)";
}

# CREATE TABLE and, with rows => N, N rows (ids from => 1 .. from + N - 1).
sub make_table
{
	my ($node, $table, %opt) = @_;
	my $dim = $opt{dim} // 8;
	$node->safe_psql('postgres',
		"CREATE TABLE $table (id int PRIMARY KEY, embedding real[], doc text, meta jsonb)");
	insert_rows($node, $table, $opt{from} // 1, $opt{rows}, $dim) if $opt{rows};
	return;
}

sub insert_rows
{
	my ($node, $table, $from, $n, $dim, $salt) = @_;
	my $to = $from + $n - 1;
	my $emb = embedding_sql('g', $dim, $salt);
	$node->safe_psql('postgres', qq{
INSERT INTO $table
SELECT g, $emb,
	CASE WHEN g % 7 = 0 THEN NULL ELSE 'document ' || g END,
	jsonb_build_object('n', g, 'even', g % 2 = 0, 'tag', 'k' || (g % 5))
FROM generate_series($from, $to) g});
	return;
}

# Deletes the collection if a previous run left it behind.
sub fresh_collection
{
	my ($node, $name) = @_;
	$node->safe_psql('postgres', "SELECT chroma_delete_collection('$name', true)");
	return;
}

sub mirror
{
	my ($node, $table, $collection, %opt) = @_;
	my $backfill = ($opt{backfill} // 1) ? 'true' : 'false';
	return $node->safe_psql('postgres', qq{
SELECT chroma_mirror('$table', collection => '$collection', document_column => 'doc',
	metadata_columns => '{meta}', backfill => $backfill)});
}

# wait_for(DESCRIPTION, SECONDS, CODE): calls CODE every 0.3 s until it returns true.
sub wait_for
{
	my ($what, $timeout, $code) = @_;
	my $deadline = time() + $timeout;
	while (1)
	{
		my $ok = eval { $code->() };
		return 1 if $ok;
		if (time() > $deadline)
		{
			diag("timed out after ${timeout}s waiting for: $what"
				  . ($@ ? " (last error: $@)" : ''));
			return 0;
		}
		sleep 0.3;
	}
}

# Polls until the query returns $expected; returns true when it did.
sub poll_query
{
	my ($node, $sql, $expected, $timeout) = @_;
	my $last;
	my $ok = wait_for("'$sql' returns '$expected'", $timeout // 60,
		sub { $last = $node->safe_psql('postgres', $sql); $last eq $expected });
	diag("last result: " . ($last // '(none)')) unless $ok;
	return $ok;
}

# One column of the mirror's status row.
sub status_row
{
	my ($node, $table, $column) = @_;
	return $node->safe_psql('postgres',
		"SELECT $column FROM chroma_sync.status WHERE source = '$table'::regclass");
}

sub worker_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'");
}

# Waits until a worker other than $old runs; returns its pid (or '' on timeout).
sub wait_for_new_worker
{
	my ($node, $old, $timeout) = @_;
	my $pid = '';
	wait_for("a new chroma_sync worker", $timeout // 30, sub {
		$pid = worker_pid($node);
		$pid ne '' && $pid ne $old;
	});
	return $pid;
}

# The server log's current length: log_offset, then assert_no_crash from there.
sub log_offset
{
	my ($node) = @_;
	return -s $node->logfile // 0;
}

# Fails when the server log shows a crash (a child killed by a signal, or a restart of
# all processes) since $offset.
sub assert_no_crash
{
	my ($node, $offset, $name) = @_;
	my $log = slurp_file($node->logfile, $offset // 0);
	my @hits = grep {
		/was terminated by signal|server process .* terminated|terminating any other active server processes|all server processes terminated/
	} split /\n/, $log;
	ok(!@hits, $name // 'no crash recovery happened')
	  or diag("crash lines in the server log:\n" . join("\n", @hits[0 .. ($#hits < 9 ? $#hits : 9)]));
	return !@hits;
}

# Prints what helps on a failure: status, failed rows, the worker, the log's tail.
sub diagnostics
{
	my ($node) = @_;
	my ($ret, $out, $err);
	($ret, $out, $err) = $node->psql('postgres',
		'SELECT source, collection, state, pending, failed, synced, last_error, lag, backfill_sent, backfill_total FROM chroma_sync.status',
		extra_params => [ '-P', 'format=aligned', '-P', 'footer=off' ]);
	diag("chroma_sync.status:\n$out$err");
	($ret, $out, $err) = $node->psql('postgres',
		'SELECT source, id, error, attempts FROM chroma_sync.failed ORDER BY 1, 2 LIMIT 20',
		extra_params => [ '-P', 'format=aligned', '-P', 'footer=off' ]);
	diag("chroma_sync.failed (first 20):\n$out$err");
	($ret, $out, $err) = $node->psql('postgres',
		"SELECT pid, state, wait_event, query FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%'",
		extra_params => [ '-P', 'format=aligned', '-P', 'footer=off' ]);
	diag("chroma_sync processes:\n$out$err");
	my @log = split /\n/, slurp_file($node->logfile);
	my $from = @log > 60 ? @log - 60 : 0;
	diag("last lines of the server log:\n" . join("\n", @log[ $from .. $#log ]));
	return;
}

# The rows of the table (with an embedding) and the records of the collection, keyed by id,
# as "embedding bytes (float4send, hex) | document | metadata" for the comparison.
my $compare_sql = q{
WITH t AS (
	SELECT (%ID%) AS id,
		(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o)
			FROM unnest(embedding) WITH ORDINALITY u(x, o)) AS emb,
		doc, NULLIF(jsonb_strip_nulls(meta), '{}'::jsonb) AS meta
	FROM %TABLE% WHERE embedding IS NOT NULL %EXCLUDE%),
c AS (
	SELECT id,
		(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o)
			FROM unnest(embedding) WITH ORDINALITY u(x, o)) AS emb,
		document AS doc, NULLIF(metadata, '{}'::jsonb) AS meta
	FROM chroma_get('%COLL%')),
j AS (
	SELECT t.id AS tid, c.id AS cid, t.emb AS temb, c.emb AS cemb, t.doc AS tdoc,
		c.doc AS cdoc, t.meta AS tmeta, c.meta AS cmeta
	FROM t FULL JOIN c ON t.id = c.id)
};

# Flush, chroma_verify and a byte comparison through chroma_get, both ways.
# Options: exclude_failed => 1 leaves rows listed in chroma_sync.failed out (they are
# expected to be missing from Chroma); timeout => seconds for chroma_flush; id => the id's
# SQL expression over the table (id::text by default; "id::text || ',' || k::text" for a
# key of two columns, as a partitioned table's often is).
sub assert_equal
{
	my ($node, $table, $collection, %opt) = @_;
	my $name = $opt{name} // "$table = $collection";
	my $timeout = $opt{timeout} // 120;
	my $all = 1;

	my $flushed = $node->safe_psql('postgres',
		"SELECT chroma_flush('$table', interval '$timeout seconds')",
		timeout => $timeout + 30);
	$all &= is($flushed, 't', "$name: chroma_flush returns true");

	my $nfailed = $node->safe_psql('postgres',
		"SELECT count(*) FROM chroma_sync.failed WHERE source = '$table'::regclass");
	my $rows = $node->safe_psql('postgres',
		"SELECT count(*) FROM $table WHERE embedding IS NOT NULL");
	my $missing = $opt{exclude_failed} ? $nfailed : 0;
	my $verify = $node->safe_psql('postgres',
		"SELECT rows, missing, extra, different FROM chroma_verify('$table')");
	$all &= is($verify, "$rows|$missing|0|0",
		"$name: chroma_verify reports $rows rows, $missing missing, 0 extra, 0 different");

	my $sql = $compare_sql;
	my $exclude = $opt{exclude_failed}
	  ? "AND id::text NOT IN (SELECT f.id FROM chroma_sync.failed f WHERE f.source = '$table'::regclass)"
	  : '';
	$sql =~ s/%TABLE%/$table/g;
	$sql =~ s/%COLL%/$collection/g;
	$sql =~ s/%EXCLUDE%/$exclude/g;
	my $id = $opt{id} // 'id::text';
	$sql =~ s/%ID%/$id/g;
	my $counts = $node->safe_psql('postgres', $sql . q{
SELECT count(*) FILTER (WHERE cid IS NULL),
	count(*) FILTER (WHERE tid IS NULL),
	count(*) FILTER (WHERE tid = cid AND temb IS DISTINCT FROM cemb),
	count(*) FILTER (WHERE tid = cid AND tdoc IS DISTINCT FROM cdoc),
	count(*) FILTER (WHERE tid = cid AND tmeta IS DISTINCT FROM cmeta),
	count(*) FILTER (WHERE tid = cid)
FROM j}, timeout => 300);
	my $expect = $rows - $missing;
	my $same = is($counts, "0|0|0|0|0|$expect",
		"$name: chroma_get matches the table both ways (only in table | only in Chroma | "
		  . "embedding bytes | document | metadata differ | matched)");
	$all &= $same;
	unless ($same)
	{
		diag("first differences (id in table | id in Chroma | table | Chroma):\n"
			  . $node->safe_psql('postgres', $sql . q{
SELECT tid, cid, concat_ws(' ', temb, tdoc, tmeta), concat_ws(' ', cemb, cdoc, cmeta)
FROM j WHERE cid IS NULL OR tid IS NULL OR temb IS DISTINCT FROM cemb
	OR tdoc IS DISTINCT FROM cdoc OR tmeta IS DISTINCT FROM cmeta
ORDER BY coalesce(tid, cid) LIMIT 10}, timeout => 300));
	}
	diagnostics($node) unless $all;
	return $all;
}

# A 0.4 text filter when DDL ran between ALTER EXTENSION UPDATE and its binding: the
# mirror of TABLE (in database DB, postgres by default) pauses saying
# so and naming chroma_resume(); resumed, the worker binds the text as its names read now.
# Returns what the binding left: "bound", "bound, paused: <reason>" (for another reason)
# or "paused: <reason>" (not bound).
sub confirm_04_filter
{
	my ($node, $table, $db) = @_;
	$db //= 'postgres';
	my $row = sub {
		$node->safe_psql($db, qq{SELECT (filter_node IS NOT NULL)::text || ' ' || paused::text || ' '
			|| coalesce(paused_reason, '') FROM chroma_sync.mirror WHERE source = '$table'::regclass});
	};
	ok(wait_for("the mirror of $table pauses for the DDL before the binding", 60,
		sub { $row->() =~ /^false true DDL ran after ALTER EXTENSION chroma_sync UPDATE and before the sync worker bound the filter/ }),
		"DDL before the binding: the filter of $table is not bound, the mirror pauses saying why");
	like($row->(), qr/then run chroma_resume\('[^']+'\) to bind it so/, 'the reason says how to confirm the text');
	return resume_04_filter($node, $table, $db);
}

# chroma_resume() of the mirror of TABLE whose 0.4 filter DDL left unbound: it says that it
# confirms the text, and the worker binds it; returns what confirm_04_filter returns.
sub resume_04_filter
{
	my ($node, $table, $db) = @_;
	$db //= 'postgres';
	my $row = sub {
		$node->safe_psql($db, qq{SELECT (filter_node IS NOT NULL)::text || ' ' || paused::text || ' '
			|| coalesce(paused_reason, '') FROM chroma_sync.mirror WHERE source = '$table'::regclass});
	};
	my ($ret, $out, $err) = $node->psql($db, "SELECT chroma_resume('$table')");
	like($err, qr/NOTICE:  the sync worker binds the filter .* of this mirror, stored by chroma_sync 0\.4, as its names read now/,
		"chroma_resume('$table') says it confirms the 0.4 text");
	my $state = '';
	wait_for("the worker binds the confirmed filter of $table", 60, sub {
		my $r = $row->();
		$state = $r =~ /^true false/ ? 'bound' : $r =~ /^true true (.*)/s ? "bound, paused: $1"
		  : $r =~ /^false true (.*)/s ? "paused: $1" : '';
		return $state ne '';
	});
	return $state;
}

# A proxy of test/lib (late_proxy.pl, throttle_proxy.pl, delay_proxy.pl) in front of the harness's Chroma
# server, started with DIR/port for its port file, then ARGS; returns the port it listens
# on. It is stopped when the test ends.
my @proxies;
END { kill 'TERM', @proxies if @proxies; }

sub start_proxy
{
	my ($script, $dir, @args) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		exec('perl', "$ENV{CHROMA_SYNC_ROOT}/test/lib/$script", $ENV{CHROMA_PORT}, "$dir/port", @args)
		  or die "exec: $!";
	}
	push @proxies, $pid;
	wait_for("$script listens", 10, sub { -s "$dir/port" }) or BAIL_OUT("$script did not start");
	my $port = PostgreSQL::Test::Utils::slurp_file("$dir/port");
	chomp $port;
	return $port;
}

# delay_proxy.pl's hold (started with HOLD_FILE): while HOLD_FILE exists, the requests
# holding its text (e.g. "<collection id>/upsert") are held at the proxy; HOLD_FILE.held
# appears once one is.
sub hold_requests
{
	my ($hold, $text) = @_;
	open(my $fh, '>', $hold) or die "$hold: $!";
	print $fh $text;
	close($fh);
	return;
}

sub release_requests
{
	my ($hold) = @_;
	unlink($hold);
	return;
}

# A record's document read straight from the harness's Chroma server, past any proxy in
# chroma_sync.url ('(none)': no such record).
sub direct_document
{
	my ($node, $coll, $id) = @_;
	return $node->safe_psql('postgres',
		"SET chroma_sync.url = '$ENV{CHROMA_URL}'; "
		  . "SELECT coalesce((SELECT document FROM chroma_get('$coll', ids => ARRAY['$id'])), '(none)')");
}

# The end of a test: no crash since $offset, diagnostics when anything failed, stop.
sub finish
{
	my ($node, $offset) = @_;
	assert_no_crash($node, $offset);
	diagnostics($node) unless Test::More->builder->is_passing;
	$node->stop;
	done_testing();
	return;
}

# Chroma control (the server the harness started for the TAP tests).
my $chroma_down = 0;

sub chroma_stop
{
	my $pid = $ENV{CHROMA_PID} or BAIL_OUT('CHROMA_PID is not set');
	system('bash', $ENV{CHROMA_CTL}, 'stop', $pid) == 0
	  or BAIL_OUT("could not stop the Chroma server (pid $pid)");
	$chroma_down = 1;
	BAIL_OUT("a Chroma server still answers on port $ENV{CHROMA_PORT} after stopping pid $pid")
	  if system("curl -sf --max-time 2 http://127.0.0.1:$ENV{CHROMA_PORT}/api/v2/heartbeat >/dev/null 2>&1") == 0;
	return;
}

# Starts the server again on the same port and data directory; returns its pid.
sub chroma_start
{
	my $kind = $ENV{CHROMA_SERVER} // 'old';
	my $pid = `bash "$ENV{CHROMA_CTL}" start $kind "$ENV{CHROMA_DATA_DIR}" $ENV{CHROMA_PORT} "$ENV{CHROMA_LOG}"`;
	chomp $pid;
	BAIL_OUT("could not restart the Chroma server on port $ENV{CHROMA_PORT}")
	  unless $? == 0 && $pid =~ /^\d+$/;
	$ENV{CHROMA_PID} = $pid;
	$chroma_down = 0;
	return $pid;
}

# SIGKILL to the Chroma server, a pause of 1 to 4 s (the worker meets a dead server, then
# connection refused), and a start on the same port and data directory.
sub chroma_kill_restart
{
	my $pid = $ENV{CHROMA_PID};
	ok(kill('KILL', $pid), "SIGKILL to the Chroma server (pid $pid)");
	$chroma_down = 1;
	wait_for("Chroma (pid $pid) is gone", 30, sub {
		my $st = -r "/proc/$pid/stat" ? slurp_file("/proc/$pid/stat") : '';
		$st eq '' || $st =~ /^\d+ \(.*\) Z /;
	});
	unlink("$ENV{CHROMA_PIDS_DIR}/$pid") if $ENV{CHROMA_PIDS_DIR};
	sleep(1 + rand(3));
	my $new = chroma_start();
	note("Chroma restarted (pid $new)");
	return $new;
}

# A crash restart: kill -9 of a client backend whose application_name is LIKE $app (or of
# the worker when none runs), then waits until the postmaster has reinitialized.
sub crash_restart_cluster
{
	my ($node, $app) = @_;
	my $off = log_offset($node);
	my $victim = '';
	# A writer's backend may exit before the signal: pick again until the postmaster
	# reports a backend killed by signal 9.
	my $killed = wait_for('a backend killed by signal 9', 60, sub {
		# (an earlier try's signal may have been reported late: never crash twice)
		return 1 if slurp_file($node->logfile, $off) =~ /was terminated by signal 9/;
		$victim = $node->safe_psql('postgres', qq{
SELECT pid FROM pg_stat_activity
WHERE application_name LIKE '$app' AND backend_type = 'client backend'
ORDER BY random() LIMIT 1});
		# a writer between two batches: the worker is a backend too
		$victim = worker_pid($node) if $victim eq '';
		return 0 if $victim eq '' || !kill('KILL', $victim);
		for (1 .. 20)
		{
			return 1 if slurp_file($node->logfile, $off) =~ /was terminated by signal 9/;
			sleep 0.25;
		}
		return 0;
	});
	ok($killed, "kill -9 of backend $victim");
	my $up = wait_for('crash recovery', 180, sub {
		my $log = slurp_file($node->logfile, $off);
		$log =~ /all server processes terminated; reinitializing/
		  && $log =~ /database system is ready to accept connections/
		  && $node->safe_psql('postgres', 'SELECT 1') eq '1';
	});
	ok($up, 'the postmaster reinitialized and accepts connections again');
	return $killed && $up;
}

# A test that dies while Chroma is down leaves it running for the next test.
END
{
	my $rc = $?;
	if ($chroma_down)
	{
		eval { chroma_start() };
	}
	$? = $rc;
}

1;
