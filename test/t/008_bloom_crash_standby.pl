
# Copyright (c) streamsketch authors
#
# Crash recovery and streaming replication of bloom_filter relations, in
# every mode (plain, elevator, localized) with small buffers, so that at
# every check some inserts sit in the buffers and others were flushed.
#
#  1. A streaming standby (from a base backup taken with data in the
#     filters) answers exactly like the primary: no false negatives, the
#     same false positives (the same bits), the same bloom_info counters,
#     after catch-up and after more work including flushes.  Writes on the
#     standby fail cleanly.
#  2. After an immediate shutdown every committed key is found, the false
#     positives and counters are exactly those before the crash, rolled-back
#     and still-open transactions left no trace, and the filters keep
#     working (inserts, flushes).  The standby follows the restarted primary.
#  3. An UNLOGGED filter is empty after a crash, keeps its parameters and is
#     usable at once.

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
shared_buffers = 16MB
# writers consolidate often: the inserts reach buffers and levels as they go
streamsketch.change_log_limit = '64kB'
# the buffers' state after the inserts is checked: no background worker
# may flush them meanwhile
streamsketch.background_consolidation = off
checkpoint_timeout = 1h
max_wal_size = 1GB
wal_keep_size = 1GB
});

my %mode = (b_plain => 'plain', b_elev => 'elevator', b_loc => 'localized');
my %buffer = (b_plain => '0', b_elev => '32kB', b_loc => '64kB');
my @tables = sort keys %mode;
my $next = 1;    # next key to insert; keys 1 .. $next - 1 are committed

$primary->safe_psql('postgres', 'CREATE EXTENSION streamsketch');
for my $t (@tables)
{
	$primary->safe_psql('postgres',
		"SELECT bloom_create('$t', 'int8', capacity => 25000, fp_rate => 0.001, "
		  . "mode => '$mode{$t}', buffer_size => '$buffer{$t}')");
}
$primary->safe_psql('postgres',
	"SELECT bloom_create('b_unl', 'int8', capacity => 25000, fp_rate => 0.001, "
	  . "mode => 'localized', buffer_size => '64kB', unlogged => true)");

# $ntx transactions of $per keys into every filter
sub fill
{
	my ($ntx, $per) = @_;
	my $sql = '';
	for (1 .. $ntx)
	{
		my $hi = $next + $per - 1;
		$sql .= "BEGIN;\n";
		$sql .= "INSERT INTO $_ SELECT generate_series($next, $hi);\n"
		  for (@tables, 'b_unl');
		$sql .= "COMMIT;\n";
		$next = $hi + 1;
	}
	$primary->safe_psql('postgres', $sql);
}

# What a node answers about a filter: missing committed keys, the false
# positives among 10^5 absent keys, and the counters.
sub state_of
{
	my ($node, $t) = @_;
	my $last = $next - 1;
	# consolidated first on a primary: the lookups below would consolidate
	# a short log, and bits_set counts only the bits set so far
	my $vacuum =
	  $node->safe_psql('postgres', 'SELECT pg_is_in_recovery()') eq 'f'
	  ? "VACUUM $t;"
	  : '';
	return $node->safe_psql(
		'postgres', qq{
$vacuum
SELECT (SELECT count(*) FROM generate_series(1, $last) i
		WHERE NOT bloom_contains('$t', i)) AS missing,
	   (SELECT coalesce(string_agg(i::text, ','), '') FROM generate_series(1000001, 1100000) i
		WHERE bloom_contains('$t', i)) AS false_positives,
	   items, bits_set, buffered_entries, flushes, bits, hashes, pages, buffer_pages
FROM bloom_info('$t')});
}

fill(60, 250);

# a standby from a base backup taken with data in the filters
my $standby = ss_standby($primary, 'standby');

fill(40, 250);
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));

