# Logical replication (issue 4, item 2): the mirror is on the SUBSCRIBER's table. Its
# triggers are ENABLE ALWAYS, so the rows the apply worker writes (initial table sync,
# INSERT, UPDATE, DELETE, TRUNCATE on the publisher) end up in Chroma; the collection ends
# equal to the subscriber's table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t021_docs';

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;
my $sub = new_node('subscriber');
my $log0 = log_offset($sub);

# same table on both sides; 300 rows on the publisher before the subscription
$pub->safe_psql('postgres',
	'CREATE TABLE docs (id int PRIMARY KEY, embedding real[], doc text, meta jsonb)');
$pub->safe_psql('postgres', q{
INSERT INTO docs SELECT g,
	ARRAY(SELECT (sin(g * 7.31 + d * 1.37) * 10)::real FROM generate_series(1, 8) d),
	CASE WHEN g % 7 = 0 THEN NULL ELSE 'document ' || g END,
	jsonb_build_object('n', g, 'tag', 'k' || (g % 5))
FROM generate_series(1, 300) g});
make_table($sub, 'docs');

fresh_collection($sub, $coll);
mirror($sub, 'docs', $coll);
is($sub->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't',
	'the empty subscriber table is mirrored');
is($sub->safe_psql('postgres', q{
SELECT string_agg(DISTINCT tgenabled::text, ',') FROM pg_trigger
WHERE tgrelid = 'docs'::regclass AND tgname LIKE 'chroma_sync%'}),
	'A', 'the mirror triggers are ENABLE ALWAYS');

$pub->safe_psql('postgres', 'CREATE PUBLICATION pub FOR TABLE docs');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION sub CONNECTION '$connstr' PUBLICATION pub");
$sub->wait_for_subscription_sync($pub, 'sub');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM docs'), '300',
	'the initial table sync copied 300 rows');
assert_equal($sub, 'docs', $coll, name => 'after the initial table sync');

# changes on the publisher, in several transactions
$pub->safe_psql('postgres', q{
INSERT INTO docs SELECT g, ARRAY(SELECT (cos(g * 3.1 + d) * 5)::real FROM generate_series(1, 8) d),
	'inserted ' || g, jsonb_build_object('new', true) FROM generate_series(301, 400) g});
$pub->safe_psql('postgres', q{
UPDATE docs SET doc = 'updated ' || id, meta = meta - 'tag' WHERE id % 10 = 1;
UPDATE docs SET embedding = NULL WHERE id BETWEEN 50 AND 54;
UPDATE docs SET id = id + 10000 WHERE id BETWEEN 60 AND 64;});
$pub->safe_psql('postgres', 'DELETE FROM docs WHERE id BETWEEN 100 AND 149');
$pub->safe_psql('postgres', q{
BEGIN;
INSERT INTO docs VALUES (500, '{1,2,3,4,5,6,7,8}', 'in a transaction', '{"a": 1}');
UPDATE docs SET doc = 'twice' WHERE id = 500;
DELETE FROM docs WHERE id = 2;
COMMIT;});
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM docs'),
	$pub->safe_psql('postgres', 'SELECT count(*) FROM docs'),
	'the subscriber has as many rows as the publisher');
assert_equal($sub, 'docs', $coll, name => 'after INSERT, UPDATE, DELETE on the publisher');
ok($sub->safe_psql('postgres', 'SELECT synced FROM chroma_sync.status') > 300,
	'status.synced counts the replicated changes');

# TRUNCATE on the publisher is replicated and mirrored too
$pub->safe_psql('postgres', 'TRUNCATE docs');
$pub->safe_psql('postgres', q{
INSERT INTO docs SELECT g, ARRAY[g, 0, 0, 0, 0, 0, 0, 1]::real[], 'after truncate',
	'{"t": true}' FROM generate_series(1, 25) g});
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM docs'), '25',
	'the subscriber table was truncated and refilled');
assert_equal($sub, 'docs', $coll, name => 'after TRUNCATE on the publisher');
is($sub->safe_psql('postgres', "SELECT chroma_count('$coll')"), '25',
	'the collection holds exactly the 25 rows');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');

assert_no_crash($sub, $log0, 'no crash recovery on the subscriber');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub');
$sub->stop;
$pub->stop;
done_testing();
