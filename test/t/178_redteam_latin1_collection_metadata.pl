# Red team: in a LATIN1 database, every record function on a collection whose collection
# metadata holds a character LATIN1 lacks fails, though neither the records nor the filters
# involve that character: chroma_api_get_collection converts Chroma's whole answer (the
# collection's metadata and configuration included) to the database encoding before it
# takes the id out of it. chroma_delete_where, chroma_query_batch, chroma_query, chroma_get
# and chroma_count all stop with 22P05 "character with byte sequence 0xc4 0x81 in encoding
# UTF8 has no equivalent in encoding LATIN1", a message that names no collection, no
# argument and no record. (chroma_collection(name), whose result holds the metadata, may
# rightly refuse.)
#
# Steps: in the UTF-8 database, a collection with metadata {"t": "ā"} and two records whose
# ids, documents and metadata are ASCII; in a LATIN1 database, the calls above.
# What happens: each fails with 22P05.
# What should happen: each succeeds (the metadata of the collection is not part of what
# they return), as they do in the UTF-8 database.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_latin1_collection_metadata');
my $log0 = log_offset($node);
$node->safe_psql('postgres', q{CREATE DATABASE cs_latin1 ENCODING 'LATIN1' LC_COLLATE 'C'
	LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('cs_latin1', 'CREATE EXTENSION chroma_sync');
fresh_collection($node, 'cs_t178');
$node->safe_psql('postgres', q{
SELECT chroma_create_collection('cs_t178', '{"t": "\u0101"}');
SELECT chroma_upsert('cs_t178', ARRAY['a', 'b', 'c'], ARRAY[[1, 0], [0, 1], [1, 1]]::real[],
	ARRAY['apple', 'banana', 'cherry'], ARRAY['{"k": 1}', '{"k": 2}', '{"k": 3}']::jsonb[]);});

my @calls = (
	[ 'chroma_count', q{SELECT chroma_count('cs_t178')}, '3' ],
	[ 'chroma_get', q{SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t178')}, 'a,b,c' ],
	[ 'chroma_query', q{SELECT id FROM chroma_query('cs_t178', ARRAY[1, 0]::real[], 1)}, 'a' ],
	[ 'chroma_query_batch',
		q{SELECT id FROM chroma_query_batch('cs_t178', ARRAY[[1, 0]]::real[], 1)}, 'a' ],
	[ 'chroma_delete_where', q{SELECT chroma_delete_where('cs_t178', '{"k": 3}')}, '1' ],
);
for my $c (@calls)
{
	my ($name, $sql, $want) = @$c;
	my ($ut) = $node->safe_psql('postgres', $sql) if $name ne 'chroma_delete_where';
	is($ut, $want, "$name works in the UTF-8 database") if $name ne 'chroma_delete_where';
	my ($ret, $out, $err) = $node->psql('cs_latin1', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	note("$name in LATIN1: exit $ret [$out] [$err]");
	is($out, $want, "$name works in the LATIN1 database");
	unlike($err, qr/ERROR/, "$name raises no error in the LATIN1 database");
}

assert_no_crash($node, $log0);
done_testing();
