# Red team: chroma_create_collection's 0A000 check (collections.c, after the create)
# compares the index the server made with the index the configuration names:
#   strcmp(chroma_configuration_index(coll.configuration), chroma_configuration_index(configuration))
# A configuration that names no index passes chroma_check_configuration ('{}', or
# '{"hnsw": null}': a null index is skipped), so chroma_configuration_index(configuration)
# is NULL and strcmp reads a NULL pointer: the backend dies with SIGSEGV and the postmaster
# restarts every session.
#
# Steps: chroma_create_collection('cs_t196_a', configuration => '{}'); the same with
# '{"hnsw": null}' and '{"spann": null}' on other names.
# What happened: the server terminates the connection; the log has "terminated by signal 11:
# Segmentation fault" (for each of the three).
# What should happen: the collection is created with the server's defaults (a configuration
# naming no index asks nothing of it), or an ERROR 22023 naming the configuration; no crash.
# Fixed (see the commit of red team 196-200).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use ChromaSyncTest;

my $node = new_node('redteam_config_no_index_crash');
my $log0 = log_offset($node);
my %cases = (cs_t196_a => '{}', cs_t196_b => '{"hnsw": null}', cs_t196_c => '{"spann": null}');
fresh_collection($node, $_) for sort keys %cases;

for my $coll (sort keys %cases)
{
	my ($ret, $out, $err) = $node->psql('postgres',
		qq{SELECT chroma_create_collection('$coll', configuration => '$cases{$coll}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	note("$cases{$coll}: exit $ret [$out] [$err]");
	ok($ret == 0 || $err =~ /ERROR:  22023:/,
		"configuration $cases{$coll}: created, or refused with 22023 (exit $ret)");
	unlike($err, qr/server closed the connection|terminated abnormally/,
		"configuration $cases{$coll}: the backend survives");
	# restart_after_crash is off in the tests: start the node again after a crash
	my $up = $node->psql('postgres', 'SELECT 1') == 0;
	if (!$up)
	{
		my $pidfile = $node->data_dir . '/postmaster.pid';
		for (1 .. 100) { last unless -e $pidfile; usleep(100_000) }
		$node->_update_pid(0);
		$node->start;
	}
}

assert_no_crash($node, $log0);
done_testing();
