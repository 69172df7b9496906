# The randomized workload of TAP 050 (test/t/050_random_workload.pl, RandomWorkload.pm) with
# a partitioned table mirrored as one (issue 17): q_parent (four partitions, one of them
# partitioned again) is mirrored into one collection next to 050's mirrors; the sessions
# write through it (partition-key updates move rows between partitions, COPY, INSERT ...
# ON CONFLICT, MERGE, savepoints, prepared transactions, TRUNCATE of the parent) and, now
# and then, to a partition directly (UPDATE, TRUNCATE of one partition), and the nemesis
# detaches partitions (plainly or CONCURRENTLY; a detach left pending by a timeout or the
# crash restart is FINALIZEd) and attaches them again (sometimes written to while
# detached), besides 050's faults. The checker compares every collection with its table
# over Chroma's REST API; for q_parent, with the rows of the partitions attached at the end.
#
# Same environment as 050: CHROMA_SYNC_SEED=N replays a run's transactions (the seed is
# printed), CHROMA_SYNC_TXNS (default here 3000), CHROMA_SYNC_SESSIONS, CHROMA_SYNC_NEMESIS,
# CHROMA_SYNC_CRASHES. Each session's SQL is in tmp_check/log/203_session_N.sql; one
# session's SQL, to replay by hand (from test/t):
#   perl -I. -MRandomWorkload -e 'RandomWorkload::enable_partitioned_mirror(); print map { $_->{sql} } RandomWorkload::session_transactions(SEED, 1, 3000, 4)'
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
# loaded here, at compile time: their INIT blocks must run before the file below runs
use PostgreSQL::Test::Utils;
use PostgreSQL::Test::Cluster;
use Test::More;
use ChromaSyncTest;
use ChromaRest;
use RandomWorkload;

$ENV{CHROMA_SYNC_TXNS} //= 3000;
our $PARTITIONED_WORKLOAD = 1;
my $file = "$FindBin::RealBin/050_random_workload.pl";
do $file;
die "$file: $@" if $@;
