# Poison rows (NaN and infinite embeddings, wrong dimensions into a fresh collection, nested
# metadata objects) land in chroma_sync.failed with readable reasons while the 10,000 good
# rows of the same batches sync; an UPDATE that fixes a poison row syncs it and clears its
# failure. Once through the queue (a drain) and once through a backfill.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('poison');
my $log0 = log_offset($node);

my %poison = (
	777 => [ q{ARRAY['NaN', 1, 2, 3, 4, 5, 6, 7]::real[]}, q{'{"p": 1}'},
		qr/non-finite|NaN/i, 'NaN embedding' ],
	2500 => [ q{ARRAY[1, 2, 3, 4]::real[]}, q{'{"p": 2}'},
		qr/4 dimensions.*8|dimension/i, 'a 4-dimensional embedding' ],
	5001 => [ q{ARRAY[1, 2, 3, 4, 5, 6, 7, 8]::real[]}, q{'{"nested": {"a": 1}}'},
		qr/nested|object|metadata|refused/i, 'a nested metadata object' ],
	7777 => [ q{ARRAY[1, 2, 3, 'Infinity', 5, 6, 7, 8]::real[]}, q{'{"p": 4}'},
		qr/non-finite|infinit/i, 'an infinite value' ],
	9999 => [ q{ARRAY(SELECT 1::real FROM generate_series(1, 16))}, q{'{"p": 5}'},
		qr/16 dimensions.*8|dimension/i, 'a 16-dimensional embedding' ],
);
my @ids = sort { $a <=> $b } keys %poison;

# Rows 1 .. $n, the poison ones replaced; id 1 (the first row the mirror sees) is good.
sub insert_with_poison
{
	my ($table, $n) = @_;
	my $emb = "CASE g";
	my $meta = "CASE g";
	for my $id (@ids)
	{
		next if $id > $n;
		$emb .= " WHEN $id THEN $poison{$id}[0]";
		$meta .= " WHEN $id THEN $poison{$id}[1]::jsonb";
	}
	$emb .= " ELSE ARRAY(SELECT (sin(g * 1.1 + d))::real FROM generate_series(1, 8) d) END";
	$meta .= " ELSE jsonb_build_object('n', g) END";
	$node->safe_psql('postgres',
		"INSERT INTO $table SELECT g, $emb, 'doc ' || g, $meta FROM generate_series(1, $n) g");
}

sub check_failed
{
	my ($table, $n, $what) = @_;
	my @expect = grep { $_ <= $n } @ids;
	my $rows = $node->safe_psql('postgres',
		"SELECT id, error FROM chroma_sync.failed WHERE source = '$table'::regclass ORDER BY id::int");
	my %got = map { split /\|/, $_, 2 } split /\n/, $rows;
	is(join(',', sort { $a <=> $b } keys %got), join(',', @expect),
		"$what: exactly the poison rows are in chroma_sync.failed") or diagnostics($node);
	for my $id (@expect)
	{
		like($got{$id} // '', $poison{$id}[2], "$what: row $id ($poison{$id}[3]): readable reason")
		  and note("row $id: $got{$id}");
	}
	is(status_row($node, $table, 'failed'), scalar(@expect), "$what: status.failed is exact");
}

sub fix_poison
{
	my ($table, $n, $what) = @_;
	my @fix = grep { $_ <= $n } @ids;
	$node->safe_psql('postgres', "UPDATE $table SET embedding = ARRAY(SELECT (cos(id + d))::real "
		  . "FROM generate_series(1, 8) d), meta = jsonb_build_object('fixed', true) "
		  . "WHERE id IN (" . join(',', @fix) . ")");
	assert_equal($node, $table, "cs_t015_$table", name => "$what, after fixing the poison rows");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM chroma_sync.failed WHERE source = '$table'::regclass"),
		'0', "$what: fixed rows left chroma_sync.failed");
	is(status_row($node, $table, 'failed'), '0', "$what: status.failed is 0");
}

# --- through the queue: one transaction, 10,005 rows, into a fresh collection
my $n = 10_005;
make_table($node, 'docs', dim => 8);
fresh_collection($node, 'cs_t015_docs');
mirror($node, 'docs', 'cs_t015_docs');
is($node->safe_psql('postgres', "SELECT chroma_flush('docs')"), 't', 'the empty backfill is done');
my $synced0 = status_row($node, 'docs', 'synced');
insert_with_poison('docs', $n);
assert_equal($node, 'docs', 'cs_t015_docs', exclude_failed => 1, name => 'drain with poison rows');
check_failed('docs', $n, 'drain');
my $synced = status_row($node, 'docs', 'synced') - $synced0;
is($synced, $n - @ids, 'the 10,000 good rows were sent (status.synced)');
is($node->safe_psql('postgres',
		"SELECT dimension FROM chroma_list_collections() WHERE name = 'cs_t015_docs'"),
	'8', 'the fresh collection got the dimension of the good rows');
fix_poison('docs', $n, 'drain');

# --- through the backfill: poison rows already in the table when the mirror is created
make_table($node, 'pre', dim => 8);
insert_with_poison('pre', 3000);
fresh_collection($node, 'cs_t015_pre');
mirror($node, 'pre', 'cs_t015_pre');
assert_equal($node, 'pre', 'cs_t015_pre', exclude_failed => 1, name => 'backfill with poison rows');
check_failed('pre', 3000, 'backfill');
fix_poison('pre', 3000, 'backfill');

finish($node, $log0);
