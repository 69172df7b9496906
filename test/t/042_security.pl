# Security, from the point of view of roles that are not superusers (sql/security.sql checks
# the settings one SET at a time; this file covers the whole list on a real cluster):
# - connection settings (url, api_key, api_key_file, tls_verify, ca_file) cannot be changed
#   with SET, set_config, ALTER ROLE SET or ALTER DATABASE SET (also by a database owner);
# - the API key (set in postgresql.conf) is never shown: SHOW, current_setting, pg_settings,
#   pg_file_settings, pg_db_role_setting, and no error message, status text or server log
#   line contains it after connection, HTTP and key-file errors;
# - a role cannot mirror, unmirror or manage a mirror of a table it does not own;
# - the worker reads with the mirror owner's rights: rows the owner cannot read (its SELECT
#   revoked, rows hidden from it by row-level security) never reach Chroma;
# - nobody but the extension reaches chroma_sync's tables and internal functions;
# - the network functions need a GRANT;
# - a caller's search_path cannot make the extension run the caller's operators with the
#   extension owner's rights (trigger, worker, chroma_verify).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

# Recognisable, and only ever in postgresql.conf or a file: Cluster.pm logs every statement.
my $secret = 'h6-SeCrEt-' . join('', map { ('a' .. 'z')[ int(rand(26)) ] } 1 .. 16);
my $file_secret = 'h6-FiLe-' . join('', map { ('a' .. 'z')[ int(rand(26)) ] } 1 .. 16);

my $node = new_node('security', conf => "chroma_sync.api_key = '$secret'\n");
my $log0 = log_offset($node);
my @seen;    # every message the tests provoked, checked for the key at the end

# Runs $sql as $user; returns (exit code, stdout, stderr) with verbose errors (SQLSTATE shown).
sub run_as
{
	my ($user, $sql, %opt) = @_;
	my ($ret, $out, $err) = $node->psql($opt{db} // 'postgres', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $user ], on_error_stop => 1);
	push @seen, $out, $err;
	return ($ret, $out, $err);
}

# $sql run as $user fails with $state and a message matching $re.
sub refused
{
	my ($user, $sql, $state, $re, $name, %opt) = @_;
	my ($ret, $out, $err) = run_as($user, $sql, %opt);
	ok($ret != 0 && $err =~ /ERROR:\s+(?:$state):/ && $err =~ $re, $name)
	  or diag("expected $state matching $re\nstdout: $out\nstderr: $err");
	return $err;
}

sub works
{
	my ($user, $sql, $name, %opt) = @_;
	my ($ret, $out, $err) = run_as($user, $sql, %opt);
	$name //= "$user may run: " . substr($sql =~ s/\s+/ /gr, 0, 60);
	ok($ret == 0, $name) or diag("stdout: $out\nstderr: $err");
	return $out;
}

my $grant_all = q{
DO $$
DECLARE f regprocedure;
BEGIN
	FOR f IN
		SELECT p.oid::regprocedure FROM pg_proc p
		JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid
		WHERE e.extname = 'chroma_sync' AND p.proname LIKE 'chroma\_%'
	LOOP
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', f, '%ROLE%');
	END LOOP;
END $$};

# alice: an application role allowed to mirror its own tables (every function granted).
# mallory: every function granted too, owns a schema and a database, owns no mirrored table.
# nobody: no grant at all.
$node->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE ROLE nobody LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE DATABASE mallorydb OWNER mallory;
} . ($grant_all =~ s/%ROLE%/alice/r) . ";\n" . ($grant_all =~ s/%ROLE%/mallory/r));

# ---------------------------------------------------------------- connection settings
my @conn = (
	[ 'chroma_sync.url', 'http://169.254.169.254/' ],
	[ 'chroma_sync.api_key', 'mallory-key' ],
	[ 'chroma_sync.api_key_file', '/etc/passwd' ],
	[ 'chroma_sync.tls_verify', 'off' ],
	[ 'chroma_sync.ca_file', '/tmp/mallory-ca.pem' ]);
