# Mirrored columns are kept by name and type (issue 15 item 3, issue 14 item 3).
#
# Restore: a table with a dropped column before the mirrored ones is dumped and restored
# into another cluster, where pg_dump's copy has no dropped column and every attnum moved
# by one. The restored mirror starts paused; chroma_adopt re-resolves the columns by name,
# and the records in Chroma carry the right embedding, document and metadata. A restore
# whose columns no longer match (a renamed document column, a retyped metadata column) is
# refused by chroma_adopt with an error naming the column, and nothing reaches Chroma.
#
# DDL drift in the mirror's own database: a char(4) key altered to char(6), a scalar
# metadata column renamed, a column the filter names dropped, the embedding column retyped:
# each pauses the mirror with a status naming the column, and nothing drifts in Chroma (no
# padded id, no renamed key). A column the filter names renamed (and another renamed to its
# old name) is followed: the filter is bound by attnum, no row is judged by another column. chroma_resync records the columns as they are now: after it
# and chroma_resume, the mirror converges again.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

# stdout of $sql, or its error (a check that fails instead of ending the test)
sub query
{
	my ($on, $db, $sql) = @_;
	my ($ret, $out, $err) = $on->psql($db, $sql);
	return $ret == 0 ? $out : "error: $err";
}

# assert_equal, counted as one failure instead of ending the test when a query fails
sub equal
{
	my (@args) = @_;
	my $ok = eval { assert_equal(@args) };
	fail("$args[1]: assert_equal ended with an error: $@") if $@;
	return $ok;
}

my $node = new_node('columns_primary');
my $log0 = log_offset($node);

# ---- restore with shifted attnums
my $coll = 'cs_t048_docs';
fresh_collection($node, $coll);
$node->safe_psql('postgres', q{
CREATE TABLE rdocs (gone text, id int PRIMARY KEY, embedding real[], doc text, meta jsonb);
ALTER TABLE rdocs DROP COLUMN gone;});
insert_rows($node, 'rdocs', 1, 120, 8);
mirror($node, 'rdocs', $coll);
equal($node, 'rdocs', $coll, name => 'original (a dropped column before the mirrored ones)');
is(query($node, 'postgres', q{
SELECT column_names::text || ' ' || column_attnums::text || ' ' || column_type_names::text
FROM chroma_sync.mirror WHERE source = 'rdocs'::regclass}),
	'{id,embedding,doc,meta} {2,3,4,5} {integer,real[],pg_catalog.text,pg_catalog.jsonb}',
	'the mirror records its columns by name, attnum and type');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t048.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
# the original leaves the collection to the copy
$node->safe_psql('postgres', "SELECT chroma_unmirror('rdocs')");

my $node2 = new_node('columns_restored');
my $log2 = log_offset($node2);
$node2->safe_psql('postgres', 'DROP EXTENSION chroma_sync');
$node2->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'postgres', $dump ],
	'pg_restore into another cluster');
