# Red team: "the table's OID is recorded (source_oid); a mirror whose table was restored in
# its place (pg_restore --clean over the same database) is treated as a restored copy" —
# except when source_oid is NULL, which config_from_tuple takes as "made here"
# ("recorded before 0.5"). Every mirror updated from 0.4 has it NULL: the update's
# record_columns fails (TAP 099: column "filter_refs" does not exist) and nothing records
# it later. A dump of such a database restored over itself (pg_restore --clean) keeps
# database_oid and system_identifier, so the mirror is "home": its stored attnums and
# filter tree are used on the restored table, whose attnums shifted past a dropped
# column (094's case): the filter a > 5 reads b, the document body is note, nothing
# pauses, and a resync sends row 2 with the wrong column's text.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_upgraded_restore_clean', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync});
fresh_collection($node, 'cs_t102');
q1('CREATE DATABASE cl102');
q1(q{
CREATE EXTENSION chroma_sync VERSION '0.4';
CREATE TABLE public.c (id int PRIMARY KEY, embedding real[], junk int, a int, b int, body text, note text);
ALTER TABLE c DROP COLUMN junk;
INSERT INTO c VALUES (1, '{1,0}', 10, 0, 'B1', 'N1'), (2, '{0,1}', 0, 10, 'B2', 'N2');
SELECT chroma_mirror('public.c', collection => 'cs_t102', document_column => 'body', filter => 'a > 5');
UPDATE chroma_sync.mirror SET filter = 'a > 5';
}, 'cl102');
is($node->safe_psql('cl102', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90), 't', 'the 0.4 mirror flushes');
my ($ret, $out, $err) = $node->psql('cl102', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
note("ALTER EXTENSION UPDATE said: $err");
# a change after the update: the worker binds the 0.4 filter (filter_node stored)
q1(q{UPDATE c SET note = 'N1x' WHERE id = 1}, 'cl102');
is($node->safe_psql('cl102', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90), 't', 'flushes after the update');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t102')}), '1:B1',
	'the original sends row 1 (a > 5) with its body');
note('before the dump: ' . q1(q{SELECT coalesce(filter, '-') || ' names=' || coalesce(column_names::text, 'NULL')
	|| ' source_oid=' || coalesce(source_oid::text, 'NULL') || ' tree=' || (filter_node IS NOT NULL) FROM chroma_sync.mirror}, 'cl102'));

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t102.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'cl102' ], 'pg_dump -Fc');
$node->command_ok([ 'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d', 'cl102', $dump ],
	'pg_restore --clean over the same database');
sleep 3;
note('after the restore: ' . q1(q{SELECT filter || ' paused=' || paused FROM chroma_sync.mirror}, 'cl102'));
my $sent = '';
if (q1(q{SELECT paused FROM chroma_sync.mirror}, 'cl102') eq 'f')
{
	$node->psql('cl102', q{SELECT chroma_resync('public.c')});
	$node->safe_psql('cl102', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90);
	$sent = q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t102')});
}
ok($sent eq '1:B1' || $sent eq '',
	"after pg_restore --clean the mirror sends what it did (1:B1) or pauses as a restored copy; it sent '$sent'");

finish($node, $log0);
