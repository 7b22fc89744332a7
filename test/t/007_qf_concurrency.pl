
# Copyright (c) streamsketch authors
#
# Real concurrency for quotient_filter relations (the isolation tests only
# interleave whole statements): pgbench clients insert random and hot keys
# into small filters at the same time, so that the filters grow (resize)
# while other backends apply their commits and read; some transactions roll
# back, some delete copies of hot keys; one filter is also resized
# explicitly (qf_resize) and merged into (qf_merge) meanwhile, and readers
# check that keys committed before the run are found all along (a miss
# fails the pgbench transaction).  Every committed change is also logged in
# a heap table in the same transaction.  fp_rate 1e-9 keeps the
# fingerprints of all these keys distinct, so counts are exact.
#
#  1. after a concurrent run every logged key is found (no false negatives)
#     and every qf_count equals the logged count exactly; items and
#     total_count add up; nothing of the rolled-back transactions is there;
#     the filters have grown several times during the run;
#  2. a crash in the middle of a concurrent run loses no committed insert:
#     every key is found, no count of a never-deleted key is below the
#     logged count, and every count is within the transactions in flight at
#     the crash of it (README: changes are applied just before the commit
#     record is written);
#  3. after recovery a new concurrent run, with more growth, adds exactly
#     its logged counts.

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

my %keytype = (c_int => 'int8', c_cnt => 'int4', c_rs => 'int8');
my @tables = sort keys %keytype;

# hot keys 1..20 start with 1000 copies in c_int, so the deletes (at most
# one per transaction, fewer than 1000 per key) never hit an empty key and
# the serial count is exactly inserts minus deletes
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
SELECT qf_create('c_int', 'int8', capacity => 500, fp_rate => 1e-9);
SELECT qf_create('c_cnt', 'int4', capacity => 200, fp_rate => 1e-9,
                 counted => true);
-- resized explicitly (up to 64 pages) while the others insert, read and
-- merge c_src (same fingerprints) into it
SELECT qf_create('c_rs', 'int8', capacity => 100, fp_rate => 1e-9);
SELECT qf_create('c_src', 'int8', capacity => 100, fp_rate => 1e-9);
INSERT INTO c_src SELECT generate_series(5001, 5200);
CREATE TABLE log (run int, tbl text, key text, n int8);
INSERT INTO c_rs SELECT generate_series(1, 1000);
INSERT INTO log SELECT 0, 'c_rs', i::text, 1 FROM generate_series(1, 1000) i;
CREATE TABLE est (label text, tbl text, key text, est int8);
INSERT INTO c_int SELECT h FROM generate_series(1, 20) h, generate_series(1, 1000);
INSERT INTO log SELECT 0, 'c_int', h::text, 1000 FROM generate_series(1, 20) h;
});
my $initial_pages =
  $node->safe_psql('postgres', "SELECT pages FROM qf_info('c_int')");

# the most one transaction changes the count of one key
my $max_txn = 1000;

my %scripts = (
	'ins.sql' => q{
\set k random(1000, 10000000)
\set h random(1, 20)
\set n random(1, 1000)
BEGIN;
INSERT INTO c_int SELECT :k + i * 7 FROM generate_series(0, 39) i;
INSERT INTO c_int VALUES (:h), (:h);
INSERT INTO c_cnt SELECT (:k + i) % 100000, :n FROM generate_series(0, 9) i;
INSERT INTO c_rs VALUES (:k);
INSERT INTO log VALUES (:run, 'c_rs', :k::text, 1);
INSERT INTO log SELECT :run, 'c_int', (:k + i * 7)::text, 1 FROM generate_series(0, 39) i;
INSERT INTO log VALUES (:run, 'c_int', :h::text, 2);
INSERT INTO log SELECT :run, 'c_cnt', ((:k + i) % 100000)::text, :n FROM generate_series(0, 9) i;
COMMIT;
},
	'hot.sql' => q{
\set h random(1, 20)
\set n random(1, 1000)
BEGIN;
INSERT INTO c_cnt VALUES (:h, :n);
INSERT INTO log VALUES (:run, 'c_cnt', :h::text, :n);
SELECT qf_delete('c_int', :h::int8);
INSERT INTO log VALUES (:run, 'c_int', :h::text, -1);
COMMIT;
},
	'rollback.sql' => q{
\set k random(1000, 10000000)
BEGIN;
INSERT INTO c_int SELECT -(:k + i) FROM generate_series(0, 99) i;
INSERT INTO c_cnt VALUES (-1, 1000000);
SELECT qf_delete('c_int', 1::int8, 1000);
ROLLBACK;
},
	# a key committed before the run that is not found during the run
	# fails the transaction (division by zero) and so pgbench
	'read.sql' => q{
\set h random(1, 20)
\set r random(1, 1000)
SELECT 1 / qf_contains('c_int', :h::int8)::int AS hot_found,
       1 / (qf_count('c_int', :h::int8) >= 500)::int AS hot_counted,
       1 / qf_contains('c_rs', :r::int8)::int AS rs_found;
SELECT qf_contains('c_cnt', :h), qf_count('c_rs', :h::int8);
SELECT items, pages, resizes FROM qf_info('c_int');
},
	'merge.sql' => q{
BEGIN;
SELECT qf_merge('c_rs', 'c_src');
INSERT INTO log SELECT :run, 'c_rs', i::text, 1 FROM generate_series(5001, 5200) i;
COMMIT;
},
	'resize.sql' => q{
SELECT qf_resize('c_rs') FROM qf_info('c_rs') WHERE pages < 64;
});

