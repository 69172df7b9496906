# Red team (unsettled requests, in-worker side): chroma_unmirror drops the mirror's
# chroma_sync.resend keys (sync_unknown.c), and nothing else remembers that a request of
# that mirror may still be applied late. Unmirror + mirror again into the same collection
# (the README's way to change a filter or columns) right after a 504: the new mirror's
# backfill sends the current state at once, the gateway then applies the stale request
# (within chroma_sync.timeout of its 504), and no resend follows.
#
# Sequence: timeout 8 s, rows 1..10 synced through late_proxy ('upsert': 504 at once,
# forwarded when a file appears); UPDATE id 1 to state 1 -> 504 (its key in resend);
# UPDATE id 1 to state 2; chroma_unmirror('d'); chroma_mirror('d', same collection);
# state 2 in Chroma (the new backfill); the gateway applies state 1 (a few seconds after
# its 504); chroma_flush (which waits for resend keys and their resend).
# Before the fix: Chroma kept state 1 (verify 10|0|0|1).
# Expected: state 2 (the new mirror's worker waits for, or resends after, the old
# mirror's unsettled requests to that collection).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert');

my $coll = 'cs_t254';
my $node = new_node('t254',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
$node->safe_psql('postgres', 'CREATE TABLE d (id int PRIMARY KEY, embedding real[])');
$node->safe_psql('postgres', 'INSERT INTO d SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 10) i');
fresh_collection($node, $coll);
$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')"), 't', 'backfilled');

sub chroma_embedding
{
	return $node->safe_psql('postgres', "SELECT embedding::text FROM chroma_get('$coll', ARRAY['1'])");
}

open(my $fh, '>', $arm) or die;
close($fh);
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[1, 1, 1] WHERE id = 1');
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of state 1 got its 504');
ok(wait_for('its key in resend', 20, sub {
	$node->safe_psql('postgres', 'SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'the key waits in chroma_sync.resend');
$node->safe_psql('postgres', 'UPDATE d SET embedding = ARRAY[2, 2, 2] WHERE id = 1');
$node->safe_psql('postgres', "SELECT chroma_unmirror('d')");
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_mirror('d', collection => '$coll')");
if ($ret != 0)
{
	diag("chroma_mirror without adopt: $err");
	$node->safe_psql('postgres', "SELECT chroma_mirror('d', collection => '$coll', adopt => true)");
}
# the new mirror's backfill sends state 2; the gateway then applies the 504ed state 1,
# within chroma_sync.timeout of its 504 (the bound the design assumes)
ok(wait_for('state 2 in Chroma', 20, sub { chroma_embedding() eq '{2,2,2}' }),
	'the new mirror sent state 2');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the 504ed state 1 reached Chroma');
is(chroma_embedding(), '{1,1,1}', 'the stale state 1 overwrote it');
# chroma_flush also waits for the keys parked in chroma_sync.resend (the new mirror took
# the old one's: sync_unknown_adopt_collection) and for their resend
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 70), 't',
	'flushed');
is(chroma_embedding(), '{2,2,2}', 'Chroma holds state 2, the table\'s');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('d')}),
	'10|0|0|0', 'chroma_verify: exact');

finish($node, $log0);
