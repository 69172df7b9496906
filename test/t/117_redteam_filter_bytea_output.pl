# Red team: "a row's place in the collection must depend on the row alone" (immutable
# functions only) and "the filter means what it meant when it was stored" — the worker and
# chroma_verify pin TimeZone, IntervalStyle and extra_float_digits while they evaluate, but
# not bytea_output, which byteaout (IMMUTABLE) obeys: a filter over bytea rendered as text
# (`left(b::text, 6) = '\x8950'`, a PNG signature) selects the row under the default (hex)
# and none under bytea_output = escape. chroma_verify in a session that SETs it reports a
# synced collection as differing (extra = 1), and after ALTER DATABASE ... SET
# bytea_output = 'escape' (applied to the worker's connection), the worker drops the row
# from the collection on its next change.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_bytea_output');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t117');
q1(q{
CREATE TABLE public.bt (id int PRIMARY KEY, embedding real[], b bytea);
INSERT INTO public.bt VALUES (1, '{1,0}', '\x89504e470d0a1a0a'), (2, '{0,1}', '\xffd8ffe0');
SELECT chroma_mirror('public.bt', collection => 'cs_t117', filter => $$left(b::text, 6) = '\x8950'$$);
});
note('stored: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.bt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t117')}), '1', 'the mirror sends the PNG row');
is(q1(q{SELECT concat_ws(',', rows, missing, extra, different) FROM chroma_verify('public.bt')}), '1,0,0,0',
	'chroma_verify: in sync');
is(q1(q{SET bytea_output = escape; SELECT concat_ws(',', rows, missing, extra, different) FROM chroma_verify('public.bt')}),
	'1,0,0,0', 'chroma_verify in a session with bytea_output = escape: in sync too');

q1(q{ALTER DATABASE postgres SET bytea_output = 'escape'});
$node->restart;
q1(q{UPDATE public.bt SET embedding = ARRAY[id, 2]::real[]});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.bt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes after the restart');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t117')}), '1',
	'the worker still sends the PNG row (the database\'s bytea_output does not change the filter)');

finish($node, $log0);
