# Deterministic races: chroma_sync.test_stall holds the worker between reading a batch and
# sending it; rows changed while their batch is in flight end in Chroma with their latest
# state (update, delete, NULL embedding, primary-key change, metadata key removed,
# TRUNCATE).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $coll = 'cs_t013_docs';
my $node = new_node('race');
my $log0 = log_offset($node);

make_table($node, 'docs', rows => 10, dim => 8);
fresh_collection($node, $coll);
mirror($node, 'docs', $coll);
assert_equal($node, 'docs', $coll, name => 'after the backfill');

set_conf($node, 'chroma_sync.test_stall', 3000);

# True once the worker holds a batch it has read and not sent (it waits in the stall).
sub stalled
{
	return wait_for('the worker holds a batch in the stall', 10, sub {
		$node->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'chroma_sync worker' AND state = 'active' AND wait_event = 'Extension'})
		  eq '1';
	});
}

sub hex_of
{
	my ($sql) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o) FROM unnest(($sql)::real[]) WITH ORDINALITY u(x, o)");
}

sub in_chroma
{
	my ($id) = @_;
	return $node->safe_psql('postgres', qq{
SELECT (SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o)
		FROM unnest(embedding) WITH ORDINALITY u(x, o)) || ' ' || coalesce(document, '<null>')
	|| ' ' || coalesce(metadata::text, '<null>')
FROM chroma_get('$coll', ARRAY['$id'])});
}

# --- update while in flight
$node->safe_psql('postgres',
	q{UPDATE docs SET embedding = '{1,1,1,1,1,1,1,1}', doc = 'v1', meta = '{"v": 1}' WHERE id = 1});
ok(stalled(), 'update: the batch with the first version is in flight');
is(status_row($node, 'docs', 'pending'), '1', 'its queue entry is still there');
$node->safe_psql('postgres',
	q{UPDATE docs SET embedding = '{2,-0.0,2,2,2,2,2,1.5e-45}', doc = 'v2', meta = '{"v": 2}' WHERE id = 1});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'update: flush');
is(in_chroma(1), hex_of(q{'{2,-0.0,2,2,2,2,2,1.5e-45}'}) . ' v2 {"v": 2}',
	'update: Chroma has the latest embedding (bytes), document and metadata');

# --- delete while in flight
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'doomed' WHERE id = 2});
ok(stalled(), 'delete: the batch is in flight');
$node->safe_psql('postgres', q{DELETE FROM docs WHERE id = 2});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'delete: flush');
is(in_chroma(2), '', 'delete: the row is not in Chroma');

# --- embedding set to NULL while in flight (a delete for the mirror)
$node->safe_psql('postgres', q{INSERT INTO docs VALUES (100, '{3,3,3,3,3,3,3,3}', 'new', NULL)});
ok(stalled(), 'NULL embedding: the batch with the new row is in flight');
$node->safe_psql('postgres', q{UPDATE docs SET embedding = NULL WHERE id = 100});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'NULL embedding: flush');
is(in_chroma(100), '', 'NULL embedding: the row is not in Chroma');

# --- primary-key change while in flight
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'moving' WHERE id = 3});
ok(stalled(), 'pk change: the batch is in flight');
$node->safe_psql('postgres', q{UPDATE docs SET id = 300 WHERE id = 3});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'pk change: flush');
is(in_chroma(3), '', 'pk change: the old id is gone');
like(in_chroma(300), qr/ moving /, 'pk change: the new id is there');

# --- metadata key and document removed while in flight
$node->safe_psql('postgres', q{UPDATE docs SET meta = '{"a": 1, "b": 2}', doc = 'keep?' WHERE id = 4});
ok(stalled(), 'metadata: the batch with keys a and b is in flight');
$node->safe_psql('postgres', q{UPDATE docs SET meta = '{"a": 1}', doc = NULL WHERE id = 4});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'metadata: flush');
like(in_chroma(4), qr/ <null> \{"a": 1\}$/, 'metadata: key b and the document are gone from Chroma');

# --- the same row changed again and again while batches are in flight
for my $v (1 .. 3)
{
	$node->safe_psql('postgres', qq{UPDATE docs SET embedding = '{$v,$v,$v,$v,$v,$v,$v,$v}', doc = 'r$v' WHERE id = 5});
	stalled();
}
$node->safe_psql('postgres', q{UPDATE docs SET embedding = '{9,9,9,9,9,9,9,9}', doc = 'last' WHERE id = 5});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'repeated updates: flush');
like(in_chroma(5), qr/ last /, 'repeated updates: Chroma has the last version');

# --- TRUNCATE while a batch is in flight, then rows written again after it
$node->safe_psql('postgres', q{UPDATE docs SET doc = 'before truncate' WHERE id IN (6, 7)});
ok(stalled(), 'truncate: a batch written before the TRUNCATE is in flight');
$node->safe_psql('postgres', q{
BEGIN;
TRUNCATE docs;
INSERT INTO docs VALUES (7, '{7,7,7,7,7,7,7,7}', 'after truncate', '{"t": 1}'),
	(70, '{7,0,7,0,7,0,7,0}', 'new after truncate', NULL);
COMMIT;});
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'truncate: flush');
is($node->safe_psql('postgres', "SELECT string_agg(id, ',' ORDER BY id) FROM chroma_get('$coll')"),
	'7,70', 'truncate: only the rows written after the TRUNCATE are in Chroma');
like(in_chroma(7), qr/ after truncate /, 'truncate: row 7 has its state after the TRUNCATE');
$node->safe_psql('postgres', q{
INSERT INTO docs SELECT g, ARRAY(SELECT (g * d)::real FROM generate_series(1, 8) d), 'refill ' || g, NULL
FROM generate_series(1, 5) g});

set_conf($node, 'chroma_sync.test_stall', 0);
assert_equal($node, 'docs', $coll, name => 'at the end');
is($node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.failed'), '0',
	'nothing in chroma_sync.failed');
finish($node, $log0);
