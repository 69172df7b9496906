# Red team: chroma_delete_where "never empties a collection by accident" (README, "Deleting
# by filter"), and an empty $and in where_document is refused because Chroma reads it as
# every record. The metadata filter "where" is not checked the same way: '{"$and": []}' is
# sent as is, and Chroma (old and new server alike) matches every record with it, so the
# call deletes the whole collection. Nested inside $or ('{"$or": [{"$and": []}, {"k": 1}]}')
# it does the same.
#
# Steps: a collection of three records with metadata k = 1, 2, 3;
# chroma_delete_where(coll, '{"$and": []}'); then the nested form.
# What happens: it returns 3 and the collection is empty (both forms).
# What should happen: ERROR 22023 before anything is sent (an empty $and/$or in "where" is
# no filter, as where_document's empty $and already is), and the three records stay.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_delete_where_empty_and');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t176');
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t176')});
my $fill = q{SELECT chroma_upsert('cs_t176', ARRAY['a', 'b', 'c'],
	ARRAY[[1, 0], [0, 1], [1, 1]]::real[], ARRAY['apple', 'banana', 'cherry'],
	ARRAY['{"k": 1}', '{"k": 2}', '{"k": 3}']::jsonb[])};

for my $where ('{"$and": []}', '{"$or": [{"$and": []}, {"k": 1}]}')
{
	$node->safe_psql('postgres', $fill);
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{SELECT chroma_delete_where('cs_t176', '$where')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $left = $node->safe_psql('postgres', q{SELECT count(*) FROM chroma_get('cs_t176')});
	note("where $where: exit $ret, returned [$out], error [$err], $left records left");
	like($err, qr/ERROR:  22023:/, "where $where is refused with 22023");
	is($left, '3', "where $where leaves the three records in place");
}

assert_no_crash($node, $log0);
done_testing();
