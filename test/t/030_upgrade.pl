# ALTER EXTENSION chroma_sync UPDATE from 0.1 (to 0.2, 0.3, 0.4, then 0.5) keeps mirrors
# syncing and loses nothing that was pending; 0.3's chroma_mirror keeps the EXECUTE grants
# of the one it replaces (also to a role whose name needs quoting) and mirrors composite
# keys; 0.4's queue has two indexes on (mirror_id, ...), keys indexed in byte order; 0.5's
# chroma_upsert, chroma_upsert_query and chroma_get keep the grants of the ones they replace
# (also to that role); filters 0.4 stored as text are named by the update and checked again
# when used; 0.5 records the columns of existing mirrors by name, attnum and type.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('upgrade', extension => 0);
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

$node->safe_psql('postgres', "ALTER EXTENSION chroma_sync UPDATE TO '0.2'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.2', 'updated to 0.2');
is($node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status"),
	'363', 'nothing pending was lost by the update to 0.2');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.upsert_progress"),
	'0', 'the view 0.2 adds exists');

# a role allowed to create mirrors before 0.3 still is after it; also one whose name needs
# quoting (Mixed Case"Role)
$node->safe_psql('postgres', q{
CREATE ROLE up_mirrorer;
GRANT EXECUTE ON FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text)
TO up_mirrorer WITH GRANT OPTION;
CREATE ROLE "Mixed Case""Role";
GRANT EXECUTE ON FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text)
TO "Mixed Case""Role"});
$node->safe_psql('postgres', "ALTER EXTENSION chroma_sync UPDATE TO '0.3'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.3', 'updated to 0.3');
is($node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status"),
	'363', 'nothing pending was lost by the update to 0.3');
my $queue_shape = q{
SELECT (SELECT string_agg(indexrelid::regclass::text, ',' ORDER BY indexrelid::regclass::text)
		FROM pg_index WHERE indrelid = 'chroma_sync.queue'::regclass),
	(SELECT collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
		WHERE a.attrelid = 'chroma_sync.queue_mirror_key'::regclass AND a.attnum = 2)};
is($node->safe_psql('postgres', $queue_shape),
	'chroma_sync.queue_mirror_barrier,chroma_sync.queue_mirror_key,chroma_sync.queue_mirror_qid,chroma_sync.queue_pkey|default',
	'the queue of 0.3: a primary key on qid, keys indexed in the database collation');

$node->safe_psql('postgres', "ALTER EXTENSION chroma_sync UPDATE TO '0.4'");
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.4', 'updated to 0.4');
is($node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status"),
	'363', 'nothing pending was lost by the update to 0.4');
is($node->safe_psql('postgres', $queue_shape),
	'chroma_sync.queue_mirror_barrier,chroma_sync.queue_mirror_key,chroma_sync.queue_mirror_qid|C',
	'the queue of 0.4: no index on qid alone, keys indexed in byte order');

# filters as 0.4 stored them (the text as written, evaluated with the worker's
# search_path): one over pg_catalog only, one naming a function of public unqualified
$node->safe_psql('postgres', q{
CREATE FUNCTION public.up_keep(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > 0';
CREATE TABLE up_f1 (id int PRIMARY KEY, embedding real[], flag boolean);
CREATE TABLE up_f2 (id int PRIMARY KEY, embedding real[]);
INSERT INTO up_f1 SELECT g, ARRAY[g, 1]::real[], g % 2 = 0 FROM generate_series(1, 6) g;
INSERT INTO up_f2 SELECT g, ARRAY[g, 2]::real[] FROM generate_series(1, 6) g});
fresh_collection($node, $_) for qw(up_f1_t030 up_f2_t030);
$node->safe_psql('postgres', q{
SELECT chroma_mirror('up_f1', 'up_f1_t030', filter => 'flag');
SELECT chroma_mirror('up_f2', 'up_f2_t030', filter => 'up_keep(id)');
UPDATE chroma_sync.mirror SET filter = 'flag' WHERE collection = 'up_f1_t030';
UPDATE chroma_sync.mirror SET filter = 'up_keep(id)' WHERE collection = 'up_f2_t030'});

# 0.5 re-creates chroma_upsert, chroma_upsert_query, chroma_get and chroma_query with new
# last arguments
$node->safe_psql('postgres', q{
GRANT EXECUTE ON FUNCTION chroma_upsert_query(text, text) TO up_mirrorer WITH GRANT OPTION;
GRANT EXECUTE ON FUNCTION chroma_get(text, text[], jsonb, int, int) TO up_mirrorer;
GRANT EXECUTE ON FUNCTION chroma_query(text, real[], int, jsonb) TO up_mirrorer;
GRANT EXECUTE ON FUNCTION chroma_upsert(text, text[], real[], text[], jsonb[]) TO "Mixed Case""Role"});
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
like($err, qr/WARNING:  the filter of the mirror of up_f2 into "up_f2_t030" is checked again when it is used: up_keep\(id\)/,
	'the update names the mirrors whose filter 0.4 stored as text');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.5', 'updated to 0.5');
is($node->safe_psql('postgres', q{
SELECT string_agg(format('%s %s %s %s', p.oid::regprocedure,
		has_function_privilege('up_mirrorer', p.oid, 'EXECUTE'),
		has_function_privilege('up_mirrorer', p.oid, 'EXECUTE WITH GRANT OPTION'),
		has_function_privilege('public', p.oid, 'EXECUTE')), '; ' ORDER BY p.proname)
FROM pg_proc p WHERE p.proname IN ('chroma_get', 'chroma_query', 'chroma_upsert', 'chroma_upsert_query')}),
	'chroma_get(text,text[],jsonb,integer,integer,boolean,jsonb) t f f; '
	  . 'chroma_query(text,real[],integer,jsonb,jsonb,text[]) t f f; '
	  . 'chroma_upsert(text,text[],real[],text[],jsonb[],boolean) f f f; '
	  . 'chroma_upsert_query(text,text,boolean) t t f',
	'0.5: one chroma_get, chroma_query, chroma_upsert and chroma_upsert_query each, with the new last arguments; grants kept, none to PUBLIC');
# (0.5's update once quoted the name twice: role """Mixed Case""""Role""" does not exist)
is($node->safe_psql('postgres', q{
SELECT has_function_privilege('Mixed Case"Role',
	'chroma_upsert(text, text[], real[], text[], jsonb[], boolean)', 'EXECUTE')}),
	't', '0.5: the grant of chroma_upsert to Mixed Case"Role is kept');
is($node->safe_psql('postgres', "SELECT pending FROM chroma_sync.status WHERE source = 'up_docs'::regclass"),
	'363', 'nothing pending was lost by the update to 0.5');
# 0.5 records the mirrored columns by name, attnum and type, filled from the catalog
my ($cret, $cols, $cerr) = $node->psql('postgres', q{
SELECT column_names::text || ' ' || column_attnums::text || ' ' || column_type_names::text
FROM chroma_sync.mirror WHERE source = 'up_docs'::regclass});
is($cols, '{id,embedding,doc,meta} {1,2,3,4} {integer,real[],pg_catalog.text,pg_catalog.jsonb}',
	"0.5: the mirror made at 0.1 has its columns recorded by name, attnum and type") or diag($cerr);
is($node->safe_psql('postgres', q{
SELECT pg_get_function_identity_arguments(p.oid),
	has_function_privilege('up_mirrorer', p.oid, 'EXECUTE WITH GRANT OPTION'),
	has_function_privilege('Mixed Case"Role', p.oid, 'EXECUTE'),
	has_function_privilege('Mixed Case"Role', p.oid, 'EXECUTE WITH GRANT OPTION'),
	has_function_privilege('public', p.oid, 'EXECUTE')
FROM pg_proc p WHERE p.proname = 'chroma_mirror'}),
	'source regclass, collection text, id_column name, embedding_column name, document_column name, '
	  . 'metadata_columns name[], backfill boolean, adopt boolean, filter text, id_columns name[], '
	  . 'configuration jsonb|t|t|f|f',
	'one chroma_mirror, with configuration last; its grants kept (also to Mixed Case"Role), none to PUBLIC');

$node->safe_psql('postgres', "SELECT chroma_resume('up_docs')");
assert_equal($node, 'up_docs', 'up_docs_t030', name => 'after the update');

# and the mirror keeps following the table
insert_rows($node, 'up_docs', 2001, 100, 8);
assert_equal($node, 'up_docs', 'up_docs_t030', name => 'new changes after the update');

# a composite primary key mirrors after the update
$node->safe_psql('postgres', q{
CREATE TABLE up_pairs (a text, b int, embedding real[], PRIMARY KEY (a, b));
INSERT INTO up_pairs SELECT 'k,' || (i % 7), i, ARRAY[i, -i, 0.5]::real[] FROM generate_series(1, 200) AS i});
fresh_collection($node, 'up_pairs_t030');
$node->safe_psql('postgres', "SELECT chroma_mirror('up_pairs', 'up_pairs_t030')");
$node->safe_psql('postgres', "UPDATE up_pairs SET b = -b WHERE b <= 10");
is($node->safe_psql('postgres', "SELECT chroma_flush('up_pairs', interval '120 seconds')", timeout => 150),
	't', 'composite mirror: flushed');
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('up_pairs')"),
	'200|0|0|0', 'composite mirror: chroma_verify reports 200 rows, none missing, extra or different');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM chroma_get('up_pairs_t030') c
FULL JOIN up_pairs t ON c.id = replace(t.a, ',', '%2C') || ',' || t.b
WHERE c.id IS NULL OR t.a IS NULL
	OR pg_catalog.array_send(c.embedding) IS DISTINCT FROM pg_catalog.array_send(t.embedding)}),
	'0', 'composite mirror: ids and embedding bytes match both ways');

