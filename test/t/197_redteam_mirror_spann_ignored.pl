# Red team: the 0A000 refusal of spann settings (TAP 180) was added to
# chroma_create_collection and chroma_modify_collection only. chroma_mirror's
# configuration goes through mirror_collection (mirror.c), which sends it to the server
# with chroma_api_create_collection and compares it with an existing collection by
# chroma_configuration_conflict, which skips every key the collection does not show. On
# single-node Chroma (both servers the tests run) '{"spann": {"search_nprobe": 4}}' is
# accepted and silently ignored: the mirror is made, its collection is HNSW with the
# defaults, and chroma_sync.mirror.configuration records the spann settings the collection
# never had (the worker sends them again on every re-creation).
#
# Steps: (a) chroma_mirror('t197a', collection => 'cs_t197_a', configuration =>
# '{"spann": {"search_nprobe": 4}}') with no such collection; (b) the same into
# cs_t197_b, an existing (default HNSW) collection.
# What happened: both mirrors are made; chroma_collection(...)->'configuration' has
# "spann": null and the default hnsw; chroma_sync.mirror.configuration holds the spann
# settings.
# What should happen: ERROR 0A000 as chroma_create_collection gives (the server indexes with
# "hnsw"), no mirror row, and in (a) no collection left behind.
# Fixed (see the commit of red team 196-200).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_mirror_spann_ignored');
my $log0 = log_offset($node);
fresh_collection($node, $_) for qw(cs_t197_a cs_t197_b);
make_table($node, 't197a', rows => 3);
make_table($node, 't197b', rows => 3);
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t197_b')});

# the same settings through chroma_create_collection are refused (TAP 180's fix)
my ($r0, $o0, $e0) = $node->psql('postgres',
	q{SELECT chroma_create_collection('cs_t197_c', configuration => '{"spann": {"search_nprobe": 4}}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e0, qr/ERROR:  0A000:/, 'chroma_create_collection refuses them with 0A000');

for my $case ([ 't197a', 'cs_t197_a', 'no collection yet' ], [ 't197b', 'cs_t197_b', 'an existing HNSW collection' ])
{
	my ($table, $coll, $what) = @$case;
	my ($ret, $out, $err) = $node->psql('postgres', qq{
SELECT chroma_mirror('$table', collection => '$coll', document_column => 'doc',
	configuration => '{"spann": {"search_nprobe": 4}}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $cfg = $node->safe_psql('postgres', qq{SELECT coalesce((SELECT
		chroma_collection('$coll')->'configuration' WHERE EXISTS (SELECT 1 FROM
		chroma_list_collections() WHERE name = '$coll'))::text, 'none')});
	my $rec = $node->safe_psql('postgres',
		qq{SELECT coalesce(configuration::text, 'no row or NULL') FROM chroma_sync.mirror
		   WHERE collection = '$coll' UNION ALL SELECT 'no row' LIMIT 1});
	note("$what: exit $ret [$err]; collection configuration $cfg; recorded $rec");
	like($err, qr/ERROR:  0A000:/, "chroma_mirror with spann settings, $what: refused with 0A000");
	unlike($rec, qr/spann/, "$what: no mirror records spann settings its collection lacks");
}

assert_no_crash($node, $log0);
done_testing();
