# Red team: the bind of a paused mirror's 0.4 filter is retried on every pass of the
# worker's loop, not "once per loaded configuration", and each failure is logged and
# written to the mirror row again.
#
# sync_mirror_step (sync.c) guards the paused bind with m->paused_bind_tried, "once per
# loaded configuration". But the worker builds its MirrorConfigs again at the top of every
# pass of its loop (worker.c: load_mirrors, in loop_ctx, which is reset each pass), so the
# flag is always false; and the paused branch ignores st->next_attempt, so the failure's
# backoff does not apply either. A 0.4 filter that cannot be bound (here: the function it
# calls was dropped while 0.4 recorded no dependency) makes the worker parse and fail it,
# log "mirror of ... paused: the stored filter ... is refused", and UPDATE the mirror row
# (last_error_at, paused_reason: the user's "paused by chroma_pause()" is overwritten)
# every pass: every retry delay (2 s here), and back to back while another mirror of the
# database has work. No configuration changed meanwhile (no chroma_bump_config).
#
# Steps: 0.4; mirror of s with filter 'public.is_pub(pub)' (0.4 text); chroma_pause; DROP
# FUNCTION public.is_pub; ALTER EXTENSION chroma_sync UPDATE; wait 20 s.
# What happens: ~10 identical LOG lines and row updates. What should happen: the bind is
# tried once (per configuration change), one LOG line; the mirror stays paused.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_paused_bind_retry_spam', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t141');
q1(q{
CREATE FUNCTION public.is_pub(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, body text);
INSERT INTO public.s VALUES (1, '{1,0}', true, 'B1'), (2, '{0,1}', false, 'B2');
SELECT chroma_mirror('public.s', collection => 'cs_t141', document_column => 'body', filter => 'public.is_pub(pub)');
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = 'public.is_pub(pub)';
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t141')}),
	'1:B1', '0.4 sends row 1');

q1(q{SELECT chroma_pause('public.s')});
# 0.4 recorded no dependency on the function
q1(q{DROP FUNCTION public.is_pub(bool)});
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
my $off = log_offset($node);
my $gen0 = q1(q{SELECT last_error_at FROM chroma_sync.mirror});
sleep 20;

my @lines = grep { /mirror of "cs_t141" (?:paused|failed): the stored filter/ } split /\n/, slurp_file($node->logfile, $off);
note(scalar(@lines) . " failure lines in 20 s; the first: " . ($lines[0] // '(none)'));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'true', 'the mirror stays paused');
is(q1(q{SELECT paused_reason FROM chroma_sync.mirror}), 'paused by chroma_pause()',
	'the reason stays the one chroma_pause gave (the failure is the last error)');
like(q1(q{SELECT coalesce(last_error, '') FROM chroma_sync.mirror}), qr/the stored filter/, '... and the failure is its last error');
cmp_ok(scalar(@lines), '>=', 1, 'the worker tried the bind and reported the failure');
cmp_ok(scalar(@lines), '<=', 2,
	'the failing bind of a paused mirror is tried once per configuration, not on every pass of the loop');

finish($node, $log0);
