# RED TEAM REPRO (6334719, sync_unknown_collect): the worker looks for kept keys of
# collections that are gone with "SELECT DISTINCT collection_id ... LIMIT 20" and asks
# Chroma about those 20 every 5 s, always the same 20 when their collections are alive.
# Keys kept for a collection that still exists stay until a mirror takes them (by design:
# chroma_unmirror without drop_collection, with a request whose outcome is unknown, leaves
# them). Once 20 such live collections exist, kept keys of collections that ARE gone are
# never looked at again: chroma_sync.resend_collection grows without bound, the
# collection step of the commit never happens.
#
# Sequence: one mirror (so the worker runs); 60 live collections created
# (chroma_create_collection), one kept key each in chroma_sync.resend_collection (the
# state chroma_unmirror('t_i') leaves for a mirror with an outcome-unknown key; inserted
# directly, as the superuser, to avoid 60 timeouts); 10 collections created and deleted in
# Chroma (chroma_delete_collection), then one kept key each (the state TAP 289's request
# ending after its mirror and collection were removed leaves; inserted directly); wait 30 s
# (6 rounds of sync_unknown_collect).
# Observed: 6 of the 10 gone collections still have kept keys after 30 s (4 were dropped:
# those that came before the 20th live one; the 20 ids
# checked each round are live ones).
# Expected: every key kept for a collection Chroma answers 404 for is dropped.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = new_node('t300');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1('CREATE TABLE t (id int PRIMARY KEY, embedding real[])');
q1('INSERT INTO t SELECT i, ARRAY[i, 0, 0] FROM generate_series(1, 3) i');
fresh_collection($node, 'cs960_m');
q1("SELECT chroma_mirror('t', collection => 'cs960_m')");
is(q1("SELECT chroma_flush('t', interval '60 seconds')"), 't', 'the mirror is synced (worker running)');

q1("SELECT chroma_delete_collection('cs960_live_' || i, true) FROM generate_series(1, 60) i");
q1("SELECT chroma_create_collection('cs960_live_' || i) FROM generate_series(1, 60) i");
q1(q{INSERT INTO chroma_sync.resend_collection (collection_id, key, not_before, collection)
	SELECT (chroma_collection('cs960_live_' || i)->>'id')::uuid, '1', now(), 'cs960_live_' || i
	FROM generate_series(1, 60) i});

q1("SELECT chroma_delete_collection('cs960_gone_' || i, true) FROM generate_series(1, 10) i");
q1("SELECT chroma_create_collection('cs960_gone_' || i) FROM generate_series(1, 10) i");
q1(q{CREATE TABLE gone AS SELECT (chroma_collection('cs960_gone_' || i)->>'id')::uuid AS id, i
	FROM generate_series(1, 10) i});
q1("SELECT chroma_delete_collection('cs960_gone_' || i) FROM generate_series(1, 10) i");
q1(q{INSERT INTO chroma_sync.resend_collection (collection_id, key, not_before, collection)
	SELECT id, '1', now(), 'cs960_gone_' || i FROM gone});
is(q1('SELECT count(*) FROM chroma_sync.resend_collection'), '70', '70 collections with kept keys');

# 20 ids a round, a round at most every 5 s (every 10 s while the worker is idle): the 70
# are all looked at within four rounds
my $t0 = time;
my $left;
wait_for('the gone collections\' keys dropped', 90, sub {
	$left = q1('SELECT count(*) FROM chroma_sync.resend_collection k JOIN gone g ON g.id = k.collection_id');
	$left eq '0' });
diag(sprintf('kept keys of gone collections after %.0f s: %s of 10', time - $t0, $left));
diag('live ones kept: ' . q1(q{SELECT count(*) FROM chroma_sync.resend_collection k
	WHERE NOT EXISTS (SELECT 1 FROM gone g WHERE g.id = k.collection_id)}));
is($left, '0', 'the keys kept for the 10 deleted collections were dropped by the worker');

q1("SELECT chroma_delete_collection('cs960_live_' || i, true) FROM generate_series(1, 60) i");
finish($node, $log0);
