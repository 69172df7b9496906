# A partitioned table mirrored as one (issue 17): chroma_mirror on the parent mirrors every
# leaf, at every level, into one collection with ids from the parent's primary key. Each
# block below ends with the collection read over Chroma's REST API (test/t/ChromaRest.pm)
# and compared both ways with the rows SELECTed from the parent (ids, float32 bytes,
# documents, typed metadata), after chroma_flush and chroma_verify:
#   capture through the parent, through a partition (a leaf, an intermediate partitioned
#   partition), COPY into the parent, INSERT ... ON CONFLICT on the parent, row movement by
#   an UPDATE of the partition key (the record ends with the row's id and new values),
#   savepoint rollback (nothing of the rolled-back part is queued);
#   CREATE TABLE ... PARTITION OF (also a partitioned one and its own partitions), ATTACH
#   PARTITION (the table's rows are sent; columns in another order and a dropped column:
#   other attnums than the parent's), DETACH PARTITION (its rows leave; later writes to it
#   queue nothing), DETACH ... CONCURRENTLY, a DETACH ... CONCURRENTLY interrupted and then
#   FINALIZEd, a sub-partitioned table attached and detached as a whole, DROP TABLE of a
#   partition, TRUNCATE of one partition (only its ids leave), of an intermediate
#   partition, TRUNCATE of the parent (the collection is emptied);
#   chroma_sync.status (one row, for the parent), chroma_verify (all leaves: a record deleted
#   and one changed behind the mirror's back are found), chroma_resync, pause and resume of
#   the whole tree, a partition mirrored on its own into its own collection, the refusal of
#   a parent and one of its partitions into one collection (both orders), chroma_unmirror
#   (no chroma_sync trigger left on any partition), DROP TABLE of the parent.
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

my $coll = 'cs_t201_ev';
my $node = new_node('partitioned', conf => "chroma_sync.batch_size = 200\n");
my $log0 = log_offset($node);
my $T0 = time();

# (a statement waiting for a lock fails the block instead of the whole test's time)
sub sql { return $node->safe_psql('postgres', "SET lock_timeout = '60s';\n$_[0]", timeout => 300); }

# rows g = FROM .. TO in region REGION_SQL (an expression of g), version SALT
sub rows_sql
{
	my ($table, $from, $to, $region, $salt) = @_;
	$salt //= 0;
	return qq{INSERT INTO $table (id, region, embedding, doc, meta)
SELECT g, $region, pt_emb(g, $salt), CASE WHEN g % 11 = 0 THEN NULL ELSE 'doc ' || g || ' v$salt' END,
	CASE WHEN g % 13 = 0 THEN NULL ELSE jsonb_build_object('n', g, 'tag', 'k' || (g % 3), 'even', g % 2 = 0) END
FROM generate_series($from, $to) g};
}

# After a block that failed, chroma_resync makes the collection equal again (when the
# mirror exists), so the next block is judged on its own.
sub heal
{
	my ($passed) = @_;
	return if $passed;
	eval {
		if (sql(qq{SELECT count(*) FROM chroma_sync.mirror WHERE collection = '$coll'}) eq '1')
		{
			sql(qq{SELECT chroma_resume('ev', '$coll') FROM chroma_sync.mirror WHERE collection = '$coll' AND paused});
			sql(qq{SELECT chroma_resync('ev', '$coll')});
			sql(qq{SELECT chroma_flush('ev', interval '120 seconds', '$coll')});
			note('the failed block is followed by chroma_resync(ev)');
		}
		1;
	} or note("healing after a failed block: $@");
	return;
}

sub queue_sql
{
	return qq{SELECT count(*) || '|' || count(DISTINCT key) || '|' || count(*) FILTER (WHERE key IS NULL)
FROM chroma_sync.queue WHERE mirror_id = (SELECT mirror_id FROM chroma_sync.mirror WHERE collection = '$coll')};
}

