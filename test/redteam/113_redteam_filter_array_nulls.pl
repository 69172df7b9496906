# Red team: "the filter's text is written and read back with fixed settings, so that it
# reads back the same in any database" — array_nulls is not among them. A text[] constant
# with a NULL element deparses as '{en,NULL}'; a database with array_nulls = off (kept
# for applications written before 8.2) reads that back as the string 'NULL'. chroma_adopt
# in such a copy binds the text (the references are the same functions and types) and the
# copy's filter also selects the rows whose tag is the string 'NULL': it sends 2 rows where
# the original sends 1, silently.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_array_nulls');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t113');
q1(q{
CREATE TABLE public.an (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.an VALUES (1, '{1,0}', 'en'), (2, '{0,1}', 'NULL'), (3, '{1,1}', 'de');
SELECT chroma_mirror('public.an', collection => 'cs_t113', filter => $$tag = ANY ('{en,NULL}'::text[])$$);
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.an', interval '60 seconds')}, timeout => 90), 't',
	'the original flushes');
is(q1(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM chroma_get('cs_t113')}), '1',
	'the original sends row 1 (the array\'s second element is NULL, not the string)');
note('stored: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
q1(q{SELECT chroma_pause('public.an')});

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t113.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy113');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy113', $dump ], 'pg_restore into copy113');
# (after the restore: pg_dump's COPY data of arrays with NULL elements needs array_nulls on)
q1('ALTER DATABASE copy113 SET array_nulls = off');
my ($ret, $out, $err) = $node->psql('copy113', q{SELECT chroma_adopt('public.an')});
note("chroma_adopt: ret=$ret err=$err");
is($node->safe_psql('copy113', q{SELECT chroma_flush('public.an', interval '60 seconds')}, timeout => 90), 't',
	'the adopted copy flushes');
is(q1(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM chroma_get('cs_t113')}), '1',
	'the copy sends what the original did (row 1), not also the row whose tag is the string NULL');

finish($node, $log0);
