# Red team: chroma_create_collection's 0A000 path (collections.c) asks whether the
# collection exists (GET), then creates it with get_or_create (POST), then, when the
# collection the server answered with has another index than the configuration names,
# deletes the collection BY NAME. Between the GET and the POST another session may create
# the collection: the POST returns that one (get_or_create), its index is "hnsw", not
# "spann", and the refusal deletes the other session's collection with its records.
#
# Steps: session A calls chroma_create_collection('cs_t198', configuration =>
# '{"spann": {"search_nprobe": 4}}') in a loop (refused with 0A000 every time). Session B,
# meanwhile, in a loop: deletes cs_t198, creates it with get_or_create => false (so a
# success means B created it), upserts one record, waits 50 ms, counts.
# What happened: B's collections vanish (in a 60 s run, 241 of them; some after B's record
# was in them, most before B's upsert reached them: "Chroma could not find what was needed
# to upsert records"): A's refusal deleted them. Only A deletes while B's collection exists.
# What should happen: the refusal deletes only the collection the call itself created
# (create with get_or_create false, delete by id); B's collections keep their records.
# Fixed (see the commit of red team 196-200).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_config_refusal_deletes_other');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t198');
my $secs = 20;

my ($aout, $aerr) = ('', '');
my $a = IPC::Run::start(
	[ 'psql', '-X', '-q', '-At', '-d', $node->connstr('postgres'), '-c', qq{
DO \$\$
DECLARE t0 timestamptz := clock_timestamp(); n int := 0;
BEGIN
	WHILE clock_timestamp() < t0 + interval '$secs seconds' LOOP
		BEGIN
			PERFORM chroma_create_collection('cs_t198', configuration => '{"spann": {"search_nprobe": 4}}');
		EXCEPTION WHEN OTHERS THEN n := n + 1;
		END;
	END LOOP;
	RAISE NOTICE 'A: % refusals', n;
END
\$\$} ],
	'>', \$aout, '2>', \$aerr);

my $b = $node->safe_psql('postgres', qq{
CREATE TEMP TABLE lost (id text);
DO \$\$
DECLARE t0 timestamptz := clock_timestamp(); made int := 0; id uuid;
BEGIN
	WHILE clock_timestamp() < t0 + interval '$secs seconds' LOOP
		PERFORM chroma_delete_collection('cs_t198', true);
		BEGIN
			id := chroma_create_collection('cs_t198', get_or_create => false);
		EXCEPTION WHEN OTHERS THEN CONTINUE;	-- A's collection of the moment
		END;
		made := made + 1;
		BEGIN
			PERFORM chroma_upsert('cs_t198', ARRAY['b1'], ARRAY[[1,2,3]]::real[]);
			PERFORM pg_sleep(0.05);
			IF (chroma_collection('cs_t198')->>'id')::uuid IS DISTINCT FROM id
				OR chroma_count('cs_t198') <> 1 THEN
				INSERT INTO lost VALUES (id::text);
			END IF;
		EXCEPTION WHEN OTHERS THEN
			INSERT INTO lost VALUES (id::text || ': ' || SQLERRM);
		END;
	END LOOP;
	RAISE NOTICE 'B: % collections made', made;
END
\$\$;
SELECT count(*) || ' lost (' || count(*) FILTER (WHERE id NOT LIKE '%:%')
	|| ' after B''s record was in them); first: '
	|| coalesce((SELECT string_agg(id, '; ') FROM (SELECT id FROM lost LIMIT 3) f), '') FROM lost});
$a->finish;
note("A: $aerr");
note("B: $b");
like($b, qr/^0 lost/, "no collection B created and filled vanished");

assert_no_crash($node, $log0);
done_testing();