for my $c (@conn)
{
	my ($name, $value) = @$c;
	my $perm = qr/permission denied to set parameter "\Q$name\E"/;
	refused('mallory', "SET $name = '$value'", '42501', $perm, "SET $name is refused");
	refused('mallory', "SELECT set_config('$name', '$value', false)", '42501', $perm,
		"set_config('$name') is refused");
	refused('mallory', "SELECT set_config('$name', '$value', true)", '42501', $perm,
		"set_config('$name', is_local) is refused");
	refused('mallory', "ALTER ROLE mallory SET $name = '$value'", '42501', $perm,
		"ALTER ROLE SET $name is refused");
	refused('mallory', "ALTER DATABASE mallorydb SET $name = '$value'", '42501', $perm,
		"ALTER DATABASE SET $name is refused, also to the database's owner");
	refused('mallory', "ALTER ROLE mallory IN DATABASE mallorydb SET $name = '$value'", '42501', $perm,
		"ALTER ROLE IN DATABASE SET $name is refused");
}
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_db_role_setting WHERE array_to_string(setconfig, ' ') LIKE '%chroma_sync%'}),
	'0', 'nothing was stored in pg_db_role_setting');
is($node->safe_psql('postgres', 'SELECT current_setting($$chroma_sync.url$$)'),
	$ENV{CHROMA_URL}, 'chroma_sync.url is still the configured one');

# ---------------------------------------------------------------- the key is never shown
# PostgreSQL 15: "must be superuser or have privileges of pg_read_all_settings to examine";
# 16+: "permission denied to examine" (the same refusal, reworded)
my $examine = qr/must be superuser or have privileges of pg_read_all_settings|permission denied to examine/;
refused('mallory', 'SHOW chroma_sync.api_key', '42501', $examine,
	'SHOW chroma_sync.api_key is refused to an ordinary role');
refused('mallory', q{SELECT current_setting('chroma_sync.api_key')}, '42501', $examine,
	'current_setting(api_key) is refused');
refused('mallory', q{SELECT current_setting('chroma_sync.api_key', true)}, '42501', $examine,
	'current_setting(api_key, missing_ok) is refused too');
refused('mallory', 'SHOW chroma_sync.api_key_file', '42501', $examine,
	'SHOW chroma_sync.api_key_file is refused');
is(works('mallory', q{SELECT count(*) FROM pg_settings WHERE name LIKE 'chroma_sync.api_key%'}),
	'0', 'pg_settings lists neither api_key nor api_key_file to an ordinary role');
refused('mallory', 'SELECT * FROM pg_file_settings', '42501', qr/permission denied/,
	'pg_file_settings (which holds postgresql.conf values) is refused');
is($node->safe_psql('postgres', 'SHOW chroma_sync.api_key'), '********',
	'a superuser sees the key masked');
# (log_statement off for this one: the statement itself names the key)
is($node->safe_psql('postgres',
		qq{SET log_statement = 'none';
SELECT count(*) FROM pg_settings WHERE setting LIKE '%$secret%' OR reset_val LIKE '%$secret%' OR boot_val LIKE '%$secret%'}),
	'0', 'pg_settings never holds the key, even for a superuser');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_show_all_settings() WHERE name = 'chroma_sync.api_key'}),
	'0', 'SHOW ALL does not list the key');
is(works('mallory', 'SELECT count(*) FROM pg_db_role_setting'), '0',
	'pg_db_role_setting (readable by everyone) holds nothing');

# ---------------------------------------------------------------- mirrors of others' tables
$node->safe_psql('postgres', q{
CREATE TABLE alice.docs (id int PRIMARY KEY, embedding real[], doc text, secret boolean NOT NULL DEFAULT false);
ALTER TABLE alice.docs OWNER TO alice;
GRANT USAGE ON SCHEMA alice TO mallory;
GRANT SELECT, INSERT, UPDATE, DELETE ON alice.docs TO mallory;
INSERT INTO alice.docs SELECT g, ARRAY[g, 1, 0]::real[], 'doc ' || g FROM generate_series(1, 20) g;
SELECT chroma_delete_collection('cs_t042_alice', true);
SELECT chroma_delete_collection('cs_t042_mallory', true);
});
works('alice', q{SELECT chroma_mirror('alice.docs', collection => 'cs_t042_alice', document_column => 'doc')},
	'the owner mirrors its table');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_alice')}, '20', 60),
	'the backfill sends its 20 rows');

