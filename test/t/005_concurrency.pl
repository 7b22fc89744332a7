
# Copyright (c) streamsketch authors
#
# Real concurrency (the isolation tests only interleave whole statements):
# pgbench clients insert the same keys into bcms tables at the same time,
# roll back some transactions, spill others to temporary files, flush the
# buffers, VACUUM and read estimates, while tiny sub-buffers make the
# inserting backends apply full sub-buffers to the sketch pages
# concurrently, and the background worker consolidates what they commit.
# Every committed insert is also logged in a heap table in the same
# transaction.
#
#  1. after a concurrent run every estimate equals the logged count exactly
#     (nothing lost, nothing doubled, nothing from rolled-back transactions);
#  2. a crash in the middle of a concurrent run loses no committed insert:
#     every estimate is at least the logged count, and at most the inserts
#     of the transactions in flight at the crash more (README: updates are
#     applied just before the commit record is written);
#  3. after recovery a new concurrent run adds exactly its logged counts.

use strict;
use warnings;

use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $clients = 4;

my $node = ss_node(
	'main',
	streaming => 1,    # wal_level = replica
	consistency => 0,
	conf => q{
shared_buffers = 32MB
max_connections = 20
max_wal_size = 1GB
log_statement = none
});

my %keytype = (s_buf => 'int8', s_plain => 'int4', s_text => 'text', s_w => 'int8');
my @tables = sort keys %keytype;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
-- tiny sub-buffers: full ones get applied by the inserting backends
SELECT bcms_create('s_buf', 'int8', epsilon => 0.00002, buffer_size => '64kB');
SELECT bcms_create('s_plain', 'int4', epsilon => 0.00002, mode => 'plain');
SELECT bcms_create('s_text', 'text', epsilon => 0.00002, conservative => true,
                   buffer_size => '64kB');
SELECT bcms_create('s_w', 'int8', epsilon => 0.00002, weighted => true,
                   buffer_size => '128kB');
-- the committed inserts, logged in the same transactions
CREATE TABLE log (run int, tbl text, key text, n int8);
CREATE TABLE est (label text, tbl text, key text, est int8);
});

# the largest count one transaction adds to one key of one table
my $max_txn = 5000;

my %scripts = (
	'ins.sql' => q{
\set k random(1, 40)
\set n random(1, 20)
BEGIN;
INSERT INTO s_buf SELECT :k FROM generate_series(1, :n);
INSERT INTO s_plain SELECT :k FROM generate_series(1, :n);
INSERT INTO s_text VALUES ('t' || :k), ('t' || (:k + 1));
INSERT INTO s_w VALUES (:k, :n * 1000);
INSERT INTO log VALUES (:run, 's_buf', :k::text, :n), (:run, 's_plain', :k::text, :n),
  (:run, 's_text', 't' || :k, 1), (:run, 's_text', 't' || (:k + 1), 1),
  (:run, 's_w', :k::text, :n * 1000);
COMMIT;
},
	'rollback.sql' => q{
\set k random(1, 40)
BEGIN;
INSERT INTO s_buf SELECT :k FROM generate_series(1, 100);
INSERT INTO s_text SELECT 't' || :k FROM generate_series(1, 100);
INSERT INTO s_w VALUES (:k, 123456);
ROLLBACK;
},
	'spill.sql' => q{
\set k random(1, 40)
BEGIN;
SET LOCAL streamsketch.pending_memory = '64kB';
INSERT INTO s_buf SELECT :k FROM generate_series(1, 5000);
INSERT INTO s_text SELECT 't' || (i % 40 + 1) FROM generate_series(1, 4000) i;
INSERT INTO log VALUES (:run, 's_buf', :k::text, 5000);
INSERT INTO log SELECT :run, 's_text', 't' || (i % 40 + 1), 100 FROM generate_series(0, 39) i;
COMMIT;
},
	'flush.sql' => q{
SELECT bcms_flush('s_buf'), bcms_flush('s_text'), bcms_flush('s_w');
},
	'vacuum.sql' => q{
VACUUM s_buf, s_plain, s_text;
},
	'read.sql' => q{
\set k random(1, 40)
SELECT bcms_estimate('s_buf', :k::int8), bcms_estimate('s_plain', :k),
       bcms_estimate('s_text', 't' || :k), bcms_estimate('s_w', :k::int8);
SELECT items, buffered_entries FROM bcms_info('s_buf');
});

my $dir = ss_pgbench_scripts(%scripts);

