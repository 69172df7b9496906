# Restored copies (issue 4, item 5): pg_dump -Fc of a database with a mirror, pg_restore
# into another database of the same cluster and into another cluster. The restored mirror
# starts paused and status.last_error says why; the original keeps syncing; nothing the copy
# does reaches the original's collection — chroma_resume alone does not make the copy
# write it (it is paused again), and chroma_mirror of the original's collection is refused
# (ownership recorded in the collection's metadata). The copy continues after pointing its
# mirror at another collection; chroma_adopt takes the collection over (the original then
# pauses and says so).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $coll = 'cs_t026_docs';
my $node = new_node('restore_primary');
my $log0 = log_offset($node);
my $sysid = $node->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');

make_table($node, 'docs', rows => 200, dim => 8);
fresh_collection($node, $coll);
fresh_collection($node, 'cs_t026_copy');
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'original before the dump');
my $relid = $node->safe_psql('postgres', "SELECT 'docs'::regclass::oid");
is($node->safe_psql('postgres',
		"SELECT metadata ->> 'chroma_sync_owner' FROM chroma_list_collections() WHERE name = '$coll'"),
	"$sysid/5/$relid", "the collection's metadata names its owner (system id/database/table)");

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t026.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc of postgres');

my $reason = qr/created in another database or cluster/;

# Restores the dump into a new database $db of $on; returns whether pg_restore succeeded.
sub restore_into
{
	my ($on, $db) = @_;
	$on->safe_psql('postgres', "CREATE DATABASE $db");
	return $on->command_ok([ 'pg_restore', '--exit-on-error', '-d', $db, $dump ],
		"pg_restore into $db (" . $on->name . ')');
}

sub copy_status
{
	my ($on, $db) = @_;
	return $on->safe_psql($db,
		"SELECT state || '|' || coalesce(last_error, '') FROM chroma_sync.status WHERE source = 'docs'::regclass");
}

# The ids of the collection among @ids (to show that the copy wrote nothing).
sub ids_in_chroma
{
	my (@ids) = @_;
	my $list = join(',', map { "'$_'" } @ids);
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM chroma_get('$coll', ids => ARRAY[$list])");
}

# ---- a copy in another database of the same cluster
restore_into($node, 'copy1');
is($node->safe_psql('copy1', 'SELECT count(*) FROM docs'), '200', 'copy1 has the 200 rows');
my $st;
ok(wait_for('the restored mirror is paused with its reason', 60,
		sub { $st = copy_status($node, 'copy1'); $st =~ /^paused\|.*$reason/ }),
	'the mirror restored into copy1 is paused, last_error says it comes from another database')
  or diag("copy1 status: $st");

# the copy writes: nothing reaches the original's collection
$node->safe_psql('copy1', q{
INSERT INTO docs VALUES (9001, '{1,1,1,1,1,1,1,1}', 'copy1 only', '{"copy": 1}'),
	(9002, '{2,2,2,2,2,2,2,2}', 'copy1 only', '{"copy": 1}');
UPDATE docs SET doc = 'changed in copy1' WHERE id <= 10;
DELETE FROM docs WHERE id BETWEEN 11 AND 15;});
sleep 3;
like(copy_status($node, 'copy1'), qr/^paused\|.*$reason/, 'after writes in copy1 it is still paused');
ok($node->safe_psql('copy1', "SELECT pending FROM chroma_sync.status") >= 17,
	'the changes of copy1 wait in its queue');

# the original keeps syncing
$node->safe_psql('postgres', q{
UPDATE docs SET doc = 'original after the dump' WHERE id BETWEEN 20 AND 40;
INSERT INTO docs VALUES (8001, '{8,0,0,0,0,0,0,1}', 'original only', '{"orig": true}');});
assert_equal($node, 'docs', $coll, name => 'original after the restore into copy1');
is(ids_in_chroma(9001, 9002), '0', "copy1's new rows are not in the collection");

# chroma_resume alone: the copy does not write the original's collection (paused again)
$node->safe_psql('copy1', "SELECT chroma_resume('docs')");
$node->safe_psql('copy1', q{UPDATE docs SET doc = 'after resume in copy1' WHERE id <= 5});
ok(wait_for('copy1 is paused again after chroma_resume', 60,
		sub { $st = copy_status($node, 'copy1'); $st =~ /^paused\|.*$reason/ }),
	'chroma_resume on the copy: the worker pauses it again with the same reason')
  or diag("copy1 status: $st");
sleep 2;
assert_equal($node, 'docs', $coll, name => 'original after chroma_resume in copy1');
is(ids_in_chroma(9001, 9002), '0', "still none of copy1's rows in the collection");

# another table of the copy cannot take the original's collection either
$node->safe_psql('copy1',
	'CREATE TABLE other (id int PRIMARY KEY, embedding real[]); INSERT INTO other VALUES (7001, \'{7,7,7,7,7,7,7,7}\')');
my ($ret, $out, $err) = $node->psql('copy1',
	"SELECT chroma_mirror('other', collection => '$coll')");
isnt($ret, 0, "chroma_mirror of the original's collection from copy1 is refused");
like($err, qr/already mirrored by another table or database/, 'with a clear error')
  or diag($err);
