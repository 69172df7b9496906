# Logical replication apply into a mirrored PARTITIONED table: the mirror is on the
# subscriber's partitioned table (chroma_mirror on the parent, one collection); the apply
# worker writes into its partitions, whose cloned row triggers and BEFORE TRUNCATE triggers
# are ENABLE ALWAYS. Each change must be captured exactly once: where the mirror is paused,
# the queue is counted against the changes applied (entries | distinct keys | TRUNCATE
# barriers), and each block ends with chroma_flush, chroma_verify on the subscriber's
# parent, and the collection read over Chroma's REST API compared both ways with the
# subscriber's rows (ids, float32 bytes, documents, typed metadata).
#   1. lr1: the publisher's table is a plain table, the subscriber's is partitioned (three
#      partitions, one of them partitioned by id): INSERT, UPDATE in place, UPDATE of the
#      partition key (the row moves between the subscriber's partitions: 2 keys), of the
#      sub-partition key, embedding set to NULL, DELETE, a mixed transaction, TRUNCATE (one
#      barrier, no keys), then rows again.
#   2. lr2 (publish_via_partition_root = true) and lr3 (= false), both partitioned on the
#      publisher with other bounds than on the subscriber (lr2: range on the publisher,
#      hash on the subscriber; lr3: the publisher's leaves are partitioned partitions on
#      the subscriber): initial sync, the same counted workload on both, region changes
#      that move rows on the publisher, on the subscriber or both, TRUNCATE of a publisher
#      partition (lr3: its ids only) and of the parent (lr2: a barrier; lr3: the leaves'
#      ids, the publisher sends its leaves).
#   3. lr1 again, while a writer on the publisher keeps inserting, updating, moving and
#      deleting rows: on the subscriber a partition is attached for a new range, a
#      sub-partitioned partition is swapped in one transaction for a copy with its columns
#      in another order, and a partition is detached (apply fails on its rows and is
#      retried) and attached again; the subscriber ends equal to the publisher and the
#      collection to the subscriber.
#   4. lr4: initial table sync (copy_data = true) of 400 rows into a mirrored partitioned
#      table: 400 keys queued once, then the collection equal; streaming afterwards.
#   5. lr5, a subscription with two_phase = true: a transaction prepared on the publisher
#      is prepared on the subscriber (nothing visible in the queue), COMMIT PREPARED queues
#      its keys once (row movement included), ROLLBACK PREPARED nothing; the records of a
#      COMMIT PREPARED reach Chroma without chroma_flush within 4 s, as those of a commit
#      (the apply worker commits without a COMMIT PREPARED statement: it waited for the
#      worker's idle timeout before).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use PartitionedMirror;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $T0 = time();
my %coll = map { $_ => "cs_t204_$_" } qw(lr1 lr2 lr3 lr4 lr5);

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->append_conf('postgresql.conf', "max_replication_slots = 16\nmax_wal_senders = 16\nmax_prepared_transactions = 5\n");
$pub->start;
my $sub = new_node('subscriber', conf => q{
chroma_sync.batch_size = 200
max_worker_processes = 24
max_logical_replication_workers = 10
max_sync_workers_per_subscription = 2
wal_retrieve_retry_interval = '300ms'
max_prepared_transactions = 5
});
my $log0 = log_offset($sub);
my $connstr = $pub->connstr . ' dbname=postgres';

sub psub { return $sub->safe_psql('postgres', "SET lock_timeout = '60s';\n$_[0]", timeout => 300); }
sub ppub { return $pub->safe_psql('postgres', $_[0], timeout => 300); }

# rows g = FROM .. TO, region REGION (an expression of g), version SALT, always an embedding
sub rows_sql
{
	my ($table, $from, $to, $region, $salt) = @_;
	$salt //= 0;
	return qq{INSERT INTO $table (id, region, embedding, doc, meta)
SELECT g, $region, pt_emb(g, $salt), CASE WHEN g % 11 = 0 THEN NULL ELSE 'doc ' || g || ' v$salt' END,
	CASE WHEN g % 13 = 0 THEN NULL ELSE jsonb_build_object('n', g, 'tag', 'k' || (g % 3), 'even', g % 2 = 0) END
FROM generate_series($from, $to) g};
}

my $COLS = 'id int, region int, embedding real[], doc text, meta jsonb, PRIMARY KEY (id, region)';