sql($PartitionedMirror::FUNCTIONS);
# region 0-9: ev_a, 10-19: ev_b, 20-29: ev_c (by id: ev_c1 below 1000, ev_c2 from 1000)
sql(q{
CREATE TABLE ev (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
CREATE TABLE ev_a PARTITION OF ev FOR VALUES FROM (0) TO (10);
CREATE TABLE ev_b PARTITION OF ev FOR VALUES FROM (10) TO (20);
CREATE TABLE ev_c PARTITION OF ev FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
CREATE TABLE ev_c1 PARTITION OF ev_c FOR VALUES FROM (MINVALUE) TO (1000);
CREATE TABLE ev_c2 PARTITION OF ev_c FOR VALUES FROM (1000) TO (MAXVALUE);
});
sql(rows_sql('ev', 1, 1800, 'g % 30'));
sql(q{UPDATE ev SET embedding = NULL WHERE id % 17 = 0});
fresh_collection($node, $coll);
for my $c (qw(cs_t201_c2 cs_t201_other cs_t201_tree2 cs_t201_ev2)) { fresh_collection($node, $c); }

heal block('chroma_mirror on the parent: the backfill sends every leaf at every level' => sub {
	like(mirror_parent($node, 'ev', $coll), qr/^[0-9a-f-]{36}$/, 'chroma_mirror(ev) returns the collection id');
	rest_equal($node, 'ev', $coll, 'backfill');
	is(sql(qq{SELECT count(*) FROM chroma_sync.status WHERE collection = '$coll'}), '1',
		'chroma_sync.status has one row for the collection');
	is(sql(qq{SELECT source FROM chroma_sync.status WHERE collection = '$coll'}), 'ev', 'its source is the parent');
	is(sql(q{SELECT count(*) FROM chroma_sync.status WHERE source IN
		(SELECT relid FROM pg_partition_tree('ev') WHERE relid <> 'ev'::regclass)}), '0',
		'no status row for a partition');
	is(sql(qq{SELECT count(*) FROM chroma_sync.mirror WHERE collection = '$coll'}), '1', 'one mirror');
});

heal block('capture through the parent' => sub {
	sql(rows_sql('ev', 2001, 2100, 'g % 30', 1));
	sql(q{UPDATE ev SET doc = 'via parent ' || id, meta = meta - 'tag' || '{"upd": 1}' WHERE id BETWEEN 10 AND 70});
	sql(q{UPDATE ev SET embedding = pt_emb(id, 7) WHERE id % 5 = 0 AND id < 1500});
	sql(q{UPDATE ev SET embedding = NULL WHERE id BETWEEN 100 AND 120});
	sql(q{UPDATE ev SET embedding = pt_emb(id, 2) WHERE id % 17 = 0 AND id < 900});
	sql(q{DELETE FROM ev WHERE id BETWEEN 200 AND 260 OR id BETWEEN 1200 AND 1230});
	rest_equal($node, 'ev', $coll, 'writes through the parent');
});

heal block('capture through a partition directly' => sub {
	sql(rows_sql('ev_b', 2201, 2260, '10 + g % 10', 3));
	sql(rows_sql('ev_c2', 2301, 2340, '20 + g % 10', 3));
	sql(q{UPDATE ev_a SET doc = 'via ev_a', meta = '{"direct": true}' WHERE id BETWEEN 300 AND 400});
	sql(q{UPDATE ev_c SET embedding = pt_emb(id, 4) WHERE id BETWEEN 900 AND 1100});
	sql(q{UPDATE ev_c1 SET doc = NULL WHERE id BETWEEN 500 AND 600});
	sql(q{DELETE FROM ev_c2 WHERE id BETWEEN 1300 AND 1350});
	sql(q{DELETE FROM ev_b WHERE id BETWEEN 1400 AND 1450});
	rest_equal($node, 'ev', $coll, 'writes to ev_a, ev_b, ev_c (partitioned) and ev_c1, ev_c2 (its leaves)');
});

heal block('COPY into the parent' => sub {
	my $data = '';
	for my $g (3001 .. 3120)
	{
		my $r = $g % 30;
		my $doc = $g % 9 == 0 ? '\N' : "copied $g";
		my $meta = $g % 10 == 0 ? '\N' : qq({"copied": $g, "t": "c\\\\td"});
		my $emb = $g % 19 == 0 ? '\N' : '{' . join(',', $g / 8, -$g, 0.25, 1) . '}';
		$data .= join("\t", $g, $r, $emb, $doc, $meta) . "\n";
	}
	sql("COPY ev (id, region, embedding, doc, meta) FROM STDIN;\n$data\\.\n");
	is(sql(q{SELECT count(*) FROM ev WHERE id BETWEEN 3001 AND 3120}), '120', 'COPY wrote 120 rows');
	rest_equal($node, 'ev', $coll, 'COPY into the parent');
});

heal block('INSERT ... ON CONFLICT on the parent' => sub {
	# existing keys in every leaf and new keys, DO UPDATE
	sql(q{INSERT INTO ev AS x (id, region, embedding, doc, meta)
SELECT g, g % 30, pt_emb(g, 9), 'upserted ' || g, jsonb_build_object('ups', g)
FROM generate_series(1, 3200, 7) g
ON CONFLICT (id, region) DO UPDATE SET embedding = excluded.embedding, doc = excluded.doc, meta = excluded.meta});
	# DO UPDATE ... WHERE, and DO NOTHING
	sql(q{INSERT INTO ev AS x (id, region, embedding, doc, meta)
SELECT g, g % 30, pt_emb(g, 10), 'maybe ' || g, NULL FROM generate_series(1, 3200, 5) g
ON CONFLICT (id, region) DO UPDATE SET doc = excluded.doc WHERE x.id % 2 = 0});
	sql(q{INSERT INTO ev (id, region, embedding, doc, meta)
SELECT g, g % 30, pt_emb(g, 11), 'nothing ' || g, NULL FROM generate_series(1, 3300, 3) g
ON CONFLICT DO NOTHING});
	rest_equal($node, 'ev', $coll, 'INSERT ... ON CONFLICT');
});

heal block('row movement: an UPDATE of the partition key' => sub {
	# ev_a -> ev_b, ev_b -> ev_c1/ev_c2 (a partition of a partition), ev_c -> ev_a
	sql(q{UPDATE ev SET region = region + 10 WHERE region < 10 AND id BETWEEN 1 AND 400 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region + 10)});
	sql(q{UPDATE ev SET region = region + 10, doc = 'moved to c ' || id WHERE region BETWEEN 10 AND 19 AND id BETWEEN 401 AND 1600 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region + 10)});
	sql(q{UPDATE ev SET region = region - 20, embedding = pt_emb(id, 12) WHERE region BETWEEN 20 AND 29 AND id BETWEEN 1601 AND 2000 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region - 20)});
	# a move between the leaves of ev_c by its own partition key (id), through ev_c
	sql(q{UPDATE ev_c SET id = id + 5000 WHERE id BETWEEN 700 AND 760});
	# moved and moved back in one transaction, and moved twice in one transaction
	sql(q{BEGIN;
UPDATE ev SET region = region + 10 WHERE region < 10 AND id BETWEEN 2001 AND 2100 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region + 10);
UPDATE ev SET region = region - 10, doc = 'back ' || id WHERE region BETWEEN 10 AND 19 AND id BETWEEN 2001 AND 2100 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region - 10);
UPDATE ev SET region = 5 WHERE region = 15 AND id BETWEEN 3001 AND 3120;
UPDATE ev SET region = 25 WHERE region = 5 AND id BETWEEN 3001 AND 3120;
COMMIT;});
	# moved in one transaction, moved back in the next one
	sql(q{UPDATE ev SET region = 29 WHERE region = 9 AND id BETWEEN 3121 AND 3300});
	sql(q{UPDATE ev SET region = 9 WHERE region = 29 AND id BETWEEN 3121 AND 3300});
	rest_equal($node, 'ev', $coll, 'row movement');
	# "never deleted after the upsert": still equal a moment later
	sleep 2;
	my ($bad, $summary) = rest_read($node, $coll, 'ev');
	is($bad, 0, "row movement: still equal 2 s later ($summary)");
});

