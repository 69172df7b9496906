# chroma_unmirror asks the worker to leave the mirror while its transaction holds the
# table and the mirror row. Each call's request is its own: two calls in two sessions
# (one database shared one request slot, so the second call's request was dropped), two
# calls in one transaction (only the first was asked for), and a request taken back by
# ROLLBACK TO SAVEPOINT (it stayed until the transaction ended: the mirror was not synced
# meanwhile).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = new_node('concurrent_unmirror');
my $log0 = log_offset($node);
for my $t (qw(a b c))
{
	make_table($node, $t, rows => 20, dim => 4);
	fresh_collection($node, "cs_t035_$t");
	mirror($node, $t, "cs_t035_$t");
}
is($node->safe_psql('postgres', "SELECT chroma_flush(NULL, interval '60 seconds')"), 't', 'backfilled');

sub mirror_id
{
	my ($t) = @_;
	return $node->safe_psql('postgres', "SELECT mirror_id FROM chroma_sync.mirror WHERE source = '$t'::regclass");
}

# --- a request taken back by ROLLBACK TO SAVEPOINT no longer keeps the worker away
my $s1 = $node->background_psql('postgres');
$s1->query_safe(q{BEGIN; SAVEPOINT s; SELECT chroma_unmirror('a'); ROLLBACK TO SAVEPOINT s;});
$node->safe_psql('postgres', "UPDATE a SET doc = 'after the savepoint' WHERE id = 1");
is($s1->query_safe(q{SELECT chroma_flush('a', interval '10 seconds')}), 't',
	'in the same transaction, after ROLLBACK TO SAVEPOINT, the mirror is synced again');
$s1->query_safe('COMMIT');
$s1->quit;
ok(poll_query($node, "SELECT document FROM chroma_get('cs_t035_a', ARRAY['1'])", 'after the savepoint', 20),
	'the change reached Chroma');

# --- two sessions unmirror two mirrors of the database at once
# b has keys parked in chroma_sync.resend (as after an outcome-unknown request), due in a
# few seconds; the worker looks them up when it starts
my $mb = mirror_id('b');
$node->safe_psql('postgres',
	"INSERT INTO chroma_sync.resend VALUES ($mb, '3', clock_timestamp() + interval '12 seconds')");
my $w = worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
ok(wait_for_new_worker($node, $w) ne '', 'a new worker runs');
sleep 1;
is($node->safe_psql('postgres', "SELECT count(*) FROM chroma_sync.resend WHERE not_before > clock_timestamp() + interval '3 seconds'"),
	'1', 'b\'s parked key is not due yet');

my $sa = $node->background_psql('postgres');
my $sb = $node->background_psql('postgres');
my $t0 = time();
$sa->query_safe(q{BEGIN; SELECT chroma_unmirror('a', drop_collection => true);});
$sb->query_safe(q{BEGIN; SELECT chroma_unmirror('b', drop_collection => true);});
ok(time() - $t0 < 20, sprintf('both chroma_unmirror calls returned (%.1f s)', time() - $t0));
# both transactions stay open past the time b's parked keys are due: the worker must
# leave b alone (it deleted b's resend rows and holds them) and go on with c
ok(poll_query($node, "SELECT bool_and(not_before < clock_timestamp() - interval '1 second') FROM chroma_sync.resend",
		't', 30), 'b\'s parked key is due');
$node->safe_psql('postgres', "UPDATE c SET doc = 'while a and b are being unmirrored' WHERE id = 2");
is($node->safe_psql('postgres', "SELECT chroma_flush('c', interval '15 seconds')", timeout => 30), 't',
	'the other mirror is synced while both unmirror transactions are open (the worker did not wait for b)');
is($node->safe_psql('postgres',
		q{SELECT coalesce(wait_event_type, '') <> 'Lock' FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'}),
	't', 'the worker does not wait for a lock held by an unmirror');
$sa->query_safe('COMMIT');
$sb->query_safe('COMMIT');
$sa->quit;
$sb->quit;
is($node->safe_psql('postgres', q{SELECT string_agg(source::text, ',') FROM chroma_sync.mirror}), 'c',
	'a and b are unmirrored');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'chroma_sync%'
	AND tgrelid IN ('a'::regclass, 'b'::regclass)}), '0', 'their triggers are gone');
is($node->safe_psql('postgres', q{SELECT (SELECT count(*) FROM chroma_sync.queue WHERE mirror_id <> ALL (SELECT mirror_id FROM chroma_sync.mirror))
	+ (SELECT count(*) FROM chroma_sync.resend WHERE mirror_id <> ALL (SELECT mirror_id FROM chroma_sync.mirror))
	+ (SELECT count(*) FROM chroma_sync.failed WHERE mirror_id <> ALL (SELECT mirror_id FROM chroma_sync.mirror))}),
	'0', 'nothing of theirs is left in queue, resend, failed');
for my $t (qw(a b))
{
	ok(wait_for("cs_t035_$t dropped", 10, sub {
		$node->safe_psql('postgres', "SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t035_$t'") eq '0' }),
		"collection cs_t035_$t is dropped");
}

# --- two unmirrors in one transaction, the worker busy with the second's backlog
for my $t (qw(a b))
{
	fresh_collection($node, "cs_t035_$t");
	mirror($node, $t, "cs_t035_$t");
}
is($node->safe_psql('postgres', "SELECT chroma_flush(NULL, interval '60 seconds')"), 't', 'mirrored again');
set_conf($node, 'chroma_sync.batch_size', '2');
set_conf($node, 'chroma_sync.test_stall', '2000');
$node->safe_psql('postgres', "UPDATE b SET doc = 'backlog ' || id");
ok(poll_query($node, "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker' AND wait_event = 'Extension'", 't', 10),
	'the worker stalls with a batch of b');
$t0 = time();
$node->safe_psql('postgres', q{BEGIN; SELECT chroma_unmirror('a'); SELECT chroma_unmirror('b', drop_collection => true); COMMIT;},
	timeout => 120);
my $took = time() - $t0;
ok($took < 12, sprintf('both unmirrors of one transaction returned in %.1f s (a batch stalls 2 s)', $took));
my $n0 = $node->safe_psql('postgres', q{SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t035_b'});
is($n0, '0', 'b\'s collection is dropped at commit');
sleep 3;
is($node->safe_psql('postgres', q{SELECT count(*) FROM chroma_list_collections() WHERE name = 'cs_t035_b'}), '0',
	'and no write of the worker creates it again');
set_conf($node, 'chroma_sync.test_stall', '0');
set_conf($node, 'chroma_sync.batch_size', '500');

$node->safe_psql('postgres', "UPDATE c SET doc = 'the end' WHERE id = 3");
assert_equal($node, 'c', 'cs_t035_c');
finish($node, $log0);
