
# Copyright (c) streamsketch authors
#
# A standby never consolidates the change log; its lookups read the
# committed records the primary has not consolidated yet, indexed once per
# log range by partition (src/storage/ss_logcache.c).  Whatever that index
# went through (built on a range, extended by later commits, a batch still
# in progress when it was built and committed after, an aborted batch, the
# primary consolidating under it), the standby's answers equal the answers
# the same standby gives once the primary consolidated everything (VACUUM),
# which read the structure's pages only.  (The primary's writers never
# consolidate here, and it runs no lookups, which would.)

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $primary = ss_node(
	'primary',
	streaming => 1,
	conf => q{
shared_buffers = 32MB
max_prepared_transactions = 2
# writers never consolidate: the log grows until VACUUM
streamsketch.change_log_limit = '1GB'
# nor does a background worker (it would after background_quiet_time)
streamsketch.background_consolidation = off
});
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
-- few pages, so that each page has many records in the log
SELECT bcms_create('c_buf', 'int8', epsilon => 0.001, delta => 0.01);
SELECT bcms_create('c_plain', 'int8', epsilon => 0.001, delta => 0.01, mode => 'plain');
-- conservative updates: the index is by page, not by counter (one page,
-- many keys per counter)
SELECT bcms_create('c_cons', 'int8', epsilon => 0.02, delta => 0.01, conservative => true);
SELECT bloom_create('c_bloom', 'int8', capacity => 100000, fp_rate => 0.01, mode => 'localized');
SELECT qf_create('c_qf', 'int8', capacity => 100000, fp_rate => 0.001);
SELECT qf_create('c_cf', 'int8', capacity => 100000, fp_rate => 0.001, access_method => 'cascade_filter');
});
my $standby = ss_standby($primary, 'standby');

my $nkeys = 400;

# The index is per backend: the answers from the log come from one session
# that lives through every step.
my $session = $standby->background_psql('postgres');

sub from_log
{
	my $sql = shift;
	return $session->query_safe($sql);
}

# every answer of one statement (so that the index is built and used)
my $answers_sql = qq{
SELECT string_agg(bcms_estimate('c_buf', g)::text, ',' ORDER BY g) || ' / ' ||
       string_agg(bcms_estimate('c_plain', g)::text, ',' ORDER BY g) || ' / ' ||
       string_agg(bcms_estimate('c_cons', g)::text, ',' ORDER BY g) || ' / ' ||
       string_agg(CASE WHEN bloom_contains('c_bloom', g) THEN '1' ELSE '0' END, '' ORDER BY g) || ' / ' ||
       string_agg(qf_count('c_qf', g)::text, ',' ORDER BY g) || ' / ' ||
       string_agg(qf_count('c_cf', g)::text, ',' ORDER BY g) || ' / ' ||
       string_agg(CASE WHEN qf_contains('c_qf', g) THEN '1' ELSE '0' END, '' ORDER BY g) ||
       string_agg(CASE WHEN qf_contains('c_cf', g) THEN '1' ELSE '0' END, '' ORDER BY g)
  FROM generate_series(-$nkeys, $nkeys) g};

sub catch_up
{
	$primary->wait_for_catchup($standby, 'replay',
		$primary->lsn('insert'));
}

sub write_rows
{
	my ($from, $to, $copies) = @_;
	$primary->safe_psql(
		'postgres', qq{
BEGIN;
INSERT INTO c_buf SELECT g FROM generate_series($from, $to) g, generate_series(1, $copies);
INSERT INTO c_plain SELECT g FROM generate_series($from, $to) g, generate_series(1, $copies);
INSERT INTO c_cons SELECT g FROM generate_series($from, $to) g, generate_series(1, $copies);
INSERT INTO c_bloom SELECT g FROM generate_series($from, $to) g;
INSERT INTO c_qf SELECT g FROM generate_series($from, $to) g, generate_series(1, $copies);
INSERT INTO c_cf SELECT g FROM generate_series($from, $to) g, generate_series(1, $copies);
COMMIT;});
}

# deletes of count 2 (the quotient filters' log replay has to apply them)
sub delete_rows
{
	my ($from, $to) = @_;
	$primary->safe_psql(
		'postgres', qq{
BEGIN;
SELECT count(qf_delete('c_qf', g::int8, 2)) FROM generate_series($from, $to) g;
SELECT count(qf_delete('c_cf', g::int8, 2)) FROM generate_series($from, $to) g;
COMMIT;});
}

sub logged
{
	return $standby->safe_psql('postgres',
		"SELECT (bcms_info('c_buf')).buffered_entries > 0 AND (bcms_info('c_plain')).buffered_entries > 0 AND (qf_info('c_qf')).items = 0 AND (qf_info('c_cf')).items = 0"
	);
}

