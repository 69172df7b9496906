# A bound filter's functions, types and schemas, as CHECK constraints have them: the
# mirror's row trigger depends on what the filter calls (DROP FUNCTION is refused, 2BP01;
# CASCADE drops the trigger and the mirror pauses), and renaming a function or its schema
# rewrites the filter's text and recorded references in the same transaction, paused
# mirror or not, so that a dump taken at any moment names what the mirror calls and
# chroma_adopt binds the same function in the copy (and records the dependency there).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('filter_dependencies');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }
sub stored { return q1(q{SELECT filter || ' ' || array_to_string(filter_refs, ';') FROM chroma_sync.mirror}, $_[0]); }

fresh_collection($node, 'cs_t095');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.norm(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
CREATE TABLE public.f (id int PRIMARY KEY, embedding real[], a int, body text);
INSERT INTO public.f VALUES (1, '{1,0}', 5, 'B1'), (2, '{0,1}', -5, 'B2');
SELECT chroma_mirror('public.f', collection => 'cs_t095', document_column => 'body', filter => 'app.norm(a) > 0');
});
is(q1(q{SELECT chroma_flush('public.f', interval '60 seconds')}), 't', 'flushes');
is(q1(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM chroma_get('cs_t095')}), '1', 'the filter selects row 1');

my ($rc, $out, $err) = $node->psql('postgres', 'DROP FUNCTION app.norm(int)');
isnt($rc, 0, 'DROP FUNCTION of a function the filter calls is refused');
like($err, qr/cannot drop function app\.norm\(integer\) because other objects depend on it/, 'with PostgreSQL\'s own message');
like($err, qr/trigger chroma_sync_\d+ on table f depends on function app\.norm\(integer\)/, 'naming the mirror\'s trigger');

# renamed: the text and the references follow at once (no worker pass needed)
q1(q{BEGIN; ALTER FUNCTION app.norm(int) RENAME TO norm2; SAVEPOINT s; ALTER SCHEMA app RENAME TO nope; ROLLBACK TO s; COMMIT});
like(stored(), qr/^\(app\.norm2\(a\) > 0\) .*function app\.norm2\(integer\)/,
	'a function renamed: the text and references name it in the same transaction (the rolled-back schema rename left no trace)');
q1(q{SELECT chroma_pause('public.f')});
q1(q{ALTER SCHEMA app RENAME TO app2});
like(stored(), qr/^\(app2\.norm2\(a\) > 0\) .*function app2\.norm2\(integer\)/,
	'its schema renamed while the mirror is paused: followed too');

# a dump now names what the mirror calls; the copy adopts the same function
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t095.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy095');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy095', $dump ], 'pg_restore into copy095');
q1(q{SELECT chroma_adopt('public.f')}, 'copy095');
is($node->safe_psql('copy095', q{SELECT chroma_flush('public.f', interval '60 seconds')}, timeout => 90), 't',
	'the adopted copy flushes');
is(q1(q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t095')}), '1:B1',
	'the copy sends what the original did');
($rc, $out, $err) = $node->psql('copy095', 'DROP FUNCTION app2.norm2(int)');
like($err, qr/trigger chroma_sync_\d+ on table f depends on function app2\.norm2\(integer\)/,
	'chroma_adopt recorded the dependency in the copy (pg_depend is not dumped)');

# CASCADE drops the trigger: the mirror pauses with the reason, DDL on the table still works
q1(q{DROP FUNCTION app2.norm2(int) CASCADE}, 'copy095');
ok(wait_for('the copy\'s mirror pauses', 60,
		sub { q1(q{SELECT paused AND paused_reason LIKE '%was dropped%' FROM chroma_sync.mirror}, 'copy095') eq 't' }),
	'DROP FUNCTION ... CASCADE: the trigger is gone and the mirror pauses with the reason')
  or note(q1(q{SELECT paused_reason FROM chroma_sync.mirror}, 'copy095'));
q1('ALTER TABLE f RENAME body TO body2', 'copy095');
is(q1(q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'f'::regclass AND attname = 'body2'}, 'copy095'), '1',
	'ALTER TABLE on the table still works with the filter\'s function gone');

finish($node, $log0);
