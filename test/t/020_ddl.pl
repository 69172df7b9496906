# DDL on mirrored tables (issue 4, item 1): renaming mirrored columns and the table keeps
# the mirror working (columns are held by attnum); dropping or retyping a mirrored column
# pauses the mirror with a clear last_error; DROP TABLE removes the mirror and its queue;
# a partitioned table with an unlogged partition is refused; a mirror trigger that is not ENABLE ALWAYS is reported.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('ddl');
my $log0 = log_offset($node);

sub mirror_id
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT mirror_id FROM chroma_sync.mirror WHERE source = '$table'::regclass");
}

# ---- renames: every mirrored column and the table
make_table($node, 'docs', rows => 200, dim => 8);
fresh_collection($node, 'cs_t020_docs');
mirror($node, 'docs', 'cs_t020_docs');
assert_equal($node, 'docs', 'cs_t020_docs', name => 'before the renames');

$node->safe_psql('postgres', q{
ALTER TABLE docs RENAME COLUMN id TO key;
ALTER TABLE docs RENAME COLUMN embedding TO vec;
ALTER TABLE docs RENAME COLUMN doc TO body;
ALTER TABLE docs RENAME COLUMN meta TO attrs;
ALTER TABLE docs RENAME TO documents;
-- a column that is not mirrored comes and goes without effect
ALTER TABLE documents ADD COLUMN scratch int;
ALTER TABLE documents DROP COLUMN scratch;});
is(status_row($node, 'documents', 'state'), 'syncing',
	'after renaming the table and its mirrored columns the mirror still syncs');
is(status_row($node, 'documents', "coalesce(last_error, '')"), '', 'no error reported');

$node->safe_psql('postgres', q{
INSERT INTO documents SELECT g, ARRAY[g, 1, 2, 3, 4, 5, 6, 7]::real[], 'renamed ' || g,
	jsonb_build_object('n', g, 'renamed', true) FROM generate_series(1001, 1050) g;
UPDATE documents SET body = 'updated ' || key, attrs = attrs || '{"u": 1}' WHERE key <= 20;
UPDATE documents SET vec = ARRAY[0.5, 1, 2, 3, 4, 5, 6, -0.0]::real[] WHERE key BETWEEN 21 AND 30;
DELETE FROM documents WHERE key BETWEEN 31 AND 40;});
is($node->safe_psql('postgres', "SELECT chroma_flush('documents', interval '60 seconds')"),
	't', 'renamed: chroma_flush returns true');
is($node->safe_psql('postgres',
		"SELECT rows, missing, extra, different FROM chroma_verify('documents')"),
	'240|0|0|0', 'renamed: chroma_verify reports 240 rows, none missing, extra or different')
  or diagnostics($node);

# the byte comparison of the helper expects the original names
$node->safe_psql('postgres', q{
ALTER TABLE documents RENAME TO docs;
ALTER TABLE docs RENAME COLUMN key TO id;
ALTER TABLE docs RENAME COLUMN vec TO embedding;
ALTER TABLE docs RENAME COLUMN body TO doc;
ALTER TABLE docs RENAME COLUMN attrs TO meta;});
assert_equal($node, 'docs', 'cs_t020_docs', name => 'after the renames');

# ---- DROP COLUMN of a mirrored column pauses the mirror
make_table($node, 'dropcol', rows => 20, dim => 4);
$node->safe_psql('postgres', q{
ALTER TABLE dropcol ADD COLUMN colour text DEFAULT 'red';
ALTER TABLE dropcol ADD COLUMN unmirrored int;});
fresh_collection($node, 'cs_t020_dropcol');
$node->safe_psql('postgres', q{
SELECT chroma_mirror('dropcol', collection => 'cs_t020_dropcol', document_column => 'doc',
	metadata_columns => '{meta,colour}')});
is($node->safe_psql('postgres', "SELECT chroma_flush('dropcol', interval '60 seconds')"),
	't', 'dropcol: initial flush');
$node->safe_psql('postgres', 'ALTER TABLE dropcol DROP COLUMN unmirrored');
is(status_row($node, 'dropcol', 'state'), 'syncing',
	'dropping a column that is not mirrored does not pause the mirror');
