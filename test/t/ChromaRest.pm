# An independent reader of Chroma collections for the TAP tests that check a mirror from
# outside the extension: its own HTTP client (HTTP::Tiny) and JSON decoder (JSON::PP) on
# Chroma's REST API, float32 bytes rebuilt from the JSON floats, metadata compared with
# their JSON types, and a comparison of the records with a table's rows both ways.
#
#   my ($records, $count) = read_collection('coll');   # id (UTF-8 bytes) -> {emb, doc, meta, dup}
#   my ($n, $examples) = compare_records(\%table, $records);
#
# %table maps each expected id (UTF-8 bytes) to [embedding as float4send hex, document as
# UTF-8 bytes or undef, metadata as a hash of Perl values typed like JSON::PP's].
package ChromaRest;

use strict;
use warnings;

use Exporter 'import';
use B;
use Encode qw(encode);
use HTTP::Tiny;
use JSON::PP;

our @EXPORT = qw(chroma_post collection_id create_collection_for_kills read_collection
  float32_hex meta_canonical compare_records);

my $http = HTTP::Tiny->new(timeout => 120);
my $api = "$ENV{CHROMA_URL}/api/v2/tenants/default_tenant/databases/default_database/collections";
my $json = JSON::PP->new->canonical;

sub chroma_post
{
	my ($path, $body) = @_;
	my $res = $http->post($path eq '' ? $api : "$api/$path", {
		headers => { 'content-type' => 'application/json' },
		content => JSON::PP->new->utf8->encode($body) });
	die "POST $path: $res->{status} $res->{content}" unless $res->{success};
	return JSON::PP->new->utf8->allow_nonref->decode($res->{content});
}

sub collection_id
{
	my ($name) = @_;
	my $res = $http->get("$api/$name");
	die "GET collection $name: $res->{status} $res->{content}" unless $res->{success};
	return JSON::PP->new->utf8->decode($res->{content})->{id};
}

# Chroma (both servers) rewrites its HNSW index files in place every sync_threshold records
# (default 1000): a SIGKILL in the middle leaves index_metadata.pickle empty, and from then
# on every write to the collection fails with HTTP 500 "Error deserializing pickle file"
# (seen with the old server). That is Chroma's bug, not the mirror's: a test that kills
# Chroma creates its collections with a threshold above its writes, so the index stays in
# memory and Chroma's SQLite log, which a SIGKILL cannot tear, is replayed at start.
sub create_collection_for_kills
{
	my ($name) = @_;
	return chroma_post('', { name => $name, get_or_create => JSON::PP::false,
		configuration => { hnsw => { sync_threshold => 10_000_000 } } });
}

# Every record of the collection, page by page, and what the count endpoint says.
sub read_collection
{
	my ($name) = @_;
	my $cid = collection_id($name);
	my %chroma;
	my $page = 1000;
	for (my $offset = 0;; $offset += $page)
	{
		my $g = chroma_post("$cid/get", { limit => $page, offset => $offset,
			include => [ 'embeddings', 'documents', 'metadatas' ] });
		my $n = scalar @{ $g->{ids} };
		for my $i (0 .. $n - 1)
		{
			my $id = encode('UTF-8', $g->{ids}[$i]);
			$chroma{$id}{dup}++ if exists $chroma{$id};
			$chroma{$id}{emb} = $g->{embeddings}[$i];
			$chroma{$id}{doc} = $g->{documents}[$i];
			$chroma{$id}{meta} = $g->{metadatas}[$i];
		}
		last if $n < $page;
	}
	my $res = $http->get("$api/$cid/count");
	return (\%chroma, $res->{content});
}

# float32 big-endian hex of a JSON number (a float32 printed by Chroma, parsed as a double)
sub float32_hex
{
	my ($v) = @_;
	return 'null' unless defined $v && !ref $v;
	my $max = unpack('f>', pack('L>', 0x7f7fffff));
	# pack rounds to nearest but turns anything above FLT_MAX into infinity
	$v = ($v < 0 ? -$max : $max) if abs($v) > $max && abs($v) < 3.4028235677973366e38;
	return unpack('H*', pack('f>', $v));
}

# A metadata object as a canonical string: type-tagged values, null keys dropped.
sub meta_canonical
{
	my ($m) = @_;
	return '' unless ref $m eq 'HASH';
	my @parts;
	for my $k (sort keys %$m)
	{
		my $v = $m->{$k};
		next unless defined $v;
		my $tv;
		if (JSON::PP::is_bool($v)) { $tv = 'b:' . ($v ? 1 : 0); }
		elsif (ref $v) { $tv = 'x:' . $json->encode($v); }
		else
		{
			my $f = B::svref_2object(\$v)->FLAGS;
			if ($f & B::SVf_POK) { $tv = "s:$v"; }
			elsif ($f & B::SVf_IOK) { $tv = "i:$v"; }
			else { $tv = 'f:' . sprintf('%.17g', $v); }
		}
		push @parts, encode('UTF-8', $k) . '=' . encode('UTF-8', $tv);
	}
	return join("\x00", @parts);
}

sub id_order
{
	return ($a =~ /^-?\d+$/ && $b =~ /^-?\d+$/) ? $a <=> $b : $a cmp $b;
}

# Compares both ways; returns the counts and the differences, one line each.
sub compare_records
{
	my ($table, $chroma) = @_;
	my %n = map { $_ => 0 } qw(only_table only_chroma embedding document metadata duplicate matched);
	my @examples;
	for my $id (sort id_order keys %$table)
	{
		my $t = $table->{$id};
		my $c = $chroma->{$id};
		unless ($c)
		{
			$n{only_table}++;
			push @examples, "id '$id': in the table, not in Chroma";
			next;
		}
		my $cemb = join('', map { float32_hex($_) } @{ $c->{emb} // [] });
		my $cdoc = defined $c->{doc} ? encode('UTF-8', $c->{doc}) : undef;
		my ($tm, $cm) = (meta_canonical($t->[2]), meta_canonical($c->{meta}));
		my $same = 1;
		if ($cemb ne $t->[0])
		{
			$n{embedding}++;
			$same = 0;
			push @examples, "id '$id': embedding table $t->[0] Chroma $cemb";
		}
		if ((defined $cdoc) != (defined $t->[1]) || (defined $cdoc && $cdoc ne $t->[1]))
		{
			$n{document}++;
			$same = 0;
			push @examples, "id '$id': document table " . ($t->[1] // 'NULL') . ' Chroma ' . ($cdoc // 'NULL');
		}
		if ($tm ne $cm)
		{
			$n{metadata}++;
			$same = 0;
			push @examples, "id '$id': metadata table [" . ($tm =~ s/\x00/; /gr) . '] Chroma [' . ($cm =~ s/\x00/; /gr) . ']';
		}
		$n{matched}++ if $same;
	}
	for my $id (sort id_order keys %$chroma)
	{
		$n{duplicate}++ if $chroma->{$id}{dup};
		next if $table->{$id};
		$n{only_chroma}++;
		push @examples, "id '$id': in Chroma, not in the table";
	}
	$n{mismatches} = $n{only_table} + $n{only_chroma} + $n{embedding} + $n{document}
	  + $n{metadata} + $n{duplicate};
	return (\%n, \@examples);
}

1;