# A failed block is followed by chroma_resync of that mirror, so the next one is judged on
# its own (the failure stays reported).
sub heal
{
	my ($passed, @tables) = @_;
	return if $passed;
	for my $t (@tables)
	{
		eval {
			psub(qq{SELECT chroma_resume('$t') FROM chroma_sync.mirror WHERE collection = '$coll{$t}' AND paused});
			psub(qq{SELECT chroma_resync('$t')});
			psub(qq{SELECT chroma_flush('$t', interval '120 seconds')});
			note("the failed block is followed by chroma_resync($t)");
			1;
		} or note("healing $t: $@");
	}
	return;
}

sub catchup
{
	for my $s (@_) { $pub->wait_for_catchup($s); }
	return;
}

# The queue of the mirror of TABLE is empty (the worker caught up), then it is paused.
sub pause_empty
{
	my ($table) = @_;
	ok(poll_query($sub, qq{SELECT count(*) FROM chroma_sync.queue WHERE mirror_id =
		(SELECT mirror_id FROM chroma_sync.mirror WHERE collection = '$coll{$table}')}, '0', 60),
		"$table: the queue is empty before the counted changes");
	psub("SELECT chroma_pause('$table')");
	return;
}

# The subscriber's rows equal the publisher's (a digest of every column, in key order).
sub same_rows
{
	my ($table, $name, $where) = @_;
	$where //= 'true';
	my $digest = qq{SELECT count(*) || ':' || coalesce(md5(string_agg(
		concat_ws('|', id, region, embedding::text, coalesce(doc, '<null>'), coalesce(meta::text, '<null>')),
		E'\\n' ORDER BY id, region)), '-') FROM $table WHERE $where};
	return is(psub($digest), ppub($digest), "$name: the subscriber's $table equals the publisher's");
}

psub($PartitionedMirror::FUNCTIONS);
ppub($PartitionedMirror::FUNCTIONS);
fresh_collection($sub, $_) for values %coll;

# ------------------------------------------------------------------ 1. plain -> partitioned
ppub(qq{CREATE TABLE lr1 ($COLS, note text);
CREATE TABLE writer_stop (x int);
CREATE PUBLICATION pub1 FOR TABLE lr1;});
psub(qq{
CREATE TABLE lr1 ($COLS, note text) PARTITION BY RANGE (region);
CREATE TABLE lr1_a PARTITION OF lr1 FOR VALUES FROM (0) TO (10);
CREATE TABLE lr1_b PARTITION OF lr1 FOR VALUES FROM (10) TO (20);
CREATE TABLE lr1_c PARTITION OF lr1 FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
CREATE TABLE lr1_c1 PARTITION OF lr1_c FOR VALUES FROM (MINVALUE) TO (150);
CREATE TABLE lr1_c2 PARTITION OF lr1_c FOR VALUES FROM (150) TO (MAXVALUE);
});
like(mirror_parent($sub, 'lr1', $coll{lr1}), qr/^[0-9a-f-]{36}$/, 'lr1 (partitioned) mirrored whole on the subscriber');
is(psub(q{SELECT string_agg(DISTINCT tgenabled::text, ',') FROM pg_trigger
	WHERE tgrelid IN (SELECT relid FROM pg_partition_tree('lr1')) AND tgname LIKE 'chroma_sync%'}),
	'A', 'every chroma_sync trigger of lr1 and its partitions is ENABLE ALWAYS');
psub(qq{CREATE SUBSCRIPTION sub1 CONNECTION '$connstr' PUBLICATION pub1 WITH (copy_data = false)});
$sub->wait_for_subscription_sync($pub, 'sub1');

heal block('1a. INSERT on the publisher\'s plain table, routed into the subscriber\'s partitions' => sub {
	pause_empty('lr1');
	ppub(rows_sql('lr1', 1, 300, 'g % 30', 0));
	catchup('sub1');
	is(psub('SELECT count(*) FROM lr1'), '300', '300 rows applied');
	is(psub(q{SELECT string_agg(tableoid::regclass || ':' || n, ',' ORDER BY tableoid::regclass::text) FROM
		(SELECT tableoid, count(*) n FROM lr1 GROUP BY 1) x}),
		'lr1_a:100,lr1_b:100,lr1_c1:50,lr1_c2:50', 'the rows are in the partitions, at both levels');
	is(queue_of($sub, $coll{lr1}), '300|300|0', 'each applied INSERT queued its key once');
	psub("SELECT chroma_resume('lr1')");
	rest_equal($sub, 'lr1', $coll{lr1}, 'after INSERT');
}), 'lr1';

