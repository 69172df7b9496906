# Red team: a factor is checked as the float64 Chroma reads it (TAP 177's fix), and that
# is what Chroma stores and shows: resize_factor 1.00000000000000001 is created as 1.0. But
# chroma_configuration_conflict (collection_config.c) compares the given value with the
# collection's by numeric_eq on the exact decimals, so the collection chroma_mirror itself
# created from that configuration "disagrees" with it: chroma_adopt of the mirror, and
# chroma_mirror again with the very same configuration after chroma_unmirror, are refused
# with 55000 "exists with hnsw.resize_factor 1.0, not 1.00000000000000001".
#
# Steps: chroma_mirror('t200', collection => 'cs_t200', configuration => '{"hnsw":
# {"resize_factor": 1.00000000000000001}}'); chroma_adopt('t200'); chroma_unmirror
# (collection kept); the same chroma_mirror again.
# What happened: both are refused with 55000.
# What should happen: factors compared as the float64 Chroma reads them (as they are
# checked), so the collection made from a configuration agrees with it.
# Fixed (see the commit of red team 196-200).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_config_factor_rounding_conflict');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t200');
make_table($node, 't200', rows => 3);
my $mirror_sql = q{
SELECT chroma_mirror('t200', collection => 'cs_t200', document_column => 'doc',
	configuration => '{"hnsw": {"resize_factor": 1.00000000000000001}}')};
$node->safe_psql('postgres', $mirror_sql);
note('stored: ' . $node->safe_psql('postgres',
	q{SELECT chroma_collection('cs_t200') #>> '{configuration,hnsw,resize_factor}'}));

my ($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_adopt('t200')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("chroma_adopt: exit $ret [$err]");
is($ret, 0, 'chroma_adopt accepts the collection chroma_mirror made from the configuration');

$node->safe_psql('postgres', q{SELECT chroma_unmirror('t200')});
($ret, $out, $err) = $node->psql('postgres', $mirror_sql,
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("chroma_mirror again: exit $ret [$err]");
is($ret, 0, 'chroma_mirror again with the same configuration accepts the collection it made');

assert_no_crash($node, $log0);
done_testing();
