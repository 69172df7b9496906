# RED TEAM REPRO (found reviewing 6334719's owner check, src/sync.c ensure_collection; fails
# the same at 7fcd740, so older): after a takeover in the same database (chroma_mirror(b,
# collection, adopt => true), the HINT's way), the previous mirror of the collection is not paused: it pauses only when its worker next
# checks the collection's owner, up to 60 s later (owner_checked_at is never reset, not by
# the new mirror's configuration change either). Meanwhile it goes on draining its own
# table's changes into the collection the new mirror now owns: a DELETE in the old table
# deletes the id of a row the new owner's table has, and nothing ever sends it again.
#
# Sequence: tables a and b, rows 1..5 each; chroma_mirror('a', 'cs_t301'), flushed;
# chroma_mirror('b', 'cs_t301', adopt => true), flushed (b's backfill sends its 5 rows);
# DELETE FROM a WHERE id = 1; chroma_flush('a'); 5 s; chroma_flush('b').
# Observed (6334719 and 7fcd740): chroma_verify('b') 5|1|0|0 (b's row 1 is missing from
# Chroma), mirror a still 'syncing' (not paused).
# Expected: a takeover stops the previous mirror in this database before it writes again
# (or its writes never reach the collection): b's 5 rows stay in Chroma, 5|0|0|0.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t301';
my $node = new_node('t301');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
for my $t (qw(a b))
{
	q1("CREATE TABLE $t (id int PRIMARY KEY, embedding real[])");
	q1("INSERT INTO $t SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 5) i");
}
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('a', collection => '$coll')");
is(q1("SELECT chroma_flush('a', interval '60 seconds')"), 't', 'a backfilled');
q1("SELECT chroma_mirror('b', collection => '$coll', adopt => true)");
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'b took the collection over and backfilled');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '5|0|0|0', 'b: exact after its backfill');

q1('DELETE FROM a WHERE id = 1');
q1("SELECT chroma_flush('a', interval '10 seconds')");
sleep(5);
diag('a: ' . q1(q{SELECT state FROM chroma_sync.status WHERE source = 'a'::regclass}));
is(q1("SELECT chroma_flush('b', interval '60 seconds')"), 't', 'b flushed');
is(q1(q{SELECT count(*) FROM chroma_get('cs_t301', ARRAY['1'])}), '1', "b's row 1 is still in Chroma");
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('b')}), '5|0|0|0', 'chroma_verify(b): exact');
finish($node, $log0);
