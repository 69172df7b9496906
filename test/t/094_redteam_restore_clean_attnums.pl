# Red team: a restored copy is recognized by (database_oid, system_identifier) only. A
# backup restored over the SAME database (pg_restore --clean --if-exists -d samedb) has
# both of the original, so it is taken as "local": the stored filter tree and
# column_attnums are used as they are. pg_dump leaves dropped columns out, so every
# column after a dropped one has a smaller attnum in the restored table: the stored tree
# (a > 5, attnum 4) reads b, and the document (body, attnum 6) is note. The types match,
# so nothing pauses; the worker even "follows the renames" (column_names become
# {..,note,b}, the filter text becomes (b > 5)) and chroma_resync sends the wrong row
# with the wrong document.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_restore_clean_attnums');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t094');
q1('CREATE DATABASE cl094');
q1(q{
CREATE EXTENSION chroma_sync;
CREATE TABLE public.c (id int PRIMARY KEY, embedding real[], junk int, a int, b int, body text, note text);
ALTER TABLE c DROP COLUMN junk;
INSERT INTO c VALUES (1, '{1,0}', 10, 0, 'B1', 'N1'), (2, '{0,1}', 0, 10, 'B2', 'N2');
SELECT chroma_mirror('public.c', collection => 'cs_t094', document_column => 'body', filter => 'a > 5');
}, 'cl094');
is($node->safe_psql('cl094', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90), 't', 'flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t094')}), '1:B1',
	'the original sends row 1 (a > 5) with its body');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t094.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'cl094' ], 'pg_dump -Fc');
$node->command_ok([ 'pg_restore', '--clean', '--if-exists', '--exit-on-error', '-d', 'cl094', $dump ],
	'pg_restore --clean over the same database');
sleep 3;
note('after the restore: ' . q1(q{SELECT filter || ' ' || column_names::text || ' paused=' || paused FROM chroma_sync.mirror}, 'cl094'));
my $sent = '';
if (q1(q{SELECT paused FROM chroma_sync.mirror}, 'cl094') eq 'f')
{
	$node->psql('cl094', q{SELECT chroma_resync('public.c')});
	$node->safe_psql('cl094', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90);
	$sent = q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t094')});
}
ok($sent eq '1:B1' || $sent eq '',
	"after pg_restore --clean the mirror sends what it did (1:B1) or pauses; it sent '$sent'");
isnt(q1(q{SELECT filter FROM chroma_sync.mirror}, 'cl094'), '(b > 5)',
	'the filter is not silently re-pointed at column b');

# taken over, the copy finds its columns by name: a (attnum 3 now) and body (attnum 5)
is(q1(q{SELECT paused FROM chroma_sync.mirror}, 'cl094'), 't',
	'the mirror restored over its own database is paused as a restored copy');
like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}, 'cl094'), qr/restored in its place/,
	'the reason says why and what to do');
q1(q{SELECT chroma_adopt('public.c')}, 'cl094');
is($node->safe_psql('cl094', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90), 't',
	'the adopted mirror flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t094')}), '1:B1',
	'adopted, it sends row 1 (a > 5) with its body, read from the columns of those names');
is(q1(q{SELECT filter || ' ' || column_names::text FROM chroma_sync.mirror}, 'cl094'),
	'(a > 5) {id,embedding,body,a}', 'the filter and the recorded names are the same columns');
q1(q{UPDATE c SET a = 0, b = 10 WHERE id = 1; UPDATE c SET a = 10, note = 'N2x' WHERE id = 2}, 'cl094');
is($node->safe_psql('cl094', q{SELECT chroma_flush('public.c', interval '60 seconds')}, timeout => 90), 't',
	'live changes flush');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t094')}), '2:B2',
	'live changes are filtered on a and documented by body');

finish($node, $log0);
