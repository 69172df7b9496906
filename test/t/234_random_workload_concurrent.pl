# The randomized workload of TAP 050 (test/t/050_random_workload.pl, RandomWorkload.pm) with
# 4 requests in flight per mirror (chroma_sync.max_concurrent_requests = 4) and batches of
# 20 records, so the drain and the backfill keep several requests in flight while the
# sessions write, the nemesis terminates the worker, kills Chroma, stalls the worker and
# crash-restarts the cluster: every collection must still equal its table.
#
# Same environment as 050: CHROMA_SYNC_SEED=N replays a run's transactions (the seed is
# printed), CHROMA_SYNC_TXNS (default here 3000), CHROMA_SYNC_SESSIONS, CHROMA_SYNC_NEMESIS,
# CHROMA_SYNC_CRASHES.
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
our %CONF_OVERRIDE = (max_concurrent_requests => 4, batch_size => 20);
our $TEST_NUMBER = '224';
my $file = "$FindBin::RealBin/050_random_workload.pl";
do $file;
die "$file: $@" if $@;