$node->safe_psql('postgres', 'ALTER TABLE dropcol DROP COLUMN colour');
is(status_row($node, 'dropcol', 'state'), 'paused',
	'dropping a mirrored column pauses the mirror');
like(status_row($node, 'dropcol', 'last_error'),
	qr/mirrored column .*colour.* was dropped/,
	'last_error names the dropped column');
# the table stays writable; changes are queued, nothing breaks
$node->safe_psql('postgres', q{UPDATE dropcol SET doc = 'after drop' WHERE id <= 5});
ok(status_row($node, 'dropcol', 'pending') >= 5, 'changes after the drop are kept in the queue');

# ---- ALTER COLUMN TYPE of a mirrored column pauses the mirror
make_table($node, 'retype', rows => 20, dim => 4);
fresh_collection($node, 'cs_t020_retype');
mirror($node, 'retype', 'cs_t020_retype');
is($node->safe_psql('postgres', "SELECT chroma_flush('retype', interval '60 seconds')"),
	't', 'retype: initial flush');
$node->safe_psql('postgres',
	'ALTER TABLE retype ALTER COLUMN embedding TYPE double precision[]');
is(status_row($node, 'retype', 'state'), 'paused',
	'changing the type of the embedding column pauses the mirror');
like(status_row($node, 'retype', 'last_error'), qr/type of a mirrored column changed/,
	'last_error says a mirrored column changed type');
make_table($node, 'retype2', rows => 10, dim => 4);
fresh_collection($node, 'cs_t020_retype2');
mirror($node, 'retype2', 'cs_t020_retype2');
$node->safe_psql('postgres',
	'ALTER TABLE retype2 ALTER COLUMN doc TYPE varchar(200)');
is(status_row($node, 'retype2', 'state'), 'paused',
	'changing the type of the document column pauses the mirror');
like(status_row($node, 'retype2', 'last_error'), qr/type of a mirrored column changed/,
	'last_error says so');
$node->safe_psql('postgres', q{
INSERT INTO retype SELECT g, ARRAY[1, 2, 3, g]::float8[], 'x', '{}' FROM generate_series(100, 110) g});

# ---- DROP TABLE removes the mirror, its queue and its failures
make_table($node, 'gone', rows => 10, dim => 4);
fresh_collection($node, 'cs_t020_gone');
mirror($node, 'gone', 'cs_t020_gone');
is($node->safe_psql('postgres', "SELECT chroma_flush('gone', interval '60 seconds')"),
	't', 'gone: initial flush');
my $gone_id = mirror_id('gone');
$node->safe_psql('postgres', "SELECT chroma_pause('gone')");
$node->safe_psql('postgres', q{
INSERT INTO gone SELECT g, ARRAY[1, 2, 3, g]::real[], 'q', '{}' FROM generate_series(100, 149) g});
is($node->safe_psql('postgres',
		"SELECT count(*) > 0 FROM chroma_sync.queue WHERE mirror_id = $gone_id"),
	't', 'the paused mirror has queue entries');
$node->safe_psql('postgres', 'DROP TABLE gone');
is($node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM chroma_sync.mirror WHERE mirror_id = $gone_id) || '|' ||
	(SELECT count(*) FROM chroma_sync.queue WHERE mirror_id = $gone_id) || '|' ||
	(SELECT count(*) FROM chroma_sync.failed WHERE mirror_id = $gone_id) || '|' ||
	(SELECT count(*) FROM chroma_sync.status WHERE collection = 'cs_t020_gone')}),
	'0|0|0|0', 'DROP TABLE removed the mirror row, its queue entries, failures and status');

# DROP TABLE inside a rolled-back transaction leaves everything in place
make_table($node, 'kept', rows => 5, dim => 4);
fresh_collection($node, 'cs_t020_kept');
mirror($node, 'kept', 'cs_t020_kept');
$node->safe_psql('postgres', 'BEGIN; DROP TABLE kept; ROLLBACK;');
is(status_row($node, 'kept', 'state') ne '', 1, 'a rolled-back DROP TABLE keeps the mirror');
$node->safe_psql('postgres', q{UPDATE kept SET doc = 'still here'});
assert_equal($node, 'kept', 'cs_t020_kept', name => 'after a rolled-back DROP TABLE');