# The standby's answers from the log, then after the primary consolidated
# everything and flushed the sub-buffers.
sub check_against_consolidated
{
	my ($what, $from_log) = @_;
	$primary->safe_psql('postgres',
		"SELECT bcms_flush('c_buf'), bcms_flush('c_plain'), bcms_flush('c_cons'), bloom_flush('c_bloom'); VACUUM c_qf; VACUUM c_cf;");
	catch_up();
	is( $standby->safe_psql('postgres',
			"SELECT (bcms_info('c_buf')).buffered_entries + (bcms_info('c_plain')).buffered_entries + (bcms_info('c_cons')).buffered_entries"
		),
		'0',
		"$what: the primary's flush left nothing in the log or the buffers");
	is($standby->safe_psql('postgres', $answers_sql),
		$from_log, "$what: answers from the log equal the consolidated ones");
}

# 1. a range read twice: the index is built on the second lookup
write_rows(1, 200, 3);
catch_up();
is(logged(), 't',
	'the standby has committed records in the log, none consolidated in the quotient filters');
my $a1 = from_log($answers_sql);
is(from_log($answers_sql),
	$a1, 'a second statement over the same range answers the same');
check_against_consolidated('built index', $a1);

# 2. the range grows under the index: later commits are added to it
write_rows(100, 300, 2);
catch_up();
my $a2 = from_log($answers_sql);
write_rows(250, 400, 1);
delete_rows(1, 150);
catch_up();
my $a3 = from_log($answers_sql);
isnt($a3, $a2, 'the later commit changes the answers');
check_against_consolidated('extended index', $a3);

# 3. a batch in progress (prepared) when the index is built, committed after
write_rows(-50, -1, 1);
$primary->safe_psql(
	'postgres', q{
BEGIN;
INSERT INTO c_buf SELECT g FROM generate_series(-200, -100) g;
INSERT INTO c_plain SELECT g FROM generate_series(-200, -100) g;
INSERT INTO c_bloom SELECT g FROM generate_series(-200, -100) g;
INSERT INTO c_qf SELECT g FROM generate_series(-200, -100) g;
SELECT count(qf_delete('c_cf', g::int8, 1)) FROM generate_series(-50, -1) g;
PREPARE TRANSACTION 'p1';});
catch_up();
my $before_commit = from_log($answers_sql);
is(from_log($answers_sql),
	$before_commit, 'a prepared batch is not counted, read twice');
is(from_log("SELECT bloom_contains('c_bloom', -150::int8)"),
	'f', 'a key only in the prepared batch is absent');
$primary->safe_psql('postgres', "COMMIT PREPARED 'p1'");
catch_up();
my $after_commit = from_log($answers_sql);
is(from_log("SELECT bloom_contains('c_bloom', -150::int8)"),
	't', 'the prepared batch counts once committed');
isnt($after_commit, $before_commit,
	'the committed prepared batch changes the answers');
check_against_consolidated('batch committed after the index was built',
	$after_commit);

# 4. an aborted batch in the range (its COMMIT failed after the append)
write_rows(1, 50, 1);
my ($ret, $out, $err) = $primary->psql(
	'postgres', q{
SET streamsketch.test_fail_after_log_append = 'error';
BEGIN;
INSERT INTO c_buf SELECT g FROM generate_series(-400, -300) g;
INSERT INTO c_plain SELECT g FROM generate_series(-400, -300) g;
INSERT INTO c_bloom SELECT g FROM generate_series(-400, -300) g;
COMMIT;});
like($err, qr/test_fail_after_log_append/, 'the COMMIT failed after its append');
write_rows(51, 60, 1);
catch_up();
my $a4 = from_log($answers_sql);
is(from_log("SELECT bloom_contains('c_bloom', -350::int8)"),
	'f', 'a key only in the aborted batch is absent');
check_against_consolidated('aborted batch in the range', $a4);

# 5. the primary consolidates part of the log under a built index
write_rows(1, 100, 1);
catch_up();
my $a5 = from_log($answers_sql);
$primary->safe_psql('postgres', 'VACUUM c_buf;');
write_rows(101, 120, 1);
catch_up();
my $a6 = from_log($answers_sql);
isnt($a6, $a5, 'commits after a partial consolidation change the answers');
check_against_consolidated('head moved under the index', $a6);

# 6. VACUUM gives the file's free tail of log pages back; the standby
# replays the truncation and answers as before
my $size_before = $primary->safe_psql('postgres',
	"SELECT pg_relation_size('c_plain')");
$primary->safe_psql('postgres',
	'INSERT INTO c_plain SELECT g % 300 FROM generate_series(1, 100000) g');
catch_up();
my $a7 = from_log($answers_sql);
$primary->safe_psql('postgres', 'VACUUM c_plain');
cmp_ok($primary->safe_psql('postgres', "SELECT pg_relation_size('c_plain')"),
	'<=', $size_before, 'VACUUM gave back the log pages of the large transaction');
catch_up();
is($standby->safe_psql('postgres', "SELECT pg_relation_size('c_plain')"),
	$primary->safe_psql('postgres', "SELECT pg_relation_size('c_plain')"),
	'the standby replayed the truncation');
check_against_consolidated('after the truncation', $a7);

$session->quit;
$standby->stop;
$primary->stop;
done_testing();
