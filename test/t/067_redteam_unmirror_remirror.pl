# Red team: chroma_unmirror(drop_collection => true) and chroma_mirror into the same
# collection name in one transaction (to change a mirror's options): the commit dropped
# the collection by name, which was by then the new mirror's; the new mirror ended
# paused with a 404. Now chroma_mirror refuses that name in such a transaction (55000),
# nothing changes, and the same done in two transactions works.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_remirror');
my $log0 = log_offset($node);
make_table($node, 'docs', rows => 20, dim => 4);
fresh_collection($node, 'cs_t067');
mirror($node, 'docs', 'cs_t067');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '60 seconds')"), 't', 'backfilled');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
SELECT chroma_unmirror('docs', true);
SELECT chroma_mirror('docs', collection => 'cs_t067', document_column => 'doc');
COMMIT;}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000.*collection "cs_t067" is dropped when this transaction commits/s,
	'chroma_mirror into a collection this transaction drops is refused (55000)');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t067'"),
	'1', 'the collection is still there');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror"), '1', 'so is the mirror');
$node->safe_psql('postgres', "SELECT chroma_unmirror('docs', true)");
mirror($node, 'docs', 'cs_t067');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t067'"),
	'1', 'in two transactions: the new mirror has its collection');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs', interval '30 seconds')"), 't',
	'the new mirror backfills');
isnt(status_row($node, 'docs', 'state'), 'paused', 'the new mirror is not paused');
assert_equal($node, 'docs', 'cs_t067', name => 'after mirroring again');
finish($node, $log0);
