# One worker slot per database, 64 in all. Databases whose worker found nothing to do
# give their slot to databases that need one; when 64 databases have mirrors, a mirror
# in a 65th is refused with an ERROR (53400), not left without a worker in silence.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('many_databases', conf => "max_worker_processes = 90\nmax_connections = 120\n");
my $log0 = log_offset($node);

# 70 databases without the extension first: each is looked at once and found dormant
$node->safe_psql('postgres', join(";\n", map { "CREATE DATABASE idle$_" } 1 .. 70));

my $n = 64;
for my $i (1 .. $n)
{
	$node->safe_psql('postgres', "CREATE DATABASE m$i");
	$node->safe_psql("m$i", qq{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t VALUES (1, '{$i,1}');
SELECT chroma_delete_collection('cs_t031_m$i', true);
SELECT chroma_mirror('t', collection => 'cs_t031_m$i');});
}
my $flushed = 0;
for my $i (1 .. $n)
{
	$flushed++ if $node->safe_psql("m$i", "SELECT chroma_flush('t', interval '60 seconds')") eq 't';
}
is($flushed, $n, "$n databases with a mirror each: every one is flushed (slots taken over from idle ones)");

$node->safe_psql('postgres', 'CREATE DATABASE m65');
$node->safe_psql('m65', q{
CREATE EXTENSION chroma_sync;
CREATE TABLE t (id int PRIMARY KEY, embedding real[]);
INSERT INTO t VALUES (1, '{65,1}');
SELECT chroma_delete_collection('cs_t031_m65', true);});
my ($ret, $out, $err) = $node->psql('m65', "SELECT chroma_mirror('t', collection => 'cs_t031_m65')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/53400.*too many databases have mirrors/s, 'a mirror in a 65th database is refused: 53400');
is($node->safe_psql('m65', 'SELECT count(*) FROM chroma_sync.mirror'), '0', 'and not created');

# a database that gives up its mirrors gives up its slot once its worker goes dormant
$node->safe_psql('m1', "SELECT chroma_unmirror('t', drop_collection => true)");
ok(wait_for('a slot to free up', 60, sub {
	my ($r, $o, $e) = $node->psql('m65', "SELECT chroma_mirror('t', collection => 'cs_t031_m65')");
	$r == 0 }), 'after m1 unmirrored, the mirror in m65 is created');
is($node->safe_psql('m65', "SELECT chroma_flush('t', interval '60 seconds')"), 't', 'and m65 syncs');
is($node->safe_psql('m65', "SELECT rows, missing, extra, different FROM chroma_verify('t')"), '1|0|0|0',
	'm65: chroma_verify reports the row');
# a commit in a database whose slot was taken over gets it a worker again
$node->safe_psql("m$n", "INSERT INTO t VALUES (2, '{2,2}')");
is($node->safe_psql("m$n", "SELECT chroma_flush('t', interval '60 seconds')"), 't', "m$n still syncs");

for my $i (2 .. $n, 65)
{
	$node->safe_psql("m$i", "SELECT chroma_unmirror('t', drop_collection => true)");
}
finish($node, $log0);