my $dir = ss_pgbench_scripts(%scripts);

sub pgbench_cmd
{
	my ($run, @limit) = @_;
	return ss_pgbench_cmd($node, $dir, $clients, $run, \@limit,
		"ins.sql\@10", "hot.sql\@3", "rollback.sql\@2", "read.sql\@4",
		"resize.sql\@1", "merge.sql\@1");
}

# record the counts of every logged key and of a few never committed keys
sub record
{
	my ($label) = @_;
	my $sql = '';
	foreach my $t (@tables)
	{
		$sql .= qq{
INSERT INTO est SELECT '$label', '$t', key, qf_count('$t', key::$keytype{$t})
  FROM (SELECT DISTINCT key FROM log WHERE tbl = '$t'
        UNION SELECT unnest(ARRAY['-1', '-1000', '-5000000'])) k;};
	}
	$node->safe_psql('postgres', $sql);
	return;
}

# keys whose count (label) minus base (label or 0) differs from the logged
# count of the runs in $runs ($cmp: '<>' or '<'); $where restricts the keys
sub compare
{
	my ($label, $base, $runs, $cmp, $where) = @_;
	$where //= 'true';
	$base //= '';
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) || ' keys' ||
       coalesce(': ' || string_agg(tbl || ' ' || key || ': ' || d || ' $cmp ' || n, ', ')
                          FILTER (WHERE d $cmp n), '')
  FROM (SELECT e.tbl, e.key, e.est - coalesce(b.est, 0) AS d, coalesce(l.n, 0) AS n
          FROM est e
          LEFT JOIN est b ON b.label = '$base' AND b.tbl = e.tbl AND b.key = e.key
          LEFT JOIN (SELECT tbl, key, sum(n) AS n FROM log WHERE run IN ($runs)
                      GROUP BY 1, 2) l ON l.tbl = e.tbl AND l.key = e.key
         WHERE e.label = '$label' AND $where) s});
}

# keys with a logged count that are not found (qf_contains false)
sub false_negatives
{
	my $sql = '';
	foreach my $t (@tables)
	{
		$sql .= qq{
SELECT '$t: ' || count(*) || ' present, ' ||
       count(*) FILTER (WHERE NOT qf_contains('$t', key::$keytype{$t})) ||
       ' false negatives'
  FROM (SELECT key FROM log WHERE tbl = '$t' GROUP BY key HAVING sum(n) > 0) k;};
	}
	return $node->safe_psql('postgres', $sql);
}

# (each filter consolidated first: qf_info describes the levels as
# consolidated)
sub info_vs_log
{
	return $node->safe_psql(
		'postgres', join('', map { ss_qf_flush_sql($_) } @tables) . q{
SELECT string_agg(t, ', ') FROM (
  SELECT l.tbl || ': ' || i.items || '/' || i.total_count || ' logged ' ||
         l.items || '/' || l.n AS t,
         (i.items, i.total_count) = (l.items, l.n) AS ok
    FROM (SELECT tbl, count(*) FILTER (WHERE n > 0) AS items, sum(n) AS n
            FROM (SELECT tbl, key, sum(n) AS n FROM log GROUP BY 1, 2) k
           GROUP BY tbl) l,
         LATERAL qf_info(l.tbl::regclass) i) s
 WHERE NOT ok});
}

