#!/usr/bin/env perl
# Reads "LABEL<TAB>pg_node_tree text" lines (stored parse trees of views, defaults and SQL
# bodies; "#operator<TAB>OID<TAB>NAME" lines name operators) and prints one line for each operator whose operand PostgreSQL had to cast
# implicitly: that operator was chosen without an exact match of its argument types, which
# is where a planted operator of the exact types would have won had its name not been
# qualified (issue 20). Write the cast explicitly.
#   ... | perl test/lib/implicit_operator_casts.pl
use strict;
use warnings;

# Tokens of the node text: braces, parentheses, quoted strings, and other atoms.
sub tokens
{
	my ($text) = @_;
	my @t;
	while ($text =~ /\G\s*(\{|\}|\(|\)|"(?:[^"\\]|\\.)*"|[^\s{}()"]+)/gc)
	{
		push @t, $1;
	}
	return \@t;
}

# A value: a node {TYPE :field value ...}, a list ( ... ), or an atom.
sub parse_value
{
	my ($t, $i) = @_;
	my $tok = $t->[$$i++];
	if ($tok eq '{')
	{
		my %node = (type => $t->[$$i++]);
		while ($t->[$$i] ne '}')
		{
			my $field = $t->[$$i++];
			if ($field =~ /^:/ && $t->[$$i] !~ /^:/ && $t->[$$i] ne '}')
			{
				$node{$field} = parse_value($t, $i);
			}
			else
			{
				$node{$field} = undef;
			}
		}
		$$i++;
		return \%node;
	}
	if ($tok eq '(')
	{
		my @list;
		push @list, parse_value($t, $i) while $t->[$$i] ne ')';
		$$i++;
		return \@list;
	}
	return $tok;
}

our %operator_name;
my %operator_nodes = map { $_ => 1 } qw(OPEXPR SCALARARRAYOPEXPR DISTINCTEXPR NULLIFEXPR);
my %cast_format = (FUNCEXPR => ':funcformat', RELABELTYPE => ':relabelformat',
	COERCEVIAIO => ':coerceformat', ARRAYCOERCEEXPR => ':coerceformat');

sub walk
{
	my ($v, $label, $out) = @_;
	if (ref $v eq 'ARRAY')
	{
		walk($_, $label, $out) for @$v;
	}
	elsif (ref $v eq 'HASH')
	{
		if ($operator_nodes{ $v->{type} } && ref $v->{':args'} eq 'ARRAY')
		{
			for my $arg (@{ $v->{':args'} })
			{
				next unless ref $arg eq 'HASH' && $cast_format{ $arg->{type} };
				my $format = $arg->{ $cast_format{ $arg->{type} } } // '';
				# CoercionForm 2 is COERCE_IMPLICIT_CAST
				my $op = $operator_name{ $v->{':opno'} } // "with oid $v->{':opno'}";
				push @$out, "$label: operator $op casts an operand implicitly ("
				  . lc($arg->{type}) . ')'
				  if $format eq '2';
			}
		}
		walk($v->{$_}, $label, $out) for grep { $_ ne 'type' } keys %$v;
	}
	return;
}

my @out;
while (my $line = <STDIN>)
{
	chomp $line;
	my ($label, $tree, $name) = split /\t/, $line, 3;
	if ($label eq '#operator')
	{
		$operator_name{$tree} = $name;
		next;
	}
	next unless defined $tree && length $tree;
	my $t = tokens($tree);
	my $i = 0;
	walk(parse_value($t, \$i), $label, \@out) while $i < @$t;
}
my %seen;
print "$_\n" for grep { !$seen{$_}++ } @out;