is($node2->safe_psql('postgres', q{
SELECT string_agg(attname || '=' || attnum, ',' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'rdocs'::regclass AND attnum > 0 AND NOT attisdropped}),
	'id=1,embedding=2,doc=3,meta=4', 'the restored table has no dropped column: attnums moved');
my $st;
ok(wait_for('the restored mirror is paused', 60, sub {
		$st = status_row($node2, 'rdocs', "state || '|' || coalesce(last_error, '')");
		$st =~ /^paused\|.*another database or cluster/ }),
	'the restored mirror is paused') or diag("status: $st");

# changes made in the copy before the adoption are sent with it
$node2->safe_psql('postgres', q{
UPDATE rdocs SET doc = 'changed in the copy ' || id, meta = meta || '{"copy": true}' WHERE id <= 10;
DELETE FROM rdocs WHERE id BETWEEN 11 AND 15;
INSERT INTO rdocs VALUES (500, '{5,0,0,0,0,0,0,5}', 'new in the copy', '{"n": 500}');});
my ($ret, $out, $err) = $node2->psql('postgres', "SELECT chroma_adopt('rdocs')");
is($ret, 0, 'chroma_adopt of the restored mirror succeeds') or diag($err);
is(query($node2, 'postgres', q{
SELECT id_columns::text || embedding_column || '|' || document_column || '|' || metadata_columns::text
	|| ' ' || column_attnums::text FROM chroma_sync.mirror}),
	'{1}2|3|{4} {1,2,3,4}', 'chroma_adopt re-resolved the columns by name (attnums of the copy)');
equal($node2, 'rdocs', $coll, name => 'after chroma_adopt in the other cluster');
$node2->safe_psql('postgres', q{UPDATE rdocs SET doc = 'after adoption', meta = '{"after": 1}' WHERE id BETWEEN 20 AND 25});
equal($node2, 'rdocs', $coll, name => 'later changes in the other cluster');

# ---- a restore whose columns no longer match is refused
my $before = $node2->safe_psql('postgres', "SELECT chroma_count('$coll')");
for my $case (
	[ 'copy_renamed', 'ALTER TABLE rdocs RENAME COLUMN doc TO body', '42703', qr/"doc"/ ],
	[ 'copy_retyped', 'ALTER TABLE rdocs ALTER COLUMN meta TYPE json', '42804', qr/"meta".*jsonb.*json/ ])
{
	my ($db, $ddl, $code, $detail) = @$case;
	$node2->safe_psql('postgres', "CREATE DATABASE $db");
	$node2->command_ok([ 'pg_restore', '--exit-on-error', '-d', $db, $dump ], "pg_restore into $db");
	$node2->safe_psql($db, "$ddl; UPDATE rdocs SET embedding = '{9,9,9,9,9,9,9,9}' WHERE id <= 30");
	($ret, $out, $err) = $node2->psql($db, "\\set VERBOSITY verbose\nSELECT chroma_adopt('rdocs')");
	isnt($ret, 0, "$db: chroma_adopt is refused");
	like($err, qr/ERROR:\s+$code:/, "$db: with SQLSTATE $code") or diag($err);
	like($err, qr/DETAIL:.*$detail/s, "$db: the detail names the column") or diag($err);
	my $s2;
	ok(wait_for("$db: status names the column", 60, sub {
			$s2 = $node2->safe_psql($db, "SELECT state || '|' || coalesce(last_error, '') FROM chroma_sync.status");
			$s2 =~ /^paused\|.*chroma_adopt.*$detail/s }),
		"$db: the mirror stays paused, its status names the column") or diag("status: $s2");
}
sleep 3;
is($node2->safe_psql('postgres', "SELECT chroma_count('$coll')"), $before,
	'nothing of the refused copies reached Chroma');
equal($node2, 'rdocs', $coll, name => 'the adopted mirror after the refused ones');
assert_no_crash($node2, $log2, 'no crash in the other cluster');
$node2->stop;

# ---- DDL drift in the mirror's own database
sub paused_with
{
	my ($table, $re, $name) = @_;
	my $s;
	my $ok = wait_for($name, 60, sub {
			$s = status_row($node, $table, "state || '|' || coalesce(last_error, '')");
			$s =~ /^paused\|.*$re/s });
	ok($ok, $name) or diag("status: $s");
	return $ok;
}

sub flushed_and_verified
{
	my ($table, $name) = @_;
	is($node->safe_psql('postgres', "SELECT chroma_flush('$table', interval '60 seconds')"),
		't', "$name: chroma_flush returns true");
	my $rows = $node->safe_psql('postgres', "SELECT count(*) FROM $table WHERE embedding IS NOT NULL");
	return $rows;
}

# a char(4) key altered to char(6): every id would be padded to 6 characters
fresh_collection($node, 'cs_t048_keys');
$node->safe_psql('postgres', q{
CREATE TABLE keys4 (code char(4) PRIMARY KEY, embedding real[], doc text);
INSERT INTO keys4 SELECT 'k' || lpad(g::text, 3, '0'), ARRAY[g, 1, 2]::real[], 'doc ' || g
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('keys4', collection => 'cs_t048_keys', document_column => 'doc');});
flushed_and_verified('keys4', 'char(4) key');
$node->safe_psql('postgres', q{
ALTER TABLE keys4 ALTER COLUMN code TYPE char(6);
UPDATE keys4 SET doc = 'after the typmod change' WHERE code <= 'k010';
INSERT INTO keys4 VALUES ('k900', '{9,9,9}', 'new');});
paused_with('keys4', qr/"code".*character\(4\).*character\(6\)/,
	'char(4) -> char(6) key: paused, the status names the column and both types');
like(status_row($node, 'keys4', 'last_error'), qr/chroma_resync/, 'and says how to go on (chroma_resync)');
sleep 2;
is($node->safe_psql('postgres', q{
SELECT count(*) || '|' || count(*) FILTER (WHERE id LIKE '% ') FROM chroma_get('cs_t048_keys')}),
	'40|0', 'no padded duplicate id reached Chroma');
$node->safe_psql('postgres', "SELECT chroma_resync('keys4'); SELECT chroma_resume('keys4')");
flushed_and_verified('keys4', 'char(6) key after chroma_resync');
is($node->safe_psql('postgres', q{
SELECT count(*) || '|' || count(*) FILTER (WHERE length(id) = 6) FROM chroma_get('cs_t048_keys')}),
	'41|41', 'after chroma_resync and chroma_resume: the padded ids replaced the old ones, no duplicate');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('keys4')"),
	'41|0|0|0', 'chroma_verify agrees');