sub pgbench_cmd
{
	my ($run, @limit) = @_;
	return ss_pgbench_cmd($node, $dir, $clients, $run, \@limit,
		"ins.sql\@10", "rollback.sql\@2", "spill.sql\@1", "flush.sql\@1",
		"vacuum.sql\@1", "read.sql\@3");
}

# record the estimates of keys 0..42 / t0..t42 of every table
sub record
{
	my ($label) = @_;
	my $sql = '';
	foreach my $t (@tables)
	{
		my $key = $keytype{$t} eq 'text' ? "'t' || i" : 'i';
		$sql .= "INSERT INTO est SELECT '$label', '$t', $key, "
		  . "bcms_estimate('$t', ($key)::$keytype{$t}) FROM generate_series(0, 42) i;\n";
	}
	$node->safe_psql('postgres', $sql);
	return;
}

# keys whose estimate (label) minus base (label or none) differs from the
# logged count of the runs in @runs; $cmp is '<>' or '<'
sub compare
{
	my ($label, $base, $runs, $cmp) = @_;
	my $base_est =
	  $base
	  ? "(SELECT est FROM est b WHERE b.label = '$base' AND b.tbl = e.tbl AND b.key = e.key)"
	  : '0';
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(tbl || ' ' || key || ': ' || d || ' $cmp ' || n, ', ')
  FROM (SELECT e.tbl, e.key, e.est - $base_est AS d,
               coalesce((SELECT sum(n) FROM log l WHERE l.tbl = e.tbl
                           AND l.key = e.key AND l.run IN ($runs)), 0) AS n
          FROM est e WHERE e.label = '$label') s
 WHERE d $cmp n});
}

# 1. a concurrent run
my ($ok, $out, $err) = (0, '', '');
$ok = IPC::Run::run(pgbench_cmd(1, '-t', 150), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 1 (pgbench)') or diag("$out\n$err");
like($out, qr/number of transactions actually processed: 600\b/,
	'run 1: every transaction processed')
  or diag($out);
record('run1');
is(compare('run1', undef, '1', '<>'), '',
	'run 1: every estimate equals the committed count');
ok( $node->poll_query_until(
		'postgres', 'SELECT rounds > 0 FROM streamsketch_background_stats()'),
	'run 1: the background worker consolidated alongside');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(t, ', ') FROM (
  SELECT tbl || ': ' || i.items || '/' || i.total_weight || ' logged ' ||
         l.rows || '/' || l.n AS t,
         (i.items, i.total_weight) = (l.rows, l.n) AS ok
    FROM (SELECT tbl, sum(n) AS n,
                 sum(CASE WHEN tbl = 's_w' THEN 1 ELSE n END) AS rows
            FROM log GROUP BY tbl) l,
         LATERAL bcms_info(l.tbl::regclass) i) s
 WHERE NOT ok}),
	'',
	'run 1: items and total_weight of every table equal the logged ones');
is( $node->safe_psql(
		'postgres',
		"SELECT items = (SELECT count(*) FROM log WHERE tbl = 's_w') FROM bcms_info('s_w')"
	),
	't',
	'run 1: items of the weighted table equals the logged rows');

# 2. a crash in the middle of a concurrent run
my $h = IPC::Run::start(pgbench_cmd(2, '-T', 120),
	'>', \$out, '2>', \$err);
# let it commit a good number of transactions first
$node->poll_query_until('postgres',
	"SELECT count(*) > 400 FROM log WHERE run = 2 AND tbl = 's_buf'")
  or die 'timed out waiting for pgbench';
$node->stop('immediate');
$h->finish;    # pgbench fails: connections lost
$node->start;

record('crash');
is(compare('crash', undef, '1, 2', '<'), '',
	'after a crash during a concurrent run no committed insert is lost');
my $slack = $clients * $max_txn;
is( $node->safe_psql(
		'postgres', qq{
SELECT string_agg(tbl || ': ' || extra, ', ') FROM (
  SELECT e.tbl, sum(e.est) - coalesce((SELECT sum(n) FROM log l
                                        WHERE l.tbl = e.tbl), 0) AS extra
    FROM est e WHERE e.label = 'crash' GROUP BY e.tbl) s
 WHERE extra > $slack * (CASE WHEN tbl = 's_w' THEN 20 ELSE 1 END)}),
	'',
	"after the crash at most the in-flight transactions ($clients) more");

# 3. after recovery a concurrent run adds exactly its counts
$ok = IPC::Run::run(pgbench_cmd(3, '-t', 150), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 3 after recovery (pgbench)') or diag("$out\n$err");
record('run3');
is(compare('run3', 'crash', '3', '<>'), '',
	'run 3: every estimate grew by exactly the committed count');

$node->stop;
done_testing();
