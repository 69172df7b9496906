# RED TEAM REPRO (found reviewing f55306c; fails the same at 7fcd740, before the three commits
# reviewed, so older): a mirror in a LATIN1 database never syncs: every step of the worker
# fails with "cannot perform encoding conversion outside a transaction" (server log, every
# 2 s), the backfill never starts and chroma_flush times out. Every row committed to the
# table is missing from Chroma.
#
# Sequence: CREATE DATABASE cs_latin1 ENCODING LATIN1; CREATE EXTENSION chroma_sync there;
# table t rows 1..3 (ASCII only); chroma_mirror('t', collection => 'cs_t302');
# chroma_flush('t', 30 s).
# Observed (on 6334719 and on 7fcd740): chroma_flush returns false; chroma_count('cs_t302')
# = 0; chroma_sync.status 'error'; the server log has
# "chroma_sync: mirror of "cs_t302" failed: cannot perform encoding conversion outside a
# transaction" every 2 s.
# Probable cause: the worker parses Chroma's JSON answers (pre-flight, the owner check's
# chroma_api_get_collection) with chroma_parse_body, whose pg_any_to_server runs outside a
# transaction in the worker (pg_do_encoding_conversion refuses that); the pre-flight is
# never cached, so every step fails. No TAP test mirrors a table of a non-UTF-8 database
# (041 and 178 call record functions only). f55306c's TAP 178 fix covers the record
# functions, not the worker.
# Expected: the backfill sends the 3 rows, as in a UTF-8 database.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('t302');
my $log0 = log_offset($node);
my $coll = 'cs_t302';
$node->safe_psql('postgres', q{CREATE DATABASE cs_latin1 ENCODING 'LATIN1' LC_COLLATE 'C'
	LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('cs_latin1', 'CREATE EXTENSION chroma_sync');
sub l1 { return $node->safe_psql('cs_latin1', $_[0]); }
fresh_collection($node, $coll);
l1('CREATE TABLE t (id int PRIMARY KEY, embedding real[])');
l1('INSERT INTO t SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
l1("SELECT chroma_mirror('t', collection => '$coll')");
is(l1("SELECT chroma_flush('t', interval '30 seconds')"), 't', 'chroma_flush: backfilled');
is(l1("SELECT chroma_count('$coll')"), '3', 'the 3 rows are in Chroma');
diag('status: ' . l1(q{SELECT state || ' | ' || coalesce(last_error, '') FROM chroma_sync.status}));
my $log = slurp_file($node->logfile, $log0);
my @fails = ($log =~ /(chroma_sync: mirror of "$coll" failed[^\n]*)/g);
diag(scalar(@fails) . ' failures logged; first: ' . ($fails[0] // 'none'));
is(scalar(@fails), 0, 'no step of the mirror failed');
finish($node, $log0);
