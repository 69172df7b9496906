# Red team: "a bound filter's functions, operators, types and collations are pg_depend
# dependencies of the mirror's row trigger, like a CHECK constraint's" — a CHECK constraint
# that reads a field of a composite column ((a).country) also depends on that field (the
# composite type's column): ALTER TYPE ... DROP ATTRIBUTE is refused (2BP01) while the
# constraint exists. The filter's dependencies leave FieldSelect out, so the type's owner
# drops the field the filter reads; the mirrored column keeps its type (addr), so the
# mirror is not paused either, and the filter now reads NULL for every row: each row
# changed afterwards is taken as filtered out and deleted from the collection, silently.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_composite_attribute_drop');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t105');
q1(q{
CREATE TYPE public.addr AS (city text, country text);
CREATE TABLE public.ca (id int PRIMARY KEY, embedding real[], a public.addr);
INSERT INTO public.ca SELECT g, ARRAY[g, 1]::real[],
	ROW('Paris', CASE WHEN g <= 30 THEN 'FR' ELSE 'DE' END)::public.addr
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.ca', collection => 'cs_t105', filter => '(a).country = ''FR''');
-- what PostgreSQL does for the same expression in a CHECK constraint
CREATE TABLE public.ref (id int PRIMARY KEY, a public.addr CHECK ((a).country <> 'XX'));
});
is(q1(q{SELECT chroma_flush('public.ca', interval '60 seconds')}), 't', 'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t105')}), '30', 'the mirror sends the 30 rows whose country is FR');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER TYPE public.addr DROP ATTRIBUTE country});
like($err, qr/depend/, 'PostgreSQL refuses to drop a field a CHECK constraint reads');
q1(q{DROP TABLE public.ref});

($ret, $out, $err) = $node->psql('postgres', q{ALTER TYPE public.addr DROP ATTRIBUTE country});
note("ALTER TYPE ... DROP ATTRIBUTE country: ret=$ret err=$err");
isnt($ret, 0, 'dropping the field the mirror filter reads is refused (the trigger depends on it)');

# whatever happened: touch every row; the collection must keep the rows the filter chose,
# or the mirror must say it stopped
q1(q{UPDATE public.ca SET embedding = ARRAY[id, 2]::real[]});
my $flushed = $node->safe_psql('postgres', q{SELECT chroma_flush('public.ca', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
my $count = q1(q{SELECT chroma_count('cs_t105')});
note("after the update: flushed=$flushed state=$state count=$count");
ok($count eq '30' || $state !~ /^syncing/,
	"the collection keeps the 30 FR rows, or the mirror is paused with a reason (count $count, state $state)");

finish($node, $log0);
