#!/usr/bin/perl
# The server's own latency for single-record writes, without PostgreSQL: upserts record "1"
# (DIM float32 values, base64) into COLLECTION every ~100 ms for SECONDS, each timed from
# the request's start to its answer, on one kept-alive connection. With WATCH_PID and
# WATCH_COLLECTION it starts once WATCH_COLLECTION holds records (bench/floor's requests
# have begun) and stops early once that process has exited. Used by bench/fairness.sh as the floor of its
# fairness figures: what a client that sends a change the moment it is made gets while
# another client loads the server.
#
#   fair_probe.pl URL COLLECTION DIM SECONDS [WATCH_PID WATCH_COLLECTION]
#
# Prints "writes N p50 P p99 Q max M" (milliseconds).
use strict;
use warnings;
use IO::Socket::INET;
use JSON::PP;
use MIME::Base64;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time sleep);

my ($url, $coll, $dim, $secs, $watch, $watch_coll) = @ARGV;
die "usage: $0 URL COLLECTION DIM SECONDS [WATCH_PID WATCH_COLLECTION]\n" unless defined $secs;
my ($host, $port) = $url =~ m{^http://([^:/]+):(\d+)} or die "URL: http://host:port\n";
my $base = "/api/v2/tenants/default_tenant/databases/default_database/collections";

# HTTP/1.1 on one kept-alive connection, each request in one write with TCP_NODELAY (as
# libcurl sends it: no delayed-ACK wait between headers and body)
my $sock;
sub request
{
	my ($method, $path, $body) = @_;
	$body //= '';
	for my $try (1, 2)
	{
		if (!$sock)
		{
			$sock = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp')
			  or die "connect: $!\n";
			setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1);
		}
		my $req = "$method $path HTTP/1.1\r\nHost: $host:$port\r\nContent-Type: application/json\r\n"
		  . "Content-Length: " . length($body) . "\r\n\r\n$body";
		my $ok = defined syswrite($sock, $req);
		my ($status, $content) = $ok ? read_response() : ();
		return ($status, $content) if defined $status;
		close($sock);
		undef $sock;    # the server closed the kept-alive connection: once more
	}
	die "$method $path: no answer\n";
}

sub read_response
{
	my $buf = '';
	while ($buf !~ /\r\n\r\n/)
	{
		my $n = sysread($sock, $buf, 65536, length $buf);
		return () unless $n;
	}
	my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
	my ($status) = $head =~ m{^HTTP/1\.\d (\d+)};
	if ($head =~ /^content-length:\s*(\d+)/mi)
	{
		my $len = $1;
		while (length($rest) < $len)
		{
			my $n = sysread($sock, $rest, 65536, length $rest);
			return () unless $n;
		}
		return ($status, substr($rest, 0, $len));
	}
	# chunked
	my $content = '';
	for (;;)
	{
		while ($rest !~ /\r\n/)
		{
			my $n = sysread($sock, $rest, 65536, length $rest);
			return () unless $n;
		}
		my ($size) = $rest =~ /^([0-9a-fA-F]+)/;
		$rest =~ s/^[^\r]*\r\n//;
		my $len = hex($size);
		while (length($rest) < $len + 2)
		{
			my $n = sysread($sock, $rest, 65536, length $rest);
			return () unless $n;
		}
		$content .= substr($rest, 0, $len);
		$rest = substr($rest, $len + 2);
		return ($status, $content) if $len == 0;
	}
}

my ($st, $c) = request('POST', $base, encode_json({ name => $coll, get_or_create => JSON::PP::true }));
die "create $coll: $st $c\n" unless $st == 200;
my $id = decode_json($c)->{id};

# wait for the other client's records (at most 10 minutes)
if (defined $watch_coll)
{
	my $deadline = time + 600;
	while (time < $deadline && kill(0, $watch))
	{
		my ($gs, $g) = request('GET', "$base/$watch_coll");
		if ($gs == 200)
		{
			my $wid = decode_json($g)->{id};
			my ($cs, $cnt) = request('GET', "$base/$wid/count");
			last if $cs == 200 && $cnt =~ /^\s*[1-9]/;
		}
		sleep 0.05;
	}
}

my @ms;
my $end = time + $secs;
my $i = 0;
while (time < $end)
{
	last if defined $watch && !kill(0, $watch);
	$i++;
	my $emb = encode_base64(pack('f<*', map { sin($i * 0.7 + $_) } 1 .. $dim), '');
	my $body = encode_json({ ids => ['1'], embeddings => [$emb], documents => ["v $i"] });
	my $t0 = time;
	my ($us, $uc) = request('POST', "$base/$id/upsert", $body);
	my $t = (time - $t0) * 1000;
	die "upsert: $us $uc\n" unless $us == 200;
	push @ms, $t;
	my $rest = 0.1 - $t / 1000;
	sleep($rest) if $rest > 0;
}
@ms = sort { $a <=> $b } @ms;
my $n = @ms;
die "no write was timed\n" unless $n;
my $pct = sub { my $k = int($_[0] * ($n - 1) + 0.5); return $ms[$k]; };
printf "writes %d p50 %.1f p99 %.1f max %.1f\n", $n, $pct->(0.5), $pct->(0.99), $ms[-1];
