# Red team: "renaming (or moving) a function, type, operator, collation or schema rewrites
# every bound filter's text and references in the same transaction" — ALTER EXTENSION ...
# SET SCHEMA moves every function and type of an extension at once, under the tag
# 'ALTER EXTENSION', which the DDL trigger does not fire on. The filter's text and
# filter_refs keep naming public.soundex(text); a later function of that name (here a
# wrapper created where the extension was) is what the dump's filter names, and
# chroma_adopt binds it in the restored copy, the reference check passing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_extension_set_schema');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

if (q1(q{SELECT count(*) FROM pg_available_extensions WHERE name = 'fuzzystrmatch'}) ne '1')
{
	plan skip_all => 'contrib fuzzystrmatch is not installed';
}

fresh_collection($node, 'cs_t107');
q1(q{
CREATE EXTENSION fuzzystrmatch SCHEMA public;
CREATE SCHEMA ext;
CREATE TABLE public.fz (id int PRIMARY KEY, embedding real[], name text);
INSERT INTO public.fz SELECT g, ARRAY[g, 1]::real[], CASE WHEN g <= 30 THEN 'Robert' ELSE 'Smith' END
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.fz', collection => 'cs_t107', filter => 'public.soundex(name) = ''R163''');
});
is(q1(q{SELECT chroma_flush('public.fz', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT chroma_count('cs_t107')}), '30', 'the original sends the 30 rows named Robert');
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));

q1(q{SELECT chroma_pause('public.fz')});
q1(q{ALTER EXTENSION fuzzystrmatch SET SCHEMA ext});
note('stored after SET SCHEMA: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));
like(q1(q{SELECT filter FROM chroma_sync.mirror}), qr/ext\.soundex\(name\)/,
	'the stored text names the function where it is now (ext.soundex)');
like(q1(q{SELECT filter_refs::text FROM chroma_sync.mirror}), qr/ext\.soundex\(text\)/,
	'the recorded references name it there too');

# another function of the old name, in the original
q1(q{CREATE FUNCTION public.soundex(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'R163'$$});
is(q1(q{SELECT count(*) FROM public.fz WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), fz.*)}),
	'30', 'the original still evaluates the function it bound (ext.soundex)');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t107.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy107');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy107', $dump ], 'pg_restore into copy107');
my ($ret, $out, $err) = $node->psql('copy107', q{SELECT chroma_adopt('public.fz')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy107', q{SELECT chroma_flush('public.fz', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	note('filter in the copy: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'copy107'));
	is(q1(q{SELECT chroma_count('cs_t107')}), '30',
		'the restored copy selects the rows the original did (ext.soundex), not those of the function that took the old name');
}
else
{
	like($err, qr/binds to other objects/, 'chroma_adopt refuses the copy (55000)');
}

finish($node, $log0);
