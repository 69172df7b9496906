# The privilege boundary: whose rights each SQL function of the extension and the worker
# use. User SQL of a mirror (its filter, the cast of its embedding column to real[], the
# operators it names) runs only as the table's current owner, as a security-restricted
# operation with a pinned search_path, whoever calls; never as the caller, never as the
# role that created the mirror.
#
# A hostile function of alice's (alice.evil) records current_user and session_user in
# public.seen and tries what only a superuser may do: ALTER ROLE alice SUPERUSER, a write
# to a table nobody was granted (public.su_only), a read of another tenant's table
# (carol.secret) and of the API key. It is reached through an IMMUTABLE wrapper (a filter
# may only call immutable functions, but a wrapper can lie), a cast, and an operator
# planted in her schema. The callers:
# (a) a role with no grants: every function of the extension is refused (42501);
# (b) the table owner who is not the mirror creator (a superuser mirrored her table), and a
#     role with every grant that does not own the table;
# (c) the creator with a hostile filter, cast, search_path or trigger;
# (d) a superuser administering a tenant's mirror: resync, verify, adopt, ...
# and the worker, before and after ALTER TABLE ... OWNER TO.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $secret = 'p47-SeCrEt-' . join('', map { ('a' .. 'z')[ int(rand(26)) ] } 1 .. 12);
my $node = new_node('privilege_boundary', conf => "chroma_sync.api_key = '$secret'\n");
my $log0 = log_offset($node);
my @seen;

sub run_as
{
	my ($user, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $user ], on_error_stop => 1);
	push @seen, $out, $err;
	return ($ret, $out, $err);
}

sub works
{
	my ($user, $sql, $name) = @_;
	my ($ret, $out, $err) = run_as($user, $sql);
	ok($ret == 0, $name) or diag("stdout: $out\nstderr: $err");
	return $out;
}

# fails with an ERROR carrying $state (a regex of SQLSTATEs)
sub refused
{
	my ($user, $sql, $state, $name) = @_;
	my ($ret, $out, $err) = run_as($user, $sql);
	ok($ret != 0 && $err =~ /ERROR:\s+(?:$state):/, $name)
	  or diag("expected $state\nstdout: $out\nstderr: $err");
	return $err;
}

sub q1 { return $node->safe_psql('postgres', $_[0]); }

# What alice's code did, with whose rights, since the last call (then forgotten).
sub recorded
{
	my ($tag) = @_;
	my $r = q1(qq{SELECT coalesce(string_agg(DISTINCT cur || '/' || what, ',' ORDER BY cur || '/' || what), '')
FROM public.seen WHERE tag = '$tag' AND NOT reported});
	q1(qq{UPDATE public.seen SET reported = true WHERE tag = '$tag'});
	return $r;
}

