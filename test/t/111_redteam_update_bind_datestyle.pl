# Red team: "the 0.4->0.5 update binds 0.4 text filters (chroma_sync.bind_filter), as the
# worker would the first time it loads the mirror" — not as the worker would: 0.4 stored
# the filter as written and the worker read it with the database's settings each time;
# bind_filter reads it (mirror_filter_derive: no filter_refs, so not with the fixed
# settings) with the DateStyle of the session that runs ALTER EXTENSION UPDATE. A date
# constant '03/04/2024' that the 0.4 worker read as March 4 (MDY) is bound as April 3 by
# an administrator whose session has DateStyle 'SQL, DMY', silently: the mirror now sends
# 8 rows where it sent 38.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_update_bind_datestyle', extension => 0, conf => q{
DateStyle = 'ISO, MDY'
});
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

mirror_04_date_filter($node, 'cs_t111');
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t111')}), '38', 'the 0.4 worker reads 03/04/2024 as March 4 (MDY): 38 rows');

my ($ret, $out, $err) = $node->psql('postgres', q{SET DateStyle = 'SQL, DMY'; ALTER EXTENSION chroma_sync UPDATE});
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE in a session with DateStyle SQL, DMY') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-03-04'::date)},
	'the bound filter is the one the 0.4 worker evaluated (March 4)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'38', 'it still selects the 38 rows the 0.4 mirror sent');

finish($node, $log0);
