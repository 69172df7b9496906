# Red team: "names are resolved once ... a filter means what it meant when it was stored".
# The stored filter is deparsed TEXT: every use (worker, chroma_verify, chroma_resync)
# parses it again, so names are resolved again each time.
# (A) A filter calling a polymorphic public.norm(anyelement) on a varchar column is
#     stored as the text public.norm(title) and resolved again at every use. A role with
#     CREATE on public (any database upgraded from PostgreSQL < 15 has that for PUBLIC)
#     adds public.norm(varchar), an exact match: her function then runs as the table's
#     owner, here a superuser, in the worker and in chroma_verify. (Views store the OID,
#     so the same overload leaves a view's meaning alone.)
# (B) Columns are stored by name in the filter, though the mirror holds every other
#     column by attnum and "renames need nothing": swapping two column names silently
#     changes which rows the filter selects; (C) a plain RENAME COLUMN, or RENAME TABLE
#     under a filter with a whole-row reference (stored as c2.*), pauses the mirror.
# (D) "Immutable functions only": a cast to a domain whose CHECK calls now() passes.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_filter_rebinding');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

fresh_collection($node, $_) for qw(cs_t090_a cs_t090_b cs_t090_c cs_t090_c2 cs_t090_d);

# ---------------------------------------------------------------- (A) overload hijack
q1(q{
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE public.ran (fn text, cur text, who text, reported boolean NOT NULL DEFAULT false);
GRANT INSERT ON public.ran TO PUBLIC;
CREATE FUNCTION public.norm(t anyelement) RETURNS text LANGUAGE sql IMMUTABLE
	AS $$ SELECT lower(t::text) $$;
CREATE TABLE public.a (id int PRIMARY KEY, embedding real[], title varchar(50));
INSERT INTO public.a VALUES (1, '{1,0,0}', 'Keep'), (2, '{0,1,0}', 'drop');
SELECT chroma_mirror('public.a', collection => 'cs_t090_a', filter => 'public.norm(title) = ''keep''');
});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_a')}, '1', 60), '(A) the worker sends row 1');
note('stored filter: ' . q1(q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t090_a'}));

# mallory plants a better match for the varchar column (IMMUTABLE, as a filter must be,
# calling her volatile function that records who runs it and tries to become superuser)
my ($ret, $out, $err) = $node->psql('postgres', q{
CREATE FUNCTION public.mallory_evil() RETURNS void LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
	INSERT INTO public.ran VALUES ('norm(varchar) by mallory', current_user,
		(SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid()));
	BEGIN
		ALTER ROLE mallory SUPERUSER;
	EXCEPTION WHEN others THEN NULL;
	END;
END $f$;
CREATE FUNCTION public.norm(t varchar) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	PERFORM public.mallory_evil();
	RETURN lower(t);
END $f$;}, extra_params => [ '-U', 'mallory' ]);
is($ret, 0, '(A) mallory creates public.norm(varchar)') or diag($err);

# what ran mallory's code since the last call, with whose rights
sub ran
{
	my $r = q1(q{SELECT coalesce(string_agg(DISTINCT fn || ' as ' || cur || ' in ' || who, ', '), 'nothing')
FROM public.ran WHERE NOT reported});
	q1(q{UPDATE public.ran SET reported = true});
	return $r;
}

# the worker reads row 3 (a change), then chroma_verify (a superuser) reads the table
q1(q{INSERT INTO public.a VALUES (3, '{0,0,1}', 'KEEP')});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_a')}, '2', 60), '(A) the worker sends row 3');
is(ran(), 'nothing',
	'(A) worker: the filter still calls the public.norm(anyelement) it was stored with, not mallory\'s overload');
$node->psql('postgres', q{SELECT * FROM chroma_verify('public.a')});
is(ran(), 'nothing', '(A) chroma_verify: likewise');
is(q1(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}), 'f',
	'(A) mallory did not become superuser through the mirror of a superuser\'s table');
q1(q{ALTER ROLE mallory NOSUPERUSER});

# ---------------------------------------------------------------- (B) column swap
q1(q{
CREATE TABLE public.b (id int PRIMARY KEY, embedding real[], published boolean, draft boolean);
INSERT INTO public.b VALUES (1, '{1,0,0}', true, false), (2, '{0,1,0}', false, true);
SELECT chroma_mirror('public.b', collection => 'cs_t090_b', filter => 'published');
});
ok(poll_query($node, q{SELECT string_agg(id, ',') FROM chroma_get('cs_t090_b')}, '1', 60),
	'(B) the worker sends the published row 1');
q1(q{
ALTER TABLE public.b RENAME COLUMN published TO was_published;
ALTER TABLE public.b RENAME COLUMN draft TO published;
});
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('public.b')}), '1|0|0|0',
	'(B) after renaming columns the filter still selects the rows it selected (verify agrees)');
q1(q{UPDATE public.b SET embedding = '{1,1,1}' WHERE id = 1});
ok(poll_query($node, q{SELECT coalesce(string_agg(id, ','), '') FROM chroma_get('cs_t090_b')}, '1', 20),
	'(B) after an update of row 1 the collection still holds row 1 only');