# Nothing alice's code did ran with more than alice's (or $owner's) rights.
sub nothing_escalated
{
	my ($name) = @_;
	is(q1(q{SELECT count(*) FROM public.seen WHERE what <> 'ran' AND NOT checked}), '0',
		"$name: no privileged action succeeded")
	  or diag(q1(q{SELECT string_agg(tag || ':' || cur || '/' || sess || '/' || what, ', ') FROM public.seen WHERE what <> 'ran' AND NOT checked}));
	q1(q{UPDATE public.seen SET checked = true});
	is(q1(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'}), 'f', "$name: alice is no superuser");
	is(q1(q{SELECT count(*) FROM public.su_only}), '0', "$name: nothing was written to su_only");
	# undo, so that one failure does not hide the next
	q1(q{ALTER ROLE alice NOSUPERUSER; TRUNCATE public.su_only});
	return;
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
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO alice, bob', f);
	END LOOP;
END $$};

q1(q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE carol LOGIN;
CREATE ROLE nobody LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE SCHEMA carol AUTHORIZATION carol;
GRANT USAGE ON SCHEMA alice TO bob;
CREATE TABLE carol.secret (s text);
ALTER TABLE carol.secret OWNER TO carol;
INSERT INTO carol.secret VALUES ('carol''s secret');
CREATE TABLE public.seen (tag text, id int, cur text, sess text, what text,
	reported boolean NOT NULL DEFAULT false, checked boolean NOT NULL DEFAULT false);
GRANT INSERT ON public.seen TO PUBLIC;
CREATE TABLE public.su_only (t text);
} . $grant_all);

# alice's code: records who runs it, tries what only a superuser could do
works('alice', q{
CREATE FUNCTION alice.evil(tag text, id int) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
	INSERT INTO public.seen (tag, id, cur, sess, what) VALUES (tag, id, current_user, session_user, 'ran');
	BEGIN
		ALTER ROLE alice SUPERUSER;
		INSERT INTO public.seen (tag, id, cur, sess, what) VALUES (tag, id, current_user, session_user, 'became superuser');
	EXCEPTION WHEN others THEN NULL;
	END;
	BEGIN
		INSERT INTO public.su_only VALUES (tag);
		INSERT INTO public.seen (tag, id, cur, sess, what) VALUES (tag, id, current_user, session_user, 'wrote su_only');
	EXCEPTION WHEN others THEN NULL;
	END;
	BEGIN
		INSERT INTO public.seen (tag, id, cur, sess, what) SELECT tag, id, current_user, session_user, 'read ' || s FROM carol.secret;
	EXCEPTION WHEN others THEN NULL;
	END;
	BEGIN
		INSERT INTO public.seen (tag, id, cur, sess, what) VALUES (tag, id, current_user, session_user,
			'key ' || pg_catalog.current_setting('chroma_sync.api_key'));
	EXCEPTION WHEN others THEN NULL;
	END;
	RETURN true;
END $f$;
CREATE FUNCTION alice.f(tag text, id int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	RETURN alice.evil(tag, id);
END $f$;
CREATE FUNCTION alice.stable_f(id int) RETURNS boolean LANGUAGE plpgsql STABLE AS $f$
BEGIN
	RETURN alice.evil('stable', id);
END $f$;
-- a cast to real[] that calls it too, and returns NULL for x = 2
CREATE TYPE alice.v AS (x real, y real);
CREATE FUNCTION alice.v_to_real(alice.v) RETURNS real[] LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	PERFORM alice.evil('cast', $1.x::int);
	RETURN CASE WHEN $1.x = 2 THEN NULL ELSE ARRAY[$1.x, $1.y] END;
END $f$;
CREATE CAST (alice.v AS real[]) WITH FUNCTION alice.v_to_real(alice.v);
-- an operator for a search_path that names her schema first
CREATE FUNCTION alice.gt(a int, b int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	PERFORM alice.evil('operator', a);
	RETURN a OPERATOR(pg_catalog.>) b;
END $f$;
CREATE OPERATOR alice.> (LEFTARG = int, RIGHTARG = int, FUNCTION = alice.gt);
-- a trigger of her own on her mirrored table
CREATE FUNCTION alice.trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM alice.evil('trigger', NEW.id);
	RETURN NULL;
END $f$;
}, 'alice creates her hostile functions, cast and operator');

for my $c (qw(cs_t047_t1 cs_t047_t2 cs_t047_t3 cs_t047_t5 cs_t047_t6 cs_t047_t4 cs_t047_legacy cs_t047_x))
{
	fresh_collection($node, $c);
}

# ---------------------------------------------------------------- (c)+(d) filter, resync
works('alice', q{
CREATE TABLE alice.t1 (id int PRIMARY KEY, embedding real[]);
INSERT INTO alice.t1 SELECT g, ARRAY[g, 1, 0]::real[] FROM generate_series(1, 3) g;
SELECT chroma_mirror('alice.t1', collection => 'cs_t047_t1', filter => 'alice.f(''t1'', id)')},
	'alice mirrors her table with a filter calling her (lying) immutable function');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t1')}, '3', 60), 'the worker sends her 3 rows');
is(recorded('t1'), 'alice/ran', 'the worker ran her filter as alice, and nothing more succeeded');

q1(q{SELECT chroma_resync('alice.t1')});
is(recorded('t1'), 'alice/ran', 'chroma_resync by a superuser ran her filter as alice');
nothing_escalated('chroma_resync by a superuser');
ok(poll_query($node, q{SELECT backfill_done FROM chroma_sync.mirror WHERE collection = 'cs_t047_t1'}, 't', 60),
	'the resync is done');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('alice.t1')}), '3|0|0|0',
	'chroma_verify by a superuser');
is(recorded('t1'), 'alice/ran', 'chroma_verify by a superuser ran her filter as alice');
for my $call (q{chroma_pause('alice.t1')}, q{chroma_resume('alice.t1')},
	q{chroma_flush('alice.t1', '30 s')}, q{chroma_retry_failed('alice.t1')}, q{chroma_adopt('alice.t1')})
{
	q1("SELECT $call");
	like(recorded('t1'), qr/^(?:alice\/ran)?$/, "$call by a superuser: her code ran as alice or not at all");
}
nothing_escalated('admin functions by a superuser');