heal block('1b. UPDATE in place, and UPDATE of the partition key: row movement on the subscriber' => sub {
	pause_empty('lr1');
	ppub(q{UPDATE lr1 SET doc = 'updated ' || id, meta = meta - 'tag' || '{"upd": 1}' WHERE id BETWEEN 1 AND 60});
	catchup('sub1');
	is(queue_of($sub, $coll{lr1}), '60|60|0', 'UPDATE in place of 60 rows: 60 keys, once each');
	# an UPDATE of a column the mirror does not send, and one that changes nothing: no key
	ppub(q{UPDATE lr1 SET note = 'not mirrored ' || id WHERE id BETWEEN 1 AND 100});
	ppub(q{UPDATE lr1 SET doc = doc, meta = meta WHERE id BETWEEN 101 AND 130});
	catchup('sub1');
	is(psub(q{SELECT count(*) FROM lr1 WHERE note LIKE 'not mirrored%'}), '100', 'the notes are applied');
	is(queue_of($sub, $coll{lr1}), '60|60|0', 'applied UPDATEs of no mirrored column queued nothing');
	# lr1_a -> lr1_b, lr1_b -> lr1_c (into its leaves), lr1_c -> lr1_a: the key (id, region)
	# changes, apply deletes from one partition and inserts into another
	my $moved = ppub(q{SELECT count(*) FROM lr1 WHERE id BETWEEN 61 AND 150});
	is($moved, '90', '90 rows to move');
	ppub(q{UPDATE lr1 SET region = (region + 10) % 30, doc = 'moved ' || id WHERE id BETWEEN 61 AND 150});
	catchup('sub1');
	is(queue_of($sub, $coll{lr1}), (60 + 2 * 90) . '|' . (60 + 2 * 90) . '|0',
		'90 rows moved between partitions: their old and new keys, once each');
	is(psub(q{SELECT count(*) FROM lr1 WHERE id BETWEEN 61 AND 150 AND doc LIKE 'moved%'
		AND tableoid = CASE WHEN region < 10 THEN 'lr1_a'::regclass WHEN region < 20 THEN 'lr1_b'::regclass
			WHEN id < 150 THEN 'lr1_c1'::regclass ELSE 'lr1_c2'::regclass END}), '90',
		'the moved rows are in their new partitions on the subscriber');
	# a region change within one partition (no movement), a move between the leaves of lr1_c
	# by its own key (id: from lr1_c2 to lr1_c1), embeddings set to NULL; disjoint rows
	my $in_place = ppub(q{SELECT count(*) FROM lr1 WHERE id BETWEEN 151 AND 180 AND region % 10 < 9});
	my $by_id = ppub(q{SELECT count(*) FROM lr1 WHERE region >= 20 AND id BETWEEN 201 AND 249});
	ppub(q{UPDATE lr1 SET region = region + 1 WHERE id BETWEEN 151 AND 180 AND region % 10 < 9});
	ppub(q{UPDATE lr1 SET id = id - 1000 WHERE region >= 20 AND id BETWEEN 201 AND 249});
	ppub(q{UPDATE lr1 SET embedding = NULL WHERE id BETWEEN 181 AND 190});
	catchup('sub1');
	my $n = 60 + 2 * 90 + 2 * $in_place + 2 * $by_id + 10;
	ok($in_place > 20 && $by_id > 10, "$in_place region changes in a partition, $by_id moves between leaves by id");
	is(psub(q{SELECT count(*) FROM lr1_c1 WHERE id < 0}), $by_id, 'the rows moved by id are in lr1_c1');
	is(queue_of($sub, $coll{lr1}), "$n|$n|0", 'each of them queued its keys once');
	psub("SELECT chroma_resume('lr1')");
	rest_equal($sub, 'lr1', $coll{lr1}, 'after the updates');
}), 'lr1';

heal block('1c. DELETE, and a transaction of mixed changes' => sub {
	pause_empty('lr1');
	my $n = ppub(q{SELECT count(*) FROM lr1 WHERE id BETWEEN 200 AND 260});
	ppub(q{DELETE FROM lr1 WHERE id BETWEEN 200 AND 260});
	catchup('sub1');
	is(queue_of($sub, $coll{lr1}), "$n|$n|0", "$n rows deleted: $n keys, once each");
	psub("SELECT chroma_resume('lr1')");
	ppub(q{BEGIN;
INSERT INTO lr1 VALUES (500, 5, pt_emb(500), 'in a transaction', '{"a": 1}');
UPDATE lr1 SET doc = 'twice', region = 15 WHERE id = 500;
UPDATE lr1 SET region = 25 WHERE id = 500;
INSERT INTO lr1 VALUES (501, 1, pt_emb(501), 'inserted then deleted', NULL);
DELETE FROM lr1 WHERE id = 501;
UPDATE lr1 SET region = 2, embedding = pt_emb(id, 3) WHERE id BETWEEN 261 AND 270 AND region >= 10;
DELETE FROM lr1 WHERE id = 271;
COMMIT;});
	catchup('sub1');
	same_rows('lr1', 'after DELETE and the mixed transaction');
	rest_equal($sub, 'lr1', $coll{lr1}, 'after DELETE and the mixed transaction');
}), 'lr1';

