# Red team: "renames are followed in the DDL's own transaction" — follow_filter_names
# (ddl.c) deparses the stored filter tree on every ALTER TABLE of a mirrored table that
# does not pause it, without the checks every other use makes first (check_bound: "a
# function or operator it calls was dropped"). Nothing records a dependency of the
# mirror on its filter's function, so DROP FUNCTION succeeds; from then on every ALTER
# TABLE of the table (ADD COLUMN, RENAME COLUMN of an unrelated column) fails with the
# internal error "cache lookup failed for function N" (XX000), paused mirror or not.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_dropped_filter_function_ddl');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t103');
q1(q{
CREATE FUNCTION public.keep(n int) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT n > 10';
CREATE TABLE public.fr (id int PRIMARY KEY, embedding real[], other int);
INSERT INTO public.fr SELECT g, ARRAY[g, 1]::real[], g FROM generate_series(1, 40) g;
SELECT chroma_mirror('public.fr', collection => 'cs_t103', filter => 'public.keep(id)');
});
is(q1(q{SELECT chroma_flush('public.fr', interval '60 seconds')}), 't', 'the mirror flushes');
q1(q{SELECT chroma_pause('public.fr')});

my ($ret, $out, $err) = $node->psql('postgres', q{DROP FUNCTION public.keep(int)});
note("DROP FUNCTION: ret=$ret err=$err");
SKIP:
{
	skip 'the filter function cannot be dropped (a dependency is recorded)', 3 if $ret != 0;
	($ret, $out, $err) = $node->psql('postgres', q{ALTER TABLE public.fr ADD COLUMN extra int});
	note("ALTER TABLE ADD COLUMN: ret=$ret err=$err");
	unlike($err, qr/cache lookup failed/, 'ALTER TABLE ... ADD COLUMN does not fail with an internal error');
	($ret, $out, $err) = $node->psql('postgres', q{ALTER TABLE public.fr RENAME COLUMN other TO other2});
	note("ALTER TABLE RENAME COLUMN: ret=$ret err=$err");
	unlike($err, qr/cache lookup failed/, 'renaming a column the mirror does not read does not fail with an internal error');
	($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_unmirror('public.fr')});
	is($ret, 0, 'the mirror can still be removed') or diag($err);
}

finish($node, $log0);
