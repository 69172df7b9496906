# RED TEAM REPRO (names as identities, as in TAP 950/951/956): chroma_unmirror(...,
# drop_collection => true) deletes, at commit, whatever collection now has the name the
# mirror was created with (chroma_api_delete_collection(m->collection)), not the mirror's
# collection id. After a rename of the mirror's collection (chroma_modify_collection) the
# name can belong to another role's collection: a table owner allowed only chroma_mirror
# and chroma_unmirror deletes a collection it has no right to (it may not call
# chroma_delete_collection), while its own collection stays.
#
# Sequence: role alice owns table t, mirrored into cs_t297 (collection U); the
# superuser renames cs_t297 to cs_t297_old (chroma_modify_collection); role mallory
# mirrors its table m into cs_t297 (a new collection V); alice runs
# chroma_unmirror('t', drop_collection => true).
# Observed: V (mallory's collection, in use by mallory's mirror) is deleted; U, alice's
# collection, is still there.
# Expected: the mirror's own collection (U) is dropped, or nothing; mallory's collection
# is untouched.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t297';
my $old = 'cs_t297_old';
my $node = new_node('t297');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
fresh_collection($node, $coll);
fresh_collection($node, $old);
for my $r ('alice', 'mallory')
{
	q1("CREATE ROLE $r");
	q1("GRANT EXECUTE ON FUNCTION chroma_mirror, chroma_unmirror TO $r");
}
q1('CREATE TABLE t (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO t SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
q1('ALTER TABLE t OWNER TO alice');
q1('CREATE TABLE m (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO m SELECT i, ARRAY[0, i, 0] FROM generate_series(1, 3) i');
q1('ALTER TABLE m OWNER TO mallory');

my $u = q1("SET ROLE alice; SELECT chroma_mirror('t', collection => '$coll')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 't backfilled');
q1("SELECT chroma_modify_collection('$coll', new_name => '$old')");
my $v = q1("SET ROLE mallory; SELECT chroma_mirror('m', collection => '$coll')");
isnt($v, $u, 'mallory\'s mirror made a new collection of the name');
is(q1("SELECT chroma_flush('m', interval '60 seconds')"), 't', 'm backfilled');
my ($ret, $out, $err) = $node->psql('postgres',
	"SET ROLE alice; SELECT chroma_delete_collection('$coll')");
isnt($ret, 0, 'alice may not delete collections herself');

q1("SET ROLE alice; SELECT chroma_unmirror('t', drop_collection => true)");
is(q1("SELECT coalesce((SELECT id::text FROM chroma_list_collections() WHERE name = '$coll'), 'gone')"), $v,
	'mallory\'s collection is still there after alice\'s unmirror');
finish($node, $log0);
