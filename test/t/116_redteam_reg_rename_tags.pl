# Red team: "the object a reg* constant names ('public.myconf'::regconfig, a regclass,
# regprocedure...) is a dependency of the mirror's trigger; renaming one ... rewrites the
# filter's text in the same transaction" — the DDL event trigger fires only on the tags it
# lists (ALTER TABLE, VIEW, MATERIALIZED VIEW, FUNCTION, ROUTINE, TYPE, ...). A regclass
# constant naming a sequence or an index is renamed by ALTER SEQUENCE / ALTER INDEX, a
# regprocedure naming a procedure by ALTER PROCEDURE: none of those tags fires the
# trigger, so the stored text keeps the old name (until some unrelated DDL happens to
# re-deparse it). A dump taken meanwhile names objects that do not exist: the restored
# copy cannot adopt the mirror.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('redteam_reg_rename_tags');
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

my %filter = (
	rs => q{'public.seq1'::regclass IS NOT NULL AND id > 0},
	ri => q{'public.ri_pkey'::regclass IS NOT NULL AND id > 0},
	rp => q{'public.p1()'::regprocedure IS NOT NULL AND id > 0});
q1(q{
CREATE SEQUENCE public.seq1;
CREATE PROCEDURE public.p1() LANGUAGE sql AS $$SELECT 1$$;
});
for my $t (sort keys %filter)
{
	fresh_collection($node, "cs_t116_$t");
	q1(qq{CREATE TABLE public.$t (id int PRIMARY KEY, embedding real[]);
INSERT INTO public.$t VALUES (1, '{1,0}');
SELECT chroma_mirror('public.$t', collection => 'cs_t116_$t', filter => \$\$$filter{$t}\$\$);});
}
is($node->safe_psql('postgres', q{SELECT chroma_flush(NULL, interval '60 seconds')}, timeout => 90), 't',
	'the mirrors flush');

q1(q{ALTER SEQUENCE public.seq1 RENAME TO seq2});
like(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.rs'::regclass}), qr/seq2/,
	'ALTER SEQUENCE ... RENAME: the stored text names the sequence by its new name');
q1(q{ALTER INDEX public.ri_pkey RENAME TO ri_pk});
like(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.ri'::regclass}), qr/ri_pk'/,
	'ALTER INDEX ... RENAME: the stored text names the index by its new name');
q1(q{ALTER PROCEDURE public.p1() RENAME TO p2});
like(q1(q{SELECT filter FROM chroma_sync.mirror WHERE source = 'public.rp'::regclass}), qr/p2\(\)/,
	'ALTER PROCEDURE ... RENAME: the stored text names the procedure by its new name');
note('stored: ' . q1(q{SELECT string_agg(filter, ' | ' ORDER BY mirror_id) FROM chroma_sync.mirror}));

q1(q{SELECT chroma_pause(source) FROM chroma_sync.mirror});
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/t116.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'postgres' ], 'pg_dump -Fc');
q1('CREATE DATABASE copy116');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'copy116', $dump ], 'pg_restore into copy116');
for my $t (sort keys %filter)
{
	my ($ret, $out, $err) = $node->psql('copy116', qq{SELECT chroma_adopt('public.$t')});
	note("chroma_adopt('public.$t') in the copy: ret=$ret err=$err");
	is($ret, 0, "the restored copy of $t adopts");
}

finish($node, $log0);
