# Red team (79b9cfa): the value read from chroma_sync_unsettled.<db> is trusted whatever it
# is: a time far in the future (the system clock stepped back after the previous worker
# wrote it — an NTP correction, a VM restored — or a damaged file) makes every later
# worker of the database send nothing until then, hours or days, although no request of
# a previous worker can be applied later than its start plus chroma_sync.timeout (at most
# 1 h): so never later than now + chroma_sync.timeout (+ 1 s), whatever the clock did.
#
# Sequence: timeout 8 s, mirror synced; server stopped; the file holds now + 1 day (what a
# clock stepped back a day leaves); server started; UPDATE a row; chroma_flush(60 s).
# Observed: the worker logs "may still be applied until <tomorrow>", chroma_flush returns
# false, nothing syncs (for a day).
# Expected: the wait is capped at now + chroma_sync.timeout (+ pad): the flush returns true.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $coll = 'cs_t252';
my $node = new_node('t252', conf => "chroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
$node->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$node->safe_psql('postgres', 'INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

my $oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'postgres'");
my $future = $node->safe_psql('postgres',
	"SELECT ((extract(epoch FROM now() + interval '1 day') - 946684800) * 1000000)::bigint");
$node->stop;
my $file = $node->data_dir . "/chroma_sync_unsettled.$oid";
ok(-e $file, 'the worker kept its file');
open(my $fh, '>', $file) or die "$file: $!";
printf $fh "%020d\n", $future;
close($fh);
my $off = log_offset($node);
$node->start;
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[5, 5, 5] WHERE id = 1');
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'flushed: the wait is bounded by chroma_sync.timeout');
diag(join("\n", grep { /may still be applied/ } split /\n/, slurp_file($node->logfile, $off)));
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('d')}),
	'10|0|0|0', 'chroma_verify: exact');

finish($node, $log0);
