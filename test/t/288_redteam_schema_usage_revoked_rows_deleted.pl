# RED TEAM REPRO (c95bb3b): the README promises that rows the table's owner cannot read go
# to chroma_sync.failed ("permission denied"). When the owner loses USAGE on the schema of
# the key column's type (a domain s.tag), every read of a changed row fails ("permission
# denied for schema s", the "$1::s.tag[]" cast), and key_castable's "$1::text::s.tag"
# fails the same way, so sync_read_rows takes each changed row for "no key of the table"
# and DELETES its record from Chroma. When USAGE is granted back, nothing sends those rows
# again: they are missing from Chroma for good (a failed row would have been retried).
#
# Sequence: role alice; schema s with DOMAIN s.tag AS text, USAGE granted to alice; table t
# (id s.tag PRIMARY KEY, embedding real[]) owned by alice, rows a, b, c, mirrored and
# flushed; REVOKE USAGE ON SCHEMA s FROM alice; UPDATE t id 'b'; chroma_flush; GRANT USAGE
# back; chroma_retry_failed; chroma_flush.
# Observed: id 'b' deleted from Chroma while the privilege was missing, no failed row, and
# still missing after the grant (chroma_verify 3|1|0|0).
# Expected: row b (a row of the table) is never deleted from Chroma; it is a failed row
# while unreadable and is sent once readable: chroma_verify exact at the end.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t288';
my $node = new_node('t288');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE ROLE alice LOGIN');
q1('CREATE SCHEMA s');
q1('CREATE DOMAIN s.tag AS text');
q1('GRANT USAGE ON SCHEMA s TO alice');
q1('CREATE TABLE t (id s.tag PRIMARY KEY, embedding real[])');
q1(q{INSERT INTO t VALUES ('a', ARRAY[1,0,0]), ('b', ARRAY[0,1,0]), ('c', ARRAY[0,0,1])});
q1('ALTER TABLE t OWNER TO alice');
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('t', collection => '$coll')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');
my ($rec) = read_collection($coll);
is(join(',', sort keys %$rec), 'a,b,c', 'three records before');

q1('REVOKE USAGE ON SCHEMA s FROM alice');
q1(q{UPDATE t SET embedding = ARRAY[7, 7, 7] WHERE id = 'b'});
$node->psql('postgres', "SELECT chroma_flush('t', interval '20 seconds')");
sleep(3);
diag('failed while revoked: ' . q1(q{SELECT coalesce(string_agg(id || ' ' || error, '; '), 'none') FROM chroma_sync.failed}));
($rec) = read_collection($coll);
ok(exists $rec->{'b'}, 'while USAGE is revoked, the record of row b is still in Chroma');

q1('GRANT USAGE ON SCHEMA s TO alice');
$node->psql('postgres', "SELECT chroma_retry_failed('t')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'flushed after the grant');
sleep(2);
($rec) = read_collection($coll);
is(join(',', sort keys %$rec), 'a,b,c', 'after the grant, Chroma ids equal the table keys');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('t')}), '3|0|0|0', 'chroma_verify(t): exact');
finish($node, $log0);
