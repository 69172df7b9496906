# Operators planted in the extension's schema hijack nothing (issue 20, item 1). While an
# extension script runs, search_path is the target schema, then pg_catalog: an operator of
# the exact argument types planted there by a role with CREATE on it wins over pg_catalog's
# (which needs a cast). A role "planter" plants such operators (and a function) in public,
# each running "evil" code that records current_user and tries ALTER ROLE planter SUPERUSER:
#   /  (bigint, numeric)        what 0.1's status view divided (backfill_rows_per_second)
#   =  (oid, regprocedure)      what 0.2 -> 0.3 compared (the grants of chroma_mirror)
#   =  (oid, integer)           ditto (grantee = 0 for PUBLIC)
#   =  (name, text), || (text, integer), format(text, regprocedure, text, text)
# before CREATE EXTENSION (db h_fresh), before CREATE EXTENSION VERSION '0.1' and every
# ALTER EXTENSION UPDATE to 0.5 (db h_upgrade), and under a 0.4 installation whose status
# view an earlier release bound to the planted operator (db h_v04: the update to 0.5 must
# rebind it). Then a superuser reads chroma_sync.status during a backfill, and runs the
# extension's other views, SQL functions and event triggers. The planted code never runs
# and the planter never becomes superuser.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('hostile_operators', extension => 0, conf => q{
# a backfill of 3,000 rows lasts ~15 s: long enough to read the status during it
chroma_sync.max_records_per_second = 200
});
my $offset = log_offset($node);

$node->safe_psql('postgres', qq{
CREATE ROLE planter LOGIN;
CREATE ROLE h_plain;
CREATE DATABASE h_fresh;
CREATE DATABASE h_upgrade;
CREATE DATABASE h_v04});

