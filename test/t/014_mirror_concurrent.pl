# Two concurrent writers (pgbench, 2 clients) update the same 1,000 keys for 30 s
# (embeddings, documents, metadata keys that come and go, embeddings set to NULL and back)
# while the worker drains; at the end the collection equals the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t014_docs';
my $node = new_node('concurrent', conf => "chroma_sync.batch_size = 100\n");
my $log0 = log_offset($node);

make_table($node, 'docs', rows => 1000, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');
my $synced0 = status_row($node, 'docs', 'synced');

$node->pgbench(
	'--no-vacuum --client=2 --jobs=2 --time=30',
	0,
	[ qr{processed: [1-9]\d*}, qr{number of failed transactions: 0} ],
	[],
	'two writers update the same 1,000 keys for 30 s',
	{
		'014_update@8' => q{
\set k random(1, 1000)
\set v random(1, 1000000)
UPDATE docs SET embedding = ARRAY[:v, :k, :v % 13, -:v, 0.5, :v / 7.0, 1e-40, :v * 1e30]::real[],
	doc = CASE WHEN :v % 5 = 0 THEN NULL ELSE 'c' || :v END,
	meta = jsonb_build_object('k' || (:v % 3), :v, 'writer', :client_id)
WHERE id = :k;
},
		'014_toggle@1' => q{
\set k random(1, 1000)
UPDATE docs SET embedding = CASE WHEN embedding IS NULL THEN ARRAY[:k, 1, 2, 3, 4, 5, 6, 7]::real[] END
WHERE id = :k;
},
		'014_txn@1' => q{
\set k random(1, 999)
BEGIN;
UPDATE docs SET doc = 'txn a ' || :client_id WHERE id = :k;
UPDATE docs SET meta = meta - 'writer' WHERE id = :k;
SELECT pg_sleep(0.01);
UPDATE docs SET doc = 'txn b ' || :client_id WHERE id = :k;
END;
},
	});

my $synced1 = status_row($node, 'docs', 'synced');
ok($synced1 > $synced0, "the worker sent changes during the run (synced $synced0 -> $synced1)");

assert_equal($node, 'docs', $coll, name => 'after the writers', timeout => 120);
is($node->safe_psql('postgres',
		"SELECT pending, failed, lag IS NULL FROM chroma_sync.status WHERE source = 'docs'::regclass"),
	'0|0|t', 'nothing pending or failed, lag is NULL');
finish($node, $log0);
