#!/usr/bin/perl
# A TCP proxy on loopback that adds DELAY_MS to each direction: every chunk read from one
# side is written to the other DELAY_MS after it arrived, in order, both ways, so a
# request and its answer take a round trip of 2 x DELAY_MS more than over loopback (a
# cloud region to a hosted Chroma is about 25 ms each way). Connections stay open as
# long as the client keeps them (keep-alive works through it); one process per connection.
# Used by bench/latency.sh and the TAP tests (start_proxy of test/t/ChromaSyncTest.pm).
#
#   delay_proxy.pl UPSTREAM_PORT PORT_FILE DELAY_MS [HOLD_FILE]
#
# With HOLD_FILE: while it exists, a request whose chunk holds the text HOLD_FILE holds (a
# collection's id in its path) is held at the proxy, with everything after it on its
# connection, until HOLD_FILE is removed; HOLD_FILE.held is created when one is held (a
# request to one collection kept in flight, the others going on).
# Forwards to 127.0.0.1:UPSTREAM_PORT; writes the port it listens on to PORT_FILE (the
# listener of LoopbackHttp.pm). A side that closes is closed on the other side
# after the delay too. SIGTERM stops everything.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IO::Select;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time);
use LoopbackHttp;

my ($upstream, $port_file, $delay_ms, $hold_file) = @ARGV;
die "usage: $0 UPSTREAM_PORT PORT_FILE DELAY_MS [HOLD_FILE]\n"
  unless defined $delay_ms && $delay_ms =~ /^\d+(\.\d+)?$/;
my $delay = $delay_ms / 1000;

# Whether the client's chunk is held now (HOLD_FILE exists and the chunk holds its text).
sub held
{
	my ($bytes) = @_;
	return 0 unless defined $hold_file && defined $bytes;
	open(my $in, '<', $hold_file) or return 0;
	my $match = do { local $/; <$in> } // '';
	close($in);
	chomp $match;
	return 0 if $match eq '' || index($bytes, $match) < 0;
	if (!-e "$hold_file.held")
	{
		open(my $fh, '>', "$hold_file.held") or die "$hold_file.held: $!";
		close($fh);
	}
	return 1;
}

serve_forked(listen_loopback($port_file), sub { return (1); }, \&relay);

# Relays one connection until both sides have closed (or one fails).
sub relay
{
	my ($client) = @_;
	my $server = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $upstream, Proto => 'tcp')
	  or return;
	for my $s ($client, $server)
	{
		setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
		$s->blocking(1);
	}
	# per direction: the socket read, the socket written, chunks [due, bytes or undef for EOF]
	my @dirs = ({ from => $client, to => $server, queue => [], open => 1 },
		{ from => $server, to => $client, queue => [], open => 1 });
	my $done = 0;
	while ($done < 2)
	{
		my $now = time;
		my $holding = 0;
		# write what is due, in order
		for my $d (@dirs)
		{
			while (@{ $d->{queue} } && $d->{queue}[0][0] <= $now)
			{
				if ($d == $dirs[0] && held($d->{queue}[0][1]))
				{
					$holding = 1;
					last;
				}
				my (undef, $bytes) = @{ shift @{ $d->{queue} } };
				if (!defined $bytes)
				{
					shutdown($d->{to}, 1);
					$done++;
					next;
				}
				my $off = 0;
				while ($off < length $bytes)
				{
					my $n = syswrite($d->{to}, $bytes, length($bytes) - $off, $off);
					return unless $n;    # the other side is gone
					$off += $n;
				}
			}
		}
		last if $done >= 2;
		my $sel = IO::Select->new(map { $_->{open} ? $_->{from} : () } @dirs);
		my $next;
		for my $d (@dirs)
		{
			$next = $d->{queue}[0][0]
			  if @{ $d->{queue} } && (!defined $next || $d->{queue}[0][0] < $next);
		}
		my $wait = defined $next ? $next - time : undef;
		$wait = 0 if defined $wait && $wait < 0;
		$wait = 0.05 if $holding;    # look at HOLD_FILE again soon
		if ($sel->count == 0)
		{
			select(undef, undef, undef, $wait) if defined $wait && $wait > 0;
			next;
		}
		for my $s ($sel->can_read($wait))
		{
			my ($d) = grep { $_->{from} == $s } @dirs;
			my $buf;
			my $n = sysread($s, $buf, 1 << 18);
			my $due = time + $delay;
			if ($n)
			{
				push @{ $d->{queue} }, [ $due, $buf ];
			}
			else
			{
				push @{ $d->{queue} }, [ $due, undef ];
				$d->{open} = 0;
			}
		}
	}
	close($client);
	close($server);
	return;
}
