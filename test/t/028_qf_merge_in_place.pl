# Copyright (c) streamsketch authors
#
# Merges written in place.  A merge into an existing level of the same
# size (a cascade filter's levels above 0, a buffered filter's level 1)
# rewrites that level's pages where they are, so the file holds the live
# levels and no spare copy of them.  Such a merge can stop halfway, with
# part of the level rewritten: streamsketch.test_qf_merge_stop stops the
# first one of a session halfway by an error, an immediate stop (PANIC),
# or a page overflow (which moves the merge out of place into a larger
# level).  Checked, for a cascade filter and a buffered filter (counted,
# 48-bit fingerprints, so qf_count is the exact count), against the
# committed counts kept in a heap table:
#  1. merges into existing levels do not grow the file: after a stream of
#     flushed batches it holds the levels and the change log's pages only;
#  2. while a stopped merge is unfinished (after the error, and after the
#     crash recovery) every count is exact on the primary and on a
#     streaming standby, and qf_merge() from such a filter adds each copy
#     once;
#  3. the next consolidation finishes it: counts exact, the merge
#     counter past it, the file no larger;
#  4. the overflow moves the merge into a doubled level, counts exact.

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
# merges run in the sessions of this test, where the stop is set
streamsketch.background_consolidation = off
restart_after_crash = on
checkpoint_timeout = 1h
});
my @filters = qw(cf bqf);
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
CREATE TABLE exact (tbl text, key int8, n int8);
CREATE INDEX ON exact (tbl, key);
SELECT qf_create('cf', 'int8', capacity => 200000, fp_rate => 1e-9,
                 counted => true, access_method => 'cascade_filter',
                 fanout => 4, buffer_size => '64kB');
SELECT qf_create('bqf', 'int8', capacity => 200000, fp_rate => 1e-9,
                 counted => true, access_method => 'buffered_quotient_filter',
                 buffer_size => '64kB');
SELECT qf_create('dst', 'int8', capacity => 200000, fp_rate => 1e-9,
                 counted => true, access_method => 'cascade_filter',
                 fanout => 4, buffer_size => '64kB');
});
my $standby = ss_standby($primary, 'standby');

# Insert keys lo..hi with counts 1 + key % 3 into $t (and log them), then
# consolidate; $stop sets streamsketch.test_qf_merge_stop for the flush.
# Returns the flush's error ('' if none).
sub load
{
	my ($t, $lo, $hi, $stop) = @_;
	$primary->safe_psql(
		'postgres', qq{
BEGIN;
INSERT INTO $t SELECT k, 1 + k % 3 FROM generate_series($lo, $hi) k;
INSERT INTO exact SELECT '$t', k, 1 + k % 3 FROM generate_series($lo, $hi) k;
COMMIT;});
	my ($err) = ss_run_sql($primary,
		($stop ? "SET streamsketch.test_qf_merge_stop = '$stop';\n" : '')
		  . "SELECT qf_flush('$t');");
	return $err;
}

# "P present, 0 false negatives, 0 wrong counts; ..." for filter $t on
# $node (no flush: a stopped merge stays as it is)
sub exact_line
{
	my ($node, $t) = @_;
	return $node->safe_psql(
		'postgres', qq{
WITH e AS (SELECT key, sum(n) AS n FROM exact WHERE tbl = '$t' GROUP BY key),
     c AS (SELECT key, n, qf_count('$t', key) AS est FROM e
           UNION ALL
           SELECT k, 0, qf_count('$t', k) FROM generate_series(900001, 902000) k)
SELECT count(*) FILTER (WHERE n > 0) || ' present, ' ||
       count(*) FILTER (WHERE est <> n) || ' wrong counts' ||
       coalesce(': ' || string_agg(key || '=' || est || '<>' || n, ' ')
                          FILTER (WHERE est <> n), '')
  FROM c;});
}

