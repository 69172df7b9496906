# The API key set in a session stays out of the server log (log_statement = all, error
# reports with their STATEMENT line, log_min_duration_statement) and out of
# pg_stat_activity while the statement that set it runs.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $node = new_node('key_redaction',
	conf => "log_statement = 'all'\nlog_min_duration_statement = 0\nlog_min_error_statement = error\n");
my $log0 = log_offset($node);

$node->safe_psql('postgres', "SET chroma_sync.api_key = 'K032-one'");
$node->safe_psql('postgres', "SET \"chroma_sync\".\"api_key\" TO 'K032-two'");
$node->safe_psql('postgres', "SELECT pg_catalog.set_config('chroma_sync.api_key', 'K032-three', false)");
$node->safe_psql('postgres', "BEGIN; SET LOCAL CHROMA_SYNC.API_KEY = 'K032-four'; COMMIT");
my ($ret, $out, $err) = $node->psql('postgres', "SET chroma_sync.api_key = E'K032-five\\x01'");
like($err, qr/must not contain control characters/, 'a refused value is an error');
($ret, $out, $err) = $node->psql('postgres', "SET chroma_sync.api_key = 'K032-six'; SELECT 1/0");
like($err, qr/division by zero/, 'an error later in a statement that set the key');

# while a statement that set the key runs, pg_stat_activity does not show its text
my ($bout, $berr) = ('', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '-c',
		"SET chroma_sync.api_key = 'K032-seven'; SELECT pg_sleep(4)" ],
	'>', \$bout, '2>', \$berr);
my $seen = '';
ok(wait_for('the sleeping statement', 10, sub {
	$seen = $node->safe_psql('postgres',
		"SELECT query FROM pg_stat_activity WHERE wait_event = 'PgSleep'");
	$seen ne '' }), 'the statement runs');
unlike($seen, qr/K032/, "pg_stat_activity shows it without the key: $seen");
$h->finish;
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%K0' || '32%'"), '0',
	'no session shows the key');

my $log = slurp_file($node->logfile, $log0);
for my $k (qw(one two three four five six seven))
{
	unlike($log, qr/K032-$k/, "the server log does not hold the key 'K032-$k'");
}
like($log, qr/a statement that sets chroma_sync\.api_key: not shown/, 'the log says a statement was hidden');
finish($node, $log0);
