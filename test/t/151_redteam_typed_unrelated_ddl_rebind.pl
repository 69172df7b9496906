# Red team: with a mirror of a typed table in the database, every non-table DDL of any
# role (ALTER FUNCTION on one's own function) bumps the configuration generation, though
# nothing of any mirror changed; a paused mirror's failing 0.4 bind is then tried, logged
# and written to the mirror row again after each such command: an unprivileged role can
# flood the log and the mirror row at will.
#
# chroma_sync_filters_renamed (src/ddl.c), run by the ddl_command_end trigger (SECURITY
# DEFINER) after ALTER FUNCTION, ALTER TYPE, ALTER SCHEMA..., calls mirror_columns_apply for
# every mirror of a typed table and sets types_renamed = true unconditionally, so
# chroma_bump_config() runs after every such DDL. sync_mirror_step retries a paused
# mirror's 0.4 bind "once per configuration generation" (st->paused_bind_generation, the
# fix of TAP 141): each bump makes a new attempt and a new failure.
#
# Steps: 0.4; typed table s OF s_t, mirrored with filter 'public.is_pub(pub)' (0.4 text);
# chroma_pause; DROP FUNCTION public.is_pub; ALTER EXTENSION chroma_sync UPDATE (one failure
# logged); then role alice (no rights on s or the extension) runs ALTER FUNCTION
# alice.f() COST n eight times. What happens: one more failure line (and row update) per
# ALTER FUNCTION. What should happen: unrelated DDL changes no configuration: no new
# attempt (at most one).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_typed_unrelated_ddl_rebind', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t151');
q1(q{
CREATE FUNCTION public.is_pub(b bool) RETURNS bool IMMUTABLE LANGUAGE sql AS 'SELECT b';
CREATE TYPE public.s_t AS (id int, embedding real[], pub bool, body text);
CREATE TABLE public.s OF public.s_t (PRIMARY KEY (id));
INSERT INTO public.s VALUES (1, '{1,0}', true, 'B1'), (2, '{0,1}', false, 'B2');
SELECT chroma_mirror('public.s', collection => 'cs_t151', document_column => 'body', filter => 'public.is_pub(pub)');
-- as 0.4 stored it: the text as written
UPDATE chroma_sync.mirror SET filter = 'public.is_pub(pub)';
CREATE ROLE alice LOGIN;
CREATE SCHEMA alice AUTHORIZATION alice;
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id || ':' || document, ',' ORDER BY id), '') FROM chroma_get('cs_t151')}),
	'1:B1', '0.4 sends row 1');

q1(q{SELECT chroma_pause('public.s')});
# 0.4 recorded no dependency on the function
q1(q{DROP FUNCTION public.is_pub(bool)});
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION chroma_sync UPDATE');
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE') or diag($err);
ok(wait_for('the first failure', 30, sub {
	q1(q{SELECT coalesce(last_error, '') FROM chroma_sync.mirror}) =~ /the stored filter/ }),
	'the worker tried the bind once and recorded the failure');
sleep 3;
# control: without DDL, no new attempt (the fix of TAP 141 holds)
my $offc = log_offset($node);
sleep 12;
my @quiet = grep { /mirror of "cs_t151" (?:paused|failed): the stored filter/ } split /\n/, slurp_file($node->logfile, $offc);
is(scalar(@quiet), 0, 'control: no new attempt in 12 s without DDL');
q1(q{SET ROLE alice; CREATE FUNCTION alice.f() RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT 1'});
sleep 3;
my $off = log_offset($node);
my $at0 = q1(q{SELECT last_error_at FROM chroma_sync.mirror});
for my $n (1 .. 8)
{
	q1(qq{SET ROLE alice; ALTER FUNCTION alice.f() COST $n});
	sleep 1.5;
}
sleep 3;
my @lines = grep { /mirror of "cs_t151" (?:paused|failed): the stored filter/ } split /\n/, slurp_file($node->logfile, $off);
note(scalar(@lines) . " failure lines after alice's 8 ALTER FUNCTION; the first: " . ($lines[0] // '(none)'));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'true', 'the mirror stays paused');
cmp_ok(scalar(@lines), '<=', 1,
	'another role\'s unrelated ALTER FUNCTION does not make the worker try the failing bind again');
is(q1(qq{SELECT (last_error_at = '$at0')::text FROM chroma_sync.mirror}), 'true',
	'... nor write the mirror row again');

finish($node, $log0);