heal block('1d. TRUNCATE of the publisher\'s table truncates the partitioned table: one barrier' => sub {
	pause_empty('lr1');
	ppub('TRUNCATE lr1');
	catchup('sub1');
	is(psub('SELECT count(*) FROM lr1'), '0', 'the subscriber\'s partitioned table is empty');
	is(queue_of($sub, $coll{lr1}), '1|0|1', 'one TRUNCATE barrier, no key of any partition');
	# rows, TRUNCATE, rows in one publisher transaction: the keys, the barrier, the keys
	ppub("BEGIN;\n" . rows_sql('lr1', 901, 910, 'g % 30', 4) . ";\nTRUNCATE lr1;\n" . rows_sql('lr1', 1, 120, 'g % 30', 4) . ";\nCOMMIT;");
	catchup('sub1');
	is(queue_of($sub, $coll{lr1}), '132|130|2', 'then 10 rows, TRUNCATE, 120 rows in one transaction: 10 keys, a barrier, 120 keys');
	is(psub(qq{WITH q AS (SELECT qid, key FROM chroma_sync.queue WHERE mirror_id = @{[mirror_id_of($sub, $coll{lr1})]})
SELECT (SELECT max(qid) FROM q WHERE split_part(key, ',', 1)::int > 900)
	< (SELECT max(qid) FROM q WHERE key IS NULL)
	AND (SELECT max(qid) FROM q WHERE key IS NULL) < (SELECT min(qid) FROM q WHERE split_part(key, ',', 1)::int <= 120)}),
		't', 'in that order in the queue');
	psub("SELECT chroma_resume('lr1')");
	rest_equal($sub, 'lr1', $coll{lr1}, 'after TRUNCATE and 120 rows');
	is((rest_read($sub, $coll{lr1}, 'lr1'))[3], 120, 'the collection holds the 120 rows');
}), 'lr1';

# ------------------------------------------------------ 2. partitioned -> partitioned
# lr2: range [0,15), [15,30) on the publisher; on the subscriber hash by id (one of the
# three partitioned by range of region). lr3: the same on the publisher; on the subscriber
# its leaves lr3_p1 and lr3_p2 (the names the publisher sends) are partitioned partitions.
for my $t (qw(lr2 lr3))
{
	ppub(qq{CREATE TABLE $t ($COLS) PARTITION BY RANGE (region);
CREATE TABLE ${t}_p1 PARTITION OF $t FOR VALUES FROM (0) TO (15);
CREATE TABLE ${t}_p2 PARTITION OF $t FOR VALUES FROM (15) TO (30);});
	ppub(rows_sql($t, 1, 200, 'g % 30', 0));
}
ppub(q{CREATE PUBLICATION pub2 FOR TABLE lr2 WITH (publish_via_partition_root = true);
CREATE PUBLICATION pub3 FOR TABLE lr3 WITH (publish_via_partition_root = false);});
psub(qq{
CREATE TABLE lr2 ($COLS) PARTITION BY HASH (id);
CREATE TABLE lr2_h0 PARTITION OF lr2 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE lr2_h1 PARTITION OF lr2 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE lr2_h2 PARTITION OF lr2 FOR VALUES WITH (MODULUS 3, REMAINDER 2) PARTITION BY RANGE (region);
CREATE TABLE lr2_h2a PARTITION OF lr2_h2 FOR VALUES FROM (MINVALUE) TO (10);
CREATE TABLE lr2_h2b PARTITION OF lr2_h2 FOR VALUES FROM (10) TO (MAXVALUE);
CREATE TABLE lr3 ($COLS) PARTITION BY RANGE (region);
CREATE TABLE lr3_p1 PARTITION OF lr3 FOR VALUES FROM (0) TO (15) PARTITION BY RANGE (region);
CREATE TABLE lr3_p1a PARTITION OF lr3_p1 FOR VALUES FROM (0) TO (5);
CREATE TABLE lr3_p1b PARTITION OF lr3_p1 FOR VALUES FROM (5) TO (15);
CREATE TABLE lr3_p2 PARTITION OF lr3 FOR VALUES FROM (15) TO (30) PARTITION BY HASH (id);
CREATE TABLE lr3_p2h0 PARTITION OF lr3_p2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE lr3_p2h1 PARTITION OF lr3_p2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
});
mirror_parent($sub, $_, $coll{$_}) for qw(lr2 lr3);

