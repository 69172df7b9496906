# What the test's own HTTP endpoints share (fake_chroma.pl, late_proxy.pl, throttle_proxy.pl,
# delay_proxy.pl): a listener on a free port of 127.0.0.1 whose number is written to a
# file, one child process per connection, and the reading of one request.
package LoopbackHttp;
use strict;
use warnings;
use Exporter 'import';
use IO::Socket::INET;

our @EXPORT = qw(listen_loopback serve_forked read_request forward_request);

# Listens on a free loopback port and writes it to PORT_FILE (via a temporary file and a
# rename, so a reader never sees half a number).
sub listen_loopback
{
	my ($port_file) = @_;
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
	return $listener;
}

# Accepts connections for ever, each served in a child process by SERVE->($conn, @args),
# where @args are what ACCEPTED->($conn) returned in this process (nothing: the connection
# is closed unserved). SIGTERM stops the children and this process.
sub serve_forked
{
	my ($listener, $accepted, $serve) = @_;
	my @children;
	$SIG{TERM} = sub { kill 'KILL', @children; exit 0; };
	$SIG{CHLD} = 'IGNORE';
	while (1)
	{
		my $conn = $listener->accept or next;
		my @args = $accepted->($conn);
		unless (@args)
		{
			close($conn);
			next;
		}
		my $pid = fork();
		die "fork: $!\n" unless defined $pid;
		if ($pid == 0)
		{
			$SIG{TERM} = 'DEFAULT';
			close($listener);
			$serve->($conn, @args);
			exit 0;
		}
		push @children, $pid;
		close($conn);
	}
}

# Reads one request (headers and a Content-Length body) from $conn, keeping what follows
# it in $$buf; returns (method, target, head, body), or nothing at the end of the stream.
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
	return ($method, $path, $head, $body);
}

# Sends a request to the server on 127.0.0.1:UPSTREAM and returns its whole answer, made
# Connection: close (502 when the server cannot be reached).
sub forward_request
{
	my ($upstream, $method, $path, $head, $body) = @_;
	my $up = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $upstream, Proto => 'tcp')
	  or return "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
	my @lines = grep { !/^(connection|keep-alive|content-length|expect):/i } split /\r\n/, $head;
	shift @lines;
	syswrite($up, join("\r\n", "$method $path HTTP/1.1", @lines, 'Connection: close',
			'Content-Length: ' . length($body)) . "\r\n\r\n" . $body);
	my $resp = '';
	while (sysread($up, $resp, 1 << 20, length $resp)) { }
	close($up);
	$resp =~ s/\r\nConnection: keep-alive//i;
	$resp =~ s/\r\n\r\n/\r\nConnection: close\r\n\r\n/ unless $resp =~ /\r\nConnection: close/i;
	return $resp;
}

1;
