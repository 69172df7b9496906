# The generator of test/t/050_random_workload.pl: a schema of mirrored tables (plain
# tables with int, text, char(n) and composite keys, filters, jsonb and scalar metadata;
# a partitioned parent whose partitions are mirrored, one of them partitioned again; an
# inheritance pair) and seeded
# random transactions over it. Everything here depends only on Perl's rand() after
# srand(seed): the same seed gives the same SQL, byte for byte.
#
#   srand($seed); my $sql = RandomWorkload::populate_sql();
#   my @txns = RandomWorkload::session_transactions($seed, $session, $ntxns, $nsessions);
#   # each: { sql => "...", kind => 'savepoints', gid => 'rw..._c' or undef }
#
# One session's SQL, to replay or minimize by hand (from test/t):
#   perl -I. -MRandomWorkload -e 'print map { $_->{sql} } RandomWorkload::session_transactions(SEED, 1, 2000, 4)'
#
# A committed transaction prints "ok" (SELECT 'ok') just before its COMMIT (or PREPARE).
package RandomWorkload;

use strict;
use warnings;

use Encode ();
use JSON::PP;

our $DIM = 4;
my $json = JSON::PP->new->canonical;

# ------------------------------------------------------------------ schema and mirrors

our $SCHEMA = q{
CREATE TABLE t_int (id int PRIMARY KEY, embedding real[], doc text, meta jsonb,
	score int, label text, flag boolean);
CREATE TABLE t_text (id text PRIMARY KEY, embedding real[], body text, weight float8,
	n bigint, tag text);
CREATE TABLE t_char (id char(5) PRIMARY KEY, embedding real[], doc text, meta jsonb);
CREATE TABLE t_comp (tenant text, n int, embedding real[], doc text, meta jsonb, qty int,
	PRIMARY KEY (tenant, n));
CREATE TABLE p_parent (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
CREATE TABLE p_low PARTITION OF p_parent FOR VALUES FROM (0) TO (10);
CREATE TABLE p_high PARTITION OF p_parent FOR VALUES FROM (10) TO (20);
CREATE TABLE p_mid PARTITION OF p_parent FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
CREATE TABLE p_mid_a PARTITION OF p_mid FOR VALUES FROM (MINVALUE) TO (75);
CREATE TABLE p_mid_b PARTITION OF p_mid FOR VALUES FROM (75) TO (MAXVALUE);
CREATE TABLE p_other PARTITION OF p_parent DEFAULT;
CREATE TABLE i_parent (id int PRIMARY KEY, embedding real[], doc text, meta jsonb);
CREATE TABLE i_child (extra text) INHERITS (i_parent);
ALTER TABLE i_child ADD PRIMARY KEY (id);
};

# Each mirror: its table, the chroma_mirror options, and how to read the rows it must hold
# (id expression, FROM, document column, jsonb metadata column, scalar metadata columns
# with their JSON type, filter).
our @MIRRORS = (
	{ table => 't_int', doc => 'doc', meta => 'meta', filter => 'flag IS NOT FALSE',
	  scalars => [ [ 'score', 'int' ], [ 'label', 'text' ], [ 'flag', 'bool' ] ],
	  id_sql => 'id::text' },
	# a second mirror of the same table: another collection, another filter, fewer columns
	{ table => 't_int', name => 't_int_pos', doc => 'label', meta => undef, filter => 'score > 0',
	  scalars => [ [ 'score', 'int' ] ], id_sql => 'id::text' },
	{ table => 't_text', doc => 'body', meta => undef,
	  scalars => [ [ 'weight', 'float' ], [ 'n', 'int' ], [ 'tag', 'text' ] ],
	  id_sql => 'id' },
	# bpchar's output keeps the padding (a cast to text would strip it)
	{ table => 't_char', doc => 'doc', meta => 'meta', scalars => [], id_sql => 'concat(id)' },
	{ table => 't_comp', doc => 'doc', meta => 'meta', filter => 'qty IS NULL OR qty >= 0',
	  scalars => [ [ 'qty', 'int' ] ],
	  id_sql => q{replace(replace(tenant, '%', '%25'), ',', '%2C') || ',' || n} },
	(map {
		{ table => $_, doc => 'doc', meta => 'meta', scalars => [ [ 'region', 'int' ] ],
		  id_sql => q{id || ',' || region} }
	} qw(p_low p_high p_mid_a p_mid_b p_other)),
	{ table => 'i_parent', only => 1, doc => 'doc', meta => 'meta', scalars => [],
	  id_sql => 'id::text' },
	{ table => 'i_child', doc => 'doc', meta => 'meta', scalars => [ [ 'extra', 'text' ] ],
	  id_sql => 'id::text' },
);

# The partitioned mirror of issue 17 (TAP 203 turns it on with enable_partitioned_mirror;
# TAP 050's schema, mirrors and SQL stay as they were for every seed): q_parent mirrored
# as one into one collection, ids "id,region"; q_r2 is partitioned again. The nemesis of
# TAP 203 detaches and attaches its partitions (@Q_PARTITIONS: name and bounds) during the
# run; the sessions write through q_parent, a few statements to a partition directly.
our $PARTITIONED_SCHEMA = q{
CREATE TABLE q_parent (id int, region int, embedding real[], doc text, meta jsonb,
	PRIMARY KEY (id, region)) PARTITION BY RANGE (region);
CREATE TABLE q_r0 PARTITION OF q_parent FOR VALUES FROM (0) TO (10);
CREATE TABLE q_r1 PARTITION OF q_parent FOR VALUES FROM (10) TO (20);
CREATE TABLE q_r2 PARTITION OF q_parent FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (id);
CREATE TABLE q_r2a PARTITION OF q_r2 FOR VALUES FROM (MINVALUE) TO (75);
CREATE TABLE q_r2b PARTITION OF q_r2 FOR VALUES FROM (75) TO (MAXVALUE);
CREATE TABLE q_r3 PARTITION OF q_parent FOR VALUES FROM (30) TO (40);
};
our @Q_PARTITIONS = ([ q_r0 => 'FROM (0) TO (10)' ], [ q_r1 => 'FROM (10) TO (20)' ],
	[ q_r2 => 'FROM (20) TO (30)' ], [ q_r3 => 'FROM (30) TO (40)' ]);
my @q_tables = qw(q_r0 q_r1 q_r2 q_r2a q_r2b q_r3);
my $partitioned_mirror = 0;

sub enable_partitioned_mirror
{
	return if $partitioned_mirror++;
	$SCHEMA .= $PARTITIONED_SCHEMA;
	add_partitioned_target();
	push @MIRRORS, { table => 'q_parent', doc => 'doc', meta => 'meta',
		scalars => [ [ 'region', 'int' ] ], id_sql => q{id || ',' || region} };
	return;
}

sub mirror_sql
{
	my ($m, $collection) = @_;
	my @meta = ((defined $m->{meta} ? ($m->{meta}) : ()), map { $_->[0] } @{ $m->{scalars} });
	my $filter = defined $m->{filter} ? ', filter => ' . sql_literal($m->{filter}) : '';
	return sprintf(q{SELECT chroma_mirror('%s', collection => '%s', document_column => '%s', metadata_columns => '{%s}'%s)},
		$m->{table}, $collection, $m->{doc}, join(',', @meta), $filter);
}

# The rows the mirror's collection must hold: id, embedding bytes, document, jsonb
# metadata (text fields hex-encoded UTF-8, 'N' for NULL), then the scalar columns.
sub expected_rows_sql
{
	my ($m) = @_;
	my $hex = sub { "CASE WHEN $_[0] IS NULL THEN 'N' ELSE 'T' || encode(convert_to(($_[0])::text, 'UTF8'), 'hex') END" };
	my @cols = (
		$hex->($m->{id_sql}),
		q{(SELECT string_agg(encode(float4send(x), 'hex'), '' ORDER BY o) FROM unnest(embedding) WITH ORDINALITY u(x, o))},
		$hex->($m->{doc}),
		defined $m->{meta} ? $hex->($m->{meta}) : q{'N'});
	for my $s (@{ $m->{scalars} })
	{
		my ($c, $type) = @$s;
		push @cols, $type eq 'text' ? $hex->($c) : "coalesce(${c}::text, 'N')";
	}
	my $filter = defined $m->{filter} ? " AND ($m->{filter}) IS TRUE" : '';
	return 'SELECT ' . join(",\n\t", @cols)
	  . "\nFROM " . ($m->{only} ? 'ONLY ' : '') . "$m->{table} WHERE embedding IS NOT NULL$filter";
}

# One line of expected_rows_sql's output as (id, [embedding hex, document, metadata]).
sub parse_expected_row
{
	my ($m, $line) = @_;
	my ($id, $emb, $doc, $meta, @scalars) = split /\|/, $line, -1;
	my $unhex = sub { $_[0] eq 'N' ? undef : pack('H*', substr($_[0], 1)) };
	my %md;
	if (defined(my $mj = $unhex->($meta)))
	{
		my $o = JSON::PP->new->utf8->decode($mj);
		%md = %$o if ref $o eq 'HASH';
	}
	my $i = 0;
	for my $s (@{ $m->{scalars} })
	{
		my ($c, $type) = @$s;
		my $v = $scalars[ $i++ ];
		next if $v eq 'N';
		if ($type eq 'text') { $md{$c} = Encode::decode('UTF-8', $unhex->($v)); }
		elsif ($type eq 'int') { $md{$c} = 0 + $v; }
		elsif ($type eq 'bool') { $md{$c} = $v eq 'true' ? JSON::PP::true : JSON::PP::false; }
		else { $md{$c} = unpack('d', pack('d', $v)); }    # a number with no string or int flag
	}
	return ($unhex->($id), [ $emb, $unhex->($doc), \%md ]);
}

# ------------------------------------------------------------------ random values

# A float32 as text that float4in reads back to the same bits: ordinary values, signed
# zeros, subnormals, values near the top of the range; never NaN or infinity.
sub random_float
{
	my $r = rand();
	my $sign = rand() < 0.5 ? 0x80000000 : 0;
	my $bits;
	if ($r < 0.70) { $bits = $sign | ((100 + int(rand(54))) << 23) | int(rand(1 << 23)); }
	elsif ($r < 0.80) { $bits = $sign; }
	elsif ($r < 0.87) { $bits = $sign | (1 + int(rand((1 << 23) - 1))); }
	elsif ($r < 0.92) { $bits = $sign | ((240 + int(rand(15))) << 23) | int(rand(1 << 23)); }
	elsif ($r < 0.94) { $bits = $sign | 0x7f7fffff; }
	else { return sprintf('%d', int(rand(2001)) - 1000); }
	return sprintf('%.9g', unpack('f>', pack('L>', $bits)));
}

my @words = ('alpha', 'beta', "it's", 'say "hi"', 'back\\slash', "tab\there", "new\nline",
	'ünïcödé', '日本語', 'a|b', '{"json": 1}', '%s', '$1', 'a,b', '%2C');

sub random_text
{
	my $n = 1 + int(rand(4));
	return join(' ', map { $words[ rand @words ] } 1 .. $n) . ' ' . int(rand(100_000));
}

sub sql_literal
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Values are Perl strings (undef for NULL) rendered by sql_value or copy_field.
sub random_embedding
{
	return undef if rand() < 0.08;
	return '{' . join(',', map { random_float() } 1 .. $DIM) . '}';
}

sub maybe_null
{
	my ($p, $gen) = @_;
	return rand() < $p ? undef : $gen->();
}

my @meta_keys = ('a', 'b', 'tag2', 'num', 'f', 'key with space', 'ключ');

sub random_meta
{
	my $r = rand();
	return undef if $r < 0.08;
	return '{}' if $r < 0.12;
	my %m;
	for my $k (@meta_keys)
	{
		next if rand() < 0.6;
		my $v = rand();
		$m{$k} = $v < 0.3 ? int(rand(2_000_001)) - 1_000_000
		  : $v < 0.4 ? JSON::PP::true
		  : $v < 0.45 ? JSON::PP::false
		  : $v < 0.5 ? JSON::PP::null
		  : $v < 0.7 ? 'FLOAT:' . sprintf('%.4f', rand(2000) - 1000)
		  : random_text();
	}
	my $text = $json->encode(\%m);
	$text =~ s/"FLOAT:([-0-9.]+)"/$1/g;    # floats keep a decimal point in jsonb
	return $text;
}

my %column_type = (embedding => 'real[]', doc => 'text', body => 'text', meta => 'jsonb',
	score => 'int', label => 'text', flag => 'boolean', weight => 'float8', n => 'bigint',
	tag => 'text', qty => 'int', region => 'int', id => 'int', tenant => 'text',
	extra => 'text');

my %column_gen = (
	embedding => \&random_embedding,
	doc => sub { maybe_null(0.1, \&random_text) },
	body => sub { maybe_null(0.1, \&random_text) },
	meta => \&random_meta,
	score => sub { maybe_null(0.15, sub { int(rand(2001)) - 1000 }) },
	label => sub { maybe_null(0.2, sub { $words[ rand @words ] }) },
	flag => sub { my $r = rand(); $r < 0.15 ? undef : $r < 0.4 ? 'false' : 'true' },
	weight => sub { maybe_null(0.15, sub { rand() < 0.3 ? int(rand(100)) : sprintf('%.6g', rand(1e6) - 5e5) }) },
	n => sub { maybe_null(0.15, sub { int(rand(2e15)) - 1e15 }) },
	tag => sub { maybe_null(0.2, \&random_text) },
	qty => sub { maybe_null(0.15, sub { int(rand(200)) - 40 }) },
	extra => sub { maybe_null(0.2, \&random_text) },
);

sub sql_value
{
	my ($v, $col, $type) = @_;
	my $t = $type // $column_type{$col} // 'text';
	return "NULL::$t" unless defined $v;
	return sql_literal($v) . "::$t";
}

sub copy_field
{
	my ($v) = @_;
	return '\\N' unless defined $v;
	$v =~ s/\\/\\\\/g;
	$v =~ s/\t/\\t/g;
	$v =~ s/\n/\\n/g;
	$v =~ s/\r/\\r/g;
	return $v;
}

# ------------------------------------------------------------------ write targets

my @tenants = ('a', 'b,c', '100%', "o'k", 'x y', 'ü', '%2C');
my @text_prefixes = ('k', 'key,', "q'", 'sp ace ', 'ünï', '%');

# A write target: the table written (through a parent for the partitions and the
# inheritance pair), its key columns and their random values, its other columns.
my %targets = (
	t_int => { keys => [ [ id => sub { 1 + int(rand(300)) }, 'int' ] ],
		cols => [qw(embedding doc meta score label flag)], range => [ id => 300 ] },
	t_text => { keys => [ [ id => sub { $text_prefixes[ rand @text_prefixes ] . (1 + int(rand(50))) }, 'text' ] ],
		cols => [qw(embedding body weight n tag)] },
	t_char => { keys => [ [ id => sub { rand() < 0.8 ? 'c' . (1 + int(rand(250))) : 'x ' . int(rand(50)) }, 'char(5)' ] ],
		cols => [qw(embedding doc meta)] },
	t_comp => { keys => [ [ tenant => sub { $tenants[ rand @tenants ] }, 'text' ], [ n => sub { 1 + int(rand(40)) }, 'int' ] ],
		cols => [qw(embedding doc meta qty)], range => [ n => 40 ] },
	p_parent => { keys => [ [ id => sub { 1 + int(rand(150)) }, 'int' ], [ region => sub { int(rand(36)) }, 'int' ] ],
		cols => [qw(embedding doc meta)], range => [ id => 150 ] },
	i_parent => { keys => [ [ id => sub { 1 + int(rand(300)) }, 'int' ] ],
		cols => [qw(embedding doc meta)], range => [ id => 300 ], child => 'i_child', child_cols => [qw(extra)] },
);
my @target_names = sort keys %targets;
# the partitioned parent and the inheritance parent are where keys outlive a statement
my @target_weights = (t_char => 1, t_comp => 1.5, t_int => 1.5, t_text => 1, p_parent => 2.5, i_parent => 2);

# the write target of the partitioned mirror (regions 0 to 39: four partitions)
sub add_partitioned_target
{
	$targets{q_parent} = { keys => [ [ id => sub { 1 + int(rand(150)) }, 'int' ], [ region => sub { int(rand(40)) }, 'int' ] ],
		cols => [qw(embedding doc meta)], range => [ id => 150 ] };
	@target_names = sort keys %targets;
	push @target_weights, q_parent => 2.5;
	return;
}

sub pick_target
{
	my $total = 0;
	my @w = @target_weights;
	for (my $i = 1; $i < @w; $i += 2) { $total += $w[$i]; }
	my $r = rand($total);
	for (my $i = 0; $i < @w; $i += 2)
	{
		return $w[$i] if ($r -= $w[ $i + 1 ]) < 0;
	}
	return $w[0];
}

sub random_key
{
	my ($t) = @_;
	return [ map { $_->[1]->() } @{ $targets{$t}{keys} } ];
}

sub key_where
{
	my ($t, $k, $alias) = @_;
	my $p = defined $alias ? "$alias." : '';
	my @k = @{ $targets{$t}{keys} };
	return join(' AND ', map { "$p$k[$_][0] = " . sql_value($k->[$_], $k[$_][0], $k[$_][2]) } 0 .. $#k);
}

sub key_cols { my ($t) = @_; return map { $_->[0] } @{ $targets{$t}{keys} }; }

# Where new rows go: the target itself, or for the inheritance pair now and then the child.
sub insert_table
{
	my ($t) = @_;
	my $child = $targets{$t}{child};
	return ($t, @{ $targets{$t}{cols} }) unless $child && rand() < 0.45;
	return ($child, @{ $targets{$t}{cols} }, @{ $targets{$t}{child_cols} });
}

sub distinct_keys
{
	my ($t, $n) = @_;
	my (%seen, @keys);
	for (1 .. $n)
	{
		my $k = random_key($t);
		next if $seen{ join("\x00", @$k) }++;
		push @keys, $k;
	}
	return @keys;
}

sub values_row
{
	my ($t, $k, @cols) = @_;
	my @kd = @{ $targets{$t}{keys} };
	return '(' . join(', ', (map { sql_value($k->[$_], $kd[$_][0], $kd[$_][2]) } 0 .. $#kd),
		map { sql_value($column_gen{$_}->(), $_) } @cols) . ')';
}

# A SET list of 1 to 3 columns (new values, or an expression on the old one).
sub random_set
{
	my ($t, $table) = @_;
	my @cols = @{ $targets{$t}{cols} };
	push @cols, @{ $targets{$t}{child_cols} } if $targets{$t}{child} && $table eq $targets{$t}{child};
	my %done;
	my @set;
	for (1 .. 1 + int(rand(3)))
	{
		my $c = $cols[ rand @cols ];
		next if $done{$c}++;
		my $r = rand();
		if ($c eq 'meta' && $r < 0.3)
		{
			push @set, rand() < 0.5
			  ? "meta = coalesce(meta, '{}') || " . sql_value($column_gen{meta}->() // '{}', 'meta')
			  : "meta = meta - " . sql_literal($meta_keys[ rand @meta_keys ]);
		}
		elsif ($c eq 'embedding' && $r < 0.1) { push @set, 'embedding = embedding'; }
		elsif ($c =~ /^(score|qty)$/ && $r < 0.3) { push @set, "$c = $c + 1"; }
		else { push @set, "$c = " . sql_value($column_gen{$c}->(), $c); }
	}
	return join(', ', @set);
}

sub range_where
{
	my ($t) = @_;
	if (my $range = $targets{$t}{range})
	{
		my ($c, $max) = @$range;
		my $a = 1 + int(rand($max));
		return "$c BETWEEN $a AND " . ($a + int(rand(12)));
	}
	return 'id LIKE ' . sql_literal($text_prefixes[ rand @text_prefixes ] . int(rand(6)) . '%')
	  if $t eq 't_text';
	return 'id LIKE ' . sql_literal('c' . (1 + int(rand(9))) . '%');
}

# ------------------------------------------------------------------ statements

# One statement on write target $t; $in_plpgsql leaves out COPY (not allowed there).
sub random_statement
{
	my ($t, $in_plpgsql) = @_;
	if ($t eq 'q_parent' && rand() < 0.12)
	{
		# a partition written directly (attached or, at that moment, detached)
		my $p = $q_tables[ rand @q_tables ];
		return "TRUNCATE $p" if rand() < 0.1;
		my $from = 1 + int(rand(150));
		return "UPDATE $p SET " . random_set($t, $t) . " WHERE id BETWEEN $from AND " . ($from + int(rand(5)));
	}
	my $r = rand(100);
	my @kc = key_cols($t);
	if ($r < 14)
	{
		my ($table, @cols) = insert_table($t);
		my @keys = distinct_keys($t, 1 + int(rand(3)));
		return "INSERT INTO $table (" . join(', ', @kc, @cols) . ') VALUES '
		  . join(', ', map { values_row($t, $_, @cols) } @keys)
		  . (rand() < 0.7 ? ' ON CONFLICT DO NOTHING' : '');
	}
	if ($r < 26)
	{
		my ($table, @cols) = insert_table($t);
		my @keys = distinct_keys($t, 1 + int(rand(3)));
		my @upd = grep { rand() < 0.7 } @cols;
		@upd = ($cols[0]) unless @upd;
		return "INSERT INTO $table AS x (" . join(', ', @kc, @cols) . ') VALUES '
		  . join(', ', map { values_row($t, $_, @cols) } @keys)
		  . ' ON CONFLICT (' . join(', ', @kc) . ') DO UPDATE SET '
		  . join(', ', map { "$_ = excluded.$_" } @upd)
		  . (rand() < 0.2 ? ' WHERE x.embedding IS DISTINCT FROM excluded.embedding' : '');
	}
	if ($r < 50)
	{
		my $table = $t;
		$table = "ONLY $t" if $targets{$t}{child} && rand() < 0.15;
		$table = $targets{$t}{child} if $targets{$t}{child} && rand() < 0.15;
		return "UPDATE $table SET " . random_set($t, $table) . ' WHERE ' . key_where($t, random_key($t));
	}
	return "UPDATE $t SET " . random_set($t, $t) . ' WHERE ' . range_where($t) if $r < 54;
	return "DELETE FROM $t WHERE " . key_where($t, random_key($t)) if $r < 62;
	return "DELETE FROM $t WHERE " . range_where($t) if $r < 64;
	if ($r < 71)
	{
		# a key change; for the partitioned parent often of region: a move between partitions
		my $k = random_key($t);
		my $i = int(rand(@kc));
		$i = 1 if ($t eq 'p_parent' || $t eq 'q_parent') && rand() < 0.7;
		my $new = [@$k];
		$new->[$i] = $targets{$t}{keys}[$i][1]->();
		return "UPDATE $t SET $kc[$i] = " . sql_value($new->[$i], $kc[$i], $targets{$t}{keys}[$i][2]) . ' WHERE ' . key_where($t, $k)
		  . " AND NOT EXISTS (SELECT 1 FROM $t WHERE " . key_where($t, $new) . ')';
	}
	if ($r < 75 && !$in_plpgsql)
	{
		# replace some keys: delete them, then COPY them in
		my ($table, @cols) = insert_table($t);
		my @keys = distinct_keys($t, 1 + int(rand(5)));
		my @kcn = key_cols($t);
		my $data = '';
		for my $k (@keys)
		{
			$data .= join("\t", (map { copy_field($_) } @$k), map { copy_field($column_gen{$_}->()) } @cols) . "\n";
		}
		return "DELETE FROM $t WHERE " . join(' OR ', map { '(' . key_where($t, $_) . ')' } @keys) . ";\n"
		  . "COPY $table (" . join(', ', @kcn, @cols) . ") FROM STDIN;\n$data\\.\n";
	}
	if ($r < 83)
	{
		my @cols = @{ $targets{$t}{cols} };
		my @keys = distinct_keys($t, 1 + int(rand(4)));
		my @rows = map {
			my $row = values_row($t, $_, @cols);
			my $op = rand() < 0.2 ? 'd' : 'u';
			$row =~ s/\)$/, '$op')/;
			$row;
		} @keys;
		return "MERGE INTO $t AS t USING (VALUES " . join(', ', @rows) . ') AS s('
		  . join(', ', @kc, @cols, 'op') . ') ON '
		  . join(' AND ', map { "t.$_ = s.$_" } @kc)
		  . " WHEN MATCHED AND s.op = 'd' THEN DELETE"
		  . ' WHEN MATCHED THEN UPDATE SET ' . join(', ', map { "$_ = s.$_" } @cols)
		  . " WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (" . join(', ', @kc, @cols)
		  . ') VALUES (' . join(', ', map { "s.$_" } @kc, @cols) . ')';
	}
	if ($r < 83.15)
	{
		return 'TRUNCATE ' . ($targets{$t}{child} && rand() < 0.5 ? 'ONLY ' : '') . $t;
	}
	if ($r < 88)
	{
		# the statement of issue 14's repro: touches no row, still runs the triggers
		return "UPDATE $t SET embedding = embedding WHERE false";
	}
	if ($r < 91)
	{
		return "UPDATE $t SET " . join(', ', map { "$_ = $_" } @{ $targets{$t}{cols} })
		  . ' WHERE ' . key_where($t, random_key($t));
	}
	if ($r < 92.3 && $t eq 't_int')
	{
		# more than 1,000 keys in one statement, above the other statements' keys
		my $a = 1000 + int(rand(1000));
		return 'DELETE FROM t_int WHERE id >= 1000' if rand() < 0.3;
		return 'INSERT INTO t_int (id, embedding, doc, meta, score, label, flag) '
		  . "SELECT g, ARRAY[g, -g, g * 0.5, $a]::real[], 'bulk ' || g, jsonb_build_object('g', g), "
		  . "g % 7 - 2, 'b' || (g % 3), g % 5 <> 0 FROM generate_series($a, $a + 1100) g "
		  . "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc || ' again', score = excluded.score + 1";
	}
	# a bulk write of a whole table (every key in one statement)
	return "UPDATE $t SET meta = coalesce(meta, '{}') || '{\"bulk\": " . int(rand(1000)) . "}' WHERE true"
	  if $r < 92 && $t ne 't_text';
	return "UPDATE $t SET " . random_set($t, $t) . ' WHERE ' . key_where($t, random_key($t));
}

sub stmt_end
{
	my ($s) = @_;
	return $s =~ /\\\.\n$/ ? $s : "$s;\n";
}

# Statements on one or two targets, some inside nested savepoints.
sub savepoint_body
{
	my ($depth, $name, @ts) = @_;
	my $sql = '';
	for my $i (1 .. 1 + int(rand(3)))
	{
		my $t = $ts[ rand @ts ];
		if ($depth < 3 && rand() < 0.35)
		{
			my $sp = "${name}_$i";
			$sql .= "SAVEPOINT $sp;\n" . savepoint_body($depth + 1, $sp, @ts);
			my $end = rand();
			if ($end < 0.45) { $sql .= "ROLLBACK TO SAVEPOINT $sp;\n"; }
			elsif ($end < 0.6)
			{
				$sql .= "ROLLBACK TO SAVEPOINT $sp;\n" . stmt_end(random_statement($t)) . "RELEASE SAVEPOINT $sp;\n";
			}
			else { $sql .= "RELEASE SAVEPOINT $sp;\n"; }
		}
		else { $sql .= stmt_end(random_statement($t)); }
	}
	return $sql;
}

sub two_targets
{
	my $a = pick_target();
	my $b = pick_target();
	$b = pick_target() while $b eq $a;
	return ($a, $b);
}

# PL/pgSQL: statements, and inner blocks with an EXCEPTION handler that often raise.
sub plpgsql_body
{
	my ($depth, @ts) = @_;
	my $sql = '';
	for (1 .. 1 + int(rand(3)))
	{
		if ($depth < 3 && rand() < 0.45)
		{
			$sql .= "BEGIN\n" . plpgsql_body($depth + 1, @ts);
			$sql .= "RAISE EXCEPTION 'undo this block';\n" if rand() < 0.6;
			$sql .= rand() < 0.5 ? "EXCEPTION WHEN OTHERS THEN NULL;\n"
			  : "EXCEPTION WHEN raise_exception OR unique_violation THEN NULL;\n";
			$sql .= "END;\n";
		}
		else { $sql .= random_statement($ts[ rand @ts ], 1) . ";\n"; }
	}
	return $sql;
}

# One transaction: returns { sql, kind, gid }.
sub random_transaction
{
	my ($w, $i, $gid_prefix) = @_;
	my $r = rand(100);
	my $ok = "SELECT 'ok $i';\n";
	if ($r < 12)
	{
		my $s = random_statement(pick_target());
		return { kind => 'autocommit', sql => stmt_end($s) . $ok };
	}
	if ($r < 38)
	{
		my @ts = two_targets();
		# an asynchronous commit: lost by a crash right after, so it must not reach Chroma first
		my $sql = "BEGIN;\n" . (rand() < 0.3 ? "SET LOCAL synchronous_commit = off;\n" : '');
		$sql .= stmt_end(random_statement($ts[ rand @ts ])) for 1 .. 1 + int(rand(4));
		return { kind => 'plain', sql => "${sql}${ok}COMMIT;\n" };
	}
	if ($r < 42)
	{
		my @ts = two_targets();
		my $sql = "BEGIN;\n";
		$sql .= stmt_end(random_statement($ts[ rand @ts ])) for 1 .. 1 + int(rand(3));
		return { kind => 'rollback', sql => "${sql}ROLLBACK;\n" };
	}
	if ($r < 58)
	{
		my @ts = two_targets();
		return { kind => 'savepoints', sql => "BEGIN;\n" . savepoint_body(0, 's', @ts) . "${ok}COMMIT;\n" };
	}
	if ($r < 74)
	{
		# writes to A, then inside a savepoint a statement on B, the savepoint rolled back
		# or released, maybe more on A: row keys of A buffered outside the savepoint
		my ($a, $b) = two_targets();
		my $sql = "BEGIN;\n" . stmt_end(random_statement($a));
		$sql .= "SAVEPOINT x;\n"
		  . stmt_end(rand() < 0.4 ? "UPDATE $b SET embedding = embedding WHERE false" : random_statement($b));
		$sql .= rand() < 0.6 ? "ROLLBACK TO SAVEPOINT x;\n" : "RELEASE SAVEPOINT x;\n";
		$sql .= stmt_end(random_statement(rand() < 0.5 ? $a : $b)) if rand() < 0.5;
		return { kind => 'cross_savepoint', sql => "${sql}${ok}COMMIT;\n" };
	}
	if ($r < 86)
	{
		my @ts = two_targets();
		my $do = "DO \$do\$\nBEGIN\n" . plpgsql_body(0, @ts) . "END\n\$do\$";
		return rand() < 0.5
		  ? { kind => 'plpgsql', sql => "$do;\n$ok" }
		  : { kind => 'plpgsql', sql => "BEGIN;\n" . stmt_end(random_statement($ts[0])) . "$do;\n${ok}COMMIT;\n" };
	}
	# a prepared transaction, committed or rolled back a moment later
	my @ts = two_targets();
	my $commit = rand() < 0.7;
	my $gid = sprintf('%s_%d_%d_%s', $gid_prefix, $w, $i, $commit ? 'c' : 'r');
	my $body = rand() < 0.5 ? savepoint_body(1, 'p', @ts) : stmt_end(random_statement($ts[0]));
	my $pause = rand() < 0.5 ? sprintf("SELECT pg_sleep(%.2f);\n", rand(0.3)) : '';
	return { kind => $commit ? 'prepared_commit' : 'prepared_rollback', gid => $gid,
		sql => "BEGIN;\n$body${ok}PREPARE TRANSACTION '$gid';\n$pause"
		  . ($commit ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid';\n" };
}

# The transactions of session $w (1 .. $nsessions) of a run of $ntxns transactions with
# seed $seed: a function of these numbers only.
sub session_transactions
{
	my ($seed, $w, $ntxns, $nsessions) = @_;
	my $count = int($ntxns / $nsessions) + ($w <= $ntxns % $nsessions ? 1 : 0);
	srand(($seed * 31 + $w * 1_000_003) % 2_147_483_647);
	return map { random_transaction($w, $_, gid_prefix($seed)) } 1 .. $count;
}

# Prepared transactions are named <prefix>_<session>_<number>_<c|r>: c to commit.
sub gid_prefix { return "rw$_[0]"; }

# The initial rows (before the mirrors exist: the backfill sends them).
sub populate_sql
{
	my $sql = '';
	for my $t (@target_names)
	{
		for (1 .. 120)
		{
			my ($table, @cols) = insert_table($t);
			my $k = random_key($t);
			$sql .= "INSERT INTO $table (" . join(', ', key_cols($t), @cols) . ') VALUES '
			  . values_row($t, $k, @cols) . " ON CONFLICT DO NOTHING;\n";
		}
	}
	return $sql;
}

1;
