# Red team: a 0.4 filter that qualifies its columns with the table's schema and name
# (app.e.m = 'happy') is refused, and the mirror paused for good, when the SCHEMA is
# renamed between the update and the worker's bind; a schema rename is otherwise followed
# by every mirror (bound filters' texts are rewritten in the DDL's transaction, TAP 049).
#
# The update records the filter's columns (text_columns_walker takes nsp.rel.col with the
# schema's name then) and the table's name (filter_relname), not the schema's. After ALTER
# SCHEMA app RENAME TO app2 the table's name is unchanged, so mirror_filter_derive binds
# the text with no alias: app.e.m names a schema that no longer exists ("missing
# FROM-clause entry for table e"), and the mirror is paused "the stored filter ... is
# refused (re-create the mirror)".
#
# Steps: 0.4; mirror of app.e with filter app.e.m = 'happy' (0.4 text); in one
# transaction ALTER EXTENSION chroma_sync UPDATE and ALTER SCHEMA app RENAME TO app2.
# What happens: the mirror is paused, row 3 is not sent. What should happen: the filter is
# bound to the table in its renamed schema (the recorded columns match) and the mirror
# keeps syncing.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_update_schema_rename_qualified', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t167');
q1(q{
CREATE SCHEMA app;
CREATE TYPE public.mood AS ENUM ('sad', 'happy');
CREATE TABLE app.e (id int PRIMARY KEY, embedding real[], m public.mood);
INSERT INTO app.e VALUES (1, '{1,0}', 'happy'), (2, '{0,1}', 'sad');
SELECT chroma_mirror('app.e', collection => 'cs_t167', filter => $$app.e.m = 'happy'$$);
UPDATE chroma_sync.mirror SET filter = $$app.e.m = 'happy'$$;
});
is(q1(q{SELECT chroma_flush('app.e', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');
is(q1(q{SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM chroma_get('cs_t167')}), '1', '0.4 sends row 1');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
ALTER SCHEMA app RENAME TO app2;
COMMIT;
});
is($ret, 0, 'the update and the schema rename commit') or diag($err);

# DDL ran before the binding: confirmed, the text is read as its names read now, where
# app.e names no table: refused, the mirror paused saying to re-create it
like(confirm_04_filter($node, 'app2.e'),
	qr/^paused: the stored filter "app\.e\.m = 'happy'" is refused \(re-create the mirror\)/,
	'a text naming the old schema cannot be bound: re-create the mirror');
is(q1(q{SELECT (filter_node IS NULL)::text FROM chroma_sync.mirror}), 'true', 'nothing is bound');

finish($node, $log0);