# (c) her own trigger on the mirrored table, around the capture trigger
works('alice', q{
CREATE TRIGGER a_first AFTER INSERT ON alice.t1 FOR EACH ROW EXECUTE FUNCTION alice.trg();
CREATE TRIGGER z_last AFTER INSERT ON alice.t1 FOR EACH ROW EXECUTE FUNCTION alice.trg();
INSERT INTO alice.t1 VALUES (4, '{4, 1, 0}')}, 'alice writes her table, with her triggers around the capture');
is(recorded('trigger'), 'alice/ran', 'her triggers ran as alice, before and after the capture trigger');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t1')}, '4', 60), 'the row is sent');
recorded('t1');

# ---------------------------------------------------------------- (c)+(d) verify's row-by-row path
works('alice', q{
CREATE TABLE alice.t3 (id int PRIMARY KEY, embedding text);
INSERT INTO alice.t3 VALUES (1, '{1,0,0}'), (2, '{2,0,0}'), (3, 'not an array');
SELECT chroma_mirror('alice.t3', collection => 'cs_t047_t3', filter => 'alice.f(''t3'', id)')},
	'alice mirrors a table with a row whose embedding cannot be cast');
ok(poll_query($node, q{SELECT count(*) FROM chroma_sync.failed f JOIN chroma_sync.mirror m USING (mirror_id) WHERE m.collection = 'cs_t047_t3'}, '1', 60),
	'the row that cannot be cast is failed');
recorded('t3');
is(q1(q{SET search_path = alice, public, pg_catalog; SELECT rows, missing FROM chroma_verify('alice.t3')}), '3|1',
	'chroma_verify by a superuser reads it row by row (the unreadable row is missing)');
is(recorded('t3'), 'alice/ran', 'every read of verify ran her filter as alice');
nothing_escalated('chroma_verify, row by row');

# ---------------------------------------------------------------- (c) search_path: her operator
works('alice', q{
CREATE TABLE alice.t6 (id int PRIMARY KEY, embedding real[]);
INSERT INTO alice.t6 SELECT g, ARRAY[g, 6, 0]::real[] FROM generate_series(1, 3) g;
SELECT chroma_mirror('alice.t6', collection => 'cs_t047_t6', filter => 'id > 0')},
	'alice mirrors with filter id > 0 (pg_catalog\'s >, as her search_path finds it)');
