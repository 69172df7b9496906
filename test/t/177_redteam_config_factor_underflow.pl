# Red team: chroma_create_collection's configuration and chroma_modify_collection's
# new_configuration check that hnsw.resize_factor is "a number greater than 0"
# (collection_config.c, CFG_FACTOR) on the jsonb numeric, then send its text as is. A
# number such as 1e-400 is greater than 0 as a numeric, but has no float64 other than 0:
# Chroma parses it as 0.0 and stores resize_factor 0.0, the very value the check refuses
# ('{"hnsw": {"resize_factor": 0}}' is an ERROR). SPANN's values (all CFG_FACTOR but
# space) pass the same way. 1e400, at the other end, reaches the server, which refuses it
# with its own "number out of range" parse error.
#
# Steps: chroma_create_collection(..., configuration => '{"hnsw": {"resize_factor":
# 1e-400}}'); chroma_modify_collection(..., new_configuration => the same) on another;
# read chroma_collection(name)->'configuration'->'hnsw'->'resize_factor'.
# What happens: both calls succeed and Chroma holds resize_factor 0.0.
# What should happen: ERROR 22023 before anything is sent (the value is 0 once read as the
# float64 Chroma stores; as for metadata numbers, rounded as ::float8 and refused when that
# underflows or overflows), and the collection keeps its resize_factor.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_config_factor_underflow');
my $log0 = log_offset($node);
fresh_collection($node, $_) for qw(cs_t177_a cs_t177_b);

# the check itself: 0 is refused
my ($ret0, $out0, $err0) = $node->psql('postgres',
	q{SELECT chroma_create_collection('cs_t177_a', configuration => '{"hnsw": {"resize_factor": 0}}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err0, qr/ERROR:  22023:.*greater than 0/, 'resize_factor 0 is refused (the check exists)');

my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_create_collection('cs_t177_a', configuration => '{"hnsw": {"resize_factor": 1e-400}}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("create: exit $ret [$out] [$err]");
like($err, qr/ERROR:  22023:/, 'configuration resize_factor 1e-400 is refused with 22023');
my $stored = $node->safe_psql('postgres', q{SELECT coalesce((SELECT
	chroma_collection('cs_t177_a') #>> '{configuration,hnsw,resize_factor}'
	WHERE EXISTS (SELECT 1 FROM chroma_list_collections() WHERE name = 'cs_t177_a')), 'none')});
note("cs_t177_a resize_factor: $stored");
isnt($stored, '0.0', 'no collection with resize_factor 0.0 was created');

$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t177_b')});
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_modify_collection('cs_t177_b', new_configuration => '{"hnsw": {"resize_factor": 1e-400}}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("modify: exit $ret [$out] [$err]");
like($err, qr/ERROR:  22023:/, 'new_configuration resize_factor 1e-400 is refused with 22023');
$stored = $node->safe_psql('postgres',
	q{SELECT chroma_collection('cs_t177_b') #>> '{configuration,hnsw,resize_factor}'});
note("cs_t177_b resize_factor: $stored");
isnt($stored, '0.0', 'cs_t177_b keeps a resize_factor greater than 0');

assert_no_crash($node, $log0);
done_testing();
