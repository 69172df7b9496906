# chroma_verify walks the table and the collection page by page:
#
# - ids are compared whole: 700 text ids of 300 bytes that share their first 290 bytes are
#   reported equal when the collection is in step, and a stale document, a stale
#   embedding, a row Chroma lacks and records the table no longer has are each counted
#   where they belong, across page boundaries; so are rows that cannot be read and Chroma
#   ids that are no key of the table;
# - memory is bounded by a page, not by the table: verifying 20,000 rows of 1,536-d
#   embeddings and 8 kB documents (about 280 MB of values) keeps the backend's peak
#   memory (VmHWM) under a cap and close to verifying 2,000 such rows.
#
# Against the real Chroma server the harness started.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use ChromaSyncTest;

# Bounds (kB) on the backend's peak memory while it verifies the big table: an absolute cap,
# and a ratio to verifying a table a tenth of its size. Measured here: the whole table in
# memory peaked at 1,183 MB (2,000 rows: 150 MB); page by page at 51 MB (2,000 rows: 50 MB).
my $cap_kb = 120 * 1024;
my $ratio = 1.5;
my $slack_kb = 20 * 1024;
my $big_rows = 20_000;
my $small_rows = 2_000;
my $dim = 1536;

# shared buffers count in VmHWM once touched: keep them small beside what is measured
my $node = new_node('verify_streaming', conf => "shared_buffers = '16MB'\n");
my $offset = log_offset($node);

# ---- (a) long ids that share a prefix longer than 255 bytes
my $prefix = 'k' x 290;
my $n = 700;
$node->safe_psql('postgres', qq{
CREATE TABLE lk (id text PRIMARY KEY, embedding real[], doc text, meta jsonb);
INSERT INTO lk SELECT '$prefix' || lpad(g::text, 10, '0'),
	} . ChromaSyncTest::embedding_sql('g', 8) . qq{,
	'document ' || g, jsonb_build_object('n', g)
FROM generate_series(1, $n) g});
fresh_collection($node, 'tap_verify_long_ids');
mirror($node, 'lk', 'tap_verify_long_ids');
assert_equal($node, 'lk', 'tap_verify_long_ids', name => "$n ids of 300 bytes sharing 290");

sub id { return "'$prefix" . sprintf('%010d', $_[0]) . "'"; }

$node->safe_psql('postgres', "SELECT chroma_pause('lk')");
$node->safe_psql('postgres', join(";\n",
	'UPDATE lk SET doc = doc || \' (changed)\' WHERE id = ' . id(5),
	'UPDATE lk SET embedding[3] = embedding[3] + 1 WHERE id = ' . id(600),
	'UPDATE lk SET embedding = NULL WHERE id = ' . id(650),
	'DELETE FROM lk WHERE id = ' . id(7),
	'INSERT INTO lk VALUES (' . id(9_999_999_999)
	  . ", '{1,2,3,4,5,6,7,8}', 'new', '{\"n\": 0}')"));
is($node->safe_psql('postgres', 'SELECT rows, missing, extra, different FROM chroma_verify(\'lk\')'),
	'699|1|2|2',
	'paused after changes: 699 rows, 1 missing (inserted), 2 extra (deleted, embedding set to NULL), 2 different (document, embedding)');
$node->safe_psql('postgres', "SELECT chroma_resume('lk')");
assert_equal($node, 'lk', 'tap_verify_long_ids', name => 'after resume');

# ---- rows that cannot be read (a float8 embedding out of float4's range) on two pages, and
# Chroma ids that are no key of the table: one that is no integer, one whose integer is a
# key but whose text is not its id, one past the table
$node->safe_psql('postgres', qq{
CREATE TABLE odd (id int PRIMARY KEY, vec float8[]);
INSERT INTO odd SELECT g, CASE WHEN g IN (150, 450) THEN ARRAY[1, 1e300, 1]
	ELSE ARRAY[g, 1.5, -2] END FROM generate_series(1, 700) g});
fresh_collection($node, 'tap_verify_odd');
$node->safe_psql('postgres',
	"SELECT chroma_mirror('odd', collection => 'tap_verify_odd', embedding_column => 'vec')");