# 1. a concurrent run
my ($ok, $out, $err) = (0, '', '');
$ok = IPC::Run::run(pgbench_cmd(1, '-t', 150), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 1 (pgbench)') or diag("$out\n$err");
like($out, qr/number of transactions actually processed: 600\b/,
	'run 1: every transaction processed')
  or diag($out);
$node->safe_psql('postgres', join('', map { ss_qf_flush_sql($_) } @tables));
my $resizes1 = $node->safe_psql('postgres',
	"SELECT string_agg(resizes::text, ' ' ORDER BY t) FROM unnest(ARRAY['c_cnt', 'c_int', 'c_rs']) t, qf_info(t::regclass)");
ok( $node->safe_psql('postgres',
		"SELECT min(resizes) >= 2 FROM unnest(ARRAY['c_cnt', 'c_int', 'c_rs']) t, qf_info(t::regclass)") eq 't',
	"run 1: the filters grew several times during the run (resizes $resizes1)");
record('run1');
like(false_negatives(),
	qr/^c_cnt: [1-9]\d* present, 0 false negatives\nc_int: [1-9]\d* present, 0 false negatives\nc_rs: [1-9]\d* present, 0 false negatives$/,
	'run 1: every committed key is found');
like(compare('run1', undef, '0, 1', '<>'), qr/^[1-9]\d* keys$/,
	'run 1: every count equals the committed count, rolled-back keys absent');
is(info_vs_log(), '',
	'run 1: items and total_count equal the committed keys and counts');

# 2. a crash in the middle of a concurrent run
my $h = IPC::Run::start(pgbench_cmd(2, '-T', 120), '>', \$out, '2>', \$err);
$node->poll_query_until('postgres',
	"SELECT count(*) > 3000 FROM log WHERE run = 2")
  or die 'timed out waiting for pgbench';
$node->stop('immediate');
$h->finish;    # pgbench fails: connections lost
$node->start;

record('crash');
like(false_negatives(),
	qr/^c_cnt: [1-9]\d* present, 0 false negatives\nc_int: [1-9]\d* present, 0 false negatives\nc_rs: [1-9]\d* present, 0 false negatives$/,
	'after a crash during a concurrent run every committed key is found');
like(
	compare('crash', undef, '0, 1, 2', '<',
		"NOT (e.tbl = 'c_int' AND e.key IN (SELECT generate_series(1, 20)::text))"),
	qr/^[1-9]\d* keys$/,
	'after the crash no committed insert is lost');
my $slack = $clients * $max_txn;
is( $node->safe_psql(
		'postgres', qq{
SELECT string_agg(e.tbl || ' ' || e.key || ': ' || e.est || ' vs ' || coalesce(l.n, 0), ', ')
  FROM est e
  LEFT JOIN (SELECT tbl, key, sum(n) AS n FROM log GROUP BY 1, 2) l
    ON l.tbl = e.tbl AND l.key = e.key
 WHERE e.label = 'crash' AND abs(e.est - coalesce(l.n, 0)) > $slack}),
	'',
	"after the crash every count is within the in-flight transactions ($clients) of the logged one"
);

# 3. after recovery a concurrent run adds exactly its counts
$ok = IPC::Run::run(pgbench_cmd(3, '-t', 150), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 3 after recovery (pgbench)') or diag("$out\n$err");
my $resizes3 = $node->safe_psql('postgres',
	"SELECT string_agg(resizes::text, ' ' ORDER BY t) FROM unnest(ARRAY['c_cnt', 'c_int', 'c_rs']) t, qf_info(t::regclass)");
isnt($resizes3, $resizes1, "run 3: the filters grew again (resizes $resizes3)");
record('run3');
like(false_negatives(),
	qr/^c_cnt: [1-9]\d* present, 0 false negatives\nc_int: [1-9]\d* present, 0 false negatives\nc_rs: [1-9]\d* present, 0 false negatives$/,
	'run 3: every committed key is found');
like(compare('run3', 'crash', '3', '<>'), qr/^[1-9]\d* keys$/,
	'run 3: every count grew by exactly the committed count');
cmp_ok($node->safe_psql('postgres', "SELECT pages FROM qf_info('c_int')"),
	'>=', 8 * $initial_pages, 'c_int has at least 8 times its initial pages');

$node->stop;
done_testing();
