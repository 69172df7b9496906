# Red team (after TAP 117's fix): "a filter is evaluated with fixed settings" — the fix
# pinned bytea_output for byteaout, but XMLELEMENT and XMLFOREST (immutable: an XmlExpr
# calls no mutable function) encode a bytea argument as xmlbinary says (base64 or hex), and
# xmlbinary is not pinned. The filter xmlelement(name x, b)::text = '<x>iVBORw==</x>'
# (a PNG's first bytes) is accepted; chroma_verify in a session with xmlbinary = hex reports
# the synced mirror as differing, and after ALTER DATABASE ... SET xmlbinary = 'hex' the
# worker drops the row from the collection.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_xmlbinary');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t132');
q1(q{
CREATE TABLE public.bt (id int PRIMARY KEY, embedding real[], b bytea);
INSERT INTO public.bt VALUES (1, '{1,0}', '\x89504e47'), (2, '{0,1}', '\xffd8ffe0');
SELECT chroma_mirror('public.bt', collection => 'cs_t132', filter => $$xmlelement(name x, b)::text = '<x>iVBORw==</x>'$$);
});
note('stored: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.bt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t132')}), '1', 'the mirror sends the PNG row');
is(q1(q{SELECT concat_ws(',', rows, missing, extra, different) FROM chroma_verify('public.bt')}), '1,0,0,0',
	'chroma_verify: in sync');
is(q1(q{SET xmlbinary = hex; SELECT concat_ws(',', rows, missing, extra, different) FROM chroma_verify('public.bt')}),
	'1,0,0,0', 'chroma_verify in a session with xmlbinary = hex: in sync too');

q1(q{ALTER DATABASE postgres SET xmlbinary = 'hex'});
$node->restart;
q1(q{UPDATE public.bt SET embedding = ARRAY[id, 2]::real[]});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.bt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes after the restart');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t132')}), '1',
	'the worker still sends the PNG row (the database\'s xmlbinary does not change the filter)');

finish($node, $log0);
