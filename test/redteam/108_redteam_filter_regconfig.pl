# Red team: "a bound filter's functions, operators, types and collations are dependencies
# of the mirror's row trigger, like a CHECK constraint's; renames are followed" — a CHECK
# constraint also depends on the objects its reg* constants name ('public.myconf'::regconfig
# for to_tsvector, a regclass, regproc...): PostgreSQL refuses DROP TEXT SEARCH
# CONFIGURATION while one uses it. The filter's dependencies record only the constant's type,
# so the configuration is dropped under the filter (which then evaluates a dangling OID),
# and ALTER TEXT SEARCH CONFIGURATION ... RENAME (a tag the DDL trigger does not fire on) is
# not followed by the stored text: a dump's filter names a configuration that is gone, or
# one created since under the old name.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_regconfig');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t108');
q1(q{
CREATE TEXT SEARCH CONFIGURATION public.myconf (COPY = pg_catalog.english);
CREATE TABLE public.ts (id int PRIMARY KEY, embedding real[], body text);
INSERT INTO public.ts SELECT g, ARRAY[g, 1]::real[], CASE WHEN g <= 30 THEN 'the cats sat' ELSE 'dogs ran' END
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.ts', collection => 'cs_t108',
	filter => $$to_tsvector('public.myconf'::regconfig, body) @@ 'cat'::tsquery$$);
-- what PostgreSQL does for the same expression in a CHECK constraint
CREATE TABLE public.ref (id int PRIMARY KEY,
	body text CHECK (to_tsvector('public.myconf'::regconfig, body) @@ 'cat'::tsquery));
});
note('stored: ' . q1(q{SELECT filter || ' ' || filter_refs::text FROM chroma_sync.mirror}));
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.ts', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t108')}), '30', 'the mirror sends the 30 rows about cats');

my ($ret, $out, $err) = $node->psql('postgres', q{DROP TEXT SEARCH CONFIGURATION public.myconf});
like($err, qr/depend/, 'PostgreSQL refuses to drop a configuration a CHECK constraint names');
q1(q{DROP TABLE public.ref});

q1(q{ALTER TEXT SEARCH CONFIGURATION public.myconf RENAME TO myconf2});
like(q1(q{SELECT filter FROM chroma_sync.mirror}), qr/myconf2/,
	'the stored text names the configuration by its new name');

($ret, $out, $err) = $node->psql('postgres', q{DROP TEXT SEARCH CONFIGURATION public.myconf2});
note("DROP TEXT SEARCH CONFIGURATION: ret=$ret err=$err");
isnt($ret, 0, 'dropping the configuration the filter names is refused (the trigger depends on it)');

($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM public.ts WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), ts.*)});
note("the filter after the drop: ret=$ret out=$out err=$err");
unlike($err, qr/cache lookup failed/, 'the filter never evaluates a configuration that is gone (XX000)');

finish($node, $log0);
