# Red team: a typed table's columns renamed by ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE
# are not followed in the DDL's transaction, so a dump taken before the worker reloads
# names the wrong columns, and the restored copy adopts them silently.
#
# ALTER TABLE renames of mirrored columns are followed in the DDL's own transaction
# (chroma_sync.columns_changed from on_ddl_end: the recorded column_names follow, "so a
# pg_dump at any moment names the columns read", TAP 099). But a typed table's columns are
# renamed by ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE, whose tag ALTER TYPE takes the
# other branch of on_ddl_end (filters_renamed only): the recorded names stay as they were
# until the worker of the database loads the mirror again (mirror_columns_apply), which
# it does not while it is away (its database left out of chroma_sync.worker_databases
# here; in general until its next pass).
#
# Steps: typed table tt OF app.item (id, embedding, body, note), mirrored with body as the
# document (sends B1, B2); the worker leaves the database; ALTER TYPE app.item RENAME
# ATTRIBUTE swaps body and note (CASCADE); pg_dump; restore into a copy; chroma_adopt.
# What happens: column_names still says body for attnum 3; the copy resolves "body" to the
# column that was note and sends N1, N2. What should happen: the recorded names follow in
# the DDL's transaction (document "note"), and the copy sends B1, B2 (or adopt refuses).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_typed_rename_attribute');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'db144', $_[0]); }
sub docs { return q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t144')}, 'postgres'); }

$node->safe_psql('postgres', q{CREATE DATABASE db144});
q1(q{CREATE EXTENSION chroma_sync});
fresh_collection($node, 'cs_t144');
q1(q{
CREATE SCHEMA app;
CREATE TYPE app.item AS (id int, embedding real[], body text, note text);
CREATE TABLE public.tt OF app.item (PRIMARY KEY (id));
INSERT INTO public.tt VALUES (1, '{1,0}', 'B1', 'N1'), (2, '{0,1}', 'B2', 'N2');
SELECT chroma_mirror('public.tt', collection => 'cs_t144', document_column => 'body');
});
is(q1(q{SELECT chroma_flush('public.tt', interval '60 seconds')}), 't', 'the mirror flushes');
is(docs(), '1:B1,2:B2', 'it sends body as the document');

# db144's worker goes away
$node->safe_psql('postgres', q{ALTER SYSTEM SET chroma_sync.worker_databases = 'postgres'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%' AND datname = 'db144'},
	'0', 30), "db144's worker has exited");

q1(q{
ALTER TYPE app.item RENAME ATTRIBUTE body TO tmp CASCADE;
ALTER TYPE app.item RENAME ATTRIBUTE note TO body CASCADE;
ALTER TYPE app.item RENAME ATTRIBUTE tmp TO note CASCADE;
});
is(q1(q{SELECT column_names[3] FROM chroma_sync.mirror}), 'note',
	'the recorded document column follows the rename in the DDL\'s transaction (as for ALTER TABLE ... RENAME)');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t144.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'db144' ], 'pg_dump -Fc');
$node->safe_psql('postgres', q{CREATE DATABASE copy144});
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy144', $dump ], 'pg_restore into copy144');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
my ($ret, $out, $err) = $node->psql('copy144', q{SELECT chroma_adopt('public.tt')});
note("chroma_adopt: ret=$ret $err");
if ($ret == 0)
{
	is($node->safe_psql('copy144', q{SELECT chroma_flush('public.tt', interval '60 seconds')}, timeout => 90), 't',
		'the adopted copy flushes');
	is(docs(), '1:B1,2:B2', 'the copy sends the column the original sends (now called note), not the one that took its name');
}
else
{
	pass('chroma_adopt refused the copy (no silent rebinding)');
	pass('(nothing sent)');
}
$node->safe_psql('postgres', q{DROP DATABASE copy144 WITH (FORCE)});

finish($node, $log0);
