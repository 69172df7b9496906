# Red team: the update's column recording reads a 0.4 filter with the updating session's
# standard_conforming_strings, though the commit under review says the raw parse tree is
# what "no setting of this session changes" (TAP 143 was the same defect with DateStyle).
#
# mirror_filter_attnums (src/mirror_columns.c) runs raw_parser on the 0.4 text; the lexer
# reads backslashes in '...' literals by standard_conforming_strings (and backslash_quote).
# With it off in the updating session, the filter dir <> 'C:\' (which the worker, and 0.4,
# read with the default on) is an unterminated literal: the update warns "could not record
# the columns", and the worker's check_04_text then refuses the filter ("the mirror's
# columns were not recorded"): the mirror is paused for good.
#
# Steps: 0.4; mirror of public.e with filter dir <> 'C:\' (0.4 text; sends row 1); in a
# session with SET standard_conforming_strings = off: ALTER EXTENSION chroma_sync UPDATE.
# What happens: the mirror is paused, row 3 not sent. What should happen: the columns are
# recorded whatever the session's settings (lexed as the worker lexes the text), the filter
# binds, the mirror syncs.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_record_scs', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t155');
q1(q{
CREATE TABLE public.e (id int PRIMARY KEY, embedding real[], dir text);
INSERT INTO public.e VALUES (1, '{1,0}', 'C:\data'), (2, '{0,1}', 'C:\');
SELECT chroma_mirror('public.e', collection => 'cs_t155', filter => $$dir <> 'C:\'$$);
UPDATE chroma_sync.mirror SET filter = $$dir <> 'C:\'$$;
});
is(q1(q{SELECT chroma_flush('public.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t155')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
SET standard_conforming_strings = off;
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
q1(q{INSERT INTO public.e VALUES (3, '{1,1}', 'D:\x')});
ok(wait_for('row 3 arrives', 30, sub { q1(q{SELECT count(*) FROM chroma_get('cs_t155') WHERE id = '3'}) eq '1' }),
	'the mirror keeps syncing');

finish($node, $log0);
