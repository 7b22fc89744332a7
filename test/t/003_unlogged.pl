
# Copyright (c) streamsketch authors
#
# UNLOGGED bcms relations skip WAL: after a crash (immediate shutdown) they
# are reset to empty from their init fork, keep their parameters (the
# metapage is recreated lazily from the catalog) and are usable at once.
# After a clean restart their data is kept.  A logged table next to them
# keeps its data through the crash.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $node = ss_node('main', consistency => 0);

my %keytype = (u_sql => 'text', u_fn => 'int8', u_plain => 'int4', l_log => 'int8');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;

-- CREATE UNLOGGED TABLE with non-default parameters from the settings
SET streamsketch.bcms_epsilon = 0.001;
SET streamsketch.bcms_delta = 0.05;
SET streamsketch.bcms_conservative = on;
SET streamsketch.bcms_buffer_size = '256kB';
CREATE UNLOGGED TABLE u_sql (key text) USING bcms;
RESET ALL;

-- the constructor, with explicit width and depth
SELECT bcms_create('u_fn', 'int8', width => 5000, depth => 3,
                   weighted => true, unlogged => true);

SET streamsketch.bcms_mode = 'plain';
CREATE UNLOGGED TABLE u_plain (key int4) USING bcms;
RESET ALL;

-- a logged one beside them
CREATE TABLE l_log (key int8) USING bcms;
});

is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(relname || ':' || relpersistence::text, ' ' ORDER BY relname) "
		  . "FROM pg_class WHERE relname IN ('u_sql', 'u_fn', 'u_plain', 'l_log')"),
	'l_log:p u_fn:u u_plain:u u_sql:u',
	'the unlogged tables are unlogged');

# the parameters of a table: every bcms_info column that does not depend on
# the data
my $params =
  'mode, epsilon, delta, width, depth, sketch_pages, buffer_pages, '
  . 'subbuffer_capacity, conservative, seed';

sub info
{
	my ($t, $cols) = @_;
	return $node->safe_psql('postgres',
		"SELECT row($cols)::text FROM bcms_info('$t')");
}

sub est
{
	my ($t, $k) = @_;
	return $node->safe_psql('postgres',
		"SELECT bcms_estimate('$t', ${k}::$keytype{$t})");
}

my %params = map { $_ => info($_, $params) } keys %keytype;
like($params{u_sql}, qr/^\(buffered,0\.001,0\.05,/,
	'u_sql got its parameters from the settings');
like($params{u_sql}, qr/,t,[^,]*\)$/, 'u_sql is conservative');
like($params{u_fn}, qr/^\(buffered,[^,]*,[^,]*,5\d\d\d,3,/,
	'u_fn has the explicit width and depth');
like($params{u_plain}, qr/^\(plain,/, 'u_plain is in plain mode');

sub fill
{
	$node->safe_psql(
		'postgres', q{
INSERT INTO u_sql SELECT 'k' || (i % 100) FROM generate_series(1, 20000) i;
INSERT INTO u_fn SELECT i % 10, 1000 FROM generate_series(1, 2000) i;
INSERT INTO u_plain SELECT i % 50 FROM generate_series(1, 5000) i;
INSERT INTO l_log SELECT i % 10 FROM generate_series(1, 1000) i;
SELECT FROM bcms_flush('u_sql') a, bcms_flush('u_fn') b;
INSERT INTO u_sql SELECT 'k' || (i % 100) FROM generate_series(1, 100) i;
INSERT INTO u_fn VALUES (1, 1);
});
	return;
}

fill();
is(est('u_sql', "'k1'"), '201', 'u_sql estimate before the crash');
is(est('u_fn', '1'), '200001', 'u_fn estimate before the crash');
is(est('u_plain', '1'), '100', 'u_plain estimate before the crash');
is(est('l_log', '1'), '100', 'l_log estimate before the crash');

# an immediate shutdown: unlogged relations are reset at recovery
$node->stop('immediate');
$node->start;

foreach my $t (sort keys %keytype)
{
	is(info($t, $params), $params{$t},
		"$t: parameters unchanged after the crash");
}
foreach my $t (qw(u_sql u_fn u_plain))
{
	is(info($t, 'items, total_weight, buffered_entries'),
		'(0,0,0)', "$t: empty after the crash");
}
is(est('u_sql', "'k1'"), '0', 'u_sql: no estimate left after the crash');
is(est('u_fn', '1'), '0', 'u_fn: no estimate left after the crash');
is(est('u_plain', '1'), '0', 'u_plain: no estimate left after the crash');
is(est('l_log', '1'), '100', 'l_log (logged) keeps its data through the crash');
is(info('l_log', 'items, total_weight'), '(1000,1000)',
	'l_log (logged) keeps its counters through the crash');

# usable at once: inserts and estimates work
$node->safe_psql(
	'postgres', q{
INSERT INTO u_sql VALUES ('k1'), ('k1'), ('k2');
INSERT INTO u_fn VALUES (1, 5), (2, 7);
INSERT INTO u_plain VALUES (1);
});
is(est('u_sql', "'k1'"), '2', 'u_sql works after the crash');
is(est('u_fn', '2'), '7', 'u_fn works after the crash');
is(est('u_plain', '1'), '1', 'u_plain works after the crash');
is(info('u_sql', 'items, total_weight'), '(3,3)',
	'u_sql counters restart from zero');
is(info('u_fn', 'items, total_weight'), '(2,12)',
	'u_fn counters restart from zero');
foreach my $t (qw(u_sql u_fn u_plain))
{
	is(info($t, $params), $params{$t},
		"$t: parameters unchanged after the first inserts");
}

# a clean restart keeps the data of unlogged tables
fill();
my %before = map {
	$_ => info($_, 'items, total_weight') . ' ' . est($_,
		$keytype{$_} eq 'text' ? "'k1'" : '1')
} keys %keytype;
$node->restart;
foreach my $t (sort keys %keytype)
{
	is( info($t, 'items, total_weight') . ' '
		  . est($t, $keytype{$t} eq 'text' ? "'k1'" : '1'),
		$before{$t},
		"$t: data kept across a clean restart");
	is(info($t, $params), $params{$t},
		"$t: parameters kept across a clean restart");
}

# TRUNCATE empties an unlogged table too, keeping its parameters
$node->safe_psql('postgres', 'TRUNCATE u_fn');
is(est('u_fn', '1'), '0', 'u_fn empty after TRUNCATE');
is(info('u_fn', $params), $params{u_fn}, 'u_fn: parameters kept by TRUNCATE');
$node->safe_psql('postgres', 'INSERT INTO u_fn VALUES (1, 3)');
is(est('u_fn', '1'), '3', 'u_fn works after TRUNCATE');

# and a second crash resets it again
$node->stop('immediate');
$node->start;
is(est('u_fn', '1'), '0', 'u_fn empty after a second crash');
is(est('u_sql', "'k1'"), '0', 'u_sql empty after a second crash');
is(info('u_fn', $params), $params{u_fn},
	'u_fn: parameters unchanged after a second crash');

$node->stop;
done_testing();