is($node->safe_psql('postgres', "SELECT chroma_flush('odd', interval '120 seconds')", timeout => 150),
	't', 'odd: flushed');
is($node->safe_psql('postgres', 'SELECT rows, missing, extra, different FROM chroma_verify(\'odd\')'),
	'700|2|0|0', 'odd: the two unreadable rows are missing');
$node->safe_psql('postgres', q{SELECT chroma_upsert('tap_verify_odd',
	ARRAY['abc', '007', '100000', '150'], ARRAY[[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]]::real[])});
is($node->safe_psql('postgres', 'SELECT rows, missing, extra, different FROM chroma_verify(\'odd\')'),
	'700|1|3|1',
	'odd: abc, 007 and 100000 are extra; an unreadable row in Chroma is different, not extra');

# ---- (b) memory: a page at a time, whatever the table holds
my $emb = ChromaSyncTest::embedding_sql('g', $dim);
for my $t ([ 'vbig', $big_rows ], [ 'vsmall', $small_rows ])
{
	my ($table, $rows) = @$t;
	my $t0 = time;
	$node->safe_psql('postgres', qq{
CREATE TABLE $table (id int PRIMARY KEY, embedding real[], doc text, meta jsonb);
INSERT INTO $table SELECT g, $emb, repeat(md5(g::text), 256),
	jsonb_build_object('n', g, 'tag', 't' || (g % 10))
FROM generate_series(1, $rows) g}, timeout => 600);
	fresh_collection($node, "tap_verify_$table");
	mirror($node, $table, "tap_verify_$table");
	is($node->safe_psql('postgres', "SELECT chroma_flush('$table', interval '900 seconds')",
			timeout => 960), 't', "$table: $rows rows of $dim-d embeddings and 8 kB documents in Chroma");
	note(sprintf("$table: written and mirrored in %.1f s", time - $t0));
}

sub status_kb
{
	my ($status, $field) = @_;
	return $status =~ /^$field:\s+(\d+) kB/m ? $1 : undef;
}

# chroma_verify in a fresh backend: (its result, VmHWM kB).
sub verify_peak
{
	my ($table) = @_;
	my $t0 = time;
	my $out = $node->safe_psql('postgres', qq{
		SELECT rows, missing, extra, different FROM chroma_verify('$table');
		SELECT pg_read_file('/proc/self/status');
	}, timeout => 900);
	my ($result, $status) = split /\n/, $out, 2;
	my $hwm = status_kb($status, 'VmHWM');
	note(sprintf("chroma_verify('$table'): $result in %.1f s, VmHWM $hwm kB", time - $t0));
	return ($result, $hwm);
}

my ($r_small, $hwm_small) = verify_peak('vsmall');
is($r_small, "$small_rows|0|0|0", "vsmall: $small_rows rows, all equal");
my ($r_big, $hwm_big) = verify_peak('vbig');
is($r_big, "$big_rows|0|0|0", "vbig: $big_rows rows, all equal");
cmp_ok($hwm_big, '<', $cap_kb,
	"peak memory verifying $big_rows rows is under " . ($cap_kb / 1024) . " MB ($hwm_big kB)");
cmp_ok($hwm_big, '<', $ratio * $hwm_small + $slack_kb,
	"peak memory does not grow with the table ($big_rows: $hwm_big kB, $small_rows: $hwm_small kB)");

# one stale row in the big table is still found
$node->safe_psql('postgres', "SELECT chroma_pause('vbig')");
$node->safe_psql('postgres', "UPDATE vbig SET doc = doc || '.' WHERE id = 19999");
is($node->safe_psql('postgres', "SELECT rows, missing, extra, different FROM chroma_verify('vbig')",
		timeout => 900),
	"$big_rows|0|0|1", 'vbig: a changed document in the last page is one difference');

for my $c ('tap_verify_long_ids', 'tap_verify_odd', 'tap_verify_vbig', 'tap_verify_vsmall')
{
	# deleting 20,000 records of 1,536 dimensions can take Chroma longer than the default 30 s
	$node->safe_psql('postgres',
		"SET chroma_sync.timeout = '5min'; SELECT chroma_delete_collection('$c', true)",
		timeout => 600);
}
finish($node, $offset);