is(q1(q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t047_t6'}), '(id > 0)', 'stored deparsed');
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t6')}, '3', 60), 'the worker sends the rows');
q1(q{SET search_path = alice, public, pg_catalog;
SELECT chroma_resync('alice.t6');
SELECT * FROM chroma_verify('alice.t6')});
is(recorded('operator'), '',
	'the filter means what it meant when stored: her operator never ran (worker, superuser with her schema first)');
# her operator, named in her search_path when she mirrors: stored qualified, run as her
works('alice', q{SET search_path = alice, public, pg_catalog;
SELECT chroma_mirror('alice.t6', collection => 'cs_t047_x', filter => 'id > 1')}, 'alice names her own operator');
is(q1(q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t047_x'}), '(id OPERATOR(alice.>) 1)',
	'stored with its schema');
q1(q{SELECT chroma_resync('alice.t6', 'cs_t047_x')});
is(recorded('operator'), 'alice/ran', 'a superuser\'s resync runs it as alice');
q1(q{SELECT chroma_unmirror('alice.t6', drop_collection => true, collection => 'cs_t047_x')});
recorded('operator');
nothing_escalated('search_path');

# ---------------------------------------------------------------- (b)+(d) a mirror made by a superuser
q1(q{
CREATE TABLE alice.t2 (id int PRIMARY KEY, embedding real[]);
ALTER TABLE alice.t2 OWNER TO alice;
INSERT INTO alice.t2 SELECT g, ARRAY[g, 2, 0]::real[] FROM generate_series(1, 3) g;
SELECT chroma_mirror('alice.t2', collection => 'cs_t047_t2', filter => 'alice.f(''t2'', id)')});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t2')}, '3', 60),
	'a superuser mirrors alice\'s table: the worker sends it');
is(recorded('t2'), 'alice/ran', 'the worker reads as the table\'s owner, not as the superuser who mirrored it');
nothing_escalated('worker, mirror by a superuser');
# (b) the table owner who did not create the mirror administers it
for my $call (q{chroma_pause('alice.t2')}, q{chroma_resume('alice.t2')}, q{chroma_resync('alice.t2')},
	q{chroma_flush('alice.t2', '30 s')}, q{chroma_retry_failed('alice.t2')}, q{chroma_adopt('alice.t2')},
	q{chroma_verify('alice.t2')})
{
	works('alice', "SELECT * FROM $call", "the owner who is not the creator: $call");
}
like(recorded('t2'), qr/^(?:alice\/ran)?$/, 'her filter ran as alice');
ok(poll_query($node, q{SELECT backfill_done FROM chroma_sync.mirror WHERE collection = 'cs_t047_t2'}, 't', 60),
	'the resync is done');
recorded('t2');
# (b) a role with every grant, not the owner
for my $call (q{chroma_pause('alice.t2')}, q{chroma_resume('alice.t2')}, q{chroma_resync('alice.t2')},
	q{chroma_retry_failed('alice.t2')}, q{chroma_adopt('alice.t2')}, q{chroma_verify('alice.t2')},
	q{chroma_unmirror('alice.t2')},
	q{chroma_mirror('alice.t2', collection => 'cs_t047_x', filter => 'alice.f(''x'', id)')})
{
	refused('bob', "SELECT * FROM $call", '42501', "bob (every grant, not the owner): $call is refused");
}
is(recorded('x') . recorded('t2'), '', 'and none of them ran alice\'s code');

# ALTER TABLE ... OWNER TO: later reads run as the new owner
q1(q{ALTER TABLE alice.t2 OWNER TO bob; INSERT INTO alice.t2 VALUES (10, '{10, 2, 0}')});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t2')}, '4', 60), 'the new row is sent');
is(recorded('t2'), 'bob/ran', 'after ALTER TABLE ... OWNER TO bob the worker reads as bob');
refused('alice', q{SELECT chroma_resync('alice.t2')}, '42501', 'alice no longer administers it');
q1(q{SELECT chroma_resync('alice.t2')});
is(recorded('t2'), 'bob/ran', 'chroma_resync by a superuser runs the filter as bob');
nothing_escalated('after OWNER TO');

# ---------------------------------------------------------------- (d) a cast run by the worker and verify
q1(q{
CREATE TABLE alice.t5 (id int PRIMARY KEY, embedding alice.v);
ALTER TABLE alice.t5 OWNER TO alice;
INSERT INTO alice.t5 SELECT g, ROW(g, 5)::alice.v FROM generate_series(1, 3) g;
SELECT chroma_mirror('alice.t5', collection => 'cs_t047_t5')});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t047_t5')}, '2', 60),
	'a superuser mirrors alice\'s table whose embedding is cast by her function (NULL for row 2)');
is(recorded('cast'), 'alice/ran', 'the worker ran her cast as alice');
my $off = log_offset($node);
is(q1(q{SELECT rows, missing, extra FROM chroma_verify('alice.t5')}), '2|0|0',
	'chroma_verify by a superuser: a cast that yields NULL is a row without embedding (no crash)');
is(recorded('cast'), 'alice/ran', 'chroma_verify ran her cast as alice');
assert_no_crash($node, $off, 'verify with a NULL cast result: the server did not crash');
nothing_escalated('cast');

# ---------------------------------------------------------------- item 3: only immutable filters
for my $f ('alice.stable_f(id)', 'id > 0 AND now() IS NOT NULL',
	q{current_setting('chroma_sync.api_key') IS NOT NULL}, 'random() < 0.5',
	'count(*) > 0', 'row_number() OVER () > 0', 'generate_series(1, 2) > 0', '$1', 'id > $1',
	'id IN (SELECT id FROM alice.t1)', 'EXISTS (SELECT 1 FROM pg_catalog.pg_class)',
	'false) OR (true', 'true) UNION SELECT 1 FROM carol.secret WHERE (true', 'true; SELECT 1',
	'id, id', 'id > 0 AS x', 'true ORDER BY 1', 'true FROM carol.secret', 'id')
{
	my $sql = $f =~ s/'/''/gr;
	refused('alice', qq{SELECT chroma_mirror('alice.t1', collection => 'cs_t047_x', filter => '$sql')},
		'22023|42601|42804|42803|42P20|0A000|42P02', "filter refused: $f");
}
is(recorded('stable'), '', 'checking the filters ran none of her code');
is(q1(q{SELECT count(*) FROM chroma_sync.mirror WHERE collection = 'cs_t047_x'}), '0', 'no mirror was made');

# ---------------------------------------------------------------- item 2: one expression, stored deparsed
works('alice', q{
CREATE TABLE alice.t4 (id int PRIMARY KEY, embedding real[], lang text);
INSERT INTO alice.t4 VALUES (1, '{1,4,0}', 'en'), (2, NULL, 'en'), (3, '{3,4,0}', 'de');
SELECT chroma_mirror('alice.t4', collection => 'cs_t047_t4', filter => 'lang = ''en'' OR id > 100')},
	'a filter with OR');
is(q1(q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t047_t4'}),
	q{((lang = 'en'::text) OR (id > 100))}, 'it is stored deparsed and parenthesized');
ok(poll_query($node, q{SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('cs_t047_t4')}, '1', 60),
	'the worker sends the rows it selects');
is(q1(q{SELECT rows, missing, extra FROM chroma_verify('alice.t4')}), '1|0|0', 'chroma_verify agrees');

# a filter stored as text by 0.4 (or edited in the table): checked again when used
$off = log_offset($node);
# (filter_node NULL, as 0.4 left it: the bound tree stored by 0.5 is what runs, not the text)
q1(q{UPDATE chroma_sync.mirror SET filter = 'false) OR (true', filter_node = NULL WHERE collection = 'cs_t047_t4'});
refused('alice', q{SELECT * FROM chroma_verify('alice.t4')}, '22023|42601',
	'chroma_verify refuses a stored filter that is not one expression');
refused('postgres', q{SELECT chroma_resync('alice.t4')}, '22023|42601', 'so does chroma_resync');
q1(q{SELECT chroma_pause('alice.t4'); SELECT chroma_resume('alice.t4')});
q1(q{INSERT INTO alice.t4 VALUES (4, '{4,4,0}', 'en')});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'alice.t4'::regclass}, 'paused', 60),
	'the worker pauses the mirror');
