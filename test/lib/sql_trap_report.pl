#!/usr/bin/env perl
# Reads what psql printed while test/lib/check_sql_scripts.sh ran the scripts in the trap
# (test/lib/sql_trap.sql) and prints one line per error, naming the script and line:
# an operator or function that resolved into schema hostile (it was not qualified), or any
# other error (the scripts must load cleanly there too). An error inside a DO block names
# the line of its statement (DO_BLOCKS: "N SCRIPT LINE" for each trap_do.block_N, written by
# test/lib/prepare_sql_scripts.pl --trap), and so does each "never ran: N LINE" of the
# check's own query (an EXECUTE of trap_do.block_N that never ran).
#   psql ... 2>&1 | perl test/lib/sql_trap_report.pl DO_BLOCKS
use strict;
use warnings;

my %do_block;
if (my $map = shift)
{
	open my $fh, '<', $map or die "$map: $!\n";
	while (<$fh>)
	{
		my ($n, $script, $line) = split;
		$do_block{$n} = [ $script, $line ];
	}
}

my @out;
my $last;
sub flush_error
{
	return unless $last;
	my ($where, $msg, $query) = @$last;
	if ($msg =~ /^operator is only a shell: (.*)$/)
	{
		$msg = "operator $1 is not written OPERATOR(pg_catalog.x)";
	}
	elsif ($msg =~ /^(.*) is a procedure$/)
	{
		$msg = "function $1 is not written pg_catalog.f(...)";
	}
	else
	{
		$msg = "error in the trap: $msg";
	}
	push @out, "$where: $msg" . (defined $query ? " in: $query" : '');
	undef $last;
	return;
}

while (my $line = <STDIN>)
{
	chomp $line;
	if ($line =~ /^psql:(?:.*\/)?([^\/]+?):(\d+): (\w+):\s+(.*)$/)
	{
		my ($where, $level, $msg) = ("$1:$2", $3, $4);
		flush_error();
		# (psql's own errors, such as a file it cannot read, are "error:")
		$last = [ $where, $msg ] if $level =~ /^(?:ERROR|FATAL|PANIC|error)$/;
	}
	elsif ($last && $line =~ /^(QUERY|LINE \d+):\s+(.*)$/)
	{
		# the statement EXECUTEd, else the line of the script where the error is
		my ($kind, $text) = ($1, $2);
		$last->[2] = $text if !defined $last->[2] || $kind eq 'QUERY';
	}
	elsif ($last && $line =~ /^(?:CONTEXT:\s+)?SQL statement "(.*)"$/)
	{
		$last->[2] //= $1;
	}
	elsif ($last && $line =~ /^(?:CONTEXT:\s+)?PL\/pgSQL function trap_do\.block_(\d+)\(\) line (\d+)/)
	{
		my ($script, $at) = @{ $do_block{$1} // [] };
		$last->[0] = "$script:" . ($at + $2 - 1) if defined $script;
	}
	elsif ($line =~ /^never ran: (\d+) (\d+)$/)
	{
		# an EXECUTE the profiler saw no run of (DO block, line in it)
		flush_error();
		my ($script, $at) = @{ $do_block{$1} // [ "DO block $1", 1 ] };
		push @out, "$script:" . ($at + $2 - 1)
		  . ': EXECUTE never ran, so the statement it builds was never checked (make the check run it)';
	}
}
flush_error();
my %seen;
print "$_\n" for grep { !$seen{$_}++ } @out;
