# Red team (minor, diagnostics): a 0.4 mirror whose metadata column and filter column were
# both renamed before the worker bound its filter is paused with a reason that names only
# the metadata rename and its fix ("if the change is intended, run chroma_resync()"), which
# cannot work: chroma_resync fails with 'column "pub" does not exist', every time. The
# filter column's rename, the thing to undo (or to unmirror for), is named nowhere in the
# status.
#
# mirror_columns_resolve keeps the first problem (set_problem); metadata columns come
# before filter columns, so the filter's rename (MIRROR_FIX_UNDO) is shadowed by the
# metadata rename (MIRROR_FIX_RESYNC); record_columns_as_they_are's check passes on that fix,
# and the 0.4 text then fails when chroma_resync reads it.
#
# Steps: 0.4 mirror of s with metadata column tag and filter 'pub' (0.4 text); in the
# update's transaction tag renamed to label and pub to published. What happens: paused
# "metadata column tag was renamed ... run chroma_resync()"; chroma_resync fails twice,
# 10 s apart. What should happen: the pause reason names the filter column's rename (undo
# it), or chroma_resync, which it names, succeeds.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_resync_shadowed_filter_rename', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t157');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, body text, tag text);
INSERT INTO public.s VALUES (1, '{1,0}', true, 'B1', 't1'), (2, '{0,1}', false, 'B2', 't2');
SELECT chroma_mirror('public.s', collection => 'cs_t157', document_column => 'body',
	metadata_columns => '{tag}', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER TABLE s RENAME tag TO label;
ALTER TABLE s RENAME pub TO published;
COMMIT;
});
is($ret, 0, 'the update and the renames commit') or diag($err);
ok(poll_query($node, q{SELECT state FROM chroma_sync.status}, 'paused', 30), 'the mirror is paused');
sleep 5;
my $reason = q1(q{SELECT paused_reason FROM chroma_sync.mirror});
note("paused_reason: $reason");
my $ok = 0;
for my $try (1 .. 2)
{
	($ret, $out, $err) = $node->psql('postgres', q{SELECT chroma_resync('public.s')});
	note("chroma_resync: ret=$ret $err");
	$ok = 1 if $ret == 0;
	last if $ok;
	sleep 10;
}
ok($ok || $reason =~ /\bpub\b/,
	'the pause reason names the filter column\'s rename, or chroma_resync (which it names) works');

finish($node, $log0);
