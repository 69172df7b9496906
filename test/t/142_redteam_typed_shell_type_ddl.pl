# Red team: on PostgreSQL 15, a typed table's recorded column type name that now names a
# shell type makes unrelated DDL of the whole database fail.
#
# mirror_columns_follow_type_renames (mirror_columns.c), for a typed table whose column's
# type name differs from the recorded one, parses the recorded name with
# chroma_parse_type_string (pg_compat.h), which on 15 is parseTypeString(..., missing_ok
# = true). missing_ok covers a name that names nothing, but parseTypeString still raises
# "type ... is only a shell" when the name names a shell type. The function runs from the
# ddl_command_end trigger after every ALTER FUNCTION, ALTER TYPE, ALTER DOMAIN, ALTER
# SCHEMA, ALTER OPERATOR, ... in the database (filters_renamed(true)), for every mirror.
#
# Steps: typed table tt OF app.item (lbl app.label, a domain), mirrored with lbl as
# metadata; ALTER TYPE app.item ALTER ATTRIBUTE lbl TYPE app.tag CASCADE (another type: the
# mirror keeps the recorded name "app.label" and pauses, as designed); DROP DOMAIN
# app.label; CREATE TYPE app.label (a shell, as one starts a new base type); then an
# unrelated ALTER FUNCTION public.f() RENAME TO g.
# What happens: the ALTER FUNCTION fails with 'type "app.label" is only a shell' (so does
# any ALTER TYPE/DOMAIN/SCHEMA/FUNCTION... until the shell is gone). What should happen:
# the unrelated DDL succeeds (the recorded name does not name the column's type: no rename
# to follow, the mirror stays paused for the type change).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_typed_shell_type_ddl');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

fresh_collection($node, 'cs_t142');
q1(q{
CREATE SCHEMA app;
CREATE DOMAIN app.label AS text;
CREATE DOMAIN app.tag AS text;
CREATE TYPE app.item AS (id int, embedding real[], lbl app.label);
CREATE TABLE public.tt OF app.item (PRIMARY KEY (id));
INSERT INTO public.tt SELECT g, ARRAY[g, 1]::real[], 'l' || g FROM generate_series(1, 5) g;
SELECT chroma_mirror('public.tt', collection => 'cs_t142', metadata_columns => '{lbl}');
CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT 1';
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.tt', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{ALTER TYPE app.item ALTER ATTRIBUTE lbl TYPE app.tag CASCADE});
is($ret, 0, 'ALTER TYPE ... ALTER ATTRIBUTE ... TYPE another type CASCADE') or diag($err);
ok(poll_query($node, q{SELECT state FROM chroma_sync.status WHERE source = 'public.tt'::regclass}, 'paused', 30),
	'the mirror pauses for the type change');
note('recorded: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));

($ret, $out, $err) = $node->psql('postgres', q{DROP DOMAIN app.label; CREATE TYPE app.label;});
is($ret, 0, 'the old domain dropped, a shell type of its name created') or diag($err);

($ret, $out, $err) = $node->psql('postgres', q{ALTER FUNCTION public.f() RENAME TO g});
is($ret, 0, 'an unrelated ALTER FUNCTION succeeds') or diag($err);
($ret, $out, $err) = $node->psql('postgres', q{CREATE SCHEMA other; ALTER SCHEMA other RENAME TO other2});
is($ret, 0, 'an unrelated ALTER SCHEMA succeeds') or diag($err);
is(q1(q{SELECT state FROM chroma_sync.status WHERE source = 'public.tt'::regclass}), 'paused',
	'the mirror stays paused for its type change');

finish($node, $log0);