# a scalar metadata column renamed: its key would change for changed rows only
fresh_collection($node, 'cs_t048_meta');
$node->safe_psql('postgres', q{
CREATE TABLE metas (id int PRIMARY KEY, embedding real[], lang text, score int);
INSERT INTO metas SELECT g, ARRAY[g, 2, 3]::real[], 'en', g FROM generate_series(1, 30) g;
SELECT chroma_mirror('metas', collection => 'cs_t048_meta', metadata_columns => '{lang,score}');});
flushed_and_verified('metas', 'scalar metadata');
$node->safe_psql('postgres', q{
ALTER TABLE metas RENAME COLUMN lang TO language;
UPDATE metas SET score = -score WHERE id <= 5;});
paused_with('metas', qr/"lang".*renamed.*"language"/,
	'scalar metadata column renamed: paused, the status names the column');
sleep 2;
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE metadata ? 'language') || '|' || count(*) FILTER (WHERE metadata ? 'lang')
FROM chroma_get('cs_t048_meta')}), '0|30', 'no record got the new key, none lost the old one');
$node->safe_psql('postgres', "SELECT chroma_resync('metas'); SELECT chroma_resume('metas')");
flushed_and_verified('metas', 'renamed metadata after chroma_resync');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE metadata ? 'language' AND NOT metadata ? 'lang') || '|'
	|| count(*) FILTER (WHERE (metadata ->> 'score')::int = -(id::int))
FROM chroma_get('cs_t048_meta')}), '30|5', 'after chroma_resync: every record has the new key only');

# a column the filter names: renamed (and another renamed to its old name), which a bound
# filter follows, then dropped, which pauses
fresh_collection($node, 'cs_t048_filter');
$node->safe_psql('postgres', q{
CREATE TABLE filt (id int PRIMARY KEY, embedding real[], published boolean, draft boolean, extra int);
INSERT INTO filt SELECT g, ARRAY[g, 3, 4]::real[], g <= 10, g > 10, g FROM generate_series(1, 40) g;
SELECT chroma_mirror('filt', collection => 'cs_t048_filter', filter => 'published AND extra > 0');});
flushed_and_verified('filt', 'filter');
is($node->safe_psql('postgres', "SELECT chroma_count('cs_t048_filter')"), '10', '10 rows pass the filter');
$node->safe_psql('postgres', q{
BEGIN;
ALTER TABLE filt RENAME COLUMN published TO visible;
ALTER TABLE filt RENAME COLUMN draft TO published;
COMMIT;
UPDATE filt SET embedding[1] = embedding[1] + 0.5 WHERE id BETWEEN 5 AND 15;});
flushed_and_verified('filt', 'filter columns swapped by renames');
is($node->safe_psql('postgres', q{
SELECT count(*) || '|' || count(*) FILTER (WHERE id::int > 10) FROM chroma_get('cs_t048_filter')}),
	'10|0', 'swapped names: no row was judged by the other column (the filter is bound by attnum)');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('filt')"),
	'10|0|0|0', 'swapped names: the mirror keeps following the table');
$node->safe_psql('postgres', q{
ALTER TABLE filt DROP COLUMN extra;
UPDATE filt SET embedding[2] = 7 WHERE id <= 20;});
paused_with('filt', qr/"extra".*filter/, 'a column the filter names dropped: paused, the status names it');

# the embedding column retyped
fresh_collection($node, 'cs_t048_emb');
$node->safe_psql('postgres', q{
CREATE TABLE embs (id int PRIMARY KEY, embedding real[]);
INSERT INTO embs SELECT g, ARRAY[g, 0.1, 0.2]::real[] FROM generate_series(1, 20) g;
SELECT chroma_mirror('embs', collection => 'cs_t048_emb');});
flushed_and_verified('embs', 'embedding');
$node->safe_psql('postgres', q{
ALTER TABLE embs ALTER COLUMN embedding TYPE numeric(6,1)[];
UPDATE embs SET embedding[2] = 0.3 WHERE id <= 5;});
paused_with('embs', qr/"embedding".*real\[\].*numeric\(6,1\)\[\]/,
	'embedding column retyped: paused, the status names the column and both types');
sleep 2;
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE embedding[2] = 0.1::real) FROM chroma_get('cs_t048_emb')}),
	'20', 'no embedding rounded by the new type reached Chroma');

# a rename that changes nothing sent (key, embedding, document, jsonb metadata) is followed
$node->safe_psql('postgres', q{
ALTER TABLE keys4 RENAME COLUMN code TO key_code;
ALTER TABLE keys4 RENAME COLUMN doc TO body;
UPDATE keys4 SET body = 'renamed' WHERE key_code <= 'k005';});
flushed_and_verified('keys4', 'key and document renamed');
is(query($node, 'postgres', q{
SELECT state || ' ' || column_names::text FROM chroma_sync.status s JOIN chroma_sync.mirror m
	ON m.source = s.source WHERE s.source = 'keys4'::regclass}),
	'syncing {key_code,embedding,body}', 'renamed key and document: followed, still syncing');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('keys4')"),
	'41|0|0|0', 'and in step');

assert_no_crash($node, $log0);
$node->stop;
done_testing();
