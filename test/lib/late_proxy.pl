#!/usr/bin/perl
# A loopback HTTP proxy in front of a real Chroma server that, when armed, answers the
# next record write with 504 at once and forwards that request to Chroma only later: the
# behaviour of a gateway that times out while the server goes on (the write is applied
# after the client has given up on it).
#
#   late_proxy.pl UPSTREAM_PORT PORT_FILE ARM_FILE WHEN [OPERATION]
#
# Every request is forwarded to 127.0.0.1:UPSTREAM_PORT and its answer relayed
# (Connection: close). While ARM_FILE exists, the next POST to .../OPERATION (upsert
# unless given, e.g. delete) removes it and gets the late 504 treatment: it is forwarded
# WHEN seconds later, or, when WHEN is a file name, once that file exists (the test
# decides when the late write lands, whatever the machine's load), and then WHEN.done is
# made once Chroma has answered it. With OPERATION ending in "+hold" (upsert+hold), the
# armed request gets no answer at all until then (the client keeps waiting, as for a
# server that is slow to answer), and Chroma's answer is relayed to it if it still waits.
# SIGTERM stops everything.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IO::Socket::INET;
use LoopbackHttp;

my ($upstream, $port_file, $arm_file, $when, $operation) = @ARGV;
die "usage: $0 UPSTREAM_PORT PORT_FILE ARM_FILE WHEN [OPERATION]\n" unless defined $when;
$operation //= 'upsert';
my $hold = $operation =~ s/\+hold$//;

serve_forked(
	listen_loopback($port_file),
	sub
	{
		my ($conn) = @_;
		my $buf = '';
		my ($method, $path, $head, $body) = read_request($conn, \$buf) or return;
		# decided here, in the parent, so exactly one request takes the armed file
		my $late = $method eq 'POST' && $path =~ m{/\Q$operation\E$} && unlink($arm_file);
		return ($method, $path, $head, $body, $late);
	},
	\&serve);

sub serve
{
	my ($conn, $method, $path, $head, $body, $late) = @_;
	if ($late)
	{
		my $json = '{"error":"GatewayTimeout","message":"the gateway gave up"}';
		unless ($hold)
		{
			syswrite($conn, "HTTP/1.1 504 Gateway Timeout\r\nContent-Type: application/json\r\n"
				  . "Connection: close\r\nContent-Length: " . length($json) . "\r\n\r\n$json");
			close($conn);
		}
		if ($when =~ /^[0-9.]+$/)
		{
			select(undef, undef, undef, $when);
			my $resp = forward($method, $path, $head, $body);
			if ($hold)
			{
				local $SIG{PIPE} = 'IGNORE';
				syswrite($conn, $resp);
				close($conn);
			}
			return;
		}
		select(undef, undef, undef, 0.05) until -e $when;
		my $resp = forward($method, $path, $head, $body);
		if ($hold)
		{
			local $SIG{PIPE} = 'IGNORE';
			syswrite($conn, $resp);
			close($conn);
		}
		open(my $done, '>', "$when.done.tmp") or die "$when.done.tmp: $!\n";
		print $done((split /\r\n/, $resp)[0], "\n");
		close($done);
		rename("$when.done.tmp", "$when.done") or die "rename: $!\n";
		return;
	}
	syswrite($conn, forward($method, $path, $head, $body));
	close($conn);
	return;
}

sub forward { return forward_request($upstream, @_); }