my $owner = qr/must be owner of table docs/;
refused('mallory', q{SELECT chroma_mirror('alice.docs', collection => 'cs_t042_mallory')}, '42501', $owner,
	'chroma_mirror of a table it does not own (even with every privilege on its rows)');
for my $call (
	q{chroma_unmirror('alice.docs')},
	q{chroma_unmirror('alice.docs', drop_collection => true)},
	q{chroma_pause('alice.docs')},
	q{chroma_resume('alice.docs')},
	q{chroma_resync('alice.docs')},
	q{chroma_retry_failed('alice.docs')},
	q{chroma_adopt('alice.docs')},
	q{chroma_verify('alice.docs')})
{
	refused('mallory', "SELECT * FROM $call", '42501', $owner, "$call by another role is refused");
}
is(works('mallory', 'SELECT chroma_retry_failed()'), '0',
	'chroma_retry_failed() without a source retries only the caller\'s own mirrors (none)');
is($node->safe_psql('postgres',
		q{SELECT state, collection FROM chroma_sync.status WHERE source = 'alice.docs'::regclass}),
	'syncing|cs_t042_alice', 'the mirror is untouched (not paused, same collection)');
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t042_mallory'}),
	'0', 'no collection was created for the refused mirror');

# ---------------------------------------------------------------- internal objects
for my $t ('chroma_sync.mirror', 'chroma_sync.queue', 'chroma_sync.failed')
{
	refused('mallory', "SELECT * FROM $t", '42501', qr/permission denied for schema chroma_sync/, "SELECT from $t is refused");
	refused('mallory', "DELETE FROM $t", '42501', qr/permission denied for schema chroma_sync/, "DELETE from $t is refused");
	refused('mallory', "TRUNCATE $t", '42501', qr/permission denied for schema chroma_sync/, "TRUNCATE $t is refused");
}
refused('mallory', q{INSERT INTO chroma_sync.queue (mirror_id, key) VALUES (1, '1')}, '42501',
	qr/permission denied for schema chroma_sync/, 'INSERT into chroma_sync.queue is refused');
refused('mallory', q{UPDATE chroma_sync.mirror SET paused = true}, '42501',
	qr/permission denied for schema chroma_sync/, 'UPDATE of chroma_sync.mirror is refused');
refused('mallory', 'SELECT * FROM chroma_sync.status', '42501', qr/permission denied/,
	'chroma_sync.status needs a grant');
refused('mallory', 'SELECT chroma_sync.config_changed()', '42501', qr/permission denied/,
	'the internal chroma_sync.config_changed() is refused');
refused('mallory', 'SELECT chroma_sync.mirror_column_types(NULL)', '42501', qr/permission denied/,
	'the internal chroma_sync.mirror_column_types() is refused');
refused('mallory', q{CREATE TABLE mallory.t (id int PRIMARY KEY);
CREATE TRIGGER forged AFTER INSERT ON mallory.t FOR EACH ROW EXECUTE FUNCTION chroma_sync.capture('1')},
	'42501', qr/permission denied for schema chroma_sync/,
	'a forged trigger with chroma_sync.capture() cannot be created');
# even with USAGE on the schema (a monitoring role), the privileges of the objects hold
$node->safe_psql('postgres', 'GRANT USAGE ON SCHEMA chroma_sync TO mallory');
for my $t ('chroma_sync.mirror', 'chroma_sync.queue', 'chroma_sync.failed')
{
	refused('mallory', "TRUNCATE $t", '42501', qr/permission denied for table/, "with USAGE on the schema, TRUNCATE $t is still refused");
	refused('mallory', "DELETE FROM $t", '42501', qr/permission denied for table/, "with USAGE on the schema, DELETE from $t is still refused");
}
refused('mallory', 'SELECT chroma_sync.config_changed()', '42501', qr/permission denied for function/,
	'with USAGE on the schema, config_changed() is still refused');
refused('mallory', 'SELECT chroma_sync.capture()', '39P01', qr/must be called as a trigger/,
	'chroma_sync.capture() cannot be called directly');
