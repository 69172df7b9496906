# Red team: the pause reason of a 0.4 text filter flagged for DDL after the update says
# "run chroma_resume('<table>') to bind it so", with the table's name quoted as an
# identifier but not as a string literal: for a table whose name has a single quote
# (public."o'brien") the advice reads chroma_resume('public."o'brien"'), which is not valid
# SQL; run as written it fails with a syntax error. (The same quoting is used by the hint
# of chroma_sync_filter.match / chroma_resync for such a filter.)
#
# Steps: 0.4 mirror of public."o'brien" with filter 'pub'; ALTER EXTENSION chroma_sync
# UPDATE and CREATE SCHEMA other in one transaction; the mirror pauses for the DDL; the
# statement the reason names is run as written.
# What happens: syntax error. What should happen: the advice is runnable
# (chroma_resume('public."o''brien"'), or quote_literal of the name).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(sleep);
use ChromaSyncTest;

my $node = new_node('redteam_unbound_filter_resume_churn', extension => 0);
my $log0 = log_offset($node);
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{CREATE EXTENSION chroma_sync VERSION '0.4'});
fresh_collection($node, 'cs_t175');
q1(q{
CREATE TABLE public."o'brien" (id int PRIMARY KEY, embedding real[], pub bool);
INSERT INTO public."o'brien" VALUES (1, '{1,0}', true), (2, '{0,1}', false);
SELECT chroma_mirror('public."o''brien"', collection => 'cs_t175', filter => 'pub');
UPDATE chroma_sync.mirror SET filter = 'pub';
});
is(q1(q{SELECT chroma_flush('public."o''brien"', interval '60 seconds')}), 't', 'the 0.4 mirror flushes');

my ($ret, $out, $err) = $node->psql('postgres', q{
BEGIN;
ALTER EXTENSION chroma_sync UPDATE;
CREATE SCHEMA other;
COMMIT;
});
is($ret, 0, 'the update and a CREATE SCHEMA commit') or diag($err);
my $row = sub { q1(q{SELECT (filter_node IS NOT NULL)::text || ' ' || paused::text || ' ' || coalesce(paused_reason, '') FROM chroma_sync.mirror}) };
ok(wait_for('the mirror pauses for the DDL', 60, sub { $row->() =~ /^false true DDL ran after ALTER EXTENSION/ }),
	'the mirror pauses for the DDL before the binding');

my ($advice) = $row->() =~ /then run (chroma_resume\(.*\)) to bind it so/;
note('advice: ' . ($advice // '(none)'));
ok(defined $advice, 'the reason names a statement to run');
my ($r, $so, $se) = $node->psql('postgres', 'SELECT ' . ($advice // 'NULL'));
is($r, 0, 'the statement the reason names runs') or diag($se);
ok(wait_for('the worker binds the confirmed filter', 30, sub { $row->() =~ /^true/ }), 'the filter is bound once the advice is followed');

finish($node, $log0);