# the filters of 0.4, checked again when used: one over pg_catalog keeps syncing, the
# other (a function found only through the old search_path) pauses its mirror
$node->safe_psql('postgres', q{SELECT chroma_pause('up_f1'); SELECT chroma_resume('up_f1');
SELECT chroma_pause('up_f2'); SELECT chroma_resume('up_f2');
INSERT INTO up_f1 VALUES (8, '{8, 1}', true), (9, '{9, 1}', false);
INSERT INTO up_f2 VALUES (8, '{8, 2}')});
is($node->safe_psql('postgres', "SELECT chroma_flush('up_f1', interval '60 seconds')", timeout => 90),
	't', 'a 0.4 filter over pg_catalog: flushed after the update');
is($node->safe_psql('postgres', q{SELECT string_agg(id, ',' ORDER BY id::int) FROM chroma_get('up_f1_t030')}),
	'2,4,6,8', 'and it still selects the rows');
is($node->safe_psql('postgres', q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror WHERE collection = 'up_f1_t030'}),
	't', 'the worker bound the 0.4 filter (filter_node stored)');
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'up_f2'::regclass}, 'paused', 60),
	'a 0.4 filter naming public.up_keep without its schema pauses its mirror');
like($node->safe_psql('postgres', q{SELECT last_error FROM chroma_sync.status WHERE source = 'up_f2'::regclass}),
	qr/stored filter "up_keep\(id\)" is refused \(re-create the mirror\).*up_keep/, 'and says why');
$node->safe_psql('postgres', q{SELECT chroma_unmirror('up_f1', drop_collection => true);
SELECT chroma_unmirror('up_f2', drop_collection => true)});

assert_no_crash($node, $offset);
$node->safe_psql('postgres', "SELECT chroma_unmirror('up_pairs', drop_collection => true)");
$node->safe_psql('postgres', "SELECT chroma_unmirror('up_docs', drop_collection => true)");
$node->stop;
done_testing();
