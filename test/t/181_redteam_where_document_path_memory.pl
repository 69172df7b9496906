# Red team: the where_document check of chroma_query, chroma_query_batch and chroma_get
# (read_filters.c, check_document_list) builds the path of every element it visits with
# psprintf("%s -> %d", path, i) and keeps them all until the call ends: a filter nested d
# levels deep allocates about d * d * 10 bytes. A where_document of about 60 kB, $and
# nested 5,000 deep with an unknown operator at the bottom, takes the backend's peak memory
# from about 15 MB to several hundred MB (measured: 4,000 deep 254 MB, 6,000 deep 549 MB, 4
# seconds) before the check says 22023; any role granted chroma_query can do it on every
# call. (chroma_delete_where's check, where_document.c, builds no paths: its memory stays
# flat for the same argument.)
#
# Steps: one session reads its own VmHWM (/proc/<pid>/status), calls chroma_query with the
# 5,000-deep where_document, reads VmHWM again.
# What happens: ERROR 22023 (unknown operator), and the peak grew by hundreds of MB.
# What should happen: the same ERROR, with the peak grown by a few MB at most (the path
# built once, when there is an error to report, or kept in one buffer).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use ChromaSyncTest;

my $node = new_node('redteam_where_document_path_memory');
my $log0 = log_offset($node);
fresh_collection($node, 'cs_t181');
$node->safe_psql('postgres', q{SELECT chroma_create_collection('cs_t181')});

my $depth = 5000;
my $hwm = q{SELECT 'hwm', substring(pg_read_file('/proc/' || pg_backend_pid() || '/status')
	FROM 'VmHWM:\s*(\d+) kB')};
my ($ret, $out, $err) = $node->psql('postgres', qq{$hwm;
SELECT * FROM chroma_query('cs_t181', ARRAY[1, 0]::real[], 1, NULL,
	(repeat('{"\$and": [', $depth) || '{"\$like": "a"}' || repeat(']}', $depth))::jsonb);
$hwm;}, on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
my @kb = $out =~ /^hwm\|(\d+)$/mg;
note("VmHWM before and after: @kb kB; error: " . substr($err, 0, 200));
like($err, qr/ERROR:  22023:/, 'the where_document is refused with 22023');
is(scalar @kb, 2, 'both peaks were read');
my $grown_mb = @kb == 2 ? ($kb[1] - $kb[0]) / 1024 : -1;
cmp_ok($grown_mb, '<', 64,
	sprintf('checking a %d-deep where_document grew the peak by %.0f MB (under 64 MB)',
		$depth, $grown_mb));

assert_no_crash($node, $log0);
done_testing();
