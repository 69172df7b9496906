# RED TEAM REPRO (e33143c): keys kept for a collection (chroma_sync.resend_collection) are
# the old mirror's id texts, and a new mirror into the collection takes them whatever its
# own key. A table with text keys is mirrored into a collection; one of its upserts gets a
# gateway's 504 (its key 'a' parked in chroma_sync.resend, the request applied later);
# chroma_unmirror (collection kept) hands 'a' to the collection. The table is replaced by
# one with an integer key (the README's way to change a mirror: unmirror, mirror again
# into the same collection) and mirrored into it. sync_unknown_adopt_collection moves 'a'
# into chroma_sync.resend of the new mirror; once due it is queued, and the drain reads
# it with "id = ANY ($1::integer[])": the row cannot be read, it goes to chroma_sync.failed
# ("could not read the row: invalid input syntax for type integer") and is retried for
# ever; the late-applied record 'a' (not a row of the table) stays in Chroma.
#
# Sequence: timeout 8 s, late_proxy 'upsert' (504 at once, forwarded when a file appears);
# table t (id text) rows a..e synced; arm; UPDATE 'a' -> 504, key in resend;
# chroma_unmirror('t'); DROP TABLE t; CREATE TABLE n (id int) rows 1..5; chroma_mirror('n')
# into the same collection (adopt => true if asked); release the late write; chroma_flush.
# Before the fix: chroma_sync.failed held ('a', could not read the row: invalid input syntax ...).
# Expected: no failed row (a key that cannot be a key of the table is no row of it: a
# delete of that id, or dropped), and Chroma equals the table.
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

my $coll = 'cs_t901';
my $node = new_node('t901',
	conf => "chroma_sync.url = 'http://127.0.0.1:$pport'\nchroma_sync.timeout = 8000\n");
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1('CREATE TABLE t (id text PRIMARY KEY, embedding real[])');
q1(q{INSERT INTO t SELECT chr(96 + i), ARRAY[i, 0, 0] FROM generate_series(1, 5) i});
fresh_collection($node, $coll);
q1("SELECT chroma_mirror('t', collection => '$coll')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'backfilled');

open(my $fh, '>', $arm) or die;
close($fh);
q1(q{UPDATE t SET embedding = ARRAY[9, 9, 9] WHERE id = 'a'});
ok(wait_for('the 504', 20, sub { !-e $arm }), 'the upsert of a got its 504');
ok(wait_for('its key in resend', 20, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '1' }),
	'key a waits in chroma_sync.resend');
q1("SELECT chroma_unmirror('t')");
is(q1('SELECT key FROM chroma_sync.resend_collection'), 'a', 'key a kept for the collection');
q1('DROP TABLE t');

q1('CREATE TABLE n (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO n SELECT i, ARRAY[i, 1, 1] FROM generate_series(1, 5) i');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT chroma_mirror('n', collection => '$coll')");
if ($ret != 0)
{
	diag("chroma_mirror without adopt: $err");
	q1("SELECT chroma_mirror('n', collection => '$coll', adopt => true)");
}
# n's backfill (it reconciles: 'a'..'e' are deleted as no ids of n) before the late write,
# within chroma_sync.timeout of the 504 (chroma_flush would also wait for the taken key)
ok(wait_for('n backfilled', 30, sub { q1("SELECT backfill_done FROM chroma_sync.mirror WHERE source = 'n'::regclass") eq 't' }),
	'n backfilled');
open($fh, '>', $release) or die;
close($fh);
ok(wait_for('the late write', 30, sub { -e "$release.done" }), 'the late write of a reached Chroma');
# the adopted key is due 8 s after the 504; chroma_flush waits for it and its resend
is(q1("SELECT chroma_flush('n', interval '60 seconds')"), 't', 'flushed');
ok(wait_for('resend empty', 30, sub { q1('SELECT count(*) FROM chroma_sync.resend') eq '0' }), 'resend empty');
sleep(2);
is(q1('SELECT count(*) || coalesce(max(\' \' || id || \' \' || error), \'\') FROM chroma_sync.failed'), '0',
	'no failed row for a key of the old table');
is(q1(q{SELECT rows, missing, extra, different FROM chroma_verify('n')}), '5|0|0|0', 'chroma_verify: exact');
finish($node, $log0);
