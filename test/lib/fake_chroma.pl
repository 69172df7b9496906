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
#   sink  answers pre-flight, collection lookups, creation, count (0), metadata updates
#         and record writes ({}); for each write it appends the number of ids received
#         to COUNT_FILE
#   garbage   answers every request 200 with a body that is not JSON (binary bytes,
#             invalid UTF-8, a NUL)
#   wrongjson answers every request 200 with valid JSON of the wrong shape (a collection
#             lookup gets a collection, so record calls reach their own answer)
#   redirect  answers every request 302 to /followed on itself; a request for /followed
#             is appended to COUNT_FILE (it must stay empty: redirects are never followed)
#   trickle   answers 200 with a long Content-Length, then one byte every 200 ms
#   truncated answers 200 with Content-Length 1000, sends 10 bytes and closes
#   badutf8   answers 200 with valid JSON whose strings hold bytes that are not UTF-8
#             (a collection list, a heartbeat, a get); a collection creation gets a 400
#             whose message is not UTF-8
#   nooffset  lists collections ignoring offset: every page is the same 100 collections
#   endless   lists collections: every page holds 100 new ones, the list never ends
#   huge      like sink, but a get or query is answered 200 with a body of 600 MiB
#             (streamed until the client hangs up)
#   samepage  like sink, but a get is answered with "limit" records r1, r2, ... whatever
#             its offset says (a get that ignores offset)
# With FAKE_CHROMA_REQUEST_LOG set in its environment, every request is appended to that
# file as "METHOD TARGET token=yes|no" (whether an x-chroma-token header came along).
# Each connection is served by its own child process; SIGTERM stops everything.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use LoopbackHttp;

my ($mode, $port_file, $count_file) = @ARGV;
my %modes = map { $_ => 1 } qw(hang sink garbage wrongjson redirect trickle truncated badutf8 nooffset endless huge samepage);
die "usage: $0 MODE PORT_FILE [COUNT_FILE]\n"
  unless defined $port_file && $modes{$mode};
die "$mode mode needs COUNT_FILE\n"
  if ($mode eq 'sink' || $mode eq 'redirect') && !defined $count_file;

serve_forked(listen_loopback($port_file), sub { return 1; }, sub { serve($_[0]); });

sub serve
{
	my ($conn) = @_;
	my $buf = '';
	while (1)
	{
		my ($method, $path, $body) = next_request($conn, \$buf) or return;
		next if $mode eq 'hang';
		return hostile($conn, $method, $path) unless $mode =~ /^(sink|huge|samepage)$/;
		answer($conn, $method, $path, $body);
	}
}

# One request; each is appended to $FAKE_CHROMA_REQUEST_LOG when that is set.
sub next_request
{
	my ($conn, $buf) = @_;
	my ($method, $path, $head, $body) = read_request($conn, $buf) or return;
	if (my $log = $ENV{FAKE_CHROMA_REQUEST_LOG})
	{
		my $token = $head =~ m{^x-chroma-token:}mi ? 'yes' : 'no';
		open(my $lf, '>>', $log) or die "$log: $!\n";
		syswrite($lf, "$method $path token=$token\n");
		close($lf);
	}
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
	elsif ($method eq 'POST' && $path =~ m{/collections$})
	{
		my ($name) = $body =~ m{"name":"([A-Za-z0-9._-]+)"};
		$name //= 'coll';
		($status, $json) = (200,
			qq({"id":"00000000-0000-4000-8000-000000000001","name":"$name","dimension":null,"metadata":null}));
	}
	elsif ($method eq 'GET' && $path =~ m{/collections/[0-9a-f-]+/count$})
	{
		($status, $json) = (200, '0');
	}
	elsif ($method eq 'PUT' && $path =~ m{/collections/[0-9a-f-]+$})
	{
		($status, $json) = (200, '{}');
	}
	elsif ($method eq 'GET' && $path =~ m{/collections/([A-Za-z0-9._-]+)$})
	{
		($status, $json) = (200,
			qq({"id":"00000000-0000-4000-8000-000000000001","name":"$1","dimension":null,"metadata":null}));
	}
	elsif ($mode eq 'huge' && $method eq 'POST' && $path =~ m{/collections/[0-9a-f-]+/(get|query)$})
	{
		my $size = 600 * 1024 * 1024;
		my $chunk = 'x' x (1 << 20);
		syswrite($conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			  . "Content-Length: $size\r\n\r\n{\"ids\":[\"") or return;
		for (1 .. 600)
		{
			syswrite($conn, $chunk) or return;
		}
		return;
	}
	elsif ($mode eq 'samepage' && $method eq 'POST' && $path =~ m{/collections/[0-9a-f-]+/get$})
	{
		my ($limit) = $body =~ m{"limit":(\d+)};
		my @ids = map { qq("r$_") } 1 .. ($limit // 10);
		($status, $json) = (200, '{"ids":[' . join(',', @ids) . '],"embeddings":null,'
			  . '"documents":null,"metadatas":null}');
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
	elsif ($mode eq 'badutf8')
	{
		my $body = qq({"nanosecond heartbeat": 1, "note": "caf\xe9 \xff"});
		$body = qq([{"id": "00000000-0000-4000-8000-000000000003", "name": "bad\xff\xfename", )
		  . qq("dimension": null, "metadata": {"k": "v\xc3"}}])
		  if $path =~ m{/collections(\?|$)};
		$body = qq{{"ids": ["id\xff"], "documents": ["doc\xc3("], "metadatas": [null]}}
		  if $path =~ m{/get$};
		$body = qq({"id": "00000000-0000-4000-8000-000000000003", "name": "coll", "dimension": 2, "metadata": null})
		  if $method eq 'GET' && $path =~ m{/collections/[A-Za-z0-9._-]+$};
		my $head = $json;
		if ($method eq 'POST' && $path =~ m{/collections$})
		{
			# an error whose message is not UTF-8
			$head =~ s{^HTTP/1.1 200 OK}{HTTP/1.1 400 Bad Request};
			$body = qq({"error": "InvalidArgument", "message": "bad \xff\xfe name \xc3"});
		}
		syswrite($conn, $head . "Content-Length: " . length($body) . "\r\n\r\n" . $body);
	}
	elsif ($mode eq 'nooffset' || $mode eq 'endless')
	{
		my ($offset) = $path =~ m{[?&]offset=(\d+)};
		my $from = $mode eq 'endless' ? ($offset // 0) : 0;
		my $body = '[' . join(',', map {
			sprintf('{"id": "00000000-0000-4000-8000-%012d", "name": "coll%d", "dimension": 2, "metadata": null}', $_, $_)
		} $from .. $from + 99) . ']';
		syswrite($conn, $json . "Content-Length: " . length($body) . "\r\n\r\n" . $body);
	}
	elsif ($mode eq 'truncated')
	{
		syswrite($conn, $json . "Content-Length: 1000\r\n\r\n{\"ids\": [\"a");
	}
	close($conn);
	return;
}