sub check_exact
{
	my ($node, $t, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	like(exact_line($node, $t), qr/^[1-9]\d* present, 0 wrong counts$/,
		"$t: $what: every count exact");
	return;
}

sub info
{
	my ($t) = @_;
	my @v = split /\|/,
	  $primary->safe_psql('postgres',
		"SELECT levels, pages, relation_pages, resizes FROM qf_info('$t')");
	return { levels => $v[0], pages => $v[1], rel => $v[2], merges => $v[3] };
}

# 1. a stream of batches, each flushed: merges into existing levels
my $next = 1;
foreach my $t (@filters)
{
	$next = 1;
	for (1 .. 12)
	{
		is(load($t, $next, $next + 4999), '', "$t: batch at $next");
		$next += 5000;
	}
	my $i = info($t);
	cmp_ok($i->{merges}, '>=', 6, "$t: merged level 0 into the others");
	# the levels, and at most the 40 pages one flushed batch's change log takes
	cmp_ok($i->{rel}, '<=', 1 + $i->{pages} + 40,
		"$t: the file holds its $i->{pages} level pages and the change log (no spare runs)"
	);
	check_exact($primary, $t, 'after the stream');
}

# 2. an error halfway through a merge in place
foreach my $t (@filters)
{
	my $before = info($t);
	like(
		load($t, 60001, 70000, 'error'),
		qr/^57014: streamsketch.test_qf_merge_stop: stopping a merge in place of "$t"/,
		"$t: the merge in place stopped by an error");
	check_exact($primary, $t, 'merge in place stopped by an error');
	$primary->wait_for_catchup($standby);
	check_exact($standby, $t, 'on the standby, merge in place unfinished');

	# qf_merge reads the unfinished merge's levels: each copy once
	$primary->safe_psql('postgres',
		"TRUNCATE dst; SELECT qf_merge('dst', '$t'); SELECT qf_flush('dst');");
	is( $primary->safe_psql(
			'postgres', qq{
SELECT count(*) FROM (SELECT key, sum(n) AS n FROM exact WHERE tbl = '$t' GROUP BY key) e
 WHERE qf_count('dst', key) <> n}), '0',
		"$t: qf_merge of a filter with a merge in place unfinished adds each copy once");

	# the next consolidation finishes it
	is(load($t, 70001, 71000), '', "$t: the next batch consolidates");
	my $after = info($t);
	check_exact($primary, $t, 'merge in place finished');
	cmp_ok($after->{merges}, '>', $before->{merges},
		"$t: the stopped merge was installed");
	cmp_ok($after->{rel}, '<=', 1 + $after->{pages} + 40,
		"$t: finishing the merge left no spare run");
	$primary->wait_for_catchup($standby);
	check_exact($standby, $t, 'on the standby, merge in place finished');
}

# 3. an immediate stop halfway through a merge in place
foreach my $t (@filters)
{
	my $offset = -s $primary->logfile;
	load($t, 80001, 90000, 'crash');
	ss_wait_restart($primary, $offset);
	ok( $primary->log_contains(
			qr/PANIC:  streamsketch.test_qf_merge_stop: stopping at "crash" in a merge in place of "$t"/,
			$offset),
		"$t: the server stopped halfway through a merge in place");
	check_exact($primary, $t, 'after crash recovery, merge in place unfinished');
	$primary->wait_for_catchup($standby);
	check_exact($standby, $t, 'on the standby after the crash');

	my $before = info($t);
	is(load($t, 90001, 91000), '', "$t: the next batch consolidates");
	my $after = info($t);
	check_exact($primary, $t, 'merge in place finished after the crash');
	cmp_ok($after->{merges}, '>', $before->{merges},
		"$t: the merge stopped by the crash was installed");
	cmp_ok($after->{rel}, '<=', 1 + $after->{pages} + 40,
		"$t: no spare run after the crash");
}

# 4. an overflow halfway: the merge moves out of place into a larger level
foreach my $t (@filters)
{
	my $before = info($t);
	is(load($t, 100001, 110000, 'overflow'), '',
		"$t: a merge in place that overflows goes on out of place");
	my $after = info($t);
	cmp_ok($after->{pages}, '>', $before->{pages},
		"$t: the overflowing level was doubled");
	check_exact($primary, $t, 'after the overflow');
	$primary->wait_for_catchup($standby);
	check_exact($standby, $t, 'on the standby after the overflow');
}

$standby->stop;
$primary->stop;
done_testing();
