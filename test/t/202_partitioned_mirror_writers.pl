# A partitioned table of 12 partitions x 20,000 rows (CHROMA_SYNC_202_ROWS per partition;
# 2,000 in the default run, which cannot wait the minutes Chroma takes to index 240,000
# records: `make partition-scale` runs 20,000; 4-dimensional embeddings) mirrored as
# one (issue 17), while four writers (background psql sessions, each a procedure committing
# one random change at a time: updates, partition-key moves between partitions, deletes,
# inserts, embeddings set to NULL, range updates) run for CHROMA_SYNC_202_SECONDS (default
# 30) s, the test detaches partitions (plain and CONCURRENTLY), writes to them while
# detached, attaches them again, and replaces a partition by a new table of as many rows.
# Two partitions stay detached at the end. Then: chroma_flush, chroma_verify, and the
# collection read over Chroma's REST API compared both ways with the rows of the parent.
# Prints the time of each phase.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use PartitionedMirror;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $coll = 'cs_t202_big';
my $parts = 12;
my $per = $ENV{CHROMA_SYNC_202_ROWS} // 2_000;    # rows per partition
my $seconds = $ENV{CHROMA_SYNC_202_SECONDS} // 30;
my $nwriters = 4;
my $node = new_node('partitioned_writers', conf => qq{
chroma_sync.batch_size = 500
deadlock_timeout = '200ms'
});
my $log0 = log_offset($node);
my $T0 = time();
my %times;

sub sql { return $node->safe_psql('postgres', $_[0], timeout => 960); }

sub phase
{
	my ($name, $code) = @_;
	my $t = time();
	$code->();
	$times{$name} = time() - $t;
	diag(sprintf('202 %-40s %6.1f s', $name, $times{$name}));
	return;
}

