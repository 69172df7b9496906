# Red team (fixed: the column is read by name): the merge of "backfill watermark bound to its backfill" (78f2074, which read
# backfill_started_at as result column 23 of mirror_config.c's load query, right after the
# three by-name columns of its time) with the filter's references (filter_refs and
# source_oid took columns 23 and 24; backfill_started_at is now column 25). config_from_tuple
# reads m->backfill_run from column 23, filter_refs: NULL for a mirror without a filter
# (always "no backfill started"), a text[] pointer read as a timestamp for a mirror with
# one. Every watermark write and the end of the backfill compare backfill_started_at with
# it: a filtered mirror's first page is always stale and its backfill never ends.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_backfill_started_column');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t106');
q1(q{
CREATE TABLE public.bf (id int PRIMARY KEY, embedding real[], lang text);
INSERT INTO public.bf SELECT g, ARRAY[g, 1]::real[], CASE WHEN g <= 30 THEN 'en' ELSE 'de' END
	FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.bf', collection => 'cs_t106', filter => 'lang = ''en''');
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.bf', interval '60 seconds')}, timeout => 90), 't',
	'a mirror with a filter finishes its backfill');
is(q1(q{SELECT chroma_count('cs_t106')}), '30', 'it sends the 30 rows the filter selects');
is(q1(q{SELECT state FROM chroma_sync.status}), 'syncing', 'and is syncing');

finish($node, $log0);
