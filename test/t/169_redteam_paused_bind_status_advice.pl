# Red team (minor, diagnostics): when the worker's bind of a paused mirror's 0.4 filter
# fails, chroma_sync.status shows "the stored filter ... is refused (re-create the
# mirror)" instead of the pause reason, whose advice (undo the rename, chroma_resume) is
# the one that works.
#
# run_step (worker.c) keeps paused_reason for a mirror already paused, but still records
# the failure in last_error, prefixed "re-create the mirror" (m->filter_invalid), and the
# status view shows last_error whenever it is set. So the status of a mirror paused for a
# renamed filter column says to re-create the mirror, though undoing the rename and
# chroma_resume() bind the filter and resume it (as this test shows).
#
# Steps: 0.4; mirror of public.s with filter pub (0.4 text); ALTER EXTENSION chroma_sync
# UPDATE; ALTER TABLE s RENAME pub TO published (the mirror pauses: undo the change and run
# chroma_resume()); the worker's paused bind fails (column "pub" does not exist). What
# happens: chroma_sync.status.last_error says "re-create the mirror". What should happen:
# the status keeps the pause reason's advice (undo the change...).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_paused_bind_status_advice', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t169');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public.s VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public.s', collection => 'cs_t169', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE public.s RENAME pub TO published;
COMMIT;
});
is($ret, 0, 'the update and the rename commit') or diag($err);
sleep 3;
note('status: ' . q1(q{SELECT state || ' / ' || coalesce(last_error, '') FROM chroma_sync.status}));
unlike(q1(q{SELECT coalesce(last_error, '') FROM chroma_sync.status}), qr/re-create the mirror/,
	'the status does not tell to re-create the mirror');
like(q1(q{SELECT coalesce(last_error, '') FROM chroma_sync.status}), qr/undo the change/,
	'the status keeps the pause reason\'s advice');

q1(q{ALTER TABLE public.s RENAME published TO pub});
is(resume_04_filter($node, 'public.s'), 'bound', 'after the undo, confirmed, the filter is bound');
q1(q{INSERT INTO public.s VALUES (3, '{1,1}', true)});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t169') WHERE id = '3'}) eq '1' }),
	'after the undo and chroma_resume the mirror syncs');

finish($node, $log0);