srand($ENV{CHROMA_SYNC_SEED} // $$);
sql($PartitionedMirror::FUNCTIONS);
phase('create and fill the partitions' => sub {
	sql(q{CREATE TABLE big (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE writer_stats (w int, txns int, errors int, moves int);}
	  . join('', map { "CREATE TABLE big_$_ PARTITION OF big FOR VALUES IN ($_);\n" } 0 .. $parts - 1));
	sql(qq{INSERT INTO big SELECT g, (g - 1) / $per, pt_emb(g), 'doc ' || g,
	jsonb_build_object('n', g, 'tag', 'k' || (g % 5)) FROM generate_series(1, $parts * $per) g});
	sql('VACUUM ANALYZE big');
});
is(sql('SELECT count(*) FROM big'), $parts * $per, "$parts partitions x $per rows");

fresh_collection($node, $coll);
phase('chroma_mirror and backfill' => sub {
	mirror_parent($node, 'big', $coll);
	is(sql(qq{SELECT chroma_flush('big', interval '900 seconds')}), 't', 'the backfill completes');
});
is(sql(qq{SELECT count FROM chroma_count('$coll') AS count}), $parts * $per, 'Chroma holds ' . $parts * $per . ' records');

# the writers: one random change per transaction, errors (a row routed to a detached
# partition, a deadlock, a move onto an existing key) counted and skipped
sql(q{
CREATE PROCEDURE writer(w int, seconds float8, rows int) LANGUAGE plpgsql AS $p$
DECLARE
	deadline timestamptz := clock_timestamp() + seconds * interval '1 second';
	k int; n int := 0; errs int := 0; moves int := 0; op float8;
BEGIN
	PERFORM setseed(w / 10.0);
	WHILE clock_timestamp() < deadline LOOP
		BEGIN
			k := 1 + floor(random() * rows)::int;
			op := random();
			IF op < 0.45 THEN
				UPDATE big SET embedding = pt_emb(k, w * 100000 + n), doc = 'w' || w || ' n' || n,
					meta = jsonb_build_object('w', w, 'n', n) WHERE id = k;
			ELSIF op < 0.60 THEN
				UPDATE big SET region = floor(random() * 12)::int, doc = 'moved by ' || w WHERE id = k;
				moves := moves + 1;
			ELSIF op < 0.68 THEN
				DELETE FROM big WHERE id = k;
			ELSIF op < 0.80 THEN
				INSERT INTO big VALUES (1000000 + w * 100000 + n, floor(random() * 12)::int,
					pt_emb(n, w), 'inserted by ' || w, jsonb_build_object('new', true));
			ELSIF op < 0.88 THEN
				UPDATE big SET embedding = CASE WHEN embedding IS NULL THEN pt_emb(k, 1) END WHERE id = k;
			ELSE
				UPDATE big SET doc = 'range ' || w || ' ' || n WHERE id BETWEEN k AND k + 40;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			errs := errs + 1;
		END;
		COMMIT;
		n := n + 1;
	END LOOP;
	INSERT INTO writer_stats VALUES (w, n, errs, moves);
	COMMIT;
END
$p$});

my @writers;
my %detached;    # partition number -> table name, while detached
my %table_of = map { $_ => "big_$_" } 0 .. $parts - 1;    # the table of each partition now
my %cycles = (detach => 0, detach_concurrently => 0, attach => 0, replaced => 0, detached_writes => 0);
my $ddl_errors = 0;
my $next_id = 5_000_000;

sub detach
{
	my ($r) = @_;
	my $concurrently = rand() < 0.5;
	my $t = $table_of{$r};
	$node->safe_psql('postgres', "SET lock_timeout = '20s'; ALTER TABLE big DETACH PARTITION $t"
		  . ($concurrently ? ' CONCURRENTLY' : ''), timeout => 120);
	$cycles{ $concurrently ? 'detach_concurrently' : 'detach' }++;
	$detached{$r} = $t;
	return;
}

sub attach
{
	my ($r) = @_;
	my $t = $detached{$r};
	if (rand() < 0.25)
	{
		# replaced by a new table of as many rows
		my $new = "big_${r}_n$next_id";
		$node->safe_psql('postgres', qq{
CREATE TABLE $new (LIKE big);
ALTER TABLE $new ADD PRIMARY KEY (id, region);
INSERT INTO $new SELECT g, $r, pt_emb(g, 3), 'replacement ' || g, jsonb_build_object('r', $r)
FROM generate_series($next_id, $next_id + $per - 1) g;
SET lock_timeout = '20s';
ALTER TABLE big ATTACH PARTITION $new FOR VALUES IN ($r);
DROP TABLE $t;}, timeout => 120);
		$next_id += $per;
		$table_of{$r} = $new;
		$cycles{replaced}++;
	}
	else
	{
		$node->safe_psql('postgres', "SET lock_timeout = '20s'; ALTER TABLE big ATTACH PARTITION $t FOR VALUES IN ($r)",
			timeout => 120);
		$cycles{attach}++;
	}
	delete $detached{$r};
	return;
}

phase("$nwriters writers for $seconds s with detach/attach cycles" => sub {
	for my $w (1 .. $nwriters)
	{
		my $bg = $node->background_psql('postgres', on_error_stop => 0);
		$bg->query_until(qr/started/, "\\echo started\nCALL writer($w, $seconds, ${\($parts * $per)});\n");
		push @writers, $bg;
	}
	my $end = time() + $seconds - 2;
	my $steps = 0;
	while (time() < $end)
	{
		# each step sends or deletes a partition's records: a few steps, seconds apart
		sleep(3 + rand(3));
		last if $steps++ >= 8;
		my $ok = eval {
			my @in = grep { !$detached{$_} } 0 .. $parts - 1;
			if (keys %detached < 2 && (rand() < 0.6 || !keys %detached))
			{
				detach($in[ rand @in ]);
			}
			else
			{
				my @out = sort keys %detached;
				my $r = $out[ rand @out ];
				# written while detached: sent when attached again
				$node->safe_psql('postgres', "UPDATE $detached{$r} SET doc = 'while detached' WHERE id % 50 = 7");
				$cycles{detached_writes}++;
				attach($r);
			}
			1;
		};
		unless ($ok)
		{
			$ddl_errors++;
			note("DDL step failed: $@");
			# a concurrent detach that failed in its second transaction stays pending
			for my $t (split /\n/, sql(q{SELECT inhrelid::regclass FROM pg_inherits WHERE inhdetachpending}))
			{
				sql("ALTER TABLE big DETACH PARTITION $t FINALIZE");
				$t =~ /^big_(\d+)/ and $detached{$1} = $t;
			}
		}
	}
	# two partitions detached at the end, one of them concurrently
	while (keys %detached < 2)
	{
		my @in = grep { !$detached{$_} } 0 .. $parts - 1;
		eval { detach($in[ rand @in ]); 1 } or do { $ddl_errors++; note("final detach failed: $@"); };
	}
	for my $bg (@writers)
	{
		$bg->query(q{SELECT 'writer done'});
		$bg->quit;
	}
});
my $stats = sql(q{SELECT sum(txns) || ' transactions, ' || sum(errors) || ' errors, ' || sum(moves) || ' moves' FROM writer_stats});
diag("202 writers: $stats; DDL: " . join(', ', map { "$_ $cycles{$_}" } sort keys %cycles) . "; $ddl_errors DDL steps failed");
is(sql(q{SELECT count(*) FROM writer_stats}), $nwriters, 'every writer ran to the end');
ok(sql(q{SELECT sum(txns) - sum(errors) FROM writer_stats}) > 1000, 'the writers committed changes');
ok($cycles{detach} + $cycles{detach_concurrently} >= 3, 'partitions were detached while the writers ran');
ok($cycles{attach} + $cycles{replaced} >= 2, 'partitions were attached while the writers ran');
ok($ddl_errors <= 2, "the DDL steps worked ($ddl_errors failed)");
is(sql(q{SELECT count(*) FROM pg_inherits WHERE inhdetachpending}), '0', 'no partition is left detach pending');
diag('202 detached at the end: ' . join(', ', map { $detached{$_} } sort keys %detached));

phase('catch up (chroma_flush)' => sub {
	is(sql(qq{SELECT chroma_flush('big', interval '900 seconds')}), 't', 'chroma_flush returns true');
});
phase('check (chroma_verify, REST read)' => sub {
	rest_equal($node, 'big', $coll, 'after the writers and the partition changes', flush_timeout => 900);
});
is(sql(q{SELECT count(*) FROM chroma_sync.status}), '1', 'chroma_sync.status has one row');
is(sql(q{SELECT count(*) FROM chroma_sync.failed}), '0', 'no row in chroma_sync.failed');
diag(sprintf('202_partitioned_mirror_writers: %.1f s in all (server %s): %s', time() - $T0,
	$ENV{CHROMA_SERVER} // 'old', join(', ', map { sprintf('%s %.1f s', $_, $times{$_}) } sort keys %times)));
sql(qq{SELECT chroma_unmirror('big', drop_collection => true)});
finish($node, $log0);
