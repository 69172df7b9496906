#!/usr/bin/perl
# A loopback HTTP server that stands in for Chroma in tests that are not about Chroma's
# answers (memory use, timeouts, cancellation) or that need a server misbehaving in ways
# a real one cannot (garbage, redirects, trickled bytes).
#
#   fake_chroma.pl MODE PORT_FILE [COUNT_FILE]
#
# It listens on a free port of 127.0.0.1 and writes that port to PORT_FILE (via a
# temporary file and rename, so a reader never sees half a number). Modes:
#   hang  accepts connections and reads requests, but never answers
#   sink  answers pre-flight, collection lookups and record writes ({}); for each write
#         it appends the number of ids received to COUNT_FILE
#   garbage   answers every request 200 with a body that is not JSON (binary bytes,
#             invalid UTF-8, a NUL)
#   wrongjson answers every request 200 with valid JSON of the wrong shape (a collection
#             lookup gets a collection, so record calls reach their own answer)
#   redirect  answers every request 302 to /followed on itself; a request for /followed
#             is appended to COUNT_FILE (it must stay empty: redirects are never followed)
#   trickle   answers 200 with a long Content-Length, then one byte every 200 ms
#   truncated answers 200 with Content-Length 1000, sends 10 bytes and closes
# Each connection is served by its own child process; SIGTERM stops everything.
use strict;
use warnings;
use IO::Socket::INET;

my ($mode, $port_file, $count_file) = @ARGV;
my %modes = map { $_ => 1 } qw(hang sink garbage wrongjson redirect trickle truncated);
die "usage: $0 hang|sink|garbage|wrongjson|redirect|trickle|truncated PORT_FILE [COUNT_FILE]\n"
  unless defined $port_file && $modes{$mode};
die "$mode mode needs COUNT_FILE\n"
  if ($mode eq 'sink' || $mode eq 'redirect') && !defined $count_file;

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
		return hostile($conn, $method, $path) if $mode ne 'sink';
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

# The misbehaving modes: one answer, then the connection is closed.
sub hostile
{
	my ($conn, $method, $path) = @_;
	my $json = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n";

	if ($mode eq 'garbage')
	{
		my $body = "\xff\xfe<html>\x00\xc3(garbage \x80\x81 not json";
		syswrite($conn, $json . "Content-Length: " . length($body) . "\r\n\r\n" . $body);
	}
	elsif ($mode eq 'wrongjson')
	{
		my $body = '{"id": 12, "name": [], "ids": "x", "embeddings": {"a": null}, '
		  . '"max_batch_size": "many", "nanosecond heartbeat": "soon", "metadatas": 7}';
		$body = '[1, "two", null]' if $path =~ m{/(get|query|collections)$};
		# a real-looking collection, so that record calls reach their own answers
		$body = '{"id": "00000000-0000-4000-8000-000000000002", "name": "coll", '
		  . '"dimension": "three", "metadata": ["x"]}'
		  if $method eq 'GET' && $path =~ m{/collections/[A-Za-z0-9._-]+$};
		$body = '{"ids": [["a", 1]], "embeddings": [["x"]], "documents": [[{}]], '
		  . '"metadatas": [[7]], "distances": [["far"]]}'
		  if $path =~ m{/query$};
		$body = '{"ids": ["a", "b"], "embeddings": [[1, 2]], "documents": ["x"], "metadatas": [null]}'
		  if $path =~ m{/get$};
		syswrite($conn, $json . "Content-Length: " . length($body) . "\r\n\r\n" . $body);
	}
	elsif ($mode eq 'redirect')
	{
		if ($path =~ m{^/followed})
		{
			open(my $cf, '>>', $count_file) or die "$count_file: $!\n";
			syswrite($cf, "$method $path\n");
			close($cf);
		}
		my $port = $conn->sockport;
		my $body = '{"moved": true}';
		syswrite($conn, "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:$port/followed$path\r\n"
			  . "Content-Type: application/json\r\nConnection: close\r\n"
			  . "Content-Length: " . length($body) . "\r\n\r\n" . $body);
	}
	elsif ($mode eq 'trickle')
	{
		syswrite($conn, $json . "Content-Length: 100000\r\n\r\n{") or return;
		for (1 .. 100000)
		{
			select(undef, undef, undef, 0.2);
			syswrite($conn, ' ') or return;
		}
	}
	elsif ($mode eq 'truncated')
	{
		syswrite($conn, $json . "Content-Length: 1000\r\n\r\n{\"ids\": [\"a");
	}
	close($conn);
	return;
}
