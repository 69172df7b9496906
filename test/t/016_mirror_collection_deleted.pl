# The collection behind one mirror is deleted: that mirror pauses (status says 404 / not
# found) and keeps its queue, without re-creating the collection by itself; another mirror
# keeps syncing. chroma_resume re-creates the collection and sends everything again.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('collection_deleted');
my $log0 = log_offset($node);

for my $t (qw(a b))
{
	make_table($node, $t, rows => 500, dim => 8);
	fresh_collection($node, "cs_t016_$t");
	mirror($node, $t, "cs_t016_$t");
	assert_equal($node, $t, "cs_t016_$t", name => "$t after the backfill");
}

is($node->safe_psql('postgres', "SELECT chroma_delete_collection('cs_t016_a')"), 't',
	'the collection behind mirror a is deleted');
for my $t (qw(a b))
{
	$node->safe_psql('postgres', qq{
INSERT INTO $t SELECT g, ARRAY(SELECT (g + d)::real FROM generate_series(1, 8) d), 'late ' || g, '{"late": true}'
FROM generate_series(1001, 1100) g;
UPDATE $t SET doc = 'changed' WHERE id <= 50;
DELETE FROM $t WHERE id BETWEEN 51 AND 60;});
}

ok(poll_query($node,
		"SELECT state FROM chroma_sync.status WHERE source = 'a'::regclass", 'paused', 60),
	'mirror a is paused') or diagnostics($node);
like(status_row($node, 'a', 'last_error'), qr/404|not found/i,
	'its last_error says the collection was not found');
note('last_error: ' . status_row($node, 'a', 'last_error'));
is(status_row($node, 'a', 'pending'), '160', 'its changes wait in the queue (pending counts the 160 distinct keys)');
is(status_row($node, 'a', 'failed'), '0', 'no row of mirror a is blamed (nothing in failed)');
is($node->safe_psql('postgres', "SELECT chroma_flush('a', interval '1 second')"), 'f',
	'chroma_flush on the paused mirror returns false at its timeout');

assert_equal($node, 'b', 'cs_t016_b', name => 'mirror b keeps syncing');
$node->safe_psql('postgres', q{UPDATE b SET meta = '{"after": 1}' WHERE id > 400});
assert_equal($node, 'b', 'cs_t016_b', name => 'mirror b, later changes');
is(status_row($node, 'b', 'state'), 'syncing', 'mirror b is syncing');

is($node->safe_psql('postgres',
		"SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t016_a'"),
	'0', 'the paused mirror did not re-create the collection by itself');
is(status_row($node, 'a', 'state'), 'paused', 'mirror a is still paused');

$node->safe_psql('postgres', "SELECT chroma_resume('a')");
assert_equal($node, 'a', 'cs_t016_a', name => 'mirror a after chroma_resume', timeout => 60);
is($node->safe_psql('postgres',
		"SELECT state, pending, failed FROM chroma_sync.status WHERE source = 'a'::regclass"),
	'syncing|0|0', 'mirror a is syncing again, nothing pending or failed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');

finish($node, $log0);
