
# Copyright (c) streamsketch authors
#
# pg_dump keeps the parameters of bcms relations: they are frozen at CREATE
# time (from the streamsketch.* settings or bcms_create's arguments), and a
# dump restored into a new database -- custom format with pg_restore, and
# plain SQL with psql -- recreates every table with the same parameters,
# whatever the settings of the restoring session.  The restored tables are
# usable.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
	'src', q{
CREATE EXTENSION streamsketch;

CREATE TABLE d_default (key int8) USING bcms;

SET streamsketch.bcms_epsilon = 0.002;
SET streamsketch.bcms_delta = 0.02;
SET streamsketch.bcms_conservative = on;
SET streamsketch.bcms_buffer_size = '512kB';
CREATE TABLE d_guc (key text, weight int4) USING bcms;
SET streamsketch.bcms_conservative = off;   -- (buffered mode only)
SET streamsketch.bcms_mode = 'plain';
CREATE TABLE d_plain (key int4) USING bcms;
RESET ALL;

SELECT bcms_create('d_fn', 'int8', width => 7000, depth => 4,
                   weighted => true, mode => 'plain');
SELECT bcms_create('d_cons', 'int4', depth => 2, conservative => true,
                   unlogged => true);
SELECT bcms_create('d_eps', 'text', epsilon => 0.0005, delta => 0.001,
                   buffer_size => '1MB');
CREATE SCHEMA other;
SET streamsketch.bcms_epsilon = 0.003;
CREATE TABLE other.d_schema (key int2) USING bcms;
RESET ALL;

INSERT INTO d_default SELECT i % 100 FROM generate_series(1, 10000) i;
INSERT INTO d_guc SELECT 'k' || (i % 100), 2 FROM generate_series(1, 10000) i;
INSERT INTO d_plain SELECT i % 100 FROM generate_series(1, 10000) i;
INSERT INTO d_fn SELECT i % 100, 3 FROM generate_series(1, 10000) i;
INSERT INTO d_cons SELECT i % 100 FROM generate_series(1, 10000) i;
INSERT INTO d_eps SELECT 'k' || (i % 100) FROM generate_series(1, 10000) i;
INSERT INTO other.d_schema SELECT i % 100 FROM generate_series(1, 10000) i;
});

my @tables = qw(d_cons d_default d_eps d_fn d_guc d_plain other.d_schema);
my %keyof = (
	d_cons => '1::int4',
	d_default => '1::int8',
	d_eps => "'k1'::text",
	d_fn => '1::int8',
	d_guc => "'k1'::text",
	d_plain => '1::int4',
	'other.d_schema' => '1::int2');

my $params = 'mode, epsilon, delta, width, depth, sketch_pages, '
  . 'buffer_pages, subbuffer_capacity, conservative';

sub params
{
	my ($db, $t, $cols) = @_;
	return $node->safe_psql($db,
		"SELECT row($cols)::text FROM bcms_info('$t')");
}

my %orig = map { $_ => params('src', $_, $params) } @tables;
my %seed = map { $_ => params('src', $_, 'seed') } @tables;

# sanity: the tables really have different parameters
like($orig{d_guc}, qr/^\(buffered,0\.002,0\.02,.*,t\)$/,
	'd_guc has the parameters of the settings');
like($orig{d_cons}, qr/^\(buffered,[^,]*,[^,]*,\d+,2,.*,t\)$/,
	'd_cons has the parameters of bcms_create');
like($orig{d_plain}, qr/^\(plain,0\.002,0\.02,/,
	'd_plain has the parameters of the settings');
like($orig{d_fn}, qr/^\(plain,[^,]*,[^,]*,7\d\d\d,4,.*,f\)$/,
	'd_fn has the parameters of bcms_create');
isnt($orig{d_default}, $orig{d_eps}, 'd_default and d_eps differ');

my $tempdir = PostgreSQL::Test::Utils::tempdir;

# restore with settings that differ from every table's: they must not be
# what the restored tables get
my $pgoptions =
  '-c streamsketch.bcms_epsilon=0.01 -c streamsketch.bcms_delta=0.1 '
  . '-c streamsketch.bcms_mode=buffered -c streamsketch.bcms_conservative=off '
  . '-c streamsketch.bcms_buffer_size=64kB';

sub check_restored
{
	my ($db, $how) = @_;
	foreach my $t (@tables)
	{
		is(params($db, $t, $params), $orig{$t},
			"$how: $t keeps its parameters");
		is(params($db, $t, 'seed'), $seed{$t}, "$how: $t keeps its hash seed");
	}
	# usable: a new insert is counted (on top of whatever was restored)
	foreach my $t (@tables)
	{
		my $k = $keyof{$t};
		my $w = $t =~ /^d_(guc|fn)$/ ? ', 5' : '';
		my $before =
		  $node->safe_psql($db, "SELECT bcms_estimate('$t', $k)");
		$node->safe_psql($db, "INSERT INTO $t VALUES ($k$w)");
		my $inc = $w ? 5 : 1;
		is( $node->safe_psql($db, "SELECT bcms_estimate('$t', $k)") -
			  $before,
			$inc, "$how: $t is usable after the restore");
	}
	return;
}

# custom format + pg_restore
command_ok(
	[ 'pg_dump', '-Fc', '-f', "$tempdir/src.dump", '-d', $node->connstr('src') ],
	'pg_dump -Fc');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
{
	local $ENV{PGOPTIONS} = $pgoptions;
	command_ok(
		[
			'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'),
			"$tempdir/src.dump"
		],
		'pg_restore into a new database');
}
check_restored('dst', 'pg_restore');

# plain SQL + psql
command_ok(
	[ 'pg_dump', '-f', "$tempdir/src.sql", '-d', $node->connstr('src') ],
	'pg_dump (plain)');
$node->safe_psql('postgres', 'CREATE DATABASE dst2');
{
	local $ENV{PGOPTIONS} = $pgoptions;
	command_ok(
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
			$node->connstr('dst2'), '-f', "$tempdir/src.sql"
		],
		'psql restores the plain dump into a new database');
}
check_restored('dst2', 'plain dump');

# the source database is unchanged by the dumps
foreach my $t (@tables)
{
	is(params('src', $t, $params), $orig{$t}, "source $t unchanged");
}

$node->stop;
done_testing();