heal block('savepoint rollback drops the captured changes' => sub {
	ok(poll_query($node, queue_sql(), '0|0|0', 20), 'the queue is empty before');
	sql("SELECT chroma_pause('ev')");
	sql(q{BEGIN;
INSERT INTO ev VALUES (4001, 1, pt_emb(4001), 'kept via parent', NULL);
SAVEPOINT s1;
INSERT INTO ev VALUES (4002, 2, pt_emb(4002), 'rolled back', NULL);
INSERT INTO ev_c2 VALUES (4003, 23, pt_emb(4003), 'rolled back', NULL);
UPDATE ev SET doc = 'rolled back' WHERE id BETWEEN 1000 AND 1100;
UPDATE ev SET region = region + 10 WHERE region < 10 AND id BETWEEN 1100 AND 1200 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = ev.region + 10);
DELETE FROM ev_b WHERE id < 300;
SAVEPOINT s2;
TRUNCATE ev_a;
RELEASE SAVEPOINT s2;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO ev_b VALUES (4004, 14, pt_emb(4004), 'kept via ev_b', NULL);
SAVEPOINT s3;
INSERT INTO ev VALUES (4005, 25, pt_emb(4005), 'rolled back too', NULL);
ROLLBACK TO SAVEPOINT s3;
COMMIT;});
	is(queue_of($node, $coll), '2|2|0',
		'the queue holds the two kept keys only (entries|distinct keys|TRUNCATE barriers)');
	is(status_row($node, 'ev', 'pending'), '2', 'status: 2 pending');
	sql("SELECT chroma_resume('ev')");
	rest_equal($node, 'ev', $coll, 'savepoints');
});

