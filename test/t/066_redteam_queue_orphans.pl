# Red team: keys still buffered when their mirror is removed in the same transaction
# (a write through a partitioned parent, whose partition's statement trigger does not
# fire, then chroma_unmirror) are written to chroma_sync.queue at PRE_COMMIT, after
# chroma_unmirror deleted the mirror's queue rows: rows of a mirror that no longer
# exists stay in the queue for good. Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_orphans');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{
CREATE TABLE par (id int PRIMARY KEY, embedding real[]) PARTITION BY RANGE (id);
CREATE TABLE p1 PARTITION OF par FOR VALUES FROM (0) TO (1000);
SELECT chroma_delete_collection('cs_t066', true);
SELECT chroma_mirror('p1', collection => 'cs_t066');
BEGIN;
INSERT INTO par VALUES (1, '{1,2,3}');
SELECT chroma_unmirror('p1');
COMMIT;});
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.queue q
WHERE NOT EXISTS (SELECT 1 FROM chroma_sync.mirror m WHERE m.mirror_id = q.mirror_id)}),
	'0', 'no queue row of a mirror that no longer exists');
finish($node, $log0);