heal block('2a. initial sync from a partitioned publisher, via the root and via its leaves' => sub {
	psub("SELECT chroma_flush('$_', interval '60 seconds')") for qw(lr2 lr3);
	pause_empty($_) for qw(lr2 lr3);
	psub(qq{CREATE SUBSCRIPTION sub2 CONNECTION '$connstr' PUBLICATION pub2;
CREATE SUBSCRIPTION sub3 CONNECTION '$connstr' PUBLICATION pub3;});
	$sub->wait_for_subscription_sync($pub, $_) for qw(sub2 sub3);
	is(psub(q{SELECT string_agg(srrelid::regclass::text, ',' ORDER BY srrelid::regclass::text) FROM pg_subscription_rel}),
		'lr1,lr2,lr3_p1,lr3_p2', 'sub2 syncs lr2 (the root), sub3 the publisher\'s leaves lr3_p1, lr3_p2');
	for my $t (qw(lr2 lr3))
	{
		is(psub("SELECT count(*) FROM $t"), '200', "$t: 200 rows copied");
		is(queue_of($sub, $coll{$t}), '200|200|0', "$t: the initial sync queued each key once");
		psub("SELECT chroma_resume('$t')");
		rest_equal($sub, $t, $coll{$t}, "$t after the initial sync");
	}
	ok(psub(q{SELECT count(DISTINCT tableoid) FROM lr2}) == 4 && psub(q{SELECT count(DISTINCT tableoid) FROM lr3}) == 4,
		'the copied rows are in the four leaves of each');
}), qw(lr2 lr3);

heal block('2b. the same changes via the root and via the leaves, counted' => sub {
	pause_empty($_) for qw(lr2 lr3);
	# region + 12: 3 -> 15 moves on both sides, 14 -> 26 on the subscriber's lr3 only and
	# on the publisher, 20 -> 2 on both; lr2 on the subscriber moves by id only (hash)
	my @stmts = (rows_sql('TBL', 201, 260, 'g % 30', 1),
		q{UPDATE TBL SET doc = 'updated ' || id, meta = '{"u": true}' WHERE id BETWEEN 1 AND 40},
		q{UPDATE TBL SET region = (region + 12) % 30, doc = 'moved ' || id WHERE id BETWEEN 41 AND 80},
		q{UPDATE TBL SET region = region + 1 WHERE id BETWEEN 81 AND 100 AND region NOT IN (14, 29)},
		q{UPDATE TBL SET id = id + 1000 WHERE id BETWEEN 131 AND 140},
		q{DELETE FROM TBL WHERE id BETWEEN 101 AND 130});
	my $small = ppub(q{SELECT count(*) FROM lr2 WHERE id BETWEEN 81 AND 100 AND region NOT IN (14, 29)});
	for my $t (qw(lr2 lr3))
	{
		# in separate transactions, as the publisher's statements come
		ppub($_ =~ s/TBL/$t/gr) for @stmts;
	}
	catchup(qw(sub2 sub3));
	my $n = 60 + 40 + 2 * 40 + 2 * $small + 2 * 10 + 30;
	for my $t (qw(lr2 lr3))
	{
		is(queue_of($sub, $coll{$t}), "$n|$n|0",
			"$t: 60 inserts, 40 updates, 40 + $small region changes, 10 id changes, 30 deletes: $n keys once each");
		same_rows($t, $t);
		psub("SELECT chroma_resume('$t')");
		rest_equal($sub, $t, $coll{$t}, "$t after the changes");
	}
}), qw(lr2 lr3);

