# chroma_sync.max_records_per_second: the worker's drain and backfill stay under the limit
# (a loose bound: the figure is a rate, measured over several seconds).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use ChromaSyncTest;

my $limit = 200;
my $node = new_node('rate', conf => "chroma_sync.max_records_per_second = $limit\n");
my $log0 = log_offset($node);

# backfill of 1,000 rows
make_table($node, 'rl_docs', rows => 1000, dim => 8);
fresh_collection($node, 'rl_docs_t017');
my $t0 = time();
mirror($node, 'rl_docs', 'rl_docs_t017');
is($node->safe_psql('postgres', "SELECT chroma_flush('rl_docs', '120 s')", timeout => 150),
	't', 'the backfill finishes');
my $rate = 1000 / (time() - $t0);
ok($rate <= $limit * 1.3, sprintf('backfill: %.0f records/s, limit %d', $rate, $limit));

# drain of 1,000 changes
$t0 = time();
$node->safe_psql('postgres', "UPDATE rl_docs SET doc = coalesce(doc, '') || ' (changed)'");
is($node->safe_psql('postgres', "SELECT chroma_flush('rl_docs', '120 s')", timeout => 150),
	't', 'the drain finishes');
$rate = 1000 / (time() - $t0);
ok($rate <= $limit * 1.3, sprintf('drain: %.0f records/s, limit %d', $rate, $limit));

# without the limit the same drain is faster: the limit is what held it back
set_conf($node, 'chroma_sync.max_records_per_second', '0');
$t0 = time();
$node->safe_psql('postgres', "UPDATE rl_docs SET doc = coalesce(doc, '') || ' (again)'");
is($node->safe_psql('postgres', "SELECT chroma_flush('rl_docs', '120 s')", timeout => 150),
	't', 'the unlimited drain finishes');
my $free = 1000 / (time() - $t0);
ok($free > $rate, sprintf('without the limit: %.0f records/s', $free));

assert_equal($node, 'rl_docs', 'rl_docs_t017');
$node->safe_psql('postgres', "SELECT chroma_unmirror('rl_docs', drop_collection => true)");
finish($node, $log0);
