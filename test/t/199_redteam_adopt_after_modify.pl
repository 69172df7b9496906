# Red team: README says "A configuration changed later with chroma_modify_collection is
# not recorded in the mirror", so changing ef_search of a mirror's collection is allowed.
# But chroma_adopt (the way a restored copy takes its mirror's collection over) runs the
# chroma_mirror comparison (mirror_collection in mirror.c) of the recorded configuration
# against the mirror's OWN existing collection, and refuses with 55000. Its hint ("leave
# hnsw.ef_search out of the configuration") cannot be followed: chroma_adopt takes no
# configuration. The only ways out are to change the collection back or to edit
# chroma_sync.mirror.
#
# Steps: chroma_mirror('t199', collection => 'cs_t199', configuration => '{"hnsw":
# {"ef_search": 25}}'); chroma_modify_collection('cs_t199', new_configuration =>
# '{"hnsw": {"ef_search": 50}}'); chroma_adopt('t199') (here in the same database, as after
# a restore, where it is the step README prescribes).
# What happened: ERROR 55000 collection "cs_t199" exists with hnsw.ef_search 50, not 25.
# What should happen: the mirror's own collection is adopted (the recorded configuration is
# for creating it again, and a later chroma_modify_collection is allowed), or the
# modification is refused / recorded so the two cannot disagree.
# Fixed (see the commit of red team 196-200).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_adopt_after_modify');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t199');
make_table($node, 't199', rows => 3);
$node->safe_psql('postgres', q{
SELECT chroma_mirror('t199', collection => 'cs_t199', document_column => 'doc',
	configuration => '{"hnsw": {"ef_search": 25}}')});
# the backfill sent first: the old server answers a modification during writes with
# "database is locked"
is($node->safe_psql('postgres', q{SELECT chroma_flush('t199', interval '60 seconds')}), 't', 'the backfill is sent');
$node->safe_psql('postgres', q{
SELECT chroma_modify_collection('cs_t199', new_configuration => '{"hnsw": {"ef_search": 50}}')});
is($node->safe_psql('postgres',
	q{SELECT chroma_collection('cs_t199') #>> '{configuration,hnsw,ef_search}'}),
	'50', 'chroma_modify_collection changed ef_search');

my ($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_adopt('t199')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
note("chroma_adopt: exit $ret [$err]");
is($ret, 0, 'chroma_adopt takes over the mirror\'s own collection after a chroma_modify_collection');

assert_no_crash($node, $log0);
done_testing();