my $mid = $node->safe_psql('postgres', q{SELECT mirror_id FROM chroma_sync.mirror WHERE source = 'alice.docs'::regclass});
refused('mallory', qq{CREATE TABLE mallory.t2 (id int PRIMARY KEY);
CREATE TRIGGER forged AFTER INSERT ON mallory.t2 FOR EACH ROW EXECUTE FUNCTION chroma_sync.capture('$mid');
INSERT INTO mallory.t2 VALUES (1)}, '55000', qr/does not mirror/,
	"a trigger forged with another table's mirror id (with USAGE) queues nothing");
$node->safe_psql('postgres', 'REVOKE USAGE ON SCHEMA chroma_sync FROM mallory');

# ---------------------------------------------------------------- the network functions
is($node->safe_psql('postgres', q{
SELECT string_agg(p.oid::regprocedure::text, ', ')
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'chroma_sync'
WHERE p.pronamespace = 'public'::regnamespace AND has_function_privilege('nobody', p.oid, 'EXECUTE')}),
	'', 'no function of the extension is executable by a role without a grant');
for my $call (
	'chroma_heartbeat()',
	'chroma_server_info()',
	q{chroma_create_collection('cs_t042_nobody')},
	'chroma_list_collections()',
	q{chroma_upsert('cs_t042_alice', ARRAY['x'], ARRAY[1, 2, 3]::real[])},
	q{chroma_add('cs_t042_alice', ARRAY['x'], ARRAY[1, 2, 3]::real[])},
	q{chroma_update('cs_t042_alice', ARRAY['1'], NULL, ARRAY['changed'])},
	q{chroma_upsert_query('cs_t042_alice', 'SELECT 1 AS id')},
	q{chroma_delete('cs_t042_alice', ARRAY['1'])},
	q{chroma_count('cs_t042_alice')},
	q{chroma_get('cs_t042_alice')},
	q{chroma_query('cs_t042_alice', ARRAY[1, 0, 0]::real[])},
	q{chroma_delete_collection('cs_t042_alice')},
	q{chroma_flush()})
{
	refused('nobody', "SELECT * FROM $call", '42501', qr/permission denied for function/,
		"$call without a grant is refused");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_get('cs_t042_alice')}), '20',
	'the collection is unchanged');
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION chroma_count(text) TO nobody');
is(works('nobody', q{SELECT chroma_count('cs_t042_alice')}), '20', 'after GRANT EXECUTE the function works');
$node->safe_psql('postgres', 'REVOKE EXECUTE ON FUNCTION chroma_count(text) FROM nobody');
refused('nobody', q{SELECT chroma_count('cs_t042_alice')}, '42501', qr/permission denied/, 'and not after REVOKE');

# chroma_upsert_query runs its query with the caller's rights
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION chroma_upsert_query(text, text, boolean) TO nobody');
refused('nobody', q{SELECT chroma_upsert_query('cs_t042_alice', 'SELECT id::text AS id, embedding FROM alice.docs')},
	'42501', qr/permission denied for schema alice/, 'chroma_upsert_query cannot read a table the caller cannot read');
$node->safe_psql('postgres', 'REVOKE EXECUTE ON FUNCTION chroma_upsert_query(text, text, boolean) FROM nobody');

# monitoring: chroma_sync.status shared with a role (the schema needs USAGE too)
$node->safe_psql('postgres', 'GRANT SELECT ON chroma_sync.status TO nobody');
refused('nobody', 'SELECT count(*) FROM chroma_sync.status', '42501', qr/permission denied for schema chroma_sync/,
	'SELECT on the view alone is not enough: the schema needs USAGE');
$node->safe_psql('postgres', 'GRANT USAGE ON SCHEMA chroma_sync TO nobody');
is(works('nobody', q{SELECT source::text || ' ' || state FROM chroma_sync.status}), 'alice.docs syncing',
	'with USAGE on the schema, a monitoring role reads chroma_sync.status');
refused('nobody', 'SELECT count(*) FROM chroma_sync.queue', '42501', qr/permission denied for table queue/,
	'but not the tables behind it');
