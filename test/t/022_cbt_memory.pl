
# Copyright (c) streamsketch authors
#
# A cbt's work takes memory bounded by its parameters, not by the size of
# its tree or of a transaction (docs/cbt.md, "Memory"): a tree of
# thousands of nodes (16 kB node buffers, fan-out 4, compression off: 10^6
# groups in about 8,000 nodes, height 9) takes a round of 500,000 rows
# (half of them groups it holds: their numeric states are combined),
# then is scanned and finalized, each in one backend whose peak resident
# memory (VmHWM of /proc/self/status, read through pg_read_file) must grow
# by less than 16 MB over what the backend had before.  shared_buffers is
# 2 MB, so the shared pages a backend touches add at most that; JIT is
# off, whose compiler (loaded when a plan costs enough) would add its own
# tens of MB to the scan's backend.  Before
# these bounds held, the round grew by 270 MB (each group's serialized
# numeric state left in the transaction's memory) and cbt_finalize by
# 120 MB (each node's merge and spill state kept until its end).  Linux
# only (procfs).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

plan skip_all => 'needs /proc/self/status (Linux)' unless -r '/proc/self/status';

my $node = ss_node(
	'memory',
	extension => 1,
	consistency => 0,
	conf => q{
autovacuum = off
shared_buffers = 2MB
log_statement = none
jit = off
});

my $limit_kb = 16 * 1024;

$node->safe_psql(
	'postgres', q{
CREATE FUNCTION peak_kb() RETURNS int8 LANGUAGE sql
  SET search_path = pg_catalog
  AS $$ SELECT substring(pg_read_file('/proc/self/status')
                         FROM 'VmHWM:\s+(\d+) kB')::int8 $$;
SELECT cbt_create('m', group_by => 'k int8',
                  aggregates => 'count(*) AS n, sum(v::numeric) AS s',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4,
                  compression => false);
CREATE TABLE truth (k int8, v numeric);
});

# 750,000 groups in three transactions, consolidated as they come
for my $part (0 .. 2)
{
	my ($lo, $hi) = ($part * 250000 + 1, ($part + 1) * 250000);
	$node->safe_psql('postgres', qq{
INSERT INTO m (k, v) SELECT g, g % 1000 FROM generate_series($lo, $hi) g;
INSERT INTO truth SELECT g, g % 1000 FROM generate_series($lo, $hi) g;
VACUUM m;
});
}

# Runs $sql in a backend that first read the cbt's metapage (its caches
# and the library loaded); returns how much its peak memory grew, in kB.
sub peak_growth
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres', qq{
SELECT count(*) FROM cbt_info('m');
SELECT peak_kb() AS before \\gset
$sql;
SELECT peak_kb() - :before;
});
	my @lines = split /\n/, $out;
	return $lines[-1];
}

# a round of 500,000 rows into the deep tree, 250,000 of them for groups
# it has: the inserting session's VACUUM consolidates them
my $round = peak_growth(q{
INSERT INTO m (k, v) SELECT g, g % 1000 FROM generate_series(500001, 1000000) g;
VACUUM m});
$node->safe_psql('postgres',
	'INSERT INTO truth SELECT g, g % 1000 FROM generate_series(500001, 1000000) g');
my ($height, $nodes) = split /\|/,
  $node->safe_psql('postgres', 'SELECT height, nodes FROM cbt_info(\'m\')');
cmp_ok($nodes, '>=', 4000, "the tree has thousands of nodes ($nodes, height $height)");
cmp_ok($round, '<', $limit_kb, "a round over the tree grows the backend by $round kB");

my $scan = peak_growth('SELECT count(*), sum(n), sum(s) FROM m');
cmp_ok($scan, '<', $limit_kb, "a full scan grows the backend by $scan kB");

my $finalize = peak_growth("SELECT cbt_finalize('m')");
cmp_ok($finalize, '<', $limit_kb, "cbt_finalize grows the backend by $finalize kB");

# and the answers are GROUP BY's
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM ((SELECT k, count(*), sum(v) FROM truth GROUP BY k
                       EXCEPT SELECT k, n, s FROM m)
                      UNION ALL
                      (SELECT k, n, s FROM m
                       EXCEPT SELECT k, count(*), sum(v) FROM truth GROUP BY k)) d}),
	'0',
	'after the round, the scan and cbt_finalize every group equals GROUP BY');
is($node->safe_psql('postgres', 'SELECT count(*) FROM m'),
	'1000000', 'one row per group');

$node->stop;
done_testing();