heal block('CREATE TABLE ... PARTITION OF' => sub {
	sql(q{CREATE TABLE ev_d PARTITION OF ev FOR VALUES FROM (30) TO (40)});
	sql(rows_sql('ev', 5001, 5200, '30 + g % 10', 1));
	sql(rows_sql('ev_d', 5201, 5260, '30 + g % 10', 2));
	sql(q{UPDATE ev SET region = 31 WHERE region = 1 AND id BETWEEN 1 AND 3000 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = 31)});
	# a partitioned partition, its partitions created afterwards
	sql(q{CREATE TABLE ev_e PARTITION OF ev FOR VALUES FROM (40) TO (50) PARTITION BY RANGE (id);
CREATE TABLE ev_e1 PARTITION OF ev_e FOR VALUES FROM (MINVALUE) TO (5500);
CREATE TABLE ev_e2 PARTITION OF ev_e FOR VALUES FROM (5500) TO (MAXVALUE);});
	sql(rows_sql('ev', 5401, 5600, '40 + g % 10', 1));
	sql(rows_sql('ev_e2', 5601, 5650, '40 + g % 10', 2));
	sql(q{UPDATE ev_e1 SET doc = 'e1 ' || id WHERE id % 2 = 0});
	rest_equal($node, 'ev', $coll, 'new partitions ev_d, ev_e (partitioned), ev_e1, ev_e2');
	is(sql(q{SELECT count(*) FROM chroma_sync.status WHERE source IN
		(SELECT relid FROM pg_partition_tree('ev') WHERE relid <> 'ev'::regclass)}), '0',
		'still no status row for a partition');
});

heal block('ATTACH PARTITION sends the table\'s rows' => sub {
	# another column order and a dropped column: attnums other than the parent's
	sql(q{CREATE TABLE ev_f (junk text, meta jsonb, doc text, embedding real[], region int, id int);
ALTER TABLE ev_f DROP COLUMN junk;
ALTER TABLE ev_f ADD PRIMARY KEY (id, region);});
	sql(rows_sql('ev_f', 6001, 6500, '50 + g % 10', 5));
	sql(q{UPDATE ev_f SET embedding = NULL WHERE id % 23 = 0});
	sql(q{ALTER TABLE ev ATTACH PARTITION ev_f FOR VALUES FROM (50) TO (60)});
	rest_equal($node, 'ev', $coll, 'ev_f attached');
	sql(q{UPDATE ev_f SET doc = 'after attach ' || id WHERE id BETWEEN 6001 AND 6100});
	sql(q{UPDATE ev SET meta = '{"through": "parent"}' WHERE region BETWEEN 50 AND 59 AND id BETWEEN 6101 AND 6200});
	sql(q{DELETE FROM ev_f WHERE id BETWEEN 6201 AND 6250});
	sql(rows_sql('ev', 6501, 6550, '50 + g % 10', 6));
	sql(q{UPDATE ev SET region = 55 WHERE region = 35 AND id < 5100 AND NOT EXISTS (SELECT 1 FROM ev e WHERE e.id = ev.id AND e.region = 55)});
	rest_equal($node, 'ev', $coll, 'writes to ev_f after the attach');
	# attached and written in one transaction
	sql(q{CREATE TABLE ev_g (LIKE ev INCLUDING DEFAULTS);
ALTER TABLE ev_g ADD PRIMARY KEY (id, region);});
	sql(rows_sql('ev_g', 6601, 6700, '60 + g % 10', 1));
	sql(q{BEGIN;
ALTER TABLE ev ATTACH PARTITION ev_g FOR VALUES FROM (60) TO (70);
UPDATE ev SET doc = 'in the attaching transaction' WHERE region >= 60 AND id < 6650;
INSERT INTO ev VALUES (6701, 61, pt_emb(6701), 'new in ev_g', '{"x": 1}');
COMMIT;});
	rest_equal($node, 'ev', $coll, 'ev_g attached and written in one transaction');
});

heal block('DETACH PARTITION: its rows leave, later writes to it are not captured' => sub {
	my $before = sql(q{SELECT count(*) FROM ev_b WHERE embedding IS NOT NULL});
	ok($before > 100, "ev_b holds $before rows with an embedding");
	sql(q{ALTER TABLE ev DETACH PARTITION ev_b});
	rest_equal($node, 'ev', $coll, 'ev_b detached');
	is(chroma_triggers_on($node, q{'ev_b'::regclass}), '', 'no chroma_sync trigger is left on ev_b');
	ok(poll_query($node, queue_sql(), '0|0|0', 20), 'the queue is empty');
	sql("SELECT chroma_pause('ev')");
	sql(q{INSERT INTO ev_b VALUES (7001, 11, pt_emb(7001), 'detached', NULL)});
	sql(q{UPDATE ev_b SET doc = 'written after the detach' WHERE id < 500});
	sql(q{DELETE FROM ev_b WHERE id BETWEEN 500 AND 600});
	sql(q{TRUNCATE ev_b});
	is(queue_of($node, $coll), '0|0|0', 'writes to the detached ev_b queue nothing for the mirror');
	sql("SELECT chroma_resume('ev')");
	# detached and written in one transaction, and a partition of a partition detached
	sql(q{BEGIN;
UPDATE ev SET doc = 'before the detach' WHERE region BETWEEN 60 AND 69;
ALTER TABLE ev DETACH PARTITION ev_g;
UPDATE ev_g SET doc = 'after the detach';
COMMIT;});
	sql(q{ALTER TABLE ev_e DETACH PARTITION ev_e2});
	rest_equal($node, 'ev', $coll, 'ev_g detached in a transaction that wrote to it, ev_e2 detached from ev_e');
	# and attached again: its rows come back
	sql(q{UPDATE ev_g SET embedding = pt_emb(id, 13)});
	sql(q{ALTER TABLE ev ATTACH PARTITION ev_g FOR VALUES FROM (60) TO (70)});
	rest_equal($node, 'ev', $coll, 'ev_g attached again');
});

