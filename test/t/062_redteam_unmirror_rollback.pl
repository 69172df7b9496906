# Red team: chroma_unmirror(..., drop_collection => true) whose effect is undone still
# deletes the Chroma collection: rolled back to a savepoint (the list of collections to
# drop is cleared only at a top-level abort), or prepared and then rolled back (PREPARE
# keeps the list in the session, whose next commit drops them). The mirror stays, its
# collection is gone, the mirror ends paused. Fails on main of 2026-12-01.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_unmirror', conf => "max_prepared_transactions = 5\n");
my $log0 = log_offset($node);

for my $t ('sp', 'prep')
{
	make_table($node, "docs_$t", rows => 20, dim => 4);
	fresh_collection($node, "cs_t062_$t");
	mirror($node, "docs_$t", "cs_t062_$t");
	is($node->safe_psql('postgres', "SELECT chroma_flush('docs_$t', interval '60 seconds')"), 't',
		"docs_$t backfilled");
}

# ROLLBACK TO SAVEPOINT undoes the unmirror
$node->safe_psql('postgres', q{
BEGIN;
SAVEPOINT s;
SELECT chroma_unmirror('docs_sp', true);
ROLLBACK TO SAVEPOINT s;
COMMIT;});
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror WHERE source = 'docs_sp'::regclass"),
	'1', 'the mirror of docs_sp is still there');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t062_sp'"),
	'1', 'its collection cs_t062_sp still exists');
$node->safe_psql('postgres', "UPDATE docs_sp SET doc = 'after the rollback' WHERE id = 1");
is($node->safe_psql('postgres', "SELECT chroma_flush('docs_sp', interval '15 seconds')"), 't',
	'a change after the rollback is synced');
isnt(status_row($node, 'docs_sp', 'state'), 'paused', 'the mirror is not paused');

# PREPARE TRANSACTION of an unmirror that drops the collection: the drop would happen at
# the session's next commit whatever became of the prepared transaction; it is refused
my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
SELECT chroma_unmirror('docs_prep', true);
PREPARE TRANSACTION 'unmirror_t062';
SELECT 1;}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/0A000.*cannot PREPARE a transaction that drops a Chroma collection/s,
	'PREPARE TRANSACTION after chroma_unmirror(drop_collection => true) is refused (0A000)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing was prepared');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.mirror WHERE source = 'docs_prep'::regclass"),
	'1', 'the mirror of docs_prep is still there');
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t062_prep'"),
	'1', 'its collection cs_t062_prep still exists');
$node->safe_psql('postgres', "UPDATE docs_prep SET doc = 'after the rollback' WHERE id = 1");
is($node->safe_psql('postgres', "SELECT chroma_flush('docs_prep', interval '15 seconds')"), 't',
	'a change after the rollback is synced');
isnt(status_row($node, 'docs_prep', 'state'), 'paused', 'the mirror is not paused');
finish($node, $log0);