like($err, qr/adopt => true/, 'and a hint about adopt');
is(ids_in_chroma(7001), '0', 'nothing of the refused mirror reached the collection');

# ---- a copy in another cluster
my $node2 = new_node('restore_other');
my $log2 = log_offset($node2);
restore_into($node2, 'restored');
ok(wait_for('the mirror restored into another cluster is paused', 60,
		sub { $st = copy_status($node2, 'restored'); $st =~ /^paused\|.*$reason/ }),
	'the mirror restored into another cluster is paused, last_error says why')
  or diag("other cluster status: $st");
$node2->safe_psql('restored', q{
INSERT INTO docs VALUES (9101, '{3,3,3,3,3,3,3,3}', 'other cluster', '{}');
SELECT chroma_resume('docs');
UPDATE docs SET doc = 'other cluster' WHERE id <= 3;});
ok(wait_for('paused again after chroma_resume', 60,
		sub { $st = copy_status($node2, 'restored'); $st =~ /^paused\|.*$reason/ }),
	'chroma_resume in the other cluster: paused again')
  or diag("other cluster status: $st");
sleep 2;
is(ids_in_chroma(9101), '0', "the other cluster's rows are not in the collection");
assert_equal($node, 'docs', $coll, name => 'original after the restore into another cluster');
assert_no_crash($node2, $log2, 'no crash in the other cluster');
$node2->stop;

# ---- the copy continues on a collection of its own
$node->safe_psql('copy1', "SELECT chroma_unmirror('docs')");
$node->safe_psql('copy1', q{
SELECT chroma_mirror('docs', collection => 'cs_t026_copy', document_column => 'doc',
	metadata_columns => '{meta}')});
$node->safe_psql('copy1', q{UPDATE docs SET doc = 'copy1 on its own collection' WHERE id BETWEEN 50 AND 60});
is($node->safe_psql('copy1', "SELECT chroma_flush('docs', interval '60 seconds')"), 't',
	'copy1 on its own collection: chroma_flush returns true');
my $rows1 = $node->safe_psql('copy1', 'SELECT count(*) FROM docs WHERE embedding IS NOT NULL');
is($node->safe_psql('copy1', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	"$rows1|0|0|0", "copy1 on its own collection: chroma_verify reports $rows1 rows, 0/0/0")
  or diag("copy1 status:\n" . $node->safe_psql('copy1', 'SELECT * FROM chroma_sync.status')
	  . "\nfailed:\n" . $node->safe_psql('copy1', 'SELECT id, error FROM chroma_sync.failed LIMIT 5'));
is(ids_in_chroma(9001, 9002), '0', "the original's collection still lacks copy1's rows");

# ---- chroma_adopt: a second copy takes the original's collection over
restore_into($node, 'copy2');
# status says so at once, whether or not a worker has looked at the copy yet
like(copy_status($node, 'copy2'), qr/^paused\|.*$reason/,
	'right after pg_restore, status shows copy2 paused with the reason');
like(copy_status($node, 'copy2'), qr/chroma_adopt/, 'and how to go on (chroma_adopt)');
$node->safe_psql('copy2', q{UPDATE docs SET doc = 'copy2 adopted' WHERE id BETWEEN 100 AND 110});
$node->safe_psql('copy2', "SELECT chroma_adopt('docs')");
my $copy2_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'copy2'");
my $relid2 = $node->safe_psql('copy2', "SELECT 'docs'::regclass::oid");
is($node->safe_psql('postgres',
		"SELECT metadata ->> 'chroma_sync_owner' FROM chroma_list_collections() WHERE name = '$coll'"),
	"$sysid/$copy2_oid/$relid2", 'the collection names copy2 as its owner');
# the original's worker checks the owner now and then (at the latest after a minute);
# a new worker checks at its first step
my $wpid = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND datname = 'postgres'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid)") if $wpid ne '';
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'original after adoption' WHERE id = 1});
ok(wait_for('the original pauses', 90,
		sub { status_row($node, 'docs', 'state') eq 'paused' }),
	'the original mirror pauses once its collection was adopted') or diagnostics($node);
like(status_row($node, 'docs', 'last_error'), qr/adopted by another mirror/,
	"the original's last_error says its collection was adopted");

is($node->safe_psql('copy2', "SELECT chroma_flush('docs', interval '120 seconds')", timeout => 150),
	't', 'copy2 after chroma_adopt: chroma_flush returns true');
my $rows2 = $node->safe_psql('copy2', 'SELECT count(*) FROM docs WHERE embedding IS NOT NULL');
is($node->safe_psql('copy2', "SELECT rows, missing, extra, different FROM chroma_verify('docs')"),
	"$rows2|0|0|0",
	"copy2 after chroma_adopt: chroma_verify reports $rows2 rows, 0/0/0 (the original's later rows were removed)");
is(ids_in_chroma(8001), '0', "the original's row written after the dump is gone from the collection");
is($node->safe_psql('copy2', "SELECT state FROM chroma_sync.status"), 'syncing',
	'copy2 syncs as the owner of the collection');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
