# The backfill watermark names the backfill it belongs to. A worker's page read before a
# chroma_resync and finished after it started from the first row (NULL) like the page of
# the restarted backfill, so the stale page moved the new backfill's watermark: with a
# one-page table the restarted backfill was marked done at once, with the configuration
# read before the resync (here: without the reconciliation the resync asked for, so an id
# the table lacks stayed in the collection for good while chroma_flush said caught up).
# The worker is held between reading its first page and writing the watermark by a lock
# on a chroma_sync.failed row of a key of that page (the watermark's transaction deletes it).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = new_node('backfill_generation', conf => "chroma_sync.batch_size = 50\n");
my $log0 = log_offset($node);
my $coll = 'cs_t036';
make_table($node, 'd', rows => 20, dim => 4);
fresh_collection($node, $coll);
# created paused: the lock below is in place before the backfill's first page
$node->safe_psql('postgres', qq{BEGIN;
SELECT chroma_mirror('d', collection => '$coll', document_column => 'doc', metadata_columns => '{meta}');
SELECT chroma_pause('d');
COMMIT;});
is($node->safe_psql('postgres', 'SELECT reconcile FROM chroma_sync.mirror'), 'f',
	'a new collection: the first backfill does not reconcile');
my $mid = $node->safe_psql('postgres', 'SELECT mirror_id FROM chroma_sync.mirror');
$node->safe_psql('postgres', qq{INSERT INTO chroma_sync.failed (mirror_id, source, id, error)
	VALUES ($mid, 'd'::regclass, '5', 'placed by the test')});

sub hold_and_resync
{
	my ($what, $before_release) = @_;
	my $lock = $node->background_psql('postgres');
	$lock->query_safe('BEGIN; SELECT 1 FROM chroma_sync.failed FOR UPDATE;');
	$what->();
	ok(poll_query($node, q{SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'chroma_sync worker'},
			'Lock', 30),
		'the worker read the first page and waits to write its watermark');
	# an id the table lacks: the resync's reconciliation deletes it
	$node->safe_psql('postgres', qq{SELECT chroma_upsert('$coll', ARRAY['stray'], ARRAY[1, 2, 3, 4]::real[])});
	is($node->safe_psql('postgres', q{SELECT chroma_resync('d')}), '20', 'chroma_resync during the backfill');
	$before_release->() if $before_release;
	$lock->query_safe('ROLLBACK');
	$lock->quit;
}

hold_and_resync(sub { $node->safe_psql('postgres', q{SELECT chroma_resume('d')}) });
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 90), 't', 'flushed');
is($node->safe_psql('postgres', q{SELECT missing, extra, different FROM chroma_verify('d')}), '0|0|0',
	'chroma_verify: the stray id is gone (the resync\'s backfill and reconciliation ran)');
is($node->safe_psql('postgres', q{SELECT reconcile, backfill_done, backfill_sent FROM chroma_sync.mirror}),
	'f|t|20', 'the restarted backfill sent every row and reconciled');

# the same with the worker terminated while it waits: the restarted backfill starts over
$node->safe_psql('postgres', qq{INSERT INTO chroma_sync.failed (mirror_id, source, id, error)
	VALUES ($mid, 'd'::regclass, '5', 'placed by the test') ON CONFLICT DO NOTHING});
hold_and_resync(sub { $node->safe_psql('postgres', q{SELECT chroma_resync('d')}) },
	sub {
		my $w = worker_pid($node);
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($w)");
		ok(wait_for_new_worker($node, $w) ne '', 'the worker was terminated while it waited');
	});
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 90), 't', 'flushed');
is($node->safe_psql('postgres', q{SELECT missing, extra, different FROM chroma_verify('d')}), '0|0|0',
	'chroma_verify after the terminated worker');

# and a crash restart in the middle of a restarted backfill
$node->safe_psql('postgres', q{SELECT chroma_resync('d')});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT chroma_flush('d', interval '60 seconds')", timeout => 90), 't',
	'flushed after a crash restart');
is($node->safe_psql('postgres', q{SELECT missing, extra, different FROM chroma_verify('d')}), '0|0|0',
	'chroma_verify after the crash restart');
$log0 = log_offset($node);
finish($node, $log0);