like(q1(q{SELECT last_error FROM chroma_sync.status WHERE source = 'alice.t4'::regclass}), qr/filter/,
	'and says why');
assert_no_crash($node, $off, 'a stored filter that is not one expression crashed nothing');

# ---------------------------------------------------------------- (a) a role with no grants
my @funcs = split /\n/, q1(q{
SELECT p.oid::regprocedure || '|' || p.proname || '|' ||
	coalesce((SELECT string_agg('NULL::' || pg_catalog.format_type(t, NULL), ', ' ORDER BY o)
	 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, o)), '')
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid
WHERE e.extname = 'chroma_sync' AND p.prorettype <> 'trigger'::regtype
	-- generated SQL calls it as the table owner: EXECUTE for PUBLIC, checked below
	AND p.oid <> 'chroma_sync_filter.match(integer, record)'::regprocedure ORDER BY 1});
ok(@funcs > 20, 'the extension has ' . scalar(@funcs) . ' functions');
for my $f (@funcs)
{
	my ($sig, $name, $args) = split /\|/, $f, 3;
	my $call = ($sig =~ s/\(.*//r) . "($args)";
	refused('nobody', "SELECT * FROM $call", '42501', "a role with no grants: $sig is refused");
}
my $mid_t4 = q1(q{SELECT mirror_id FROM chroma_sync.mirror WHERE collection = 'cs_t047_t4'});
refused('nobody', qq{SELECT chroma_sync_filter.match($mid_t4, ROW(1, NULL, 'en'))}, '42501',
	'a role with no grants: chroma_sync_filter.match on a mirror of a table she cannot read is refused');
refused('nobody', 'SELECT * FROM chroma_sync.mirror', '42501', 'chroma_sync.mirror is not readable');
refused('nobody', 'SELECT * FROM chroma_sync.failed', '42501', 'chroma_sync.failed is not readable');
refused('nobody', 'SELECT * FROM chroma_sync.queue', '42501', 'chroma_sync.queue is not readable');
refused('nobody', 'SELECT * FROM carol.secret', '42501', 'another tenant\'s rows are not readable');
refused('nobody', q{SELECT current_setting('chroma_sync.api_key')}, '42501', 'the key is not readable');

# ---------------------------------------------------------------- nothing leaked
is(q1(q{SELECT count(*) FROM public.seen WHERE what LIKE 'read %' OR what LIKE 'key %'}), '0',
	'alice\'s code never read carol\'s rows or the API key setting (over the whole test)');
ok(!grep({ index($_ // '', substr($secret, 0, 12)) >= 0 } @seen), 'no output showed the key');
nothing_escalated('end');

finish($node, $log0);
