# Red team (after the fix of TAP 111): "ALTER EXTENSION UPDATE from 0.4 binds a 0.4
# filter with the settings' defaults (the worker's), not the updating session's" —
# chroma_sync.bind_filter resets DateStyle & co. to their reset values, but a session's
# reset value is the one its connection brought (PGOPTIONS='-c DateStyle=...', a
# connection string's options, ALTER ROLE ... SET of the updating role), not the worker's.
# An administrator whose connection asks for DateStyle 'SQL, DMY' binds the 0.4 filter
# d >= '03/04/2024', which the 0.4 worker read as March 4 (MDY), as April 3, silently:
# the mirror now sends 8 rows where it sent 38.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('redteam_update_bind_pgoptions');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$ENV{CHROMA_URL}'
chroma_sync.retry_max_delay = 2000
DateStyle = 'ISO, MDY'
});
$node->start;
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

mirror_04_date_filter($node, 'cs_t118');
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.dt', interval '60 seconds')}, timeout => 90), 't',
	'the 0.4 mirror flushes');
is(q1(q{SELECT chroma_count('cs_t118')}), '38', 'the 0.4 worker reads 03/04/2024 as March 4 (MDY): 38 rows');

my ($ret, $out, $err);
{
	# the administrator's connection options, not a SET
	local $ENV{PGOPTIONS} = '-c DateStyle=SQL,DMY';
	($ret, $out, $err) = $node->psql('postgres', q{SHOW DateStyle; ALTER EXTENSION chroma_sync UPDATE});
	note("the updating session's DateStyle: $out");
}
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE in a connection with PGOPTIONS -c DateStyle=SQL,DMY') or diag($err);
ok(poll_query($node, q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}, 't'), 'the worker binds the 0.4 filter after the update');
note('stored after the update: ' . q1(q{SELECT filter FROM chroma_sync.mirror}));
is(q1(q{SELECT filter FROM chroma_sync.mirror}), q{(d >= '2024-03-04'::date)},
	'the bound filter is the one the 0.4 worker evaluated (March 4)');
is(q1(q{SELECT count(*) FROM public.dt WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), dt.*)}),
	'38', 'it still selects the 38 rows the 0.4 mirror sent');

finish($node, $log0);