# ---- a partitioned table with an unlogged partition is refused with a clear error;
# nothing reaches Chroma (partitioned tables themselves: TAP 201)
fresh_collection($node, 'cs_t020_parted');
$node->safe_psql('postgres', q{
CREATE TABLE parted (id int PRIMARY KEY, embedding real[], doc text, meta jsonb)
	PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (1000);
CREATE UNLOGGED TABLE parted_2 PARTITION OF parted FOR VALUES FROM (1000) TO (2000);
INSERT INTO parted SELECT g, ARRAY[1, 2, 3, g]::real[], 'p', '{}' FROM generate_series(1, 10) g;});
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT chroma_mirror('parted', collection => 'cs_t020_parted')");
isnt($ret, 0, 'chroma_mirror on a partitioned table with an unlogged partition fails');
like($err, qr/cannot mirror partitioned table parted: partition parted_2 is not a logged table/,
	'with a clear error') or diag($err);
like($err, qr/HINT:.*SET LOGGED/, 'and a hint to make it logged');
$node->safe_psql('postgres', 'DROP TABLE parted_2');
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM chroma_sync.mirror WHERE source = 'parted'::regclass) + (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'parted'::regclass)}),
	'0', 'no mirror row and no trigger left on the partitioned table');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t020_parted'"),
	'0', 'no collection was created');
# a partition itself is an ordinary table and can be mirrored
fresh_collection($node, 'cs_t020_parted_1');
mirror($node, 'parted_1', 'cs_t020_parted_1');
$node->safe_psql('postgres', q{INSERT INTO parted VALUES (500, '{5,5,5,5}', 'via parent', '{"p": 1}')});
assert_equal($node, 'parted_1', 'cs_t020_parted_1', name => 'a mirrored partition (rows inserted through the parent)');

# ---- a mirror trigger that is not ENABLE ALWAYS shows in status
make_table($node, 'trig', rows => 30, dim => 4);
fresh_collection($node, 'cs_t020_trig');
mirror($node, 'trig', 'cs_t020_trig');
is($node->safe_psql('postgres', "SELECT chroma_flush('trig', interval '60 seconds')"),
	't', 'trig: initial flush');
my $tid = mirror_id('trig');
$node->safe_psql('postgres', "ALTER TABLE trig DISABLE TRIGGER chroma_sync_$tid");
like(status_row($node, 'trig', 'last_error'),
	qr/trigger chroma_sync_$tid\b.*not ENABLE ALWAYS/,
	"DISABLE TRIGGER chroma_sync_$tid is reported in last_error");
# rows written meanwhile are missed; ENABLE ALWAYS and chroma_resync repair that
$node->safe_psql('postgres', q{
UPDATE trig SET doc = 'missed while disabled' WHERE id <= 10;
INSERT INTO trig VALUES (1000, '{1,1,1,1}', 'missed', '{}');});
$node->safe_psql('postgres', "ALTER TABLE trig ENABLE TRIGGER chroma_sync_$tid");
like(status_row($node, 'trig', 'last_error'), qr/chroma_sync_$tid\b.*not ENABLE ALWAYS/,
	'ENABLE TRIGGER (origin only, not ALWAYS) is reported too');
$node->safe_psql('postgres', "ALTER TABLE trig ENABLE ALWAYS TRIGGER chroma_sync_$tid");
$node->safe_psql('postgres', "SELECT chroma_resume('trig')");
$node->safe_psql('postgres', "SELECT chroma_resync('trig')");
ok(poll_query($node, "SELECT state FROM chroma_sync.status WHERE source = 'trig'::regclass",
		'syncing', 60),
	'after ENABLE ALWAYS, chroma_resume and chroma_resync the mirror syncs again');
assert_equal($node, 'trig', 'cs_t020_trig', name => 'after re-enabling the trigger and resync');

