# A cluster with chroma_sync preloaded reaches the Chroma server the harness started.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $url = $ENV{CHROMA_URL}
  or BAIL_OUT('CHROMA_URL is not set: run the TAP tests through test/run_all.sh');

my $node = PostgreSQL::Test::Cluster->new('basic');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'chroma_sync'
chroma_sync.url = '$url'
});
$node->start;

my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'CREATE EXTENSION chroma_sync');
is($ret, 0, 'CREATE EXTENSION chroma_sync') or diag($stderr);

($ret, $stdout, $stderr) =
  $node->psql('postgres', 'SELECT chroma_heartbeat() > 0');
is($stdout, 't', 'chroma_heartbeat() reaches the Chroma server') or diag($stderr);

$node->stop;
done_testing();
