# Red team: "DDL that changes what would be sent pauses the mirror" (the DDL trigger, in
# the DDL's own transaction) — not when the ALTER TABLE is made on the partitioned parent
# of a mirrored partition: pg_event_trigger_ddl_commands() reports the parent's OID alone,
# so chroma_sync.columns_changed is never called for the partition. The same ALTER made
# on a table that is not a partition pauses its mirror at once.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_partition_alter_type');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

fresh_collection($node, $_) for qw(cs_t100a cs_t100b);
q1(q{
CREATE TABLE public.p (id int, embedding real[], body text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE public.p1 PARTITION OF public.p FOR VALUES FROM (0) TO (100);
CREATE TABLE public.q (id int PRIMARY KEY, embedding real[], body text);
INSERT INTO public.p VALUES (1, '{1,0}', 'B1');
INSERT INTO public.q VALUES (1, '{1,0}', 'B1');
SELECT chroma_mirror('public.p1', collection => 'cs_t100a', document_column => 'body');
SELECT chroma_mirror('public.q', collection => 'cs_t100b', document_column => 'body');
});
is(q1(q{SELECT chroma_flush('public.p1', interval '60 seconds')}), 't', 'p1 flushes');
is(q1(q{SELECT chroma_flush('public.q', interval '60 seconds')}), 't', 'q flushes');

# control: on a mirrored table itself, its mirror pauses in the same transaction
q1(q{ALTER TABLE q ALTER COLUMN body TYPE varchar(10)});
is(q1(q{SELECT paused FROM chroma_sync.mirror WHERE collection = 'cs_t100b'}), 't',
	'a type change made on the mirrored table pauses its mirror');

# a partition's column type changes only through its parent
q1(q{ALTER TABLE p ALTER COLUMN body TYPE varchar(10)});
is(q1(q{SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'p1'::regclass AND attname = 'body'}),
	'character varying(10)', 'the partition\'s column changed type with the parent\'s');
is(q1(q{SELECT paused FROM chroma_sync.mirror WHERE collection = 'cs_t100a'}), 't',
	'a type change made through the partitioned parent pauses the partition\'s mirror too');

finish($node, $log0);
