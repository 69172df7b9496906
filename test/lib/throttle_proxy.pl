#!/usr/bin/perl
# A loopback HTTP proxy in front of a real Chroma server that, when told to, answers record
# writes with 429 Too Many Requests and a Retry-After header: a server shedding load.
#
#   throttle_proxy.pl UPSTREAM_PORT PORT_FILE CONTROL_FILE LOG_FILE
#
# Every request is forwarded to 127.0.0.1:UPSTREAM_PORT and its answer relayed
# (Connection: close). CONTROL_FILE, when it exists, holds "N VALUE": the next N POSTs to
# .../upsert or .../delete get 429 instead, with "Retry-After: VALUE" (VALUE "-": no such
# header; "date+S": an HTTP date S seconds from now; anything else is sent as it is).
# Each such POST appends "EPOCH_SECONDS STATUS OPERATION" to LOG_FILE (STATUS: 429, or the
# status Chroma answered). SIGTERM stops everything.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IO::Socket::INET;
use POSIX qw(strftime);
use Time::HiRes qw(time);
use LoopbackHttp;

my ($upstream, $port_file, $control, $log_file) = @ARGV;
die "usage: $0 UPSTREAM_PORT PORT_FILE CONTROL_FILE LOG_FILE\n" unless defined $log_file;

sub logline
{
	my ($status, $op) = @_;
	open(my $l, '>>', $log_file) or die "$log_file: $!\n";
	printf $l "%.3f %s %s\n", time, $status, $op;
	close($l);
}

serve_forked(
	listen_loopback($port_file),
	sub
	{
		my ($conn) = @_;
		my $buf = '';
		my ($method, $path, $head, $body) = read_request($conn, \$buf) or return;
		my ($op) = $method eq 'POST' ? $path =~ m{/(upsert|delete)$} : ();
		my $value;
		# decided here, in the parent, so each armed answer is taken once
		if (defined $op && open(my $c, '<', $control))
		{
			my ($n, $v) = split ' ', scalar(<$c>) // '';
			close($c);
			if (defined $n && $n > 0)
			{
				$value = $v // '-';
				open(my $w, '>', "$control.tmp") or die "$control.tmp: $!\n";
				print $w ($n - 1), " $value\n";
				close($w);
				rename("$control.tmp", $control) or die "rename: $!\n";
			}
		}
		return ($method, $path, $head, $body, $op, $value);
	},
	\&serve);

sub serve
{
	my ($conn, $method, $path, $head, $body, $op, $value) = @_;
	if (defined $value)
	{
		logline(429, $op);
		my $header = '';
		if ($value =~ /^date\+(\d+)$/)
		{
			$header = 'Retry-After: ' . strftime('%a, %d %b %Y %H:%M:%S GMT', gmtime(time + $1)) . "\r\n";
		}
		elsif ($value ne '-')
		{
			$header = "Retry-After: $value\r\n";
		}
		my $json = '{"error":"TooManyRequests","message":"slow down"}';
		syswrite($conn, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n$header"
			  . "Connection: close\r\nContent-Length: " . length($json) . "\r\n\r\n$json");
		close($conn);
		return;
	}
	my $resp = forward_request($upstream, $method, $path, $head, $body);
	logline(($resp =~ m{^HTTP/\S+ (\d+)})[0] // 0, $op) if defined $op;
	syswrite($conn, $resp);
	close($conn);
	return;
}
