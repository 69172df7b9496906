# RED TEAM REPRO (42533c5): key_castable now says "no row of the table" only when the key's
# text is no value of the key's *base* type; a key that is one but fails the domain's
# check becomes a failed row. For a validated domain CHECK that is wrong the other way:
# no row of the table can have such a key, yet its record stays in Chroma and a failed row
# stays in chroma_sync.failed. This is TAP 258's case (a key handed over from an earlier
# table of the collection) with a domain key: the late write of the old table's row
# outlives the new table's state. (Reading the row compares through the domain, so it
# fails instead of finding nothing; comparing on the base type, or trusting a validated
# check, would find no row and delete the id.)
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file
# appears); table t (id int) rows -1, 1..3 synced into cs_t295; arm; UPDATE t id -1 -> 504
# (key '-1' in resend); chroma_unmirror('t') (key kept for the collection); DROP TABLE t;
# CREATE DOMAIN posint AS int CHECK (VALUE > 0) (validated); table n (id posint) rows 1..3;
# chroma_mirror('n') into the collection (adopt => true if asked; takes key '-1'); n's
# backfill reconciles ('-1' deleted); the 504ed write of '-1' lands (within the timeout);
# chroma_flush('n') (waits for the taken key).
# Observed: chroma_sync.failed holds ('-1', could not read the row: value for domain
# posint violates check constraint ...); Chroma keeps record '-1' (chroma_verify 3|0|1|0).
# Expected (as TAP 258): no failed row, record '-1' deleted, Chroma equals the table.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $dir = PostgreSQL::Test::Utils::tempdir();
my $arm = "$dir/arm";
my $release = "$dir/release";
my $pport = start_proxy('late_proxy.pl', $dir, $arm, $release, 'upsert');

my $coll = 'cs_t295';
my $node = new_node('t295',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE t (id int PRIMARY KEY, embedding real[])');
q1(q{INSERT INTO t SELECT i, ARRAY[i, 0, 0] FROM generate_series(-1, 3) i WHERE i <> 0});
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('t', collection => '$coll')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1(q{UPDATE t SET embedding = ARRAY[9, 9, 9] WHERE id = -1});
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of -1 got its 504');
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key -1 waits in chroma_sync.resend');
q1("SELECT chroma_unmirror('t')");
is(q1('SELECT key FROM chroma_sync.resend_collection'), '-1', 'key -1 kept for the collection');
q1('DROP TABLE t');

q1('CREATE DOMAIN posint AS int CHECK (VALUE > 0)');
q1('CREATE TABLE n (id posint PRIMARY KEY, embedding real[])');
q1('INSERT INTO n SELECT i, ARRAY[i, 1, 1] FROM generate_series(1, 3) i');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_mirror('n', collection => '$coll')");
if ($ret != 0)
{
	diag("chroma_mirror without adopt: $err");
	q1("SELECT chroma_mirror('n', collection => '$coll', adopt => true)");
}
ok(wait_for('n backfilled', 30, sub { q1("SELECT backfill_done FROM chroma_sync.mirror WHERE source = 'n'::regclass") eq 't' }),
	'n backfilled');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the late write of -1 reached Chroma');
is(q1("SELECT chroma_flush('n', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('resend empty', 30, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '0' }), 'resend empty');
sleep(2);
is(q1('SELECT count(*) || coalesce(max(\' \' || id || \' \' || error), \'\') FROM chroma_sync.failed'), '0',
	'no failed row for a key no row of n can have');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('n')}), '3|0|0|0', 'chroma_verify: exact');
is(q1("SELECT count(*) FROM chroma_get('$coll', ARRAY['-1'])"), '0', 'record -1 deleted');
finish($node, $log0);
