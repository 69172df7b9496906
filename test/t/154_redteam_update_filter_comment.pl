# Red team: a 0.4 filter that ends in a line comment (m = 'happy' -- happy only) is
# bound and used fine by chroma_sync, but the update cannot record its columns, and the
# worker then refuses it: the mirror is paused for good after ALTER EXTENSION UPDATE.
#
# The binder parses a filter alone (mirror_filter.c parse_one_expression,
# RAW_PARSE_PLPGSQL_EXPR), where a trailing "-- ..." is a comment. The update's column
# recording (mirror_columns.c mirror_filter_attnums) parses
# psprintf("SELECT 1 FROM ONLY %s WHERE (%s)", table, filter): the comment swallows the
# closing parenthesis, a syntax error; the update warns and records no columns; the worker's
# check_04_text refuses ("the mirror's columns were not recorded") and the mirror pauses.
#
# Steps: 0.4; mirror of public.e with filter "m = 'happy' -- happy only" (0.4 text, syncs);
# ALTER EXTENSION chroma_sync UPDATE. What happens: WARNING at the update, the mirror is
# paused, row 3 not sent. What should happen: the columns are recorded (the text parsed as
# the binder parses it, or on a line of its own), the filter binds, the mirror syncs.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_filter_comment', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t154');
q1(q{
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO public.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('public.e', collection => 'cs_t154', filter => $$m = 'happy' -- happy only$$);
UPDATE chroma_sync.mirror SET filter = $$m = 'happy' -- happy only$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t154')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
ALTER EXTENSION chroma_sync UPDATE;
});
is($ret, 0, 'the update commits') or diag($err);
note("the update said: $err");

ok(wait_for('the worker binds or pauses', 60, sub {
	q1(q{SELECT (filter_node IS NOT NULL OR paused)::text FROM chroma_sync.mirror}) eq 'true' }),
	'the worker has seen the mirror');
sleep 2;
note('stored: ' . q1(q{SELECT 'bound=' || (filter_node IS NOT NULL)::text || ' paused=' || paused::text || ' '
	|| coalesce(paused_reason, '') || ' / ' || coalesce(last_error, '') || ' types=' || column_types::text FROM chroma_sync.mirror}));
is(q1(q{SELECT paused::text FROM chroma_sync.mirror}), 'false', 'the update does not leave the mirror paused');
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', 'happy')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t154') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
