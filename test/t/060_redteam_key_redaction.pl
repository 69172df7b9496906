# Red team: ways the API key a session sets still reaches the server log or
# pg_stat_activity (TAP 032 covers the simple-protocol SET forms). Each check fails on
# main of 2026-12-01: PREPARE/EXECUTE, the extended protocol's parse/bind/execute log
# lines and their "parameters:" DETAIL, an error's CONTEXT, pg_stat_activity during
# EXECUTE.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $node = new_node('redteam_key',
	conf => "log_statement = 'all'\nlog_min_duration_statement = 0\nlog_min_error_statement = error\n");
my $log0 = log_offset($node);

# PREPARE ... EXECUTE: the EXECUTE statement's text does not name the setting
$node->safe_psql('postgres',
	"PREPARE p(text) AS SELECT pg_catalog.set_config('chroma_sync.api_key', \$1, false);\n"
	  . "EXECUTE p('K060-prep')");

# the extended protocol (pgbench -M extended): a literal, and a bound parameter
my $script = "${PostgreSQL::Test::Utils::tmp_check}/k060.sql";
open(my $fh, '>', $script) or die;
print $fh "SET chroma_sync.api_key = 'K060-extlit';\n";
print $fh "SELECT pg_catalog.set_config('chroma_sync.api_key', :k, false);\n";
close($fh);
my ($out, $err) = ('', '');
IPC::Run::run([ 'pgbench', '-n', '-M', 'extended', '-t', '1', '-D', 'k=K060-param',
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);
like($out, qr/number of transactions actually processed: 1/, 'pgbench ran the script');

# an error inside a statement run by PL/pgSQL: its CONTEXT repeats the statement
my ($ret, $o2, $e2) = $node->psql('postgres',
	"DO \$\$BEGIN EXECUTE pg_catalog.format('SET chroma_sync.api_key = %L', E'K060-ctx\\x01'); END\$\$");
like($e2, qr/must not contain control characters/, 'the refused key is an error');

# pg_stat_activity while EXECUTE of a statement that sets the key runs
my ($bout, $berr) = ('', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
		'-c', "PREPARE q(text) AS SELECT pg_catalog.set_config('chroma_sync.api_key', \$1, false)",
		'-c', "EXECUTE q('K060-act'); SELECT pg_sleep(4)" ],
	'>', \$bout, '2>', \$berr);
my $seen = '';
ok(wait_for('the sleeping statement', 10, sub {
	$seen = $node->safe_psql('postgres',
		"SELECT query FROM pg_stat_activity WHERE wait_event = 'PgSleep'");
	$seen ne '' }), 'the statement runs');
unlike($seen, qr/K060/, "pg_stat_activity shows it without the key: $seen");
$h->finish;

my $log = slurp_file($node->logfile, $log0);
for my $k (qw(prep extlit param ctx act))
{
	my @lines = grep { /K060-$k/ } split /\n/, $log;
	ok(!@lines, "the server log does not hold the key 'K060-$k'")
	  or diag(join("\n", @lines));
}
finish($node, $log0);
