# Red team: "A function or operator planted later in a schema the filter names (an exact
# overload of app.norm(anyelement)) is never chosen" holds in the database where the
# filter was bound, but chroma_adopt binds the stored TEXT again in a restored copy
# (public.norm(title), resolved by name with search_path pg_catalog, pg_temp). A role
# with CREATE on public in the copy (restored from the original's ACL; any database
# upgraded from PostgreSQL < 15 has it for PUBLIC) who adds public.norm(varchar) between
# pg_restore and chroma_adopt gets her function bound: the worker then runs it as the
# table's owner (here a superuser). In the original, the same overload is never chosen.
# Fixed: chroma_mirror records what the bound filter refers to (filter_refs), and
# chroma_adopt refuses a text that binds anything else; once the overload is gone, the
# adoption goes through and the filter calls public.norm(anyelement).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_adopt_overload');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t091');
q1(q{
CREATE ROLE mallory LOGIN;
GRANT CREATE ON SCHEMA public TO mallory;
CREATE TABLE public.ran (fn text, cur text, who text);
GRANT INSERT ON public.ran TO PUBLIC;
CREATE FUNCTION public.norm(t anyelement) RETURNS text LANGUAGE sql IMMUTABLE
	AS $$ SELECT lower(t::text) $$;
CREATE TABLE public.a (id int PRIMARY KEY, embedding real[], title varchar(50));
INSERT INTO public.a VALUES (1, '{1,0,0}', 'Keep'), (2, '{0,1,0}', 'drop');
SELECT chroma_mirror('public.a', collection => 'cs_t091', filter => 'public.norm(title) = ''keep''');
});
is(q1(q{SELECT chroma_flush('public.a', interval '60 seconds')}), 't', 'the original mirror flushes');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t091.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy091');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy091', $dump ], 'pg_restore into copy091');

# mallory, in the copy, before the DBA adopts it (and likewise in the original, where the
# bound tree must ignore it)
my $evil = q{
CREATE FUNCTION public.mallory_evil() RETURNS void LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
	INSERT INTO public.ran VALUES ('norm(varchar) by mallory', current_user,
		(SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid()));
END $f$;
CREATE FUNCTION public.norm(t varchar) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
	PERFORM public.mallory_evil();
	RETURN lower(t);
END $f$;};
for my $db (qw(postgres copy091))
{
	my ($ret, $out, $err) = $node->psql($db, $evil, extra_params => [ '-U', 'mallory' ]);
	is($ret, 0, "mallory creates public.norm(varchar) in $db") or diag($err);
}

q1(q{INSERT INTO public.a VALUES (3, '{0,0,1}', 'KEEP')});
is(q1(q{SELECT chroma_flush('public.a', interval '60 seconds')}), 't', 'the original sends row 3');
is(q1(q{SELECT count(*) FROM public.ran}), '0', 'original: mallory\'s overload is not chosen (bound by OID)');

# chroma_adopt binds the text again, finds public.norm(character varying) where
# public.norm(anyelement) was recorded, and refuses before anything runs
my ($ret, $out, $err) = $node->psql('copy091', q{SELECT chroma_adopt('public.a')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($ret, 0, 'copy: chroma_adopt refuses while the filter binds the planted overload');
like($err, qr/55000.*binds to other objects.*public\.norm\(character varying\)/s,
	'copy: the refusal (55000) names the function the text now binds') or diag($err);
is(q1(q{SELECT count(*) FROM chroma_sync.mirror WHERE database_oid = (SELECT oid FROM pg_database WHERE datname = current_database())}, 'copy091'),
	'0', 'copy: the mirror is not adopted');

# the DBA removes it: the text binds what was recorded, and the adoption goes through
q1(q{DROP FUNCTION public.norm(varchar)}, 'copy091');
q1(q{SELECT chroma_adopt('public.a')}, 'copy091');
q1(q{INSERT INTO public.a VALUES (4, '{1,1,0}', 'keep')}, 'copy091');
$node->safe_psql('copy091', q{SELECT chroma_flush('public.a', interval '30 seconds')}, timeout => 60);
is(q1(q{SELECT coalesce(string_agg(DISTINCT fn || ' as ' || cur || ' in ' || coalesce(who, '?'), ', '), 'nothing') FROM public.ran}, 'copy091'),
	'nothing',
	'copy: after chroma_adopt the filter still calls public.norm(anyelement), not the overload mallory planted before adopt');

finish($node, $log0);
