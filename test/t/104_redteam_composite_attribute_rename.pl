# Red team: "renames are followed ... so a pg_dump at any moment names the columns read"
# — a filter reads a field of a composite column by its position (FieldSelect), and its
# text names the field. ALTER TYPE ... RENAME ATTRIBUTE is tagged 'ALTER TYPE', which the
# DDL trigger ignores, and filter_refs records no field names: swap two fields' names of
# a paused mirror's filter, pg_dump, and chroma_adopt in the copy binds the filter to the
# other field, silently (the original, by position, keeps selecting rows 1-30).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_composite_attribute_rename');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t104');
q1(q{
CREATE TYPE public.addr AS (city text, country text);
CREATE TABLE public.ca (id int PRIMARY KEY, embedding real[], a public.addr);
INSERT INTO public.ca SELECT g, ARRAY[g, 1]::real[],
	CASE WHEN g <= 30 THEN ROW('Paris', 'FR')::public.addr ELSE ROW('FR', 'Paris')::public.addr END
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.ca', collection => 'cs_t104', filter => '(a).city = ''Paris''');
});
is(q1(q{SELECT chroma_flush('public.ca', interval '60 seconds')}), 't', 'the original flushes');
is(q1(q{SELECT chroma_count('cs_t104')}), '30', 'the original sends the 30 rows whose city is Paris');

q1(q{SELECT chroma_pause('public.ca')});
q1(q{
ALTER TYPE public.addr RENAME ATTRIBUTE city TO tmp;
ALTER TYPE public.addr RENAME ATTRIBUTE country TO city;
ALTER TYPE public.addr RENAME ATTRIBUTE tmp TO country;
});
is(q1(q{SELECT count(*) FROM public.ca WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), ca.*)}),
	'30', 'the original still reads the first field (now called country)');
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{((a).country = 'Paris'::text)},
	'the stored text names the field the filter reads by its new name');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t104.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy104');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy104', $dump ], 'pg_restore into copy104');
my ($ret, $out, $err) = $node->psql('copy104', q{SELECT chroma_adopt('public.ca')});
note("chroma_adopt: ret=$ret err=$err");
if ($ret == 0)
{
	is($node->safe_psql('copy104', q{SELECT chroma_flush('public.ca', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	note('filter in the copy: ' . q1(q{SELECT filter FROM chroma_sync.mirror}, 'copy104'));
	is(q1(q{SELECT chroma_count('cs_t104')}), '30',
		'the restored copy selects the rows the original did (the first field), not those of the field that took its name');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
}

finish($node, $log0);
