#!/usr/bin/perl
# A loopback HTTP server that stands in for Chroma in tests that are not about Chroma's
# answers (memory use, timeouts, cancellation).
#
#   fake_chroma.pl MODE PORT_FILE [COUNT_FILE]
#
# It listens on a free port of 127.0.0.1 and writes that port to PORT_FILE (via a
# temporary file and rename, so a reader never sees half a number). Modes:
#   hang  accepts connections and reads requests, but never answers
#   sink  answers pre-flight, collection lookups and record writes ({}); for each write
#         it appends the number of ids received to COUNT_FILE
# Each connection is served by its own child process; SIGTERM stops everything.
use strict;
use warnings;
use IO::Socket::INET;

my ($mode, $port_file, $count_file) = @ARGV;
die "usage: $0 hang|sink PORT_FILE [COUNT_FILE]\n"
  unless defined $port_file && ($mode eq 'hang' || $mode eq 'sink');
die "sink mode needs COUNT_FILE\n" if $mode eq 'sink' && !defined $count_file;

my $listener = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp',
	Listen => 64,
	ReuseAddr => 1) or die "listen: $!\n";

open(my $pf, '>', "$port_file.tmp") or die "$port_file.tmp: $!\n";
print $pf $listener->sockport, "\n";
close($pf);
rename("$port_file.tmp", $port_file) or die "rename: $!\n";

my @children;
$SIG{TERM} = sub { kill 'KILL', @children; exit 0; };
$SIG{CHLD} = 'IGNORE';

while (1)
{
	my $conn = $listener->accept or next;
	my $pid = fork();
	die "fork: $!\n" unless defined $pid;
	if ($pid == 0)
	{
		$SIG{TERM} = 'DEFAULT';
		close($listener);
		serve($conn);
		exit 0;
	}
	push @children, $pid;
	close($conn);
}

sub serve
{
	my ($conn) = @_;
	my $buf = '';
	while (1)
	{
		my ($method, $path, $body) = read_request($conn, \$buf) or return;
		next if $mode eq 'hang';
		answer($conn, $method, $path, $body);
	}
}

# Reads one request (headers and Content-Length body); nothing at end of stream.
sub read_request
{
	my ($conn, $buf) = @_;
	my $end;
	until (($end = index($$buf, "\r\n\r\n")) >= 0)
	{
		my $n = sysread($conn, $$buf, 65536, length $$buf);
		return if !$n;
	}
	my $head = substr($$buf, 0, $end);
	substr($$buf, 0, $end + 4) = '';
	my ($method, $path) = $head =~ m{^(\S+) (\S+)};
	my ($len) = $head =~ m{^content-length:\s*(\d+)}mi;
	$len //= 0;
	while (length $$buf < $len)
	{
		my $n = sysread($conn, $$buf, 1 << 20, length $$buf);
		return if !$n;
	}
	my $body = substr($$buf, 0, $len);
	substr($$buf, 0, $len) = '';
	return ($method, $path, $body);
}

sub answer
{
	my ($conn, $method, $path, $body) = @_;
	my ($status, $json) = (404, '{"error":"NotFound","message":"not found"}');

	if ($method eq 'GET' && $path =~ m{/api/v2/pre-flight-checks$})
	{
		($status, $json) = (200, '{"max_batch_size":5461,"supports_base64_encoding":true}');
	}
	elsif ($method eq 'GET' && $path =~ m{/api/v2/heartbeat$})
	{
		($status, $json) = (200, '{"nanosecond heartbeat":1}');
	}
	elsif ($method eq 'GET' && $path =~ m{/collections/([A-Za-z0-9._-]+)$})
	{
		($status, $json) = (200,
			qq({"id":"00000000-0000-4000-8000-000000000001","name":"$1","dimension":null,"metadata":null}));
	}
	elsif ($method eq 'POST' && $path =~ m{/collections/[0-9a-f-]+/(upsert|add|update)$})
	{
		my ($ids) = $body =~ m{"ids":\[([^\]]*)\]};
		my $n = defined $ids && length $ids ? ($ids =~ tr/,//) + 1 : 0;
		open(my $cf, '>>', $count_file) or die "$count_file: $!\n";
		syswrite($cf, "$n\n");
		close($cf);
		($status, $json) = (200, '{}');
	}
	my $reason = $status == 200 ? 'OK' : 'Not Found';
	my $resp = "HTTP/1.1 $status $reason\r\nContent-Type: application/json\r\n"
	  . "Content-Length: " . length($json) . "\r\n\r\n$json";
	syswrite($conn, $resp);
}
