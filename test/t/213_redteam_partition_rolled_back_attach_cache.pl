# Red-team repro (partitioned mirrors): a backend's capture cache outlives a rolled-back
# transaction that re-attached a partition with its columns in another order.
#
# Sequence, in one session (rows with an even id are in rb1: k = 1 + id % 2):
#   BEGIN;
#   ALTER TABLE rb DETACH PARTITION rb1;
#   -- rb1's embedding and its unmirrored column alt (same type) swap names
#   ALTER TABLE rb1 RENAME embedding TO tmp; ... RENAME alt TO embedding; ... RENAME tmp TO alt;
#   ALTER TABLE rb ATTACH PARTITION rb1 FOR VALUES IN (1);
#   UPDATE rb1 SET doc = ... WHERE id = 2;    -- the trigger caches rb1's attnums by name
#   ROLLBACK;                                 -- rb1 is as before; nothing bumps the cache
#   UPDATE rb SET embedding = ... WHERE id = 4;   -- committed
#
# trigger.c caches what it captures per (mirror, relid), mapped by column name when it is
# filled, and drops the cache only when the configuration generation changes. The
# ALTER TABLEs bump the generation before the UPDATE fills the cache; the ROLLBACK does not
# bump it (chroma_config_xact_end(false)). The committed UPDATE is then compared on the
# attnum of rb1's "alt" column instead of "embedding": no change seen, nothing queued.
#
# Observed: the committed embedding change never reaches Chroma; chroma_flush returns true
# and chroma_verify reports different = 1 (the status says syncing, nothing pending).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use ChromaSyncTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_node('rt213');
my $log0 = log_offset($node);
fresh_collection($node, 'rt213_rb');
$node->safe_psql('postgres', q{
CREATE TABLE rb (id int, k int, embedding real[], doc text, alt real[], PRIMARY KEY (id, k))
	PARTITION BY LIST (k);
CREATE TABLE rb1 PARTITION OF rb FOR VALUES IN (1);
CREATE TABLE rb2 PARTITION OF rb FOR VALUES IN (2);
INSERT INTO rb SELECT g, 1 + g % 2, ARRAY[g, 1]::real[], 'doc ' || g, ARRAY[0, 0]::real[]
	FROM generate_series(1, 10) g;
SELECT chroma_mirror('rb', collection => 'rt213_rb', document_column => 'doc');
});
is($node->safe_psql('postgres', "SELECT chroma_flush('rb', interval '60 seconds')"), 't', 'backfilled');
is($node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('rb')}),
	'10|0|0|0', 'the collection matches after the backfill');

# one session: the rolled-back re-attach, then a committed change of a partition's row
my ($out, $err) = ('', '');
$node->psql('postgres', q{
BEGIN;
ALTER TABLE rb DETACH PARTITION rb1;
ALTER TABLE rb1 RENAME embedding TO tmp;
ALTER TABLE rb1 RENAME alt TO embedding;
ALTER TABLE rb1 RENAME tmp TO alt;
ALTER TABLE rb ATTACH PARTITION rb1 FOR VALUES IN (1);
UPDATE rb1 SET doc = 'inside' WHERE id = 2;
ROLLBACK;
UPDATE rb SET embedding = ARRAY[42, 42]::real[] WHERE id = 4;
}, stdout => \$out, stderr => \$err, on_error_stop => 1);
is($err, '', 'the statements ran') or diag($err);
is($node->safe_psql('postgres', q{SELECT embedding FROM rb WHERE id = 4}), '{42,42}', 'the change is committed');

is($node->safe_psql('postgres', "SELECT chroma_flush('rb', interval '60 seconds')"), 't', 'flushed');
my $v = $node->safe_psql('postgres', q{SELECT rows, missing, extra, different FROM chroma_verify('rb')});
is($v, '10|0|0|0', 'a committed embedding change after a rolled-back re-attach reaches the collection')
  or diag('chroma_verify rows|missing|extra|different: ' . $v);

finish($node, $log0);