heal block('2c. TRUNCATE of a publisher partition and of the publisher\'s parent' => sub {
	# lr3 (via the leaves): TRUNCATE lr3_p1 truncates the subscriber's lr3_p1 (partitioned):
	# the ids of its rows leave, nothing else
	pause_empty('lr3');
	my $n1 = psub(q{SELECT count(*) FROM lr3_p1});
	ppub('TRUNCATE lr3_p1');
	catchup('sub3');
	is(psub('SELECT count(*) FROM lr3_p1'), '0', 'the subscriber\'s lr3_p1 is empty');
	is(queue_of($sub, $coll{lr3}), "$n1|$n1|0", "lr3: TRUNCATE lr3_p1 queued its $n1 ids once, no barrier");
	psub("SELECT chroma_resume('lr3')");
	rest_equal($sub, 'lr3', $coll{lr3}, 'lr3 after TRUNCATE of the partition lr3_p1');
	# TRUNCATE of the parent: via the root a barrier, via the leaves their ids
	pause_empty($_) for qw(lr2 lr3);
	my $n3 = psub(q{SELECT count(*) FROM lr3});
	ppub('TRUNCATE lr2; TRUNCATE lr3');
	catchup(qw(sub2 sub3));
	is(psub('SELECT (SELECT count(*) FROM lr2) + (SELECT count(*) FROM lr3)'), '0', 'lr2 and lr3 are empty on the subscriber');
	is(queue_of($sub, $coll{lr2}), '1|0|1', 'lr2 (via the root): one barrier, no key');
	is(queue_of($sub, $coll{lr3}), "$n3|$n3|0", "lr3 (via the leaves): the $n3 ids of its rows, no barrier");
	for my $t (qw(lr2 lr3))
	{
		ppub(rows_sql($t, 301, 350, 'g % 30', 2));
		catchup($t eq 'lr2' ? 'sub2' : 'sub3');
		psub("SELECT chroma_resume('$t')");
		rest_equal($sub, $t, $coll{$t}, "$t after TRUNCATE and 50 rows");
		is((rest_read($sub, $coll{$t}, $t))[3], 50, "$t: the collection holds the 50 rows");
	}
}), qw(lr2 lr3);

# --------------------------------------------- 3. ATTACH / DETACH while apply is running
heal block('3. partitions attached and detached on the subscriber while the publisher writes' => sub {
	my $writer_sql = q{DO $$
DECLARE i int := 0;
BEGIN
	WHILE i < 4000 AND NOT EXISTS (SELECT 1 FROM writer_stop) LOOP
		i := i + 1;
		INSERT INTO lr1 (id, region, embedding, doc, meta)
			VALUES (100000 + i, i % 30, pt_emb(100000 + i, 1), 'w ' || i, jsonb_build_object('w', i));
		UPDATE lr1 SET doc = 'w upd ' || i WHERE id = 100000 + i - 3;
		IF i % 3 = 0 THEN UPDATE lr1 SET region = (region + 7) % 30 WHERE id = 100000 + i - 5; END IF;
		IF i % 5 = 0 THEN DELETE FROM lr1 WHERE id = 100000 + i - 9; END IF;
		IF i % 4 = 0 THEN UPDATE lr1 SET meta = coalesce(meta, '{}') || jsonb_build_object('x', i) WHERE id < 1000 AND id % 40 = i % 40; END IF;
		IF i % 7 = 0 THEN UPDATE lr1 SET embedding = CASE WHEN embedding IS NULL THEN pt_emb(id, 5) END WHERE id = 100000 + i - 11; END IF;
		COMMIT;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$};
	my ($out, $err) = ('', '');
	my $writer = IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $connstr, '-c', $writer_sql ],
		'>', \$out, '2>', \$err);
	my $writes = sub { ppub('SELECT count(*) FROM lr1 WHERE id > 100000') };
	ok(wait_for('the writer has started', 30, sub { $writes->() > 20 }), 'the writer writes');

	# (a) a partition attached for a new range, then rows of that range
	psub(qq{CREATE TABLE lr1_d (LIKE lr1, PRIMARY KEY (id, region));
ALTER TABLE lr1 ATTACH PARTITION lr1_d FOR VALUES FROM (30) TO (40);});
	ppub(rows_sql('lr1', 3001, 3060, '30 + g % 10', 6));
	sleep 1;
	# (b) lr1_c (partitioned) swapped for a copy, columns in another order, in one transaction
	psub(qq{BEGIN;
ALTER TABLE lr1 DETACH PARTITION lr1_c;
CREATE TABLE lr1_c_new (note text, meta jsonb, doc text, region int, embedding real[], id int, PRIMARY KEY (id, region));
INSERT INTO lr1_c_new (id, region, embedding, doc, meta, note) SELECT id, region, embedding, doc, meta, note FROM lr1_c;
ALTER TABLE lr1 ATTACH PARTITION lr1_c_new FOR VALUES FROM (20) TO (30);
COMMIT;});
	psub('DROP TABLE lr1_c');
	sleep 1;
	# (c) lr1_b detached: the changes of its rows fail to apply and are retried; attached again
	psub('ALTER TABLE lr1 DETACH PARTITION lr1_b');
	my $before = $writes->();
	ok(wait_for('the writer goes on', 20, sub { $writes->() > $before + 10 }), 'the publisher writes while lr1_b is detached');
	sleep 1;
	psub('ALTER TABLE lr1 ATTACH PARTITION lr1_b FOR VALUES FROM (10) TO (20)');
	# (d) the partition of the new range detached (after its rows were applied) and dropped;
	# the publisher keeps those rows, and writes no more of them
	ppub(rows_sql('lr1', 3061, 3080, '30 + g % 10', 7));
	catchup('sub1');
	is(psub('SELECT count(*) FROM lr1_d'), '80', 'lr1_d holds the 80 rows of its range');
	psub('ALTER TABLE lr1 DETACH PARTITION lr1_d');
	psub('DROP TABLE lr1_d');
	sleep 1;
	ppub('INSERT INTO writer_stop VALUES (1)');
	$writer->finish;
	is($err, '', 'the writer ran without an error');
	note('the writer wrote ' . $writes->() . ' rows');
	catchup('sub1');
	same_rows('lr1', 'after the writer, the attaches and detaches', 'region < 30');
	is(psub('SELECT count(*) FROM lr1 WHERE region >= 30'), '0', 'no row of the detached range on the subscriber');
	my $apply_errors = () = slurp_file($sub->logfile, $log0) =~ /no partition of relation "lr1" found for row/g;
	ok($apply_errors > 0, "apply failed $apply_errors times while lr1_b was detached, and was retried");
	rest_equal($sub, 'lr1', $coll{lr1}, 'after the writer, the attaches and detaches');
	is(psub(q{SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = 'lr1_c_new'::regclass AND t.tgname LIKE 'chroma_sync%' AND t.tgenabled = 'A'}),
		psub(q{SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = 'lr1_a'::regclass AND t.tgname LIKE 'chroma_sync%' AND t.tgenabled = 'A'}),
		'the attached lr1_c_new has the ENABLE ALWAYS triggers of lr1_a');
}), 'lr1';