heal block('DETACH PARTITION ... CONCURRENTLY' => sub {
	sql(q{ALTER TABLE ev DETACH PARTITION ev_d CONCURRENTLY});
	is(sql(q{SELECT count(*) FROM pg_inherits WHERE inhrelid = 'ev_d'::regclass}), '0', 'ev_d is detached');
	rest_equal($node, 'ev', $coll, 'ev_d detached concurrently');
	is(chroma_triggers_on($node, q{'ev_d'::regclass}), '', 'no chroma_sync trigger is left on ev_d');
	sql(q{UPDATE ev_d SET doc = 'after the concurrent detach'});
	rest_equal($node, 'ev', $coll, 'ev_d written after the detach');
});

heal block('DETACH ... CONCURRENTLY interrupted, then FINALIZE' => sub {
	# a transaction with a snapshot older than the detach keeps its second phase waiting;
	# the statement timeout ends it there: ev_f stays "detach pending"
	my $s1 = $node->background_psql('postgres');
	$s1->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM ev;});
	my ($ret, $out, $err) = $node->psql('postgres',
		q{SET statement_timeout = '3s'; ALTER TABLE ev DETACH PARTITION ev_f CONCURRENTLY;}, timeout => 60);
	$s1->query_safe('COMMIT');
	$s1->quit;
	like($err, qr/canceling statement due to statement timeout/, 'the concurrent detach waits and is canceled');
	is(sql(q{SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'ev_f'::regclass}), 't',
		'ev_f is left detach pending');
	# a detach-pending partition is still a partition: writes to it work (and are sent or
	# deleted by the FINALIZE below)
	($ret, $out, $err) = $node->psql('postgres', q{UPDATE ev_f SET doc = 'while detach pending' WHERE id % 3 = 0});
	is($ret . $err, '0', 'an UPDATE of the detach-pending ev_f works');
	($ret, $out, $err) = $node->psql('postgres', q{INSERT INTO ev_f VALUES (NULL, NULL, pt_emb(6999), 55, 6999)});
	is($ret . $err, '0', 'an INSERT into the detach-pending ev_f works');
	sql(q{ALTER TABLE ev DETACH PARTITION ev_f FINALIZE});
	is(sql(q{SELECT count(*) FROM pg_inherits WHERE inhrelid = 'ev_f'::regclass}), '0', 'ev_f is detached');
	rest_equal($node, 'ev', $coll, 'ev_f detached by FINALIZE');
	is(chroma_triggers_on($node, q{'ev_f'::regclass}), '', 'no chroma_sync trigger is left on ev_f');
});