my %before;
for my $t (@tables)
{
	my $s = state_of($primary, $t);
	$before{$t} = $s;
	my ($missing, $fps, $items, $bits, $buffered, $flushes) = split /\|/, $s;
	is($missing, '0', "$t: no false negatives on the primary");
	is($items, $next - 1, "$t: items count every committed row");
	ok($t eq 'b_plain' || $buffered > 0, "$t: some inserts are buffered");
	ok($t eq 'b_plain' || $flushes > 0, "$t: buffers were flushed");
	my $nfp = ($fps eq '') ? 0 : scalar(split /,/, $fps);
	ok($nfp > 20 && $nfp < 200, "$t: about 0.1% false positives ($nfp)");
	# the primary's lookups consolidated the change log: replay that too
	# (a read-only query's WAL may not be written yet: wait for its insert
	# position, not the write position wait_for_catchup uses by default)
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	is(state_of($standby, $t), $s, "$t: the standby answers like the primary");
}

my ($ret, $out, $err) = $standby->psql('postgres', 'INSERT INTO b_loc VALUES (1)');
isnt($ret, 0, 'INSERT on the standby fails');
($ret, $out, $err) = $standby->psql('postgres', "SELECT bloom_flush('b_elev')");
isnt($ret, 0, 'bloom_flush on the standby fails');
like($err, qr/read-only|recovery/, 'with a read-only error');

# rolled back, and still open at the crash: no trace
$primary->safe_psql('postgres',
	"BEGIN; INSERT INTO b_plain VALUES (-5); INSERT INTO b_elev VALUES (-5); "
	  . "INSERT INTO b_loc VALUES (-5); ROLLBACK;");
my $open = $primary->background_psql('postgres');
$open->query_safe(
	"BEGIN; INSERT INTO b_plain VALUES (-6); INSERT INTO b_elev VALUES (-6); "
	  . "INSERT INTO b_loc VALUES (-6);");

my $unl = $primary->safe_psql('postgres',
	"SELECT mode, bits, hashes, pages, buffer_pages FROM bloom_info('b_unl')");
is( $primary->safe_psql(
		'postgres', "SELECT items FROM bloom_info('b_unl')"),
	$next - 1,
	'the unlogged filter has data before the crash');

$primary->stop('immediate');
eval { $open->quit; };
$primary->start;

for my $t (@tables)
{
	is(state_of($primary, $t), $before{$t},
		"$t: the same answers and counters after a crash");
	is( $primary->safe_psql(
			'postgres',
			"SELECT bloom_contains('$t', -5::int8)::text || bloom_contains('$t', -6::int8)::text"),
		'falsefalse',
		"$t: rolled-back and uncommitted inserts left no trace");
}

is( $primary->safe_psql(
		'postgres',
		"SELECT items, buffered_entries, bits_set, relation_pages FROM bloom_info('b_unl')"),
	'0|0|0|1',
	'the unlogged filter is empty after the crash (its metapage only)');
is( $primary->safe_psql(
		'postgres',
		"SELECT mode, bits, hashes, pages, buffer_pages FROM bloom_info('b_unl')"),
	$unl,
	'and keeps its parameters');
$primary->safe_psql('postgres', 'INSERT INTO b_unl VALUES (42)');
is( $primary->safe_psql(
		'postgres', "SELECT bloom_contains('b_unl', 42::int8)"),
	't', 'the unlogged filter works at once');

# more work after the crash, with flushes, reaches the standby too
fill(20, 250);
$primary->safe_psql('postgres',
	"SELECT bloom_flush('b_elev'), bloom_flush('b_loc')");
fill(5, 100);
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
for my $t (@tables)
{
	my $s = state_of($primary, $t);
	like($s, qr/^0\|/, "$t: no false negatives after more work");
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	is(state_of($standby, $t), $s,
		"$t: the standby follows the restarted primary");
}

# a second crash right after a flush changes nothing
$primary->safe_psql('postgres',
	"SELECT bloom_flush('b_elev'), bloom_flush('b_loc')");
my %flushed = map { $_ => state_of($primary, $_) } @tables;
$primary->stop('immediate');
$primary->start;
for my $t (@tables)
{
	is(state_of($primary, $t), $flushed{$t},
		"$t: a flush just before a crash survives it");
}

$standby->stop;
$primary->stop;
done_testing();
