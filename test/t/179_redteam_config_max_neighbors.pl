# Red team: chroma_create_collection's configuration check lets hnsw.max_neighbors (and
# the other counts) be any whole number up to 2147483647. Chroma creates the collection,
# but cannot build its index: every later upsert fails with HTTP 500 "Error in compaction:
# Failed to get hnsw segment writer", which chroma_sync reports as 38000 with the hint "The
# server is overloaded or unavailable; try again later." Retrying never helps: the
# collection is unusable, and nothing says the configuration is the cause.
#
# Steps: chroma_create_collection('cs_t179', configuration => '{"hnsw": {"max_neighbors":
# 2147483647}}'); chroma_upsert of one record.
# What happens: the create succeeds; the upsert fails with 38000 "try again later" (old and
# new server alike).
# What should happen: the configuration is refused with 22023 before anything is sent (a
# bound on max_neighbors that Chroma can build), or, if accepted, the collection takes
# records.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_config_max_neighbors');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t179');

my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_create_collection('cs_t179', configuration => '{"hnsw": {"max_neighbors": 2147483647}}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("create: exit $ret [$out] [$err]");
if ($ret != 0)
{
	like($err, qr/ERROR:  22023:/, 'the configuration is refused with 22023');
}
else
{
	my ($r2, $o2, $e2) = $node->psql('postgres',
		q{SELECT chroma_upsert('cs_t179', ARRAY['a'], ARRAY[[1, 2]]::real[])},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	note("upsert: exit $r2 [$o2] [$e2]");
	is($o2, '1', 'the collection created with this configuration takes a record');
	unlike($e2, qr/try again later/, 'no advice to retry what can never succeed');
}

assert_no_crash($node, $log0);
done_testing();