# ------------------------------------------------------------- 4. copy_data = true
heal block('4. initial table sync (copy_data = true) into a mirrored partitioned table' => sub {
	ppub(qq{CREATE TABLE lr4 ($COLS);});
	ppub(rows_sql('lr4', 1, 400, 'g % 40', 0));
	ppub(q{CREATE PUBLICATION pub4 FOR TABLE lr4});
	psub(qq{
CREATE TABLE lr4 ($COLS) PARTITION BY RANGE (region);
CREATE TABLE lr4_a PARTITION OF lr4 FOR VALUES FROM (0) TO (20) PARTITION BY HASH (id);
CREATE TABLE lr4_a0 PARTITION OF lr4_a FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE lr4_a1 PARTITION OF lr4_a FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE lr4_b PARTITION OF lr4 FOR VALUES FROM (20) TO (40);
});
	mirror_parent($sub, 'lr4', $coll{lr4});
	psub("SELECT chroma_flush('lr4', interval '60 seconds')");
	pause_empty('lr4');
	psub(qq{CREATE SUBSCRIPTION sub4 CONNECTION '$connstr' PUBLICATION pub4 WITH (copy_data = true)});
	$sub->wait_for_subscription_sync($pub, 'sub4');
	is(psub('SELECT count(*) FROM lr4'), '400', '400 rows copied');
	is(psub(q{SELECT count(DISTINCT tableoid) FROM lr4}), '3', 'into the three leaves');
	is(queue_of($sub, $coll{lr4}), '400|400|0', 'the table sync queued each of the 400 keys once');
	psub("SELECT chroma_resume('lr4')");
	rest_equal($sub, 'lr4', $coll{lr4}, 'lr4 after the initial table sync');
	ppub(rows_sql('lr4', 401, 440, 'g % 40', 1));
	ppub(q{UPDATE lr4 SET region = 39 - region WHERE id BETWEEN 1 AND 50});
	ppub(q{DELETE FROM lr4 WHERE id BETWEEN 51 AND 70});
	catchup('sub4');
	same_rows('lr4', 'lr4 streaming after the sync');
	rest_equal($sub, 'lr4', $coll{lr4}, 'lr4 streaming after the sync');
}), 'lr4';