# What planter does in $db: a log anyone may write to, the evil functions, the operators,
# and domains named like the built-in types the scripts name unqualified (text, jsonb, uuid,
# name, timestamptz). Types have no overloading: while an extension script runs, pg_catalog
# is searched before the target schema (it is not named in search_path), so the built-in
# type is found first; bound_to_public checks that no column or argument took a domain.
sub plant
{
	my ($db) = @_;
	$node->safe_psql($db, 'GRANT CREATE ON SCHEMA public TO planter');
	$node->safe_psql($db, q{
SET ROLE planter;
CREATE TABLE public.hijack_log (who name, what text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT ON public.hijack_log TO PUBLIC;
CREATE FUNCTION public.evil(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.hijack_log (who, what) VALUES (current_user, what);
	BEGIN
		ALTER ROLE planter SUPERUSER;
	EXCEPTION WHEN insufficient_privilege THEN
		NULL;
	END;
END
$$;
CREATE FUNCTION public.evil_div(bigint, numeric) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('/ (bigint, numeric)');
	RETURN $1::pg_catalog.numeric OPERATOR(pg_catalog./) $2; END $$;
CREATE OPERATOR public./ (LEFTARG = bigint, RIGHTARG = numeric, FUNCTION = public.evil_div);
CREATE FUNCTION public.evil_eq_proc(oid, regprocedure) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('= (oid, regprocedure)');
	RETURN $1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regprocedure, FUNCTION = public.evil_eq_proc);
CREATE FUNCTION public.evil_eq_int(oid, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('= (oid, integer)');
	RETURN $1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.evil_eq_int);
CREATE FUNCTION public.evil_eq_name(name, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('= (name, text)');
	RETURN $1::pg_catalog.text OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = text, FUNCTION = public.evil_eq_name);
CREATE FUNCTION public.evil_cat(text, integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('|| (text, integer)');
	RETURN $1 OPERATOR(pg_catalog.||) $2::pg_catalog.text; END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = public.evil_cat);
CREATE FUNCTION public.evil_check(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil(what); RETURN true; END $$;
CREATE DOMAIN public.text AS pg_catalog.varchar CHECK (public.evil_check('domain text'));
CREATE DOMAIN public.jsonb AS pg_catalog.jsonb CHECK (public.evil_check('domain jsonb'));
CREATE DOMAIN public.uuid AS pg_catalog.uuid CHECK (public.evil_check('domain uuid'));
CREATE DOMAIN public.name AS pg_catalog.name CHECK (public.evil_check('domain name'));
CREATE DOMAIN public.timestamptz AS pg_catalog.timestamptz CHECK (public.evil_check('domain timestamptz'));
CREATE FUNCTION public.format(text, regprocedure, text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.evil('format(text, regprocedure, text, text)');
	RETURN pg_catalog.format($1, $2, $3, $4); END $$;
});
	return;
}

# Nothing planted ever ran, and planter is no superuser.
sub assert_not_hijacked
{
	my ($db, $when) = @_;
	is($node->safe_psql($db, q{SELECT coalesce(string_agg(who || ': ' || what, '; '), '')
		FROM public.hijack_log}), '', "$db, $when: no planted operator or function ran");
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'planter'"),
		'f', "$db, $when: planter is not a superuser");
	return;
}

# The extension's objects whose stored parse trees use an object of schema public.
sub bound_to_public
{
	my ($db) = @_;
	return $node->safe_psql($db, q{
SET search_path = pg_catalog;
SELECT coalesce(string_agg(DISTINCT pg_describe_object(d.classid, d.objid, d.objsubid) || ' uses '
		|| pg_describe_object(d.refclassid, d.refobjid, 0), '; '), '')
FROM pg_depend d
WHERE ((d.refclassid = 'pg_operator'::regclass AND d.refobjid IN
			(SELECT oid FROM pg_operator WHERE oprnamespace = 'public'::regnamespace))
		OR (d.refclassid = 'pg_proc'::regclass AND d.refobjid IN
			(SELECT oid FROM pg_proc WHERE pronamespace = 'public'::regnamespace))
		OR (d.refclassid = 'pg_type'::regclass AND d.refobjid IN
			(SELECT oid FROM pg_type WHERE typnamespace = 'public'::regnamespace)))
	AND d.classid <> 'pg_operator'::regclass
	-- the planted domains themselves (their checks, their array types)
	AND NOT (d.classid = 'pg_constraint'::regclass AND d.objid IN
			(SELECT oid FROM pg_constraint WHERE connamespace = 'public'::regnamespace))
	AND NOT (d.classid = 'pg_type'::regclass AND d.objid IN
			(SELECT oid FROM pg_type WHERE typnamespace = 'public'::regnamespace))});
}

# A mirror in $db whose backfill is running; status read (as superuser) while it does, and
# every view, SQL function and event trigger of the extension run.
sub exercise
{
	my ($db) = @_;
	my $coll = "hostile_t044_$db";
	$node->safe_psql($db, q{
CREATE TABLE h_docs (id int PRIMARY KEY, embedding real[], doc text, extra int);
INSERT INTO h_docs SELECT g, ARRAY[g, -g, 0.5]::real[], 'doc ' || g::text, g
	FROM generate_series(1, 3000) g});
	$node->safe_psql($db, "SELECT chroma_delete_collection('$coll', true)");
	$node->safe_psql($db, "SELECT chroma_mirror('h_docs', '$coll', document_column => 'doc')");
	ok( wait_for(
			"$db: a backfill with a rate", 60,
			sub {
				$node->safe_psql($db, q{SELECT state = 'backfilling' AND backfill_rows_per_second IS NOT NULL
					FROM chroma_sync.status}) eq 't';
			}),
		"$db: the status is read during the backfill, with its rate")
	  or diag("status: ", $node->safe_psql($db, 'SELECT * FROM chroma_sync.status'), "\nprocesses: ",
		$node->safe_psql('postgres', q{SELECT string_agg(backend_type || ' ' || coalesce(datname, '-'), ', ')
			FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%'}));
	$node->safe_psql($db, q{
SELECT * FROM chroma_sync.status;
SELECT * FROM chroma_sync.upsert_progress;
SELECT chroma_sync.mirror_column_types(m) FROM chroma_sync.mirror m;
ALTER TABLE h_docs ALTER COLUMN extra TYPE bigint;
ALTER TABLE h_docs DISABLE TRIGGER USER;
ALTER TABLE h_docs DROP COLUMN extra;
CREATE TABLE h_gone (id int PRIMARY KEY);
DROP TABLE h_gone});
	$node->safe_psql($db, 'SELECT * FROM chroma_sync.status');
	$node->safe_psql($db, "SELECT chroma_unmirror('h_docs', drop_collection => true)");
	return;
}

# ---- a fresh install under planted operators
plant('h_fresh');
my ($ret, $out, $err) = $node->psql('h_fresh', 'CREATE EXTENSION chroma_sync');
is($ret, 0, 'h_fresh: CREATE EXTENSION under planted operators') or diag($err);
assert_not_hijacked('h_fresh', 'after CREATE EXTENSION');
is(bound_to_public('h_fresh'), '', 'h_fresh: nothing of the extension is bound to a planted object');
exercise('h_fresh');
assert_not_hijacked('h_fresh', 'after reading the status during a backfill');

# ---- an install at 0.1 updated to 0.5 step by step, planted operators present throughout
plant('h_upgrade');
$node->safe_psql('h_upgrade', "CREATE EXTENSION chroma_sync VERSION '0.1'");
# a grant for 0.2 -> 0.3 to carry over (it compared oid = regprocedure and grantee = 0)
$node->safe_psql('h_upgrade', q{
GRANT EXECUTE ON FUNCTION chroma_mirror(regclass, text, name, name, name, name[], boolean, boolean, text)
	TO h_plain WITH GRANT OPTION});
$node->safe_psql('h_upgrade', 'TRUNCATE public.hijack_log');    # what 0.1 did is h_fresh's test
$node->safe_psql('postgres', 'ALTER ROLE planter NOSUPERUSER');
for my $v ('0.2', '0.3', '0.4', '0.5')
{
	($ret, $out, $err) = $node->psql('h_upgrade', "ALTER EXTENSION chroma_sync UPDATE TO '$v'");
	is($ret, 0, "h_upgrade: ALTER EXTENSION UPDATE TO '$v' under planted operators") or diag($err);
	$node->psql('h_upgrade', 'SELECT * FROM chroma_sync.status');
	assert_not_hijacked('h_upgrade', "after the update to $v");
}
is($node->safe_psql('h_upgrade', q{
SELECT has_function_privilege('h_plain', p.oid, 'EXECUTE WITH GRANT OPTION'),
	has_function_privilege('public', p.oid, 'EXECUTE'),
	pg_get_function_identity_arguments(p.oid) LIKE '%, id_columns name[], configuration jsonb'
FROM pg_proc p WHERE p.proname = 'chroma_mirror'}),
	't|f|t', 'h_upgrade: 0.5\'s chroma_mirror keeps the grant to h_plain, none to PUBLIC');
is(bound_to_public('h_upgrade'), '', 'h_upgrade: nothing of the extension is bound to a planted object');
exercise('h_upgrade');
assert_not_hijacked('h_upgrade', 'after reading the status during a backfill');

# ---- a 0.4 installation whose status view an earlier release bound to the planted operator
plant('h_v04');
$node->safe_psql('h_v04', "CREATE EXTENSION chroma_sync VERSION '0.4'");
$node->safe_psql('h_v04', 'TRUNCATE public.hijack_log');
$node->safe_psql('postgres', 'ALTER ROLE planter NOSUPERUSER');
if (bound_to_public('h_v04') eq '')
{
	# This release's 0.1 script no longer binds it: bind it the way earlier releases did
	# (bigint / numeric, resolved with public on the search_path).
	my $def = $node->safe_psql('h_v04', "SELECT pg_get_viewdef('chroma_sync.status'::regclass)");
	my $n = ($def =~ s/\(m\.backfill_sent\)::numeric \/ /m.backfill_sent \/ /g);
	is($n, 1, 'h_v04: the division of the status view is found in its definition');
	$node->safe_psql('h_v04', "CREATE OR REPLACE VIEW chroma_sync.status AS $def");
}
like(bound_to_public('h_v04'), qr{view chroma_sync\.status uses operator public\./\(bigint,numeric\)},
	'h_v04: the 0.4 status view is bound to the planted operator');
$node->safe_psql('h_v04', 'ALTER EXTENSION chroma_sync UPDATE');
is($node->safe_psql('h_v04', "SELECT extversion FROM pg_extension WHERE extname = 'chroma_sync'"),
	'0.5', 'h_v04: updated to 0.5');
is(bound_to_public('h_v04'), '', 'h_v04: after the update nothing is bound to a planted object');
exercise('h_v04');
assert_not_hijacked('h_v04', 'after reading the status during a backfill');

assert_no_crash($node, $offset);
$node->stop;
done_testing();
