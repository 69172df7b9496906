#!/usr/bin/perl
# Runs a command in private Linux namespaces as the calling user (no root needed: an
# unprivileged user namespace maps the caller's uid and gid to themselves), so a TAP test
# can start a PostgreSQL server that sees another /etc/resolv.conf or /etc/ssl/certs
# without changing the machine's own files.
#
#   private_ns.pl [--bind SRC:DST]... [--dns-blackhole PIDFILE] -- COMMAND ARGS...
#
# --bind SRC:DST       bind-mounts SRC over DST, visible only to COMMAND and its children
# --dns-blackhole PF   also a private network namespace (only loopback, up) in which a
#                      child process holds UDP 127.0.0.1:53 and reads queries without
#                      ever answering; its pid is written to PF (kill it when done). With
#                      --bind of a resolv.conf naming 127.0.0.1, every DNS lookup hangs.
# Exits 3 when the kernel refuses unprivileged user namespaces (a test can skip then).
use strict;
use warnings;
use Socket qw(AF_INET SOCK_DGRAM INADDR_LOOPBACK pack_sockaddr_in);

# x86_64 system call numbers and flags (linux/sched.h, linux/mount.h)
my ($SYS_mount, $SYS_unshare) = (165, 272);
my ($CLONE_NEWNS, $CLONE_NEWUSER, $CLONE_NEWNET) = (0x00020000, 0x10000000, 0x40000000);
my ($MS_BIND, $MS_REC, $MS_PRIVATE) = (4096, 16384, 1 << 18);
my ($SIOCGIFFLAGS, $SIOCSIFFLAGS, $IFF_UP) = (0x8913, 0x8914, 1);

my (@binds, $dns_pidfile);
while (@ARGV && $ARGV[0] ne '--')
{
	my $opt = shift @ARGV;
	if ($opt eq '--bind') { push @binds, [ split /:/, shift(@ARGV), 2 ]; }
	elsif ($opt eq '--dns-blackhole') { $dns_pidfile = shift @ARGV; }
	else { die "usage: $0 [--bind SRC:DST]... [--dns-blackhole PIDFILE] -- COMMAND...\n"; }
}
shift @ARGV;
die "no command given\n" unless @ARGV;
die "only x86_64 is supported\n" unless `uname -m` =~ /x86_64/;

sub write_file
{
	my ($path, $text) = @_;
	open(my $f, '>', $path) or die "$path: $!\n";
	print $f $text or die "$path: $!\n";
	close($f) or die "$path: $!\n";
	return;
}

my ($uid, $gid) = ($<, (split ' ', $()[0]);
my $flags = $CLONE_NEWUSER | $CLONE_NEWNS | ($dns_pidfile ? $CLONE_NEWNET : 0);
if (syscall($SYS_unshare, $flags) != 0)
{
	warn "unshare: $!\n";
	exit 3;
}
write_file('/proc/self/setgroups', 'deny');
write_file('/proc/self/uid_map', "$uid $uid 1");
write_file('/proc/self/gid_map', "$gid $gid 1");
# syscall() passes strings by address: they must be variables
my ($none, $root) = ('none', '/');
syscall($SYS_mount, $none, $root, 0, $MS_REC | $MS_PRIVATE, 0) == 0
  or die "mount --make-rprivate /: $!\n";
for my $b (@binds)
{
	my ($src, $dst) = @$b;
	syscall($SYS_mount, $src, $dst, 0, $MS_BIND, 0) == 0
	  or die "mount --bind $src $dst: $!\n";
}

if ($dns_pidfile)
{
	socket(my $s, AF_INET, SOCK_DGRAM, 0) or die "socket: $!\n";
	my $ifr = pack('a16 x24', 'lo');
	ioctl($s, $SIOCGIFFLAGS, $ifr) or die "SIOCGIFFLAGS lo: $!\n";
	my (undef, $ifflags) = unpack('a16 s', $ifr);
	ioctl($s, $SIOCSIFFLAGS, pack('a16 s x22', 'lo', $ifflags | $IFF_UP))
	  or die "SIOCSIFFLAGS lo: $!\n";
	close($s);

	socket(my $dns, AF_INET, SOCK_DGRAM, 0) or die "socket: $!\n";
	bind($dns, pack_sockaddr_in(53, INADDR_LOOPBACK)) or die "bind 127.0.0.1:53: $!\n";
	my $pid = fork();
	die "fork: $!\n" unless defined $pid;
	if ($pid == 0)
	{
		# read and drop every query: no answer, no ICMP "port unreachable"
		my $buf;
		while (1) { recv($dns, $buf, 65536, 0); }
	}
	close($dns);
	write_file("$dns_pidfile.tmp", "$pid\n");
	rename("$dns_pidfile.tmp", $dns_pidfile) or die "rename: $!\n";
}

exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!\n";