# ------------------------------------------------ 5. two-phase commit (two_phase = true)
heal block('5. transactions prepared on the publisher, prepared and committed by the apply worker' => sub {
	ppub(qq{CREATE TABLE lr5 ($COLS); CREATE PUBLICATION pub5 FOR TABLE lr5;});
	psub(qq{
CREATE TABLE lr5 ($COLS) PARTITION BY RANGE (region);
CREATE TABLE lr5_a PARTITION OF lr5 FOR VALUES FROM (0) TO (15);
CREATE TABLE lr5_b PARTITION OF lr5 FOR VALUES FROM (15) TO (30);
});
	mirror_parent($sub, 'lr5', $coll{lr5});
	psub(qq{CREATE SUBSCRIPTION sub5 CONNECTION '$connstr' PUBLICATION pub5 WITH (copy_data = false, two_phase = true)});
	$sub->wait_for_subscription_sync($pub, 'sub5');
	ok(poll_query($sub, q{SELECT subtwophasestate FROM pg_subscription WHERE subname = 'sub5'}, 'e', 60),
		'sub5: two-phase enabled');
	# a record is in Chroma shortly after its commit on the subscriber, without chroma_flush
	# (the worker is woken at commit; it would otherwise wait up to its idle period, 10 s)
	my $prompt = sub {
		my ($what) = @_;
		my $t = time();
		my $ok = wait_for("$what reaches Chroma without chroma_flush", 4,
			sub { (rest_read($sub, $coll{lr5}, 'lr5'))[0] == 0 });
		note(sprintf('%s: in Chroma after %.1f s', $what, time() - $t));
		return $ok;
	};
	ppub(rows_sql('lr5', 1, 30, 'g % 30', 0));
	catchup('sub5');
	ok($prompt->('a committed transaction'), 'the rows of a transaction committed by apply reach Chroma within 4 s');
	rest_equal($sub, 'lr5', $coll{lr5}, 'lr5 after a committed transaction');

	# PREPARE on the publisher: prepared on the subscriber, nothing visible
	pause_empty('lr5');
	ppub("BEGIN;\n" . rows_sql('lr5', 101, 140, 'g % 30', 1)
		  . ";\nUPDATE lr5 SET region = (region + 15) % 30, doc = 'moved in 2pc' WHERE id BETWEEN 1 AND 10;\nPREPARE TRANSACTION 'p1';");
	catchup('sub5');
	is(psub(q{SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'pg_gid_%'}), '1', 'the apply worker prepared the transaction');
	is(queue_of($sub, $coll{lr5}), '0|0|0', 'nothing of it is visible in the queue');
	ppub("COMMIT PREPARED 'p1'");
	catchup('sub5');
	is(psub(q{SELECT count(*) FROM pg_prepared_xacts}), '0', 'COMMIT PREPARED applied');
	is(queue_of($sub, $coll{lr5}), '60|60|0', 'then 40 inserts and 10 moves: 60 keys, once each');
	# ROLLBACK PREPARED: nothing
	ppub("BEGIN;\n" . rows_sql('lr5', 201, 210, 'g % 30', 1) . ";\nDELETE FROM lr5 WHERE id BETWEEN 11 AND 20;\nPREPARE TRANSACTION 'p2';");
	catchup('sub5');
	ppub("ROLLBACK PREPARED 'p2'");
	catchup('sub5');
	is(queue_of($sub, $coll{lr5}), '60|60|0', 'a transaction prepared then rolled back queued nothing');
	psub("SELECT chroma_resume('lr5')");
	rest_equal($sub, 'lr5', $coll{lr5}, 'lr5 after COMMIT PREPARED and ROLLBACK PREPARED');

	# the worker has just caught up and idles: a COMMIT PREPARED applied now
	ppub("BEGIN;\n" . rows_sql('lr5', 301, 330, 'g % 30', 2) . ";\nPREPARE TRANSACTION 'p3';");
	catchup('sub5');
	ppub("COMMIT PREPARED 'p3'");
	catchup('sub5');
	ok($prompt->('a transaction committed by COMMIT PREPARED'),
		'the rows of a prepared transaction committed by apply reach Chroma within 4 s');
	rest_equal($sub, 'lr5', $coll{lr5}, 'lr5 after COMMIT PREPARED');
	same_rows('lr5', 'lr5');
}), 'lr5';

is(psub('SELECT count(*) FROM chroma_sync.failed'), '0', 'nothing in chroma_sync.failed');
is(psub(q{SELECT string_agg(source || ':' || state, ',' ORDER BY source::text) FROM chroma_sync.status}),
	'lr1:syncing,lr2:syncing,lr3:syncing,lr4:syncing,lr5:syncing', 'five mirrors, none paused or in error');
$sub->safe_psql('postgres', "DROP SUBSCRIPTION $_") for qw(sub1 sub2 sub3 sub4 sub5);
psub("SELECT chroma_unmirror('$_', drop_collection => true)") for qw(lr1 lr2 lr3 lr4 lr5);
diag(sprintf('204_partitioned_logical_replication: %.1f s (server %s)', time() - $T0, $ENV{CHROMA_SERVER} // 'old'));
$pub->stop;
finish($sub, $log0);
