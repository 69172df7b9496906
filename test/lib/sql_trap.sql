-- The trap of test/lib/check_sql_scripts.sh, created in an empty database: a schema hostile
-- where every name of pg_catalog that SQL can call is taken by something that fails as
-- soon as a statement is parsed with it, whatever the statement and whether or not it
-- touches a row:
--   - every operator: a shell of the same name and argument types ("operator is only a
--     shell"); a shell is what PostgreSQL makes of a NEGATOR that does not exist yet, so
--     each is named as the negator of a carrier operator in schema trap_carrier;
--   - every function, aggregate and window function: a procedure of the same name and
--     input arguments (names and defaults included: the same calls resolve to it),
--     "... is a procedure".
-- With search_path = public, hostile, pg_catalog, a name not written pg_catalog.x or
-- OPERATOR(pg_catalog.x) resolves into hostile, as it would to what a role with CREATE on
-- the extension's schema planted there.
SET client_min_messages = notice;
CREATE SCHEMA hostile;
CREATE SCHEMA trap_carrier;
CREATE SCHEMA trap_do;
CREATE SCHEMA static_stub;
CREATE EXTENSION plpgsql_check SCHEMA static_stub;
CREATE FUNCTION static_stub.config_dump(regclass, text) RETURNS integer LANGUAGE plpgsql
	AS 'BEGIN RETURN 0; END';
DO $$
DECLARE
	p record;
	shells integer := 0;
	procedures integer := 0;
	missed text[] := '{}';
BEGIN
	FOR p IN SELECT DISTINCT oprleft, oprright FROM pg_operator
		WHERE oprnamespace = 'pg_catalog'::regnamespace LOOP
		EXECUTE format('CREATE FUNCTION trap_carrier.f(%s) RETURNS boolean LANGUAGE internal AS %L',
			concat_ws(', ', nullif(p.oprleft, 0)::regtype, p.oprright::regtype), 'int4pl');
	END LOOP;
	FOR p IN SELECT oid, oprname, oprleft, oprright FROM pg_operator
		WHERE oprnamespace = 'pg_catalog'::regnamespace LOOP
		BEGIN
			EXECUTE format('CREATE OPERATOR trap_carrier.%s (%sRIGHTARG = %s, FUNCTION = trap_carrier.f, NEGATOR = OPERATOR(hostile.%s))',
				'#' || p.oprname,
				CASE WHEN p.oprleft <> 0 THEN format('LEFTARG = %s, ', p.oprleft::regtype) ELSE '' END,
				p.oprright::regtype, p.oprname);
			shells := shells + 1;
		EXCEPTION WHEN OTHERS THEN
			missed := missed || format('%s: %s', p.oid::regoperator, SQLERRM);
		END;
	END LOOP;
	FOR p IN SELECT f.oid, f.proname,
			(SELECT coalesce(string_agg(
					CASE WHEN a.mode = 'v' THEN 'VARIADIC ' ELSE '' END
					|| CASE WHEN coalesce(a.name, '') <> '' THEN quote_ident(a.name) || ' ' ELSE '' END
					|| format_type(a.type, NULL)
					|| CASE WHEN a.n > f.pronargs - f.pronargdefaults THEN ' DEFAULT NULL' ELSE '' END,
					', ' ORDER BY a.n), '')
				FROM (SELECT row_number() OVER (ORDER BY x.i) AS n, x.type, x.mode, x.name
					FROM unnest(coalesce(f.proallargtypes, f.proargtypes::oid[]), f.proargmodes,
						f.proargnames) WITH ORDINALITY AS x(type, mode, name, i)
					WHERE coalesce(x.mode, 'i') IN ('i', 'b', 'v')) a) AS args
		FROM pg_proc f
		WHERE f.pronamespace = 'pg_catalog'::regnamespace LOOP
		BEGIN
			EXECUTE format('CREATE PROCEDURE hostile.%I(%s) LANGUAGE internal AS %L',
				p.proname, p.args, 'int4pl');
			procedures := procedures + 1;
		EXCEPTION WHEN OTHERS THEN
			missed := missed || format('%s: %s', p.oid::regprocedure, SQLERRM);
		END;
	END LOOP;
	RAISE NOTICE 'trap: % operators, % functions (% not made)', shells, procedures,
		cardinality(missed);
	IF cardinality(missed) > 0 THEN
		RAISE NOTICE 'not made: %', array_to_string(missed, '; ');
	END IF;
END
$$;
-- What makes the update scripts' loops run, so that the statements they EXECUTE are run
-- (and checked): a role holding an EXECUTE grant on every function of the extension (given
-- after each script by test/lib/check_sql_scripts.sh), chroma_sync.api_key stored per role
-- and per database. The role's name needs quoting, as the statements built with it must do.
CREATE ROLE "Trap ""Grantee";
ALTER ROLE "Trap ""Grantee" SET chroma_sync.api_key = 'trap';
ALTER ROLE "Trap ""Grantee" IN DATABASE trap SET chroma_sync.api_key = 'trap';
ALTER DATABASE trap SET chroma_sync.api_key = 'trap';
