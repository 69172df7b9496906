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
#
# With --trap OUTDIR, each script is instead written to OUTDIR with its lines where they
# were (so that an error names the line of the original), rewritten only as above for the C
# functions, @extschema@ and pg_extension_config_dump, and with every DO block run as a
# function trap_do.block_N (so plpgsql_check's profiler can tell which of its statements
# ran); the file names are printed in install order, and OUTDIR/do_blocks has a line
# "N FILE LINE" for each DO block (its function, the file and line of the DO).
#   perl test/lib/prepare_sql_scripts.pl --trap OUTDIR SQL_DIR
use strict;
use warnings;

my $trap_dir;
if (@ARGV && $ARGV[0] eq '--trap')
{
	shift;
	$trap_dir = shift // die "--trap needs a directory\n";
}
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

# The script's text with C functions as stubs: the line numbers stay those of the original.
sub rewritten
{
	my ($file) = @_;
	open my $fh, '<', $file or die "$file: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	$text =~ s/^\\echo .*$//mg;
	$text =~ s/\@extschema\@/public/g;
	$text =~ s/AS\s+'MODULE_PATHNAME'\s*,\s*'[^']*'\s+LANGUAGE\s+C\b/
	  'AS $stub$BEGIN END$stub$ LANGUAGE plpgsql' . ("\n" x (() = $&  =~ m{\n}g))/gie;
	$text =~ s/\bpg_catalog\.pg_extension_config_dump\(/static_stub.config_dump(/g;
	return $text;
}

if (defined $trap_dir)
{
	my $do_n = 0;
	open my $blocks, '>', "$trap_dir/do_blocks" or die "$trap_dir/do_blocks: $!\n";
	for my $file (@files)
	{
		(my $name = $file) =~ s{.*/}{};
		my $line = 1;
		my $out = '';
		for my $s (statements(rewritten($file)))
		{
			my ($lead) = $s =~ /^((?:\s+|--[^\n]*\n)*)/;
			my $code = substr($s, length $lead);
			my $at = $line + ($lead =~ tr/\n//);
			if ($code =~ s/^DO\s+(?:LANGUAGE\s+plpgsql\s+)?(?=(\$(\w*)\$.*\$\2\$)\s*$)//si)
			{
				$do_n++;
				$code = "CREATE FUNCTION trap_do.block_$do_n() RETURNS void LANGUAGE plpgsql AS $code;"
				  . " SELECT trap_do.block_$do_n()";
				print $blocks "$do_n $name $at\n";
			}
			$out .= "$lead$code;";
			$line += ($s =~ tr/\n//);
		}
		open my $fh, '>', "$trap_dir/$name" or die "$trap_dir/$name: $!\n";
		print $fh "$out\n";
		close $fh or die "$trap_dir/$name: $!\n";
		print "$name\n";
	}
	close $blocks or die "$trap_dir/do_blocks: $!\n";
	exit 0;
}

my ($do_n, $stmt_n) = (0, 0);
print "SET client_min_messages = warning;\n";
for my $file (@files)
{
	my $text = rewritten($file);
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
