# A filter stored by 0.4 as text is bound by the sync worker of its database alone (the
# settings 0.4's worker read it with are known to no other session: TAP 128, 129). Until
# the worker has bound it — its database left out of chroma_sync.worker_databases here —
# nothing else binds it: the update leaves it as text, chroma_sync_filter.match and
# chroma_adopt refuse it, and columns renamed in the meantime (two names swapped) pause
# the mirror instead of binding the text to the columns that took the names (TAP 099's
# hazard). Undone, the worker binds it to the columns 0.4 read.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('update_unbound_filter', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'db138', $_[0]); }
sub docs { return q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t138')}, 'postgres'); }

$node->safe_psql('postgres', q{CREATE DATABASE db138});
$node->safe_psql('postgres', q{CREATE EXTENSION chroma_sync});
q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t138');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, arch bool, body text, note text);
INSERT INTO public.s VALUES (1, '{1,0}', true, false, 'B1', 'N1'), (2, '{0,1}', false, true, 'B2', 'N2');
SELECT chroma_mirror('public.s', collection => 'cs_t138', document_column => 'body', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(docs(), '1:B1', 'the 0.4 worker sends row 1 with its body');

# db138's worker goes away before the update
$node->safe_psql('postgres', q{ALTER SYSTEM SET chroma_sync.worker_databases = 'postgres'; SELECT pg_reload_conf()});
ok(poll_query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'chroma_sync%' AND datname = 'db138'},
	'0', 30), "db138's worker has exited");
my ($ret, $out, $err) = $node->psql('db138', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
is(q1(q{SELECT (filter_node IS NULL)::text || ' ' || filter || ' ' || column_names::text FROM chroma_sync.mirror}),
	'true pub {id,embedding,body,pub}', 'the update records the columns and leaves the filter to the worker');
($ret, $out, $err) = $node->psql('db138',
	q{SELECT count(*) FROM public.s WHERE chroma_sync_filter.match((SELECT mirror_id FROM chroma_sync.mirror), s.*)});
isnt($ret, 0, 'chroma_sync_filter.match refuses the unbound filter');
like($err, qr/stored by chroma_sync 0\.4, is not bound yet/, '... saying the worker binds it');

q1(q{
ALTER TABLE s RENAME pub TO tmp; ALTER TABLE s RENAME arch TO pub; ALTER TABLE s RENAME tmp TO arch;
ALTER TABLE s RENAME body TO tmp; ALTER TABLE s RENAME note TO body; ALTER TABLE s RENAME tmp TO note;
});
is(q1(q{SELECT (filter_node IS NULL)::text || ' ' || filter FROM chroma_sync.mirror}), 'true pub',
	'still unbound after the renames, the text as 0.4 stored it');

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t138.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'db138' ], 'pg_dump -Fc');
$node->safe_psql('postgres', q{CREATE DATABASE copy138});
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy138', $dump ], 'pg_restore into copy138');
($ret, $out, $err) = $node->psql('copy138', q{SELECT chroma_adopt('public.s')});
isnt($ret, 0, 'chroma_adopt refuses the copy');
like($err, qr/filter|column/, '... naming the filter or its columns') or diag($err);
$node->safe_psql('postgres', q{DROP DATABASE copy138});

# the worker comes back
$node->safe_psql('postgres', q{ALTER SYSTEM RESET chroma_sync.worker_databases; SELECT pg_reload_conf()});
ok(wait_for('the mirror paused', 60, sub { q1(q{SELECT state FROM chroma_sync.status}) eq 'paused' }),
	'the worker pauses the mirror');
like(q1(q{SELECT paused_reason FROM chroma_sync.mirror}), qr/pub/, 'the reason names the filter\'s column')
	or diag(q1(q{SELECT paused_reason FROM chroma_sync.mirror}));
is(q1(q{SELECT (filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true', 'the filter is not bound to the swapped columns');
q1(q{UPDATE s SET embedding = '{0,2}' WHERE id = 2});
sleep 2;
is(docs(), '1:B1', 'row 2 (now "pub") is not sent');

# undone, the worker binds the text to the columns 0.4 read
q1(q{
ALTER TABLE s RENAME pub TO tmp; ALTER TABLE s RENAME arch TO pub; ALTER TABLE s RENAME tmp TO arch;
ALTER TABLE s RENAME body TO tmp; ALTER TABLE s RENAME note TO body; ALTER TABLE s RENAME tmp TO note;
SELECT chroma_resume('public.s');
});
# DDL ran since the update: chroma_resume() after the undo confirms the text
ok(wait_for('the filter bound', 60, sub { q1(q{SELECT filter_node IS NOT NULL FROM chroma_sync.mirror}) eq 't' }),
	'the worker binds the filter');
q1(q{UPDATE s SET embedding = '{2,0}' WHERE id = 1});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the mirror flushes');
is(docs(), '1:B1', 'row 1 with its body, as 0.4 sent it');
like(q1(q{SELECT filter FROM chroma_sync.mirror}), qr/^\(?pub\)?$/, 'the bound text reads the same column');

finish($node, $log0);
