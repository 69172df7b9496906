# A mirror created with a collection configuration: when its collection is deleted behind
# its back, the mirror pauses; chroma_resume has the worker create it again with the
# recorded configuration and send everything again. A collection of that name created
# meanwhile with another configuration is refused: the mirror stays paused and says which
# key disagrees. (Space l2: Chroma returns a cosine collection's floats with the last bits
# changed, which chroma_verify would count as different.)
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('mirror_configuration');
my $log0 = log_offset($node);
my $coll = 'cs_t182';

make_table($node, 'c', rows => 300, dim => 8);
fresh_collection($node, $coll);
$node->safe_psql('postgres', qq{
SELECT chroma_mirror('c', collection => '$coll', document_column => 'doc',
	metadata_columns => '{meta}',
	configuration => '{"hnsw": {"space": "l2", "ef_construction": 110, "ef_search": 35}}')});
assert_equal($node, 'c', $coll, name => 'after the backfill');

my $hnsw_sql = qq{SELECT concat_ws(' ', c->'configuration'->'hnsw'->>'space',
	c->'configuration'->'hnsw'->>'ef_construction', c->'configuration'->'hnsw'->>'ef_search')
FROM chroma_collection('$coll') c};
is($node->safe_psql('postgres', $hnsw_sql), 'l2 110 35', 'the collection has the configuration');

# ---- deleted behind the mirror's back: paused, then created again with the configuration
is($node->safe_psql('postgres', "SELECT chroma_delete_collection('$coll')"), 't',
	'the collection is deleted');
insert_rows($node, 'c', 301, 50, 8);
$node->safe_psql('postgres', q{UPDATE c SET doc = 'changed' WHERE id <= 20});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'c'::regclass},
		'paused', 60), 'the mirror pauses') or diagnostics($node);
like(status_row($node, 'c', 'last_error'), qr/404|not found/i, 'it says the collection is gone');

$node->safe_psql('postgres', q{SELECT chroma_resume('c')});
assert_equal($node, 'c', $coll, name => 'after chroma_resume', timeout => 60);
is($node->safe_psql('postgres', $hnsw_sql), 'l2 110 35',
	'the worker created the collection again with the recorded configuration');
is($node->safe_psql('postgres', q{SELECT state FROM chroma_sync.status WHERE source = 'c'::regclass}),
	'syncing', 'the mirror is syncing');

# ---- created again by someone else with another space: refused, the mirror stays paused
$node->safe_psql('postgres', "SELECT chroma_delete_collection('$coll')");
insert_rows($node, 'c', 351, 10, 8);
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'c'::regclass},
		'paused', 60), 'deleted again: the mirror pauses') or diagnostics($node);
$node->safe_psql('postgres',
	qq{SELECT chroma_create_collection('$coll', configuration => '{"hnsw": {"space": "ip"}}')});
$node->safe_psql('postgres', q{SELECT chroma_resume('c')});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'c'::regclass},
		'paused', 60), 'a collection with another space: the mirror pauses again') or diagnostics($node);
my $err = status_row($node, 'c', 'last_error');
like($err, qr/hnsw\.space "ip", not the mirror's "l2"/, 'it names the key and both values');
note("last_error: $err");
is($node->safe_psql('postgres', "SELECT chroma_count('$coll')"), '0',
	'nothing was written into that collection');

$node->safe_psql('postgres', "SELECT chroma_delete_collection('$coll')");
$node->safe_psql('postgres', q{SELECT chroma_resume('c')});
assert_equal($node, 'c', $coll, name => 'that collection deleted, resumed', timeout => 60);
is($node->safe_psql('postgres', $hnsw_sql), 'l2 110 35', 'created with the configuration once more');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');

$node->safe_psql('postgres', q{SELECT chroma_unmirror('c', drop_collection => true)});
finish($node, $log0);
