# Red team (after TAP 123's fix): "renaming a mirrored column's type or its schema changes
# nothing (the mirror keeps syncing)". A table's, view's or materialized view's row type is
# renamed by ALTER TABLE/VIEW/MATERIALIZED VIEW ... RENAME or SET SCHEMA, and on_ddl_end
# follows type renames for those tags only inside "IF EXISTS (SELECT FROM chroma_sync.mirror
# WHERE filter IS NOT NULL)": in a database whose mirrors have no filter, renaming the
# table whose row type a mirrored column has (here the document column, of type public.addr,
# a table) is read as a type change: the mirror pauses ("the type of a mirrored column
# changed: a was public.addr, is now public.address") and a dump of it cannot be adopted.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_rowtype_rename_unfollowed');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, 'cs_t130');
q1(q{
CREATE TABLE public.addr (city text, country text);
CREATE TABLE public.ty (id int PRIMARY KEY, embedding real[], doc text, a public.addr);
INSERT INTO public.ty SELECT g, ARRAY[g, 1]::real[], 'd' || g, ROW('Paris', 'FR')::public.addr
	FROM generate_series(1, 5) g;
SELECT chroma_mirror('public.ty', collection => 'cs_t130', document_column => 'a');
});
is($node->safe_psql('postgres', q{SELECT chroma_flush('public.ty', interval '60 seconds')}, timeout => 90), 't',
	'the mirror flushes');
is(q1(q{SELECT chroma_count('cs_t130')}), '5', 'it sends the 5 rows');
note('recorded: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));

q1(q{ALTER TABLE public.addr RENAME TO address});
note('recorded after ALTER TABLE ... RENAME: ' . q1(q{SELECT column_type_names::text FROM chroma_sync.mirror}));
q1(q{UPDATE public.ty SET embedding = ARRAY[id, 2]::real[]});
$node->psql('postgres', q{SELECT chroma_flush('public.ty', interval '30 seconds')}, timeout => 60);
my $state = q1(q{SELECT state || ' ' || coalesce(last_error, '') FROM chroma_sync.status});
note("status: $state");
is($state, 'syncing ', 'renaming the table whose row type a mirrored column has changes nothing: the mirror keeps syncing');
finish($node, $log0);
