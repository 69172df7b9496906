# Red team: on single-node Chroma (both servers the tests run) a "spann" configuration is
# accepted and silently ignored. chroma_modify_collection(..., new_configuration =>
# '{"spann": {"search_nprobe": 4}}') of an HNSW collection returns without error and
# changes nothing; chroma_create_collection(..., configuration => '{"spann": {...}}')
# creates an HNSW collection with the default settings. The caller is told nothing.
#
# Steps: create cs_t180_a (default HNSW); modify it with the spann configuration; read
# chroma_collection('cs_t180_a')->'configuration'. Create cs_t180_b with the spann
# configuration; read its configuration.
# What happens: both calls succeed; configuration.spann stays null and hnsw is the default.
# What should happen: an ERROR (22023 or 0A000: the collection's index is HNSW, spann
# applies to Chroma Cloud), or the configuration read back holds search_nprobe 4.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_config_spann_ignored');
my $log0 = log_offset($node);
fresh_collection($node, $_) for qw(cs_t180_a cs_t180_b);
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t180_a')});

sub applied_or_refused
{
	my ($what, $sql, $coll) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $cfg = $node->safe_psql('postgres', qq{SELECT coalesce((SELECT
		chroma_collection('$coll')->'configuration' WHERE EXISTS (SELECT 1 FROM
		chroma_list_collections() WHERE name = '$coll'))::text, 'none')});
	note("$what: exit $ret [$err]; configuration now $cfg");
	ok(($ret != 0 && $err =~ /ERROR:  (22023|0A000):/) || $cfg =~ /"search_nprobe": 4/,
		"$what: refused, or applied");
}

applied_or_refused('modify with spann',
	q{SELECT chroma_modify_collection('cs_t180_a', new_configuration => '{"spann": {"search_nprobe": 4}}')},
	'cs_t180_a');
applied_or_refused('create with spann',
	q{SELECT chroma_create_collection('cs_t180_b', configuration => '{"spann": {"search_nprobe": 4}}')},
	'cs_t180_b');

assert_no_crash($node, $log0);
done_testing();
