# RED TEAM REPRO (c95bb3b): a row of the table whose key text no longer passes its key
# domain's CHECK (a constraint added NOT VALID: the rows already there keep their values)
# is judged "no key of the table" by sync_rows.c key_castable, and its record is DELETED
# from Chroma, though the row is in the table.
#
# Sequence: CREATE DOMAIN posint AS int; table t (id posint PRIMARY KEY, embedding real[],
# doc text) rows -1, 1, 2 mirrored and flushed (3 records); ALTER DOMAIN posint ADD
# CONSTRAINT positive CHECK (VALUE > 0) NOT VALID; UPDATE t SET doc = 'changed' WHERE id = -1
# (the row keeps its key); chroma_flush.
# Observed: the drain reads the key with "id = ANY ($1::public.posint[])" (fails: the
# domain's check), then key_castable's "$1::text::public.posint" fails too, so the key is
# taken as no row of the table: id "-1" is deleted from Chroma; no failed row.
# Expected: the record of row -1 stays in Chroma (updated, or at worst left as it was with a
# chroma_sync.failed row, as before c95bb3b): a row of the table is never deleted.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use ChromaRest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t285';
my $node = new_node('t285');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE DOMAIN posint AS int');
q1('CREATE TABLE t (id posint PRIMARY KEY, embedding real[], doc text)');
q1(q{INSERT INTO t VALUES (-1, ARRAY[1,0,0], 'minus one'), (1, ARRAY[0,1,0], 'one'), (2, ARRAY[0,0,1], 'two')});
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('t', collection => '$coll', document_column => 'doc')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');
my ($rec) = read_collection($coll);
is(join(',', sort keys %$rec), '-1,1,2', 'three records before');

q1('ALTER DOMAIN posint ADD CONSTRAINT positive CHECK (VALUE > 0) NOT VALID');
q1(q{UPDATE t SET doc = 'changed' WHERE id = -1});
is(q1('SELECT count(*) FROM t WHERE id = -1'), '1', 'row -1 is still a row of t');
q1("SELECT chroma_flush('t', interval '60 seconds')");
sleep(2);
diag('failed: ' . q1(q{SELECT coalesce(string_agg(id || ' ' || error, '; '), 'none') FROM chroma_sync.failed}));
($rec) = read_collection($coll);
ok(exists $rec->{'-1'}, 'the record of row -1 (a row of the table) is still in Chroma');
is(join(',', sort keys %$rec), '-1,1,2', 'Chroma ids equal the table keys');
finish($node, $log0);