# ---------------------------------------------------------------- (C) plain rename
q1(q{
CREATE TABLE public.c (id int PRIMARY KEY, embedding real[], published boolean);
INSERT INTO public.c VALUES (1, '{1,0,0}', true);
SELECT chroma_mirror('public.c', collection => 'cs_t090_c', filter => 'published');
});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_c')}, '1', 60), '(C) the worker sends row 1');
q1(q{ALTER TABLE public.c RENAME COLUMN published TO is_published});
q1(q{INSERT INTO public.c VALUES (2, '{0,1,0}', true)});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_c')}, '2', 20),
	'(C) after RENAME COLUMN the mirror keeps syncing');
is(status_row($node, 'public.c', 'state') . ' ' . (status_row($node, 'public.c', 'last_error') // ''), 'syncing ',
	'(C) and is not paused');

# the text shown (and dumped) follows the rename; the bound tree never needed it
ok(poll_query($node, q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t090_c'}, '(is_published)', 20),
	'(C) the stored text of the filter names the column as it is now');

# a whole-row reference is stored with the table's name: RENAME TABLE pauses the mirror
q1(q{
CREATE TABLE public.c2 (id int PRIMARY KEY, embedding real[], note text);
INSERT INTO public.c2 VALUES (1, '{1,0,0}', 'x');
SELECT chroma_mirror('public.c2', collection => 'cs_t090_c2', filter => 'num_nonnulls(c2) = 1');
});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_c2')}, '1', 60), '(C) c2: the worker sends row 1');
note('stored filter: ' . q1(q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t090_c2'}));
q1(q{ALTER TABLE public.c2 RENAME TO c2_renamed});
q1(q{INSERT INTO public.c2_renamed VALUES (2, '{0,1,0}', 'y')});
ok(poll_query($node, q{SELECT count(*) FROM chroma_get('cs_t090_c2')}, '2', 20),
	'(C) after RENAME TABLE the mirror of a filter with a whole-row reference keeps syncing');
is(status_row($node, 'public.c2_renamed', 'state') . ' ' . (status_row($node, 'public.c2_renamed', 'last_error') // ''),
	'syncing ', '(C) and is not paused');

# ---------------------------------------------------------------- dropped filter column
# the tree reads a column that is gone: the mirror pauses and says why (the check of the
# columns kept by name, which runs first since they came, names the column)
q1(q{ALTER TABLE public.c DROP COLUMN is_published});
q1(q{INSERT INTO public.c VALUES (3, '{0,0,1}')});
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'public.c'::regclass}, 'paused', 30),
	'a dropped filter column pauses the mirror');
like(status_row($node, 'public.c', 'last_error') // '', qr/no longer fits its table.*dropped|named by the mirror's filter was dropped/,
	'and says why');

# ---------------------------------------------------------------- chroma_sync_filter.match
# anyone may call it, on a row of the mirror's table only, and it never takes an expression
my $mid_b = q1(q{SELECT mirror_id FROM chroma_sync.mirror WHERE collection = 'cs_t090_b'});
($ret, $out, $err) = $node->psql('postgres', qq{SELECT chroma_sync_filter.match($mid_b, a) FROM public.a},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:\s+42804/, 'match() refuses a row of another table');
is(q1(qq{SELECT string_agg(id::text || ':' || chroma_sync_filter.match($mid_b, b), ',' ORDER BY id) FROM public.b}),
	'1:true,2:false', 'match() evaluates the bound filter on the table\'s rows');

# ---------------------------------------------------------------- (D) domain CHECK
q1(q{
CREATE DOMAIN public.recent AS timestamptz CHECK (VALUE > now() - interval '1 day');
CREATE TABLE public.d (id int PRIMARY KEY, embedding real[], at timestamptz);
});
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT chroma_mirror('public.d', collection => 'cs_t090_d', filter => '(at::public.recent) IS NOT NULL')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:\s+22023/,
	'(D) a filter whose domain CHECK calls now() (stable) is refused like now() itself');

# ---------------------------------------------------------------- restored copy, chroma_adopt
# a restored tree holds the OIDs of another database: chroma_adopt binds the stored text
# again there (the text followed the renames of (B), so it names the same column)
ok(poll_query($node, q{SELECT filter FROM chroma_sync.mirror WHERE collection = 'cs_t090_b'}, '(was_published)', 20),
	'(B) the stored text names the renamed column');
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t090.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE copy090');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy090', $dump ], 'pg_restore into copy090');
$node->safe_psql('copy090', q{UPDATE chroma_sync.mirror SET filter_node = 'garbage' WHERE collection = 'cs_t090_b'});
$node->safe_psql('copy090', q{SELECT chroma_adopt('public.b')});
is($node->safe_psql('copy090', q[SELECT filter_node LIKE '{VAR %' FROM chroma_sync.mirror WHERE collection = 'cs_t090_b']),
	't', 'chroma_adopt binds the filter again in the new database');
is($node->safe_psql('copy090', q{SELECT chroma_flush('public.b', interval '60 seconds')}, timeout => 90), 't',
	'the adopted mirror flushes');
is($node->safe_psql('copy090', q{SELECT rows, missing, extra, different FROM chroma_verify('public.b')}), '1|0|0|0',
	'and selects the rows the original did');

finish($node, $log0);
