# Red team: the update records a 0.4 filter's columns by reading its text with the
# updating session's settings; when that read fails the columns stay unrecorded, and the
# worker then binds the text with no column guard (to the columns that took the names).
#
# ALTER EXTENSION chroma_sync UPDATE (0.4--0.5) calls chroma_sync.record_columns, which
# takes the filter's columns from mirror_filter_attnums(relid, text, NULL): the 0.4 text
# parsed and analyzed in the updating session, with its DateStyle. A date constant that
# the worker reads fine ('03/04/2024' under the worker's 'ISO, MDY') raises "date/time
# field value out of range" under the session's 'ISO, YMD'; the update reports a WARNING
# ("could not record the columns") and goes on. The mirror then has no recorded columns:
# mirror_columns_resolve sees no rename, and check_04_text binds "the text alone". The
# commit under review says the settings of the updating session no longer matter and that
# columns renamed before the worker binds pause the mirror (TAP 138).
#
# Steps: 0.4 mirror of dt (d date, e date) with filter d >= '03/04/2024' (0.4 text; sends
# row 1); in one transaction with DateStyle 'ISO, YMD': ALTER EXTENSION chroma_sync UPDATE,
# then the names d and e swapped. What happens: the columns are not recorded, nothing
# pauses, the worker binds 'd' to the column that was e and the filter selects row 2.
# What should happen: the columns are recorded (which columns a text names does not depend
# on DateStyle) and the swap pauses the mirror, as in TAP 138.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_record_datestyle', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t143');
q1(q{
CREATE TABLE public.dt (id int PRIMARY KEY, embedding real[], d date, e date);
INSERT INTO public.dt VALUES (1, '{1,0}', '2024-03-10', '2024-01-01'), (2, '{0,1}', '2024-01-01', '2024-03-10');
SELECT chroma_mirror('public.dt', collection => 'cs_t143', filter => $$d >= '03/04/2024'$$);
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = $$d >= '03/04/2024'$$;
});
is(q1(q{SELECT chroma_flush('public.dt', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t143')}), '1',
	'0.4 sends row 1 (d on or after March 4)');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
SET DateStyle = 'ISO, YMD';
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE dt RENAME d TO tmp; ALTER TABLE dt RENAME e TO d; ALTER TABLE dt RENAME tmp TO e;
COMMIT;
});
is($ret, 0, 'the update and the swap commit') or diag($err);
note("the update said: $err");
is(q1(q{SELECT (column_names IS NOT NULL)::text FROM chroma_sync.mirror}), 'true',
	'the update records the columns whatever the updating session\'s DateStyle');

ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT (filter_node IS NULL)::text || ' ' || filter || ' paused=' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}));
if (q1(q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}) eq 't')
{
	is(q1(q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM public.dt
		WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
		'1', 'the bound filter selects row 1, the column 0.4 read, not the column that took its name');
}
else
{
	like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}), qr/\bd\b/, 'the mirror pauses for the renamed filter column');
}

finish($node, $log0);