heal block('a sub-partitioned table attached and detached as a whole' => sub {
	sql(q{CREATE TABLE sp (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (id);
CREATE TABLE sp1 PARTITION OF sp FOR VALUES FROM (MINVALUE) TO (8200);
CREATE TABLE sp2 PARTITION OF sp FOR VALUES FROM (8200) TO (MAXVALUE) PARTITION BY LIST (region);
CREATE TABLE sp2x PARTITION OF sp2 FOR VALUES IN (70, 71, 72, 73, 74);
CREATE TABLE sp2y PARTITION OF sp2 DEFAULT;});
	sql(rows_sql('sp', 8001, 8100, '70 + g % 10', 1));
	sql(rows_sql('sp', 8201, 8400, '70 + g % 10', 1));
	sql(q{ALTER TABLE ev ATTACH PARTITION sp FOR VALUES FROM (70) TO (80)});
	rest_equal($node, 'ev', $coll, 'sp (two levels, three leaves) attached');
	sql(q{UPDATE sp2y SET doc = 'sp2y ' || id});
	sql(rows_sql('sp1', 8101, 8150, '70 + g % 10', 2));
	sql(q{UPDATE sp SET region = 70 WHERE region = 79 AND id >= 8200});    # sp2y -> sp2x
	sql(q{DELETE FROM sp2x WHERE id % 4 = 0});
	rest_equal($node, 'ev', $coll, 'writes to sp, sp1, sp2x, sp2y');
	sql(q{ALTER TABLE ev DETACH PARTITION sp});
	rest_equal($node, 'ev', $coll, 'sp detached');
	is(chroma_triggers_on($node, q{SELECT relid FROM pg_partition_tree('sp')}), '',
		'no chroma_sync trigger is left on sp or its partitions');
	ok(poll_query($node, queue_sql(), '0|0|0', 20), 'the queue is empty');
	sql("SELECT chroma_pause('ev')");
	sql(q{UPDATE sp SET doc = 'after the detach of sp'});
	is(queue_of($node, $coll), '0|0|0', 'writes to the detached sp queue nothing for the mirror');
	sql("SELECT chroma_resume('ev')");
	sql(q{ALTER TABLE ev ATTACH PARTITION sp FOR VALUES FROM (70) TO (80)});
	rest_equal($node, 'ev', $coll, 'sp attached again');
});

heal block('TRUNCATE of one partition deletes only its ids' => sub {
	my $others = sql(q{SELECT count(*) FROM ev WHERE embedding IS NOT NULL AND tableoid <> 'ev_c1'::regclass});
	sql(q{TRUNCATE ev_c1});
	rest_equal($node, 'ev', $coll, 'ev_c1 (a leaf of ev_c) truncated');
	is((rest_read($node, $coll, 'ev'))[3], $others, "the other partitions' $others records stay");
	# truncated, then written, in one transaction; two partitions in one statement
	sql(q{BEGIN;
UPDATE ev_a SET doc = 'before the truncate';
TRUNCATE ev_a, sp2x;
} . rows_sql('ev', 9001, 9050, 'g % 10', 1) . q{;
INSERT INTO sp2x VALUES (9100, 72, pt_emb(9100), 'after the truncate', NULL);
UPDATE ev_e1 SET doc = 'other partition, same transaction';
COMMIT;});
	rest_equal($node, 'ev', $coll, 'ev_a and sp2x truncated and written in one transaction');
	# an intermediate partition: its leaves' ids
	sql(q{TRUNCATE ev_e});
	rest_equal($node, 'ev', $coll, 'ev_e (partitioned) truncated');
});

heal block('status, chroma_verify and chroma_resync on the parent' => sub {
	is(sql(q{SELECT source || ' ' || state FROM chroma_sync.status}), 'ev syncing',
		'chroma_sync.status: one row, the parent, syncing');
	my $n = sql(q{SELECT count(*) FROM ev WHERE embedding IS NOT NULL});
	my ($leaf_id, $other_id) = split /\|/, sql(q{SELECT
		(SELECT id || ',' || region FROM sp2y WHERE embedding IS NOT NULL ORDER BY id LIMIT 1),
		(SELECT id || ',' || region FROM ev_c2 WHERE embedding IS NOT NULL ORDER BY id LIMIT 1)});
	# behind the mirror's back: a record of a leaf two levels down deleted, another changed
	sql(qq{SELECT chroma_delete('$coll', ARRAY['$leaf_id'])});
	sql(qq{SELECT chroma_upsert('$coll', ARRAY['$other_id'], ARRAY[[9, 9, 9, 9]]::real[])});
	is(sql(q{SELECT rows, missing, extra, different FROM chroma_verify('ev')}), "$n|1|0|1",
		"chroma_verify(ev) compares every leaf: $n rows, 1 missing ($leaf_id), 1 different ($other_id)");
	# and an id no leaf has
	sql(qq{SELECT chroma_upsert('$coll', ARRAY['999999,5'], ARRAY[[1, 2, 3, 4]]::real[])});
	is(sql(q{SELECT extra FROM chroma_verify('ev')}), '1', 'chroma_verify(ev) finds the extra id');
	ok(sql(q{SELECT chroma_resync('ev')}) >= $n, 'chroma_resync(ev) sends every row of every leaf');
	rest_equal($node, 'ev', $coll, 'after chroma_resync');
});

heal block('chroma_pause and chroma_resume act on the whole tree' => sub {
	sql("SELECT chroma_pause('ev')");
	is(status_row($node, 'ev', 'state'), 'paused', 'paused');
	sql(q{UPDATE ev SET doc = 'while paused' WHERE id BETWEEN 1000 AND 1100});
	sql(q{UPDATE sp2y SET doc = 'while paused'});
	sql(q{DELETE FROM ev_a WHERE id % 2 = 0});
	sleep 2;
	my $paused = sql(qq{SELECT count(*) FROM chroma_get('$coll') WHERE document = 'while paused'});
	is($paused, '0', 'nothing is sent while paused (leaves at two levels written)');
	ok(status_row($node, 'ev', 'pending') > 0, 'the changes are pending');
	sql("SELECT chroma_resume('ev')");
	rest_equal($node, 'ev', $coll, 'resumed');
});

heal block('a partition mirrored on its own, and a parent and its partition in one collection refused' => sub {
	# a leaf mirrored into its own collection, next to the parent's mirror
	like(mirror_parent($node, 'ev_c2', 'cs_t201_c2'), qr/^[0-9a-f-]{36}$/, 'ev_c2 mirrored into its own collection');
	sql(q{UPDATE ev SET doc = 'both mirrors' WHERE region BETWEEN 20 AND 29});
	sql(rows_sql('ev_c2', 10001, 10040, '20 + g % 10', 1));
	rest_equal($node, 'ev_c2', 'cs_t201_c2', 'ev_c2 in its own collection');
	rest_equal($node, 'ev', $coll, 'ev next to the mirror of ev_c2');
	is(sql(q{SELECT count(*) FROM chroma_sync.status}), '2', 'status: one row for ev, one for ev_c2');
	# a partition into the parent's collection
	my $mirrors = sql(q{SELECT count(*) FROM chroma_sync.mirror});
	for my $p (qw(ev_c1 ev_c ev_a))
	{
		my ($ret, $out, $err) = $node->psql('postgres',
			qq{SELECT chroma_mirror('$p', collection => '$coll', document_column => 'doc', metadata_columns => '{meta,region}')});
		isnt($ret, 0, "chroma_mirror($p) into the collection of its parent's mirror is refused");
		like($err, qr/ERROR/, "... with an error: " . ($err =~ /(ERROR:.*)/ ? $1 : $err));
	}
	# adopt => true takes a collection over from another database's mirror, never from the
	# mirror of the partition's own parent
	my $records = (rest_read($node, $coll, 'ev'))[3];
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{SELECT chroma_mirror('ev_c1', collection => '$coll', document_column => 'doc', metadata_columns => '{meta,region}', adopt => true)});
	isnt($ret, 0, "chroma_mirror(ev_c1, adopt => true) into the collection of its parent's mirror is refused too");
	if ($ret == 0)
	{
		sleep 3;
		diag('adopt => true was accepted; the collection now holds '
			  . sql(qq{SELECT count FROM chroma_count('$coll') count}) . " records ($records before)");
		$node->psql('postgres', qq{SELECT chroma_unmirror('ev_c1', collection => '$coll')});
		# the parent's mirror takes its collection back (it pauses once it sees the owner changed)
		sql(qq{SELECT chroma_adopt('ev', '$coll')});
		sql(qq{SELECT chroma_resume('ev', '$coll')});
		sql(qq{SELECT chroma_flush('ev', interval '120 seconds', '$coll')});
	}
	is(sql(q{SELECT count(*) FROM chroma_sync.mirror}), $mirrors, 'no mirror was added');
	# the other order: a partition mirrored first, then its parent into that collection
	sql(q{CREATE TABLE tree2 (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE tree2_a PARTITION OF tree2 FOR VALUES IN (1);
CREATE TABLE tree2_b PARTITION OF tree2 FOR VALUES IN (2) PARTITION BY RANGE (id);
CREATE TABLE tree2_b1 PARTITION OF tree2_b FOR VALUES FROM (MINVALUE) TO (MAXVALUE);});
	sql(rows_sql('tree2', 1, 50, '1 + g % 2', 0));
	mirror_parent($node, 'tree2_b1', 'cs_t201_tree2');
	for my $p (qw(tree2 tree2_b))
	{
		my ($ret, $out, $err) = $node->psql('postgres',
			qq{SELECT chroma_mirror('$p', collection => 'cs_t201_tree2', document_column => 'doc', metadata_columns => '{meta,region}')});
		isnt($ret, 0, "chroma_mirror($p) into the collection of the mirror of its partition tree2_b1 is refused");
		like($err, qr/ERROR/, "... with an error: " . ($err =~ /(ERROR:.*)/ ? $1 : $err));
	}
	is(chroma_triggers_on($node, q{'tree2'::regclass, 'tree2_b'::regclass, 'tree2_a'::regclass}), '',
		'no trigger of a refused mirror on tree2, tree2_a, tree2_b');
	rest_equal($node, 'tree2_b1', 'cs_t201_tree2', 'tree2_b1 alone in its collection');
	# the parent into another collection is fine
	like(mirror_parent($node, 'tree2', 'cs_t201_other'), qr/^[0-9a-f-]{36}$/, 'tree2 mirrored into another collection');
	sql(q{UPDATE tree2 SET doc = 'two mirrors ' || id});
	rest_equal($node, 'tree2', 'cs_t201_other', 'tree2 in its collection');
	rest_equal($node, 'tree2_b1', 'cs_t201_tree2', 'tree2_b1 next to its parent\'s mirror');
	sql(q{SELECT chroma_unmirror('tree2', drop_collection => true)});
	is(chroma_triggers_on($node, q{SELECT relid FROM pg_partition_tree('tree2') WHERE relid <> 'tree2_b1'::regclass}), '',
		'chroma_unmirror(tree2) leaves no trigger on tree2, tree2_a, tree2_b');
	sql(q{UPDATE tree2 SET doc = 'after unmirroring the parent ' || id});
	rest_equal($node, 'tree2_b1', 'cs_t201_tree2', 'tree2_b1 still mirrored after unmirroring tree2');
	sql(q{SELECT chroma_unmirror('tree2_b1', drop_collection => true)});
	sql(q{DROP TABLE tree2});
});

heal block('TRUNCATE of the parent empties the collection' => sub {
	sql(q{BEGIN;
TRUNCATE ev;
} . rows_sql('ev', 11001, 11030, '(ARRAY[1, 22, 63, 72, 77])[1 + g % 5]', 1) . q{;
COMMIT;});
	rest_equal($node, 'ev', $coll, 'ev truncated and 30 rows written');
	is((rest_read($node, $coll, 'ev'))[3], 30, 'the collection holds the 30 rows');
	rest_equal($node, 'ev_c2', 'cs_t201_c2', 'the own mirror of ev_c2 follows the TRUNCATE of the parent');
	sql(rows_sql('ev', 12001, 12400, '(ARRAY[1, 22, 63, 72, 77])[1 + g % 5]', 2));
	rest_equal($node, 'ev', $coll, 'written again');
});

heal block('DROP TABLE of a partition' => sub {
	sql(q{DROP TABLE ev_a});
	rest_equal($node, 'ev', $coll, 'ev_a dropped');
	sql(q{DROP TABLE ev_e});    # partitioned, with its leaf ev_e1
	rest_equal($node, 'ev', $coll, 'ev_e (partitioned) dropped');
	sql(q{DROP TABLE ev_c2});    # has its own mirror too
	is(sql(q{SELECT count(*) FROM chroma_sync.mirror WHERE collection = 'cs_t201_c2'}), '0',
		'dropping ev_c2 removed its own mirror');
	rest_equal($node, 'ev', $coll, 'ev_c2 dropped');
	is(sql(q{SELECT source FROM chroma_sync.status}), 'ev', 'status: the parent\'s row only');
});

heal block('chroma_unmirror of the parent leaves no trigger on any partition' => sub {
	sql(qq{SELECT chroma_unmirror('ev', drop_collection => true)});
	is(chroma_triggers_on($node, q{SELECT relid FROM pg_partition_tree('ev')}), '',
		'no chroma_sync trigger on ev or any of its partitions');
	is(chroma_triggers_on($node, q{SELECT c.oid FROM pg_class c WHERE c.relname IN ('ev_b', 'ev_d', 'ev_f', 'sp', 'sp1', 'sp2', 'sp2x', 'sp2y')}), '',
		'nor on the tables detached before');
	is(sql(q{SELECT count(*) FROM chroma_sync.status}), '0', 'no status row');
	sql(rows_sql('ev', 13001, 13010, '(ARRAY[63, 72, 77])[1 + g % 3]', 1));
	sql(q{UPDATE ev SET doc = 'unmirrored'});
	sql(q{TRUNCATE ev_c1});
	is(sql(q{SELECT count(*) FROM chroma_sync.queue}), '0', 'writes to the tree queue nothing');
	ok(wait_for("$coll dropped", 20, sub { sql(qq{SELECT count(*) FROM chroma_list_collections() WHERE name = '$coll'}) eq '0' }),
		'the collection is dropped');
	# mirrored again (a backfill of the tree), then DROP TABLE of the parent
	mirror_parent($node, 'ev', 'cs_t201_ev2');
	rest_equal($node, 'ev', 'cs_t201_ev2', 'mirrored again');
	sql(q{DROP TABLE ev});
	is(sql(q{SELECT count(*) FROM chroma_sync.mirror}), '0', 'DROP TABLE ev removes the mirror');
	is(sql(q{SELECT count(*) FROM chroma_sync.queue}), '0', 'and its queue');
	sql(q{SELECT chroma_delete_collection('cs_t201_ev2', true)});
});

diag(sprintf('201_partitioned_mirror: %.1f s (server %s)', time() - $T0, $ENV{CHROMA_SERVER} // 'old'));
finish($node, $log0);
