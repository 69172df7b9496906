# chroma_sync runs only from shared_preload_libraries (issue 20, item 10). Loaded later, its
# settings would be undefined in the sessions that had not loaded it, and there
# ALTER ROLE ... SET chroma_sync.api_key was stored unchecked in pg_db_role_setting, which
# every user reads. Without the preload: CREATE EXTENSION, LOAD, and the first call of any
# of its functions (a write to a mirrored table included) fail with 55000 and a hint. The
# update to 0.5 removes keys stored per role or per database earlier, with a warning.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = PostgreSQL::Test::Cluster->new('preload_required');
$node->init;
$node->append_conf('postgresql.conf', "log_line_prefix = '%m [%p] %b '\n");
$node->start;
my $offset = log_offset($node);

# $sql fails with SQLSTATE 55000 and the preload message and hint.
sub refused_without_preload
{
	my ($sql, $name) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	ok( $ret != 0
		  && $err =~ /ERROR:\s+55000: chroma_sync must be loaded via shared_preload_libraries/
		  && $err =~ /HINT:\s+Add chroma_sync to shared_preload_libraries/,
		$name) or diag("stdout: $out\nstderr: $err");
	return;
}

refused_without_preload('CREATE EXTENSION chroma_sync', 'CREATE EXTENSION without the preload: 55000');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0', 'and the extension was not created');
refused_without_preload("CREATE EXTENSION chroma_sync VERSION '0.1'",
	'CREATE EXTENSION of an older version without the preload: 55000');
refused_without_preload("LOAD 'chroma_sync'", 'LOAD without the preload: 55000');

# A superuser may store any not-yet-defined setting; a key stored that way (as sessions that
# had not loaded the library of earlier releases did) is removed by the update to 0.5.
$node->safe_psql('postgres', q{
CREATE ROLE keyed;
CREATE ROLE "Mixed Case""Keyed";
ALTER ROLE keyed SET chroma_sync.api_key = 'leaked-role-key';
ALTER ROLE "Mixed Case""Keyed" IN DATABASE postgres SET chroma_sync.api_key = 'leaked-role-db-key';
ALTER DATABASE postgres SET chroma_sync.api_key = 'leaked-db-key';
ALTER ROLE keyed SET work_mem = '8MB'});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_db_role_setting, unnest(setconfig) c
	WHERE c LIKE 'chroma_sync.api_key=leaked-%'}), '3', 'three keys are stored in pg_db_role_setting');

# With the preload: created and used; then the preload is taken away again.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'chroma_sync'\n");
$node->restart;
$node->safe_psql('postgres', "CREATE EXTENSION chroma_sync VERSION '0.4'");
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'the update to 0.5 runs') or diag($err);
is( $node->safe_psql('postgres', q{SELECT count(*) FROM pg_db_role_setting, unnest(setconfig) c
	WHERE c LIKE 'chroma_sync.api_key=%'}), '0', 'the update to 0.5 removed every stored key');
is($node->safe_psql('postgres', q{SELECT setconfig FROM pg_db_role_setting
	WHERE setrole = 'keyed'::regrole AND setdatabase = 0}), '{work_mem=8MB}', 'and nothing else');
my @warnings = $err =~ /WARNING:\s+removed chroma_sync\.api_key stored for ([^\n]*)/g;
is_deeply([ sort @warnings ],
	[ 'role (all), database postgres', 'role Mixed Case"Keyed, database postgres', 'role keyed, database (all)' ],
	'one warning for each key removed') or diag($err);
unlike($err, qr/leaked-/, 'the warnings do not show the keys');

my ($r2, $o2, $e2) = $node->psql('postgres', "\\set VERBOSITY verbose\nALTER ROLE keyed SET chroma_sync.api_key = 'again'");
ok($r2 != 0 && $e2 =~ /ERROR:\s+42501: chroma_sync.api_key cannot be stored per role or per database/,
	'with the preload, ALTER ROLE ... SET chroma_sync.api_key is refused (42501)') or diag($e2);

$node->safe_psql('postgres', q{
CREATE TABLE pr_docs (id int PRIMARY KEY, embedding real[]);
CREATE TRIGGER pr_capture AFTER INSERT ON pr_docs FOR EACH ROW EXECUTE FUNCTION chroma_sync.capture()});
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.status'), '0', 'the status view answers');

$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->restart;
refused_without_preload('SELECT chroma_heartbeat()', 'a function call after the preload was removed: 55000');
refused_without_preload('INSERT INTO pr_docs VALUES (1, ARRAY[1]::real[])',
	'a write to a table with the capture trigger after the preload was removed: 55000');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pr_docs'), '0', 'the refused write wrote nothing');

assert_no_crash($node, $offset);
$node->stop;
done_testing();