$node->safe_psql('postgres', 'REVOKE USAGE ON SCHEMA chroma_sync FROM nobody; REVOKE SELECT ON chroma_sync.status FROM nobody');

# ---------------------------------------------------------------- the worker reads as the owner
# 1. The owner's SELECT is revoked: changed rows cannot be read, fail with the reason, and
#    nothing of them reaches Chroma; after the GRANT back they are sent.
works('alice', 'REVOKE SELECT ON alice.docs FROM alice', 'the owner revokes its own SELECT');
$node->safe_psql('postgres', q{INSERT INTO alice.docs VALUES (100, '{100, 1, 0}', 'written without SELECT');
UPDATE alice.docs SET doc = 'changed without SELECT' WHERE id = 1});
ok(poll_query($node, q{SELECT count(*) FROM chroma_sync.failed WHERE source = 'alice.docs'::regclass}, '2', 60),
	'both changed rows fail');
like($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT error, ', ') FROM chroma_sync.failed WHERE source = 'alice.docs'::regclass}),
	qr/permission denied for table docs/, 'with the reason: permission denied');
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_get('cs_t042_alice', ARRAY['100'])}), '0',
	'the unreadable new row is not in Chroma');
is($node->safe_psql('postgres', q{SELECT document FROM chroma_get('cs_t042_alice', ARRAY['1'])}), 'doc 1',
	'the unreadable change is not in Chroma');
works('alice', q{GRANT SELECT ON alice.docs TO alice; SELECT chroma_retry_failed('alice.docs')},
	'SELECT granted back, failed rows retried');
ok(poll_query($node, q{SELECT document FROM chroma_get('cs_t042_alice', ARRAY['1', '100']) ORDER BY id},
		"changed without SELECT\nwritten without SELECT", 60),
	'once readable, the rows are sent');
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_sync.failed WHERE source = 'alice.docs'::regclass}), '0',
	'and leave chroma_sync.failed');

# 2. Row-level security that hides rows from the owner (FORCE: owners are subject to it).
#    Hidden rows are not sent, a row that becomes hidden is deleted from the collection, and a
#    resync removes what the owner cannot see.
$node->safe_psql('postgres', q{
ALTER TABLE alice.docs ENABLE ROW LEVEL SECURITY;
ALTER TABLE alice.docs FORCE ROW LEVEL SECURITY;
CREATE POLICY not_secret ON alice.docs USING (NOT secret);
UPDATE alice.docs SET secret = true, doc = doc || ' (secret)' WHERE id IN (2, 3);
INSERT INTO alice.docs VALUES (101, '{101, 1, 0}', 'secret from the start', true);
INSERT INTO alice.docs VALUES (102, '{102, 1, 0}', 'visible', false);
});
ok(poll_query($node, q{SELECT string_agg(id, ',' ORDER BY id::int) FROM chroma_get('cs_t042_alice') WHERE id::int IN (2, 3, 101, 102)},
		'102', 60),
	'rows hidden by a policy are not in Chroma (rows made secret were deleted), visible ones are');
is(works('alice', q{SELECT count(*) FROM alice.docs}), '20', 'the owner itself sees 20 of the 23 rows');
works('alice', q{SELECT chroma_resync('alice.docs')}, 'the owner resyncs');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_alice')}, '20', 60),
	'after a resync the collection holds exactly the 20 rows the owner can read');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM chroma_get('cs_t042_alice') c JOIN alice.docs d ON d.id::text = c.id WHERE d.secret}),
	'0', 'no secret row is in Chroma');
is(works('alice', q{SELECT rows, missing, extra, different FROM chroma_verify('alice.docs')}), '20|0|0|0',
	'chroma_verify (with the owner\'s rights) agrees');
$node->safe_psql('postgres', 'ALTER TABLE alice.docs NO FORCE ROW LEVEL SECURITY; UPDATE alice.docs SET secret = false');
works('alice', q{SELECT chroma_resync('alice.docs')}, 'the policy no longer applies to the owner: resync');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_alice')}, '23', 60),
	'every row is sent again');

