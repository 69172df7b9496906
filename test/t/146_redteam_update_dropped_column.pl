# Red team: ALTER EXTENSION chroma_sync UPDATE (0.4 -> 0.5) crashes the server (SIGSEGV)
# when a 0.4 mirror has a mirrored column that was dropped.
#
# 0.4 lets a mirrored column be dropped (the mirror pauses). The update script calls
# chroma_sync.record_columns for every mirror (its comment: "A mirror that cannot be
# recorded (a mirrored column dropped already) is reported and left as it is"), i.e.
# mirror_columns_record -> set_column: get_attname() returns the dropped column's
# "........pg.dropped.N........" name, column_type() returns NULL for a dropped column,
# and store() then passes the NULL type to CStringGetTextDatum (types[i] is NULL only when
# the name is): strlen(NULL), signal 11, every backend of the cluster restarted. Not a line
# of 3e3901c, but the update path it reworks (the update is now the only thing between
# 0.4 and the worker's binding).
#
# Steps: 0.4 mirror of s with metadata column tag; ALTER TABLE s DROP COLUMN tag (0.4:
# the mirror pauses); ALTER EXTENSION chroma_sync UPDATE.
# What happens: the backend is killed by signal 11 and the cluster goes through crash
# recovery. What should happen: the update succeeds, reporting the mirror it cannot record
# (a WARNING), as its comment says.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_update_dropped_column', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }
q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t146');
q1(q{
CREATE TABLE public.s (id int PRIMARY KEY, embedding real[], pub bool, body text, tag text);
INSERT INTO public.s VALUES (1, '{1,0}', true, 'B1', 't1'), (2, '{0,1}', false, 'B2', 't2');
SELECT chroma_mirror('public.s', collection => 'cs_t146', document_column => 'body', metadata_columns => '{tag}');
});
is(q1(q{SELECT chroma_flush('public.s', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
my ($ret, $out, $err) = $node->psql('postgres', q{ALTER TABLE s DROP COLUMN tag});
note("drop: $ret $err");
note(q1(q{SELECT paused::text || ' ' || coalesce(paused_reason,'') FROM chroma_sync.mirror}));
($ret, $out, $err) = $node->psql('postgres', q{ALTER EXTENSION chroma_sync UPDATE});
note("update: $ret $err");
is($ret, 0, 'ALTER EXTENSION chroma_sync UPDATE succeeds (the mirror with a dropped column is reported, not recorded)');
finish($node, $log0);
