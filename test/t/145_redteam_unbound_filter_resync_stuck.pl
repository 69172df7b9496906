# Red team: a 0.4 mirror paused for an intended change of another column (a metadata
# column renamed) before the worker bound its filter is stuck: the status says "run
# chroma_resync()", chroma_resync says "wait for the worker", and the worker never binds.
#
# The paused mirror's filter is bound by the worker only when m->column_problem is NULL
# (sync.c, sync_mirror_step), even when the problem is not the filter's (its columns are
# intact, mirror_columns_filter_intact). chroma_resync, the fix the status names for a
# metadata rename (MIRROR_FIX_RESYNC), evaluates the filter (mirror_present_sql ->
# mirror_filter_bound -> check_04_text) and refuses: "the filter of mirror N, stored by
# chroma_sync 0.4, is not bound yet", hint "Wait for the worker". Waiting never helps.
#
# Steps: 0.4 mirror of s with metadata column tag (text) and filter 'pub' (0.4 text); in
# the update's transaction, tag renamed to label (intended). The mirror pauses ("metadata
# column "tag" was renamed ... run chroma_resync()"). chroma_resync, 10 s later, again.
# What happens: chroma_resync fails both times with "not bound yet ... Wait for the
# worker"; the filter stays unbound. What should happen: the worker binds the filter (its
# column pub is intact) and chroma_resync records the new name and resends, as the status
# says (or the status names the way out).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_resync_stuck', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t145');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, body text, tag text);
INSERT INTO public.s VALUES (1, '{1,0}', true, 'B1', 't1'), (2, '{0,1}', false, 'B2', 't2');
SELECT chroma_mirror('public.s', collection => 'cs_t145', document_column => 'body',
	metadata_columns => '{tag}', filter => 'pub');
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE s RENAME tag TO label;
COMMIT;
});
is($ret, 0, 'the update and the rename commit') or diag($err);
ok(poll_query($node, q{SELECT state FROM chroma_sync.status}, 'paused', 30), 'the mirror is paused');
my $reason = q1(q{SELECT paused_reason FROM chroma_sync.mirror});
note("paused_reason: $reason");
like($reason, qr/chroma_resync/, 'the status says to run chroma_resync() if the rename is intended');

# DDL ran after the update (the rename): the worker binds the text only once confirmed,
# and chroma_resync says how
($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resync('public.s')});
isnt($ret, 0, 'chroma_resync cannot evaluate the unbound filter');
like($err, qr/is not bound yet/, '... not bound yet');
like($err, qr/run chroma_resume\('public\.s'\) to have the worker bind it as they read now, then this again/,
	'... and the hint gives the way out');
($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resume('public.s')});
like($err, qr/NOTICE:  the sync worker binds the filter "pub" of this mirror, stored by chroma_sync 0\.4, as its names read now/,
	'chroma_resume says it confirms the text');
ok(wait_for('the filter bound', 60, sub { q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}) eq 'true' }),
	'confirmed, the worker binds the filter (its column is intact)');
($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resync('public.s')});
is($ret, 0, 'chroma_resync records the intended rename (the worker has bound the filter, whose column is intact)')
	or diag($err);
is(q1(q{SELECT (filter_node IS NOT NULL)::text FROM chroma_sync.mirror}), 'true',
	'the filter of the paused mirror is bound: its columns did not change');

finish($node, $log0);