# ---------------------------------------------------------------- search_path hijacking
# A role's own operator "=" put before pg_catalog in search_path must never run with the
# extension owner's (a superuser's) rights. The operators try to make their role a superuser.
my $evil_ops = q{
CREATE FUNCTION %S.eq4(int4, int4) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user) THEN
		EXECUTE 'ALTER ROLE %S SUPERUSER';
	END IF;
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END $f$;
CREATE FUNCTION %S.eq8(int8, int8) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user) THEN
		EXECUTE 'ALTER ROLE %S SUPERUSER';
	END IF;
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END $f$;
CREATE OPERATOR %S.= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = %S.eq4);
CREATE OPERATOR %S.= (LEFTARG = int8, RIGHTARG = int8, FUNCTION = %S.eq8);
};
works('mallory', $evil_ops =~ s/%S/mallory/gr, 'mallory creates "=" operators that grab superuser');
works('alice', $evil_ops =~ s/%S/alice/gr, 'alice creates "=" operators that grab superuser');

# 1. A writer of a mirrored table: the trigger writes the queue as the extension owner.
works('mallory', q{SET search_path = mallory, pg_catalog;
INSERT INTO alice.docs VALUES (200, '{200, 1, 0}', 'by mallory');
UPDATE alice.docs SET doc = 'changed by mallory' WHERE id = 4;
DELETE FROM alice.docs WHERE id = 5;
BEGIN; INSERT INTO alice.docs VALUES (201, '{201, 1, 0}', 'committed at PRE_COMMIT'); COMMIT},
	'mallory writes to the mirrored table with her operators first in search_path');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'the trigger did not run her operator as a superuser');
ok(poll_query($node, q{SELECT string_agg(id || ':' || document, ',' ORDER BY id) FROM chroma_get('cs_t042_alice', ARRAY['200', '201', '4', '5'])},
		'200:by mallory,201:committed at PRE_COMMIT,4:changed by mallory', 60),
	'and her changes were queued and sent');

# 2. The mirror owner's filter changes the worker's search_path (set_config, not local;
#    declared IMMUTABLE, as other filters are refused, but a declaration can lie).
works('alice', q{
CREATE TABLE alice.filtered (id int PRIMARY KEY, embedding real[]);
CREATE FUNCTION alice.hijack(int) RETURNS bool LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	PERFORM pg_catalog.set_config('search_path', 'alice, pg_catalog', false);
	RETURN true;
END $f$;
SELECT chroma_delete_collection('cs_t042_filtered', true);
SELECT chroma_mirror('alice.filtered', collection => 'cs_t042_filtered', filter => 'alice.hijack(id)');
INSERT INTO alice.filtered SELECT g, ARRAY[g, 2, 0]::real[] FROM generate_series(1, 5) g},
	'alice mirrors a table whose filter sets search_path to her schema');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_filtered')}, '5', 60),
	'the worker sends the filtered rows');
$node->safe_psql('postgres', q{INSERT INTO alice.filtered SELECT g, ARRAY[g, 2, 0]::real[] FROM generate_series(6, 10) g});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_filtered')}, '10', 60),
	'and later changes (the worker\'s own statements ran after the filter)');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'}), 'f',
	'the worker did not run her operator as a superuser');

# 3. chroma_verify called by a superuser runs alice's filter: its settings do not stay.
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('alice.filtered');
SELECT current_setting('search_path');
SELECT 1 = 1}), "10|0|0|0\n\"\$user\", public\nt",
	'chroma_verify by a superuser: the filter\'s search_path does not survive it');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'}), 'f',
	'alice is still not a superuser');

# 4. A database owner sets search_path for its database: the worker there is not fooled.
$node->safe_psql('mallorydb', 'CREATE EXTENSION chroma_sync');
$node->safe_psql('mallorydb', ($grant_all =~ s/%ROLE%/mallory/r));
works('mallory', ($evil_ops =~ s/%S/public/gr) =~ s/ALTER ROLE public/ALTER ROLE mallory/gr,
	'mallory creates her operators in her database', db => 'mallorydb');
