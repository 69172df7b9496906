# Helpers of the partitioned-mirror TAP tests (test/t/20[1-3]_*.pl): tables partitioned by
# region with the primary key (id, region), so a record's id is "id,region"; the mirror
# sends doc as the document and meta's top-level keys plus region as metadata.
#
#   $node->safe_psql('postgres', $PartitionedMirror::FUNCTIONS);   # pt_emb(g, salt)
#   mirror_parent($node, 'ev', 'cs_t201_ev');
#   rest_equal($node, 'ev', 'cs_t201_ev', 'after the backfill');
#       # chroma_flush, chroma_verify, and the collection read over Chroma's REST API
#       # (test/t/ChromaRest.pm) compared both ways with the rows SELECTed from the table
package PartitionedMirror;

use strict;
use warnings;

use Exporter 'import';
use ChromaSyncTest;
use ChromaRest;
use Encode qw(decode);
use JSON::PP;
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw(mirror_parent expected_records rest_equal rest_read block
  chroma_triggers_on queue_of mirror_id_of);

# A deterministic 4-dimensional embedding of row g (salt: another version of it).
our $FUNCTIONS = q{
CREATE FUNCTION pt_emb(g int, salt int DEFAULT 0) RETURNS real[] LANGUAGE sql IMMUTABLE AS
$$ SELECT ARRAY[sin(g * 1.7 + salt), cos(g * 0.3 - salt), (g % 97) / 7.0, salt]::real[] $$;
};

sub mirror_parent
{
	my ($node, $table, $collection, %opt) = @_;
	my $backfill = ($opt{backfill} // 1) ? 'true' : 'false';
	return $node->safe_psql('postgres', qq{
SELECT chroma_mirror('$table', collection => '$collection', document_column => 'doc',
	metadata_columns => '{meta,region}', backfill => $backfill)}, timeout => 300);
}

# The records a collection must hold: the rows of FROM (a table, or a subquery with an
# alias) with an embedding, as ChromaRest's compare_records takes them.
sub expected_records
{
	my ($node, $from) = @_;
	my $hex = sub { "CASE WHEN $_[0] IS NULL THEN 'N' ELSE 'T' || encode(convert_to(($_[0])::text, 'UTF8'), 'hex') END" };
	my $sql = 'SELECT ' . join(",\n\t",
		$hex->(q{id || ',' || region}),
		q{(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o) FROM unnest(embedding) WITH ORDINALITY u(x, o))},
		$hex->('doc'), $hex->('meta'), q{coalesce(region::text, 'N')})
	  . "\nFROM $from WHERE embedding IS NOT NULL";
	my $unhex = sub { $_[0] eq 'N' ? undef : pack('H*', substr($_[0], 1)) };
	my %table;
	for my $line (split /\n/, $node->safe_psql('postgres', $sql, timeout => 300))
	{
		my ($id, $emb, $doc, $meta, $region) = split /\|/, $line, -1;
		my %md;
		if (defined(my $mj = $unhex->($meta)))
		{
			my $o = JSON::PP->new->utf8->decode($mj);
			%md = %$o if ref $o eq 'HASH';
		}
		$md{region} = 0 + $region unless $region eq 'N';
		$table{ $unhex->($id) } = [ $emb, $unhex->($doc), \%md ];
	}
	return \%table;
}

# The collection over the REST API compared with the rows of FROM; returns (mismatches,
# a summary, the first differences).
sub rest_read
{
	my ($node, $coll, $from) = @_;
	my $table = expected_records($node, $from);
	my ($chroma, $count) = read_collection($coll);
	my ($n, $examples) = compare_records($table, $chroma);
	my $nt = scalar keys %$table;
	$count =~ s/\s+//g;
	my $bad = $n->{mismatches} + ($count eq $nt ? 0 : 1);
	my $summary = "$nt rows, " . scalar(keys %$chroma) . " records (count endpoint $count); "
	  . "only in table $n->{only_table}, only in Chroma $n->{only_chroma}, embedding "
	  . "$n->{embedding}, document $n->{document}, metadata $n->{metadata}, duplicate ids $n->{duplicate}";
	return ($bad, $summary, $examples, $nt);
}

# chroma_flush, chroma_verify and the REST comparison of the mirror of SOURCE into COLL
# with the rows of FROM (default SOURCE). Options: from, flush_timeout (also chroma_verify's,
# when longer than 300 s), verify => 0.
sub rest_equal
{
	my ($node, $source, $coll, $name, %opt) = @_;
	my $from = $opt{from} // $source;
	my $timeout = $opt{flush_timeout} // 120;
	my $all = 1;
	my $t0 = time();
	my $flushed = $node->safe_psql('postgres',
		"SELECT chroma_flush('$source', interval '$timeout seconds', '$coll')", timeout => $timeout + 30);
	$all &= is($flushed, 't', "$name: chroma_flush('$source') returns true");
	my $tf = time() - $t0;
	my ($bad, $summary, $examples, $nrows) = rest_read($node, $coll, $from);
	if ($opt{verify} // 1)
	{
		$all &= is($node->safe_psql('postgres',
				"SELECT rows, missing, extra, different FROM chroma_verify('$source', '$coll')",
				timeout => $timeout > 300 ? $timeout : 300),
			"$nrows|0|0|0", "$name: chroma_verify('$source') reports $nrows rows, 0 missing, 0 extra, 0 different");
	}
	$all &= is($bad, 0, "$name: the collection $coll read over the REST API equals $from ($summary)");
	note(sprintf('%s: flushed in %.1f s, checked in %.1f s', $name, $tf, time() - $t0 - $tf));
	if ($bad)
	{
		diag("$name: first differences (expected = $from, actual = Chroma):\n"
			  . join("\n", map { decode('UTF-8', $_) =~ s/\n/\\n/gr } @$examples[ 0 .. ($#$examples < 9 ? $#$examples : 9) ]));
		# what helps to tell a flush that returned early from a lasting divergence
		my $later = wait_for("$coll converges after the flush", 20, sub { (rest_read($node, $coll, $from))[0] == 0 });
		diag("$name: " . ($later ? 'the collection converged within 20 s AFTER chroma_flush returned (flush returned early)'
			: 'the collection still differs 20 s later: ' . (rest_read($node, $coll, $from))[1]));
	}
	diagnostics($node) unless $all;
	return $all;
}

# A subtest that fails (instead of ending the test) when its code dies.
sub block
{
	my ($name, $code) = @_;
	return subtest $name => sub {
		my $ok = eval { $code->(); 1 };
		fail("$name: died: $@") unless $ok;
		done_testing();
	};
}

# The triggers of chroma_sync (by name or by function) on the relations of LIST (SQL
# returning regclass values), as "relation:trigger" lines.
sub chroma_triggers_on
{
	my ($node, $list_sql) = @_;
	return $node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(t.tgrelid::regclass || ':' || t.tgname, ', ' ORDER BY 1), '')
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid IN ($list_sql) AND (t.tgname LIKE 'chroma%' OR p.proname LIKE 'chroma%')});
}

sub mirror_id_of
{
	my ($node, $coll) = @_;
	return $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE collection = '$coll'");
}

# Entries of the mirror of COLL in chroma_sync.queue: "entries|distinct keys|barriers".
sub queue_of
{
	my ($node, $coll) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) || '|' || count(DISTINCT key) || '|' || count(*) FILTER (WHERE key IS NULL)
FROM chroma_sync.queue WHERE mirror_id = (SELECT mirror_id FROM chroma_sync.mirror WHERE collection = '$coll')});
}

1;
