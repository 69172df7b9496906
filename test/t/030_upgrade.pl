# ALTER EXTENSION chroma_sync UPDATE from 0.1 keeps mirrors syncing and loses nothing
# that was pending.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
});
$node->start;
my $offset = log_offset($node);

$node->safe_psql('postgres', "CREATE EXTENSION chroma_sync VERSION '0.1'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.1', 'installed at 0.1');

make_table($node, 'up_docs', rows => 500, dim => 8);
fresh_collection($node, 'up_docs_t030');
mirror($node, 'up_docs', 'up_docs_t030');
assert_equal($node, 'up_docs', 'up_docs_t030', name => 'before the update');

# changes pending across the update: the mirror is paused while they are written
$node->safe_psql('postgres', "SELECT chroma_pause('up_docs')");
insert_rows($node, 'up_docs', 501, 300, 8);
$node->safe_psql('postgres', "UPDATE up_docs SET doc = doc || ' (edited)' WHERE id <= 50");
$node->safe_psql('postgres', "DELETE FROM up_docs WHERE id BETWEEN 100 AND 119");
my $pending = $node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status");
# 300 inserts, 43 edits (the 7 rows with a NULL doc do not change), 20 deletes
is($pending, '363', 'changes are pending before the update');

$node->safe_psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.2', 'updated to 0.2');
is($node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status"),
	'363', 'nothing pending was lost by the update');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.upsert_progress"),
	'0', 'the view 0.2 adds exists');

$node->safe_psql('postgres', "SELECT chroma_resume('up_docs')");
assert_equal($node, 'up_docs', 'up_docs_t030', name => 'after the update');

# and the mirror keeps following the table
insert_rows($node, 'up_docs', 2001, 100, 8);
assert_equal($node, 'up_docs', 'up_docs_t030', name => 'new changes after the update');

assert_no_crash($node, $offset);
$node->safe_psql('postgres', "SELECT chroma_unmirror('up_docs', drop_collection => true)");
$node->stop;
done_testing();