works('mallory', q{
ALTER DATABASE mallorydb SET search_path = public, pg_catalog;
CREATE TABLE docs (id int PRIMARY KEY, embedding real[]);
SELECT chroma_delete_collection('cs_t042_mallorydb', true);
SELECT chroma_mirror('docs', collection => 'cs_t042_mallorydb');
INSERT INTO docs SELECT g, ARRAY[g, 3, 0]::real[] FROM generate_series(1, 5) g},
	'the owner of a database sets its search_path and mirrors a table there', db => 'mallorydb');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t042_mallorydb')}, '5', 60),
	'the worker of that database sends the rows');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'the worker did not run her operator as a superuser');

# ---------------------------------------------------------------- the key in errors and logs
# Provoke errors with the key configured: a refused connection, HTTP 404, a refused batch,
# a mirror paused because its collection was deleted, and a key file that cannot be read.
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION chroma_heartbeat(), chroma_count(text) TO nobody');
my $closed = PostgreSQL::Test::Cluster::get_free_port();
for my $sql (
	"SET chroma_sync.url = 'http://127.0.0.1:$closed'; SELECT chroma_heartbeat()",
	"SET chroma_sync.url = 'https://127.0.0.1:$closed'; SELECT chroma_count('cs_t042_alice')",
	q{SELECT chroma_count('cs_t042_does_not_exist')},
	q{SELECT chroma_upsert('cs_t042_alice', ARRAY['bad'], ARRAY[1, 2]::real[])},
	q{SET chroma_sync.tenant = 'no_such_tenant'; SELECT chroma_count('cs_t042_alice')})
{
	my ($ret, $out, $err) = run_as('postgres', $sql);
	ok($ret != 0 && $err =~ /ERROR:\s+[0-9A-Z]{5}:/, "an error with a SQLSTATE: $sql")
	  or diag("stdout: $out\nstderr: $err");
}
refused('nobody', q{SELECT chroma_count('cs_t042_does_not_exist')}, '42704', qr/Chroma/,
	'a granted role gets the 404 error');
# a new key on reload: PostgreSQL logs changed settings with their value
$node->append_conf('postgresql.conf', "chroma_sync.api_key = '${secret}2'\n");
$node->reload;
ok(poll_query($node, q{SELECT chroma_count('cs_t042_alice') > 0}, 't', 20), 'the reloaded key is used');
like(slurp_file($node->logfile, $log0), qr/parameter "chroma_sync.api_key" changed/, 'the reload was logged');
# the key from a file, then an unreadable file
my $keyfile = $node->basedir . '/chroma_key';
PostgreSQL::Test::Utils::append_to_file($keyfile, "$file_secret\n");
chmod 0600, $keyfile;
$node->append_conf('postgresql.conf', "chroma_sync.api_key = ''\nchroma_sync.api_key_file = '$keyfile'\n");
$node->reload;
ok(poll_query($node, q{SELECT chroma_count('cs_t042_alice') > 0}, 't', 20), 'the key file is used');
rename($keyfile, "$keyfile.gone");
refused('postgres', q{SELECT chroma_count('cs_t042_alice')}, '58P01', qr/could not open chroma_sync.api_key_file/,
	'a missing key file: the error names the file');
rename("$keyfile.gone", $keyfile);
chmod 0600, $keyfile;
# a mirror paused with an error: its collection is deleted behind it
$node->safe_psql('postgres', q{SELECT chroma_delete_collection('cs_t042_filtered');
INSERT INTO alice.filtered VALUES (11, '{11, 2, 0}')});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'alice.filtered'::regclass}, 'paused', 60),
	'the mirror whose collection was deleted pauses');
push @seen, $node->safe_psql('postgres', q{SELECT string_agg(coalesce(last_error, ''), E'\n') FROM chroma_sync.status});
push @seen, $node->safe_psql('postgres', q{SELECT coalesce(string_agg(error, E'\n'), '') FROM chroma_sync.failed});

my $log = slurp_file($node->logfile, $log0);
ok(length($log) > 0 && $log =~ /ERROR/, 'the server log holds the errors');
for my $k ($secret, $file_secret)
{
	my $part = substr($k, 0, 12);
	ok(!grep({ index($_, $part) >= 0 } @seen), "no error, status or failure text shows the key ($part...)");
	ok(index($log, $part) < 0, "the server log never shows the key ($part...)");
}

finish($node, $log0);