# ---- DDL the event triggers do not see pauses the mirror with a reason
for my $case (
	[ 'droptrig', sub { "DROP TRIGGER chroma_sync_$_[0] ON droptrig" }, qr/trigger chroma_sync_\d+ was dropped/ ],
	[ 'droptrunc', sub { "DROP TRIGGER chroma_sync_$_[0]_truncate ON droptrunc" }, qr/chroma_sync_\d+_truncate was dropped/ ],
	[ 'unlogged', sub { 'ALTER TABLE unlogged SET UNLOGGED' }, qr/no longer a logged table/ ])
{
	my ($t, $ddl, $reason) = @$case;
	make_table($node, $t, rows => 5, dim => 4);
	fresh_collection($node, "cs_t020_$t");
	mirror($node, $t, "cs_t020_$t");
	is($node->safe_psql('postgres', "SELECT chroma_flush('$t', interval '60 seconds')"), 't', "$t: flushed");
	my $id = mirror_id($t);
	$node->safe_psql('postgres', $ddl->($id));
	# the worker looks at its next pass; a change wakes it
	$node->safe_psql('postgres', "UPDATE $t SET doc = 'after the DDL' WHERE id = 1");
	ok(poll_query($node, "SELECT state FROM chroma_sync.status WHERE source = '$t'::regclass", 'paused', 30),
		"$t: " . $ddl->($id) . ' pauses the mirror');
	like(status_row($node, $t, 'last_error'), $reason, "$t: status says why");
}
$node->safe_psql('postgres', 'ALTER TABLE unlogged SET LOGGED');
$node->safe_psql('postgres', "SELECT chroma_resume('unlogged')");
$node->safe_psql('postgres', "SELECT chroma_resync('unlogged')");
ok(poll_query($node, "SELECT state FROM chroma_sync.status WHERE source = 'unlogged'::regclass", 'syncing', 60),
	'unlogged: SET LOGGED, resume and resync: syncing again');
assert_equal($node, 'unlogged', 'cs_t020_unlogged', name => 'unlogged after SET LOGGED');

# ---- an inheritance parent's mirror holds the parent's own rows, not its children's
make_table($node, 'inh', rows => 10, dim => 4);
$node->safe_psql('postgres', 'CREATE TABLE inh_child () INHERITS (inh)');
$node->safe_psql('postgres', q{INSERT INTO inh_child VALUES (1001, '{1,2,3,4}', 'child', '{}'), (1002, '{1,2,3,5}', 'child', '{}')});
fresh_collection($node, 'cs_t020_inh');
mirror($node, 'inh', 'cs_t020_inh');
is($node->safe_psql('postgres', "SELECT chroma_flush('inh', interval '60 seconds')"), 't', 'inh: backfilled');
$node->safe_psql('postgres', "SELECT chroma_resync('inh')");
is($node->safe_psql('postgres', "SELECT chroma_flush('inh', interval '60 seconds')"), 't', 'inh: resynced');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('cs_t020_inh') WHERE id::int > 1000"), '0',
	"no child row was sent by the backfill or chroma_resync");
$node->safe_psql('postgres', q{UPDATE inh SET doc = 'through the parent' WHERE id IN (1, 1001)});
is($node->safe_psql('postgres', "SELECT chroma_flush('inh', interval '60 seconds')"), 't', 'inh: flushed');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('inh')"), '10|0|0|0',
	'inh: chroma_verify compares the parent itself: 10 rows, none missing, extra or different');
is($node->safe_psql('postgres', "SELECT document FROM chroma_get('cs_t020_inh', ARRAY['1'])"), 'through the parent',
	'inh: the parent row changed through the parent is in Chroma');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_get('cs_t020_inh')"), '10',
	'the collection holds the 10 rows of the parent itself');

# ---- the main mirror is still fine after all of this
$node->safe_psql('postgres', q{UPDATE docs SET meta = meta - 'tag' WHERE id % 3 = 0});
assert_equal($node, 'docs', 'cs_t020_docs', name => 'at the end');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
