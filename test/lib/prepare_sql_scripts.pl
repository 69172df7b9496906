#!/usr/bin/env perl
# Prints the install script and every upgrade script of SQL_DIR, in the order CREATE
# EXTENSION runs them, rewritten so that they load into a plain database for
# test/lib/check_sql_scripts.sh:
#   - C functions become empty PL/pgSQL stubs (no library needed), @extschema@ becomes public,
#     pg_extension_config_dump (extension scripts only) a no-op;
#   - every DO block is also created as a function static_check.do_block_N, whose body
#     static_check.take_do_block inspects while the tables it reads exist; and every top-level SELECT, INSERT ... SELECT and CREATE ... AS query
#     is also created as a view static_check.statement_N (so its parse tree is stored),
#     which static_check.take_statement inspects and drops at once.
#   perl test/lib/prepare_sql_scripts.pl SQL_DIR > combined.sql
use strict;
use warnings;

my $dir = shift // 'sql';
my %next;
for my $f (glob "$dir/chroma_sync--*--*.sql")
{
	my ($from, $to) = $f =~ /chroma_sync--([^-]+)--([^-]+)\.sql$/ or next;
	die "two upgrade scripts from $from\n" if exists $next{$from};
	$next{$from} = $to;
}
my @files = ("$dir/chroma_sync--0.1.sql");
for (my $v = '0.1'; exists $next{$v}; $v = $next{$v})
{
	push @files, "$dir/chroma_sync--$v--$next{$v}.sql";
}

# Splits SQL text into top-level statements (quotes, dollar quotes and comments respected).
sub statements
{
	my ($sql) = @_;
	my @out;
	my $cur = '';
	while (length $sql)
	{
		if ($sql =~ s/^(--[^\n]*\n?|\/\*.*?\*\/|'(?:[^']|'')*'|"(?:[^"]|"")*"|(\$(?:[A-Za-z_]\w*)?\$).*?\2)//s)
		{
			$cur .= $1;
		}
		elsif ($sql =~ s/^;//)
		{
			push @out, $cur;
			$cur = '';
		}
		else
		{
			$sql =~ s/^(.[^-\/'"\$;]*)//s;
			$cur .= $1;
		}
	}
	push @out, $cur if $cur =~ /\S/;
	return @out;
}

my ($do_n, $stmt_n) = (0, 0);
print "SET client_min_messages = warning;\n";
for my $file (@files)
{
	open my $fh, '<', $file or die "$file: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	$text =~ s/^\\echo .*$//mg;
	$text =~ s/\@extschema\@/public/g;
	$text =~ s/AS\s+'MODULE_PATHNAME'\s*,\s*'[^']*'\s+LANGUAGE\s+C\b/AS \$stub\$BEGIN END\$stub\$ LANGUAGE plpgsql/gi;
	$text =~ s/\bpg_catalog\.pg_extension_config_dump\(/static_stub.config_dump(/g;
	(my $name = $file) =~ s{.*/}{};
	print "-- ===== $name\n";
	for my $s (statements($text))
	{
		(my $code = $s) =~ s/^(?:\s+|--[^\n]*\n)+//;
		if ($code =~ /^DO\s+(?:LANGUAGE\s+plpgsql\s+)?(\$(\w*)\$.*\$\2\$)\s*$/si)
		{
			$do_n++;
			print "CREATE FUNCTION static_check.do_block_$do_n() RETURNS void LANGUAGE plpgsql AS $1;\n";
			print "SELECT static_check.take_do_block('static_check.do_block_$do_n()', '$name: DO block $do_n');\n";
		}
		elsif ($code =~ /^(?:CREATE\s+(?:TEMP(?:ORARY)?\s+)?TABLE\s+\S+(?:\s+ON\s+COMMIT\s+\w+)?\s+AS|INSERT\s+INTO\s+\S+(?:\s*\([^)]*\))?)\s+(SELECT\b.*)$/si
			|| $code =~ /^(SELECT\b.*)$/si)
		{
			my $query = $1;
			$stmt_n++;
			(my $head = $code) =~ s/\s+/ /g;
			$head = substr($head, 0, 60);
			$head =~ s/'/''/g;
			print "CREATE VIEW static_check.statement_$stmt_n AS $query;\n";
			print "SELECT static_check.take_statement('static_check.statement_$stmt_n', '$name: $head');\n";
		}
		print "$s;\n";
	}
}
