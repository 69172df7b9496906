# Red team: ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE renames the columns of a typed
# table's inheritance children too, but only mirrors of typed tables are followed in the
# DDL's transaction (the fix of TAP 144): a mirror of the child keeps the old names, so a
# dump taken before its worker reloads names the wrong columns (as in TAP 144).
#
# chroma_sync_filters_renamed (src/ddl.c) runs mirror_columns_apply only when
# table_is_typed(m->relid) (pg_class.reloftype set). PostgreSQL's renameatt recurses from
# the type to its typed tables and from them to their inheritance children (plain tables,
# reloftype 0), whose columns are renamed by the same command.
#
# Steps: type app.item (id, embedding, body, note); typed table p OF app.item; plain table
# c () INHERITS (p), mirrored with body as the document; in one transaction ALTER TYPE
# app.item RENAME ATTRIBUTE swaps body and note (CASCADE), then the recorded column names of
# both mirrors are read. What happens: p's mirror records "note" as its document column, c's
# still "body" (attnum 3, now called note). What should happen: c's recorded names follow
# in the DDL's transaction too ("note").
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_typed_child_rename_attribute');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

fresh_collection($node, 'cs_t156p');
fresh_collection($node, 'cs_t156c');
q1(q{
CREATE SCHEMA app;
CREATE TYPE app.item AS (id int, embedding real[], body text, note text);
CREATE TABLE public.p OF app.item (PRIMARY KEY (id));
CREATE TABLE public.c () INHERITS (public.p);
ALTER TABLE public.c ADD PRIMARY KEY (id);
INSERT INTO public.p VALUES (1, '{1,0}', 'B1', 'N1');
INSERT INTO public.c VALUES (2, '{0,1}', 'B2', 'N2');
SELECT chroma_mirror('public.p', collection => 'cs_t156p', document_column => 'body');
SELECT chroma_mirror('public.c', collection => 'cs_t156c', document_column => 'body');
});
is(q1(q{SELECT chroma_flush('public.c', interval '60 seconds')}), 't', 'the mirror of the child flushes');
is(q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t156c')}),
	'2:B2', 'it sends body as the document');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER TYPE app.item RENAME ATTRIBUTE body TO tmp CASCADE;
ALTER TYPE app.item RENAME ATTRIBUTE note TO body CASCADE;
ALTER TYPE app.item RENAME ATTRIBUTE tmp TO note CASCADE;
SELECT (SELECT attname FROM pg_attribute WHERE attrelid = 'public.c'::regclass AND attnum = 3)
	|| ' p=' || (SELECT column_names[3] FROM chroma_sync.mirror WHERE collection = 'cs_t156p')
	|| ' c=' || (SELECT column_names[3] FROM chroma_sync.mirror WHERE collection = 'cs_t156c');
COMMIT;
});
is($ret, 0, 'the renames commit') or diag($err);
note("in the DDL's transaction: attnum 3 of c is $out");
like($out, qr/^note p=note/, 'the typed table\'s mirror follows (TAP 144)');
like($out, qr/ c=note$/, 'the mirror of its inheritance child follows in the DDL\'s transaction too');

finish($node, $log0);
