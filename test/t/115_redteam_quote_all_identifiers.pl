# Red team: "the filter's text is written and read back with fixed settings", and
# chroma_adopt compares the references it binds with filter_refs by name — but those names
# (and the recorded column type names) are rendered with the session's
# quote_all_identifiers, a setting any user may SET (pg_dump --quote-all-identifiers and
# some migration tools do). A mirror made in such a session records
# "pg_catalog"."text" for its filter's column and function "pg_catalog"."texteq"(...) for
# its references: the worker reads the column type as pg_catalog.text and pauses the mirror
# at once ("the type of a column named by the mirror's filter changed"), and a restored
# copy refuses chroma_adopt. A function renamed in such a session, under a paused mirror
# made in an ordinary session, is not followed (the recorded column type names no longer
# match, so the DDL trigger skips the mirror): a dump names the old function, and the
# restored copy cannot adopt.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_quote_all_identifiers');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t115a');
fresh_collection($node, 'cs_t115b');
q1(q{
CREATE SCHEMA app;
CREATE FUNCTION app.norm(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT lower(t)$$;
CREATE TABLE public.qa (id int PRIMARY KEY, embedding real[], tag text);
CREATE TABLE public.qb (id int PRIMARY KEY, embedding real[], tag text);
INSERT INTO public.qa VALUES (1, '{1,0}', 'en'), (2, '{0,1}', 'de');
INSERT INTO public.qb VALUES (1, '{1,0}', 'EN'), (2, '{0,1}', 'DE');
});
# made in a session that quotes every identifier
q1(q{SET quote_all_identifiers = on;
SELECT chroma_mirror('public.qa', collection => 'cs_t115a', filter => $$tag = 'en'$$);});
# made in an ordinary session, paused; a function it calls renamed in a session that quotes
q1(q{SELECT chroma_mirror('public.qb', collection => 'cs_t115b', filter => $$app.norm(tag) = 'en'$$);});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.qb', interval '60 seconds')}, timeout => 90), 't',
	'qb flushes');
q1(q{SELECT chroma_pause('public.qb')});
q1(q{SET quote_all_identifiers = on; ALTER FUNCTION app.norm(text) RENAME TO norm2;});
note('stored: ' . q1(q{SELECT string_agg(filter || ' ' || filter_refs::text, ' | ' ORDER BY mirror_id) FROM chroma_sync.mirror}));
like(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.qb'::regclass}), qr/norm2/,
	'the rename is followed in the same transaction (paused mirror or not)');

$node->safe_psql('postgres', q{SELECT chroma_flush('public.qa', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status WHERE source = 'public.qa'::regclass});
note("status of qa: $state");
is($state, 'syncing ', 'the mirror made with quote_all_identifiers = on keeps syncing');
is(q1(q{SELECT chroma_count('cs_t115a')}), '1', 'it sends row 1');

q1(q{SELECT chroma_pause('public.qa')});
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t115.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy115');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy115', $dump ], 'pg_restore into copy115');
for my $t (qw(qa qb))
{
	my ($ret, $out, $err) = $node->psql('copy115', qq{SELECT chroma_adopt('public.$t')});
	note("chroma_adopt('public.$t') in the copy: ret=$ret err=$err");
	is($ret, 0, "the restored copy of $t adopts cleanly");
}

finish($node, $log0);
