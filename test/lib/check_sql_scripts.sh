#!/usr/bin/env bash
# Fails on any operator or function in the extension's SQL scripts that a role with CREATE
# on the extension's schema could hijack while the script runs (issue 20: a planted
# public./(bigint, numeric) made its planter superuser).
#
# A scratch cluster gets a schema "hostile" that shadows every operator, function and
# aggregate of pg_catalog (same names and argument types; they behave like the originals).
# The scripts are loaded in install order (test/lib/prepare_sql_scripts.pl) with
# search_path = public, hostile, pg_catalog, so every name that is not written
# pg_catalog.x / OPERATOR(pg_catalog.x) resolves to a shadow. Then the parse trees are read:
#   - views, column defaults, constraints and top-level statements (stored as views):
#     pg_depend on a shadow;
#   - SQL-language function bodies: compiled again as BEGIN ATOMIC copies, then pg_depend;
#   - PL/pgSQL bodies and DO blocks: plpgsql_check's dependency list;
#   - in every stored parse tree, an operator whose operand was cast implicitly (not an
#     exact match: write the cast), test/lib/implicit_operator_casts.pl.
# What the scripts only run (UPDATE, VALUES, ALTER TABLE ... USING, a string a DO block
# EXECUTEs, any other statement) leaves no parse tree: a second database, the trap
# (test/lib/sql_trap.sql), holds operator shells and procedures under every name of
# pg_catalog, so that each statement fails as it is parsed if a name in it is not
# qualified; the scripts run there statement by statement, and every EXECUTE must have run.
#   bash test/lib/check_sql_scripts.sh [SQL_DIR]
#   (SQL_CHECK_TRAP_LOG=FILE keeps what psql printed in the trap)
set -u
sql_dir=$(cd "${1:-sql}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
# the system's server (Debian's plpgsql_check package installs there), not PG_PREFIX's copy
bindir=$("${SQL_CHECK_PG_CONFIG:-pg_config}" --bindir) || exit 2
pkglibdir=$("${SQL_CHECK_PG_CONFIG:-pg_config}" --pkglibdir) || exit 2
if [ ! -e "$pkglibdir/plpgsql_check.so" ]; then
	echo "plpgsql_check is not installed in $pkglibdir (Debian: postgresql-15-plpgsql-check)"
	exit 1
fi

work=$(mktemp -d /tmp/chroma_sql_check.XXXXXX) || exit 2
chmod 755 "$work"
as_pg() {
	if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres: "$work"
cleanup() {
	as_pg "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

perl "$here/prepare_sql_scripts.pl" "$sql_dir" >"$work/combined.sql" || exit 2
as_pg "$bindir/initdb" -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; exit 2; }
as_pg "$bindir/pg_ctl" -D "$work/data" -l "$work/server.log" -w \
	-o "-c listen_addresses='' -k $work -c fsync=off -c port=5432" start >/dev/null ||
	{ cat "$work/server.log"; exit 2; }
psql() { as_pg "$bindir/psql" -X -q -h "$work" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }

psql >"$work/shadows.log" 2>&1 <<'EOF' || { cat "$work/shadows.log"; exit 2; }
CREATE SCHEMA hostile;
CREATE SCHEMA static_stub;
CREATE EXTENSION plpgsql_check SCHEMA static_stub;
CREATE SCHEMA static_check;
CREATE FUNCTION static_stub.config_dump(regclass, text) RETURNS integer LANGUAGE plpgsql
	AS 'BEGIN RETURN 0; END';
CREATE TABLE static_check.found (what text);
CREATE TABLE static_check.trees (label text, tree pg_node_tree);
-- The shadows a stored parse tree uses (pg_depend), as "OBJECT uses SHADOW" lines.
CREATE FUNCTION static_check.shadow_uses() RETURNS TABLE (what text, classid oid, objid oid)
	LANGUAGE sql SET search_path = pg_catalog AS $$
	SELECT format('%s uses %s', pg_describe_object(d.classid, d.objid, d.objsubid),
			pg_describe_object(d.refclassid, d.refobjid, 0)), d.classid, d.objid
	FROM pg_depend d
	WHERE ((d.refclassid = 'pg_proc'::regclass
			AND d.refobjid IN (SELECT oid FROM pg_proc WHERE pronamespace = 'hostile'::regnamespace))
		OR (d.refclassid = 'pg_operator'::regclass
			AND d.refobjid IN (SELECT oid FROM pg_operator WHERE oprnamespace = 'hostile'::regnamespace)))
		AND NOT (d.classid = 'pg_operator'::regclass
			AND d.objid IN (SELECT oid FROM pg_operator WHERE oprnamespace = 'hostile'::regnamespace))
		AND NOT (d.classid = 'pg_proc'::regclass
			AND d.objid IN (SELECT oid FROM pg_proc WHERE pronamespace = 'hostile'::regnamespace))
$$;
-- A top-level statement stored as a view: its uses of shadows are kept, the view dropped
-- (it would hold dependencies on what the scripts drop later).
CREATE FUNCTION static_check.take_statement(v regclass, label text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO static_check.found
		SELECT label || ': ' || u.what FROM static_check.shadow_uses() u
		WHERE u.classid = 'pg_rewrite'::regclass
			AND u.objid IN (SELECT oid FROM pg_rewrite WHERE ev_class = v);
	INSERT INTO static_check.trees SELECT label, ev_action FROM pg_rewrite WHERE ev_class = v;
	EXECUTE format('DROP VIEW %s', v);
END
$$;
-- A DO block's body as a function: the shadows its statements use (plpgsql_check compiles
-- it with the session's search_path, so this function does not pin one).
CREATE FUNCTION static_check.take_do_block(f regprocedure, label text) RETURNS void
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO static_check.found
		SELECT pg_catalog.format('%s uses %s %s.%s%s', label, pg_catalog.lower(d.type), d.schema, d.name, d.params)
		FROM static_stub.plpgsql_show_dependency_tb(f) d
		WHERE d.schema OPERATOR(pg_catalog.=) 'hostile';
END
$$;
DO $$
DECLARE
	p record;
	made integer := 0;
BEGIN
	FOR p IN SELECT f.oid, f.prokind, f.proname, a.aggkind, a.aggtransfn, a.aggtranstype,
			a.aggfinalfn, a.aggfinalextra, a.agginitval
		FROM pg_proc f LEFT JOIN pg_aggregate a ON a.aggfnoid = f.oid
		WHERE f.pronamespace = 'pg_catalog'::regnamespace AND f.prokind IN ('f', 'w', 'a') LOOP
		BEGIN
			IF p.prokind = 'a' THEN
				CONTINUE WHEN p.aggkind <> 'n';
				EXECUTE format('CREATE AGGREGATE hostile.%I(%s) (SFUNC = %s, STYPE = %s%s%s%s)',
					p.proname, coalesce(nullif(pg_get_function_identity_arguments(p.oid), ''), '*'),
					p.aggtransfn::regprocedure::oid::regproc, p.aggtranstype::regtype,
					CASE WHEN p.aggfinalfn <> 0 THEN ', FINALFUNC = ' || p.aggfinalfn::regproc END,
					CASE WHEN p.aggfinalextra THEN ', FINALFUNC_EXTRA' END,
					CASE WHEN p.agginitval IS NOT NULL THEN ', INITCOND = ' || quote_literal(p.agginitval) END);
			ELSE
				EXECUTE replace(pg_get_functiondef(p.oid), 'CREATE OR REPLACE FUNCTION pg_catalog.',
					'CREATE FUNCTION hostile.');
			END IF;
			made := made + 1;
		EXCEPTION WHEN OTHERS THEN
			NULL;	-- a pseudo-type or a shape CREATE cannot copy: nothing SQL could call
		END;
	END LOOP;
	FOR p IN SELECT o.oprname, o.oprleft, o.oprright, o.oprcode FROM pg_operator o
		WHERE o.oprnamespace = 'pg_catalog'::regnamespace AND o.oprcode <> 0 LOOP
		BEGIN
			EXECUTE format('CREATE OPERATOR hostile.%s (%sRIGHTARG = %s, FUNCTION = %s)', p.oprname,
				CASE WHEN p.oprleft <> 0 THEN format('LEFTARG = %s, ', p.oprleft::regtype) ELSE '' END,
				p.oprright::regtype, p.oprcode::regprocedure::oid::regproc);
			made := made + 1;
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END LOOP;
	RAISE NOTICE 'shadows: %', made;
END
$$;
EOF

grep -h "shadows:" "$work/shadows.log"
if ! PGOPTIONS='-c search_path=public,hostile,pg_catalog' psql -1 -f "$work/combined.sql" >"$work/load.log" 2>&1; then
	echo "the scripts do not load into the scratch cluster:"
	cat "$work/load.log"
	exit 1
fi

# SQL-language bodies compiled again as BEGIN ATOMIC copies, whose parse trees are stored.
PGOPTIONS='-c search_path=public,hostile,pg_catalog' psql >"$work/atomic.log" 2>&1 <<'EOF' || { cat "$work/atomic.log"; exit 1; }
DO $$
DECLARE
	p record;
	n integer := 0;
BEGIN
	FOR p IN SELECT f.oid, f.prosrc FROM pg_proc f
		WHERE f.prolang = (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'sql')
			AND f.pronamespace::regnamespace::text NOT IN ('pg_catalog', 'hostile', 'information_schema',
				'static_check')
			AND f.prosqlbody IS NULL LOOP
		n := n + 1;
		EXECUTE format('CREATE FUNCTION static_check.sql_body_%s(%s) RETURNS %s LANGUAGE sql BEGIN ATOMIC %s; END',
			n, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
			regexp_replace(p.prosrc, ';\s*$', ''));
		EXECUTE format('COMMENT ON FUNCTION static_check.sql_body_%s IS %L', n, p.oid::regprocedure::text);
	END LOOP;
END
$$;
EOF

# Every SQL and PL/pgSQL function must pin search_path (plpgsql_check does not see every
# expression of a PL/pgSQL body, so the pinned path is what protects those bodies). The
# pins are then reset, so that plpgsql_check compiles the bodies with the hostile path.
psql -At >"$work/pins.log" 2>&1 <<'EOF' || { cat "$work/pins.log"; exit 1; }
INSERT INTO static_check.found
SELECT format('%s does not SET search_path = pg_catalog, pg_temp', f.oid::regprocedure)
FROM pg_proc f
WHERE f.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
	AND f.pronamespace::regnamespace::text IN ('public', 'chroma_sync')
	AND f.prosrc <> 'BEGIN END'	-- a C function's stub
	AND NOT coalesce(f.proconfig @> '{"search_path=pg_catalog, pg_temp"}', false);
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN SELECT oid FROM pg_proc WHERE proconfig IS NOT NULL
		AND pronamespace::regnamespace::text IN ('public', 'chroma_sync') LOOP
		EXECUTE format('ALTER FUNCTION %s RESET ALL', f);
	END LOOP;
END
$$;
EOF

# (PL/pgSQL bodies are compiled with the session's search_path: the hostile one)
found=$(PGOPTIONS='-c search_path=public,hostile,pg_catalog' psql -At <<'EOF'
SELECT what FROM static_check.found
UNION ALL
-- a stored parse tree (view, default, constraint, BEGIN ATOMIC copy) that uses a shadow
SELECT CASE WHEN u.classid = 'pg_proc'::regclass AND obj_description(u.objid, 'pg_proc') IS NOT NULL
		THEN obj_description(u.objid, 'pg_proc') || substr(u.what, strpos(u.what, ' uses '))
		ELSE u.what END
FROM static_check.shadow_uses() u
UNION ALL
-- a PL/pgSQL body (function or DO block) whose statements use a shadow
SELECT format('%s uses %s %s.%s%s', f.oid::regprocedure, lower(dep.type), dep.schema, dep.name, dep.params)
FROM pg_proc f,
	-- a trigger function is checked as if on some table
	LATERAL static_stub.plpgsql_show_dependency_tb(f.oid, CASE WHEN f.prorettype = 'trigger'::regtype
		THEN 'static_check.found'::regclass ELSE 0 END) dep
WHERE f.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
	AND f.pronamespace::regnamespace::text IN ('public', 'chroma_sync')	-- DO blocks: at load
	AND dep.schema = 'hostile'
ORDER BY 1;
EOF
) || { echo "the check's own query failed: $found"; exit 2; }
# Operators on operands cast implicitly (their argument types did not match exactly), read
# from every stored parse tree: views, defaults, constraints, index expressions, the
# top-level statements and the BEGIN ATOMIC copies of SQL bodies.
casts=$(psql -At -F "$(printf '\t')" <<'EOF' | perl "$here/implicit_operator_casts.pl"
SELECT '#operator', oid, oid::regoperator FROM pg_operator;
SELECT label, tree FROM static_check.trees;
SELECT ev_class::regclass, ev_action FROM pg_rewrite
	WHERE ev_class IN (SELECT oid FROM pg_class
		WHERE relnamespace::regnamespace::text IN ('public', 'chroma_sync'));
SELECT format('default of %s.%s', adrelid::regclass, attname), adbin
	FROM pg_attrdef JOIN pg_attribute ON attrelid = adrelid AND attnum = adnum
	WHERE adrelid IN (SELECT oid FROM pg_class
		WHERE relnamespace::regnamespace::text IN ('public', 'chroma_sync'));
SELECT conname, conbin FROM pg_constraint WHERE conbin IS NOT NULL
	AND connamespace::regnamespace::text IN ('public', 'chroma_sync');
SELECT indexrelid::regclass, indexprs FROM pg_index WHERE indexprs IS NOT NULL
	AND indrelid IN (SELECT oid FROM pg_class WHERE relnamespace::regnamespace::text IN ('public', 'chroma_sync'))
UNION ALL
SELECT indexrelid::regclass, indpred FROM pg_index WHERE indpred IS NOT NULL
	AND indrelid IN (SELECT oid FROM pg_class WHERE relnamespace::regnamespace::text IN ('public', 'chroma_sync'));
SELECT obj_description(oid, 'pg_proc'), prosqlbody FROM pg_proc
	WHERE pronamespace = 'static_check'::regnamespace AND prosqlbody IS NOT NULL;
EOF
) || { echo "the check's own query failed: $casts"; exit 2; }
[ -z "$casts" ] || found=$(printf '%s\n%s' "$found" "$casts" | sed '/^$/d')

# The trap (test/lib/sql_trap.sql): every statement as it runs, of whatever kind. What is
# read above is what the scripts store (views, defaults, bodies); this sees what they only
# run: UPDATE, DELETE, INSERT, VALUES, WITH, ALTER TABLE ... USING, the strings a DO block
# EXECUTEs. The scripts run file by file, each in a transaction, each statement behind a
# savepoint (an error is reported and the rest still runs), with EXECUTE grants on every
# function given after each file (the updates carry grants over). DO blocks run as
# functions under plpgsql_check's profiler: an EXECUTE that never ran is reported, as the
# statement it builds was never checked.
psql_trap() { as_pg "$bindir/psql" -X -q -h "$work" -U postgres -d trap "$@"; }
psql -c 'CREATE DATABASE trap' >"$work/trap.log" 2>&1 || { cat "$work/trap.log"; exit 2; }
psql_trap -v ON_ERROR_STOP=1 -f "$here/sql_trap.sql" >"$work/trap.log" 2>&1 || { cat "$work/trap.log"; exit 2; }
grep -ho "trap: .*" "$work/trap.log"
mkdir "$work/trap"
perl "$here/prepare_sql_scripts.pl" --trap "$work/trap" "$sql_dir" >"$work/trap.files" || exit 2
{
	echo "SET client_min_messages = warning;"
	echo "LOAD 'plpgsql_check';"
	echo "SET plpgsql_check.profiler = on;"
	echo '\set ON_ERROR_ROLLBACK on'
	while read -r f; do
		echo "BEGIN;"
		echo "\\i $work/trap/$f"
		echo "COMMIT;"
		echo "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public, chroma_sync TO \"Trap \"\"Grantee\" WITH GRANT OPTION;"
		echo "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public, chroma_sync TO PUBLIC;"
	done <"$work/trap.files"
	cat <<'EOF'
SET search_path = pg_catalog;
SELECT format('never ran: %s %s', substr(f.proname, 7), s.lineno)
FROM pg_proc f, LATERAL static_stub.plpgsql_profiler_function_statements_tb(f.oid) s
WHERE f.pronamespace = 'trap_do'::regnamespace
	AND (s.stmtname ~ 'EXECUTE' OR s.stmtname = 'OPEN') AND s.exec_stmts = 0;
SELECT 'the trap ran to its end';
EOF
} >"$work/trap_driver.sql"
chmod 644 "$work"/trap/*.sql "$work/trap_driver.sql"
# (psql goes on after an error: what it printed is the report's input)
PGOPTIONS='-c search_path=public,hostile,pg_catalog' psql_trap -At -f "$work/trap_driver.sql" >"$work/trap_run.log" 2>&1
[ -z "${SQL_CHECK_TRAP_LOG:-}" ] || cp "$work/trap_run.log" "$SQL_CHECK_TRAP_LOG"
grep -qx 'the trap ran to its end' "$work/trap_run.log" || { cat "$work/trap_run.log"; exit 2; }
trapped=$(perl "$here/sql_trap_report.pl" "$work/trap/do_blocks" <"$work/trap_run.log") ||
	{ echo "the trap's report failed"; exit 2; }
[ -z "$trapped" ] || found=$(printf '%s\n%s' "$found" "$trapped" | sed '/^$/d')
if [ -n "$found" ]; then
	echo "hijackable operators or functions (write OPERATOR(pg_catalog.x) on exactly matching types, pg_catalog.f(...)), or statements that fail in the trap:"
	printf '%s\n' "$found" | sed 's/^/  /'
	exit 1
fi
echo "no operator or function of $(basename "$sql_dir")/chroma_sync--*.sql resolves outside pg_catalog and the extension"
