
# Copyright (c) streamsketch authors
#
# A cbt equals GROUP BY over its committed rows after crashes, restarts,
# on a standby and under concurrent writers (docs/cbt.md, "Transactions
# and rounds").
#
#  1. 10^6 rows in 10^5 groups go into a cbt with small buffers (a deep
#     tree: spills, splits), in four parts; the round that consolidates
#     each of the first three parts is stopped by a PANIC at a different
#     point (streamsketch.test_cbt_crash: after a pass wrote its pages but
#     before it was installed, after the round installed but before the
#     change log's head moved, after cbt_finalize wrote its pages).  After
#     each restart every group and every aggregate equals a heap's GROUP
#     BY over the parts inserted so far (floats within rounding), through
#     the scan and through cbt_lookup of sampled keys; the tree must have
#     spilled and split, and its free list, longer than the metapage
#     holds, went on in pages (reloaded after each crash) and leaked
#     nothing.
#  2. A clean restart and an immediate stop change nothing.
#  3. A streaming standby answers as the primary (scan and lookups), and
#     refuses cbt_finalize.
#  4. An UNLOGGED cbt is empty after the crash, and usable.
#  5. pgbench clients insert (and roll back, read, look up, finalize)
#     concurrently, each committed row also logged in a heap in the same
#     transaction; after the run, and after an immediate stop in the
#     middle of another, the cbt equals GROUP BY over the log.
#  6. A damaged page of the free list's overflow (a plausible extent of no
#     pages) makes the next round fail with XX001, leaving the log as it
#     was, instead of letting it reuse blocks the tree holds.

use strict;
use warnings;

use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $node = ss_node(
	'primary',
	streaming => 1,
	extension => 1,
	conf => q{
restart_after_crash = on
autovacuum = off
shared_buffers = 64MB
max_connections = 20
max_wal_size = 2GB
log_statement = none
# the writers leave the log to the round each part triggers
streamsketch.change_log_limit = '256MB'
# and their rows stay rows (uncombined at commit): the rounds that crash,
# spill and split run the transition functions over them
streamsketch.test_combine_min_records = 2147483647
});
my $standby = ss_standby($node, 'standby');

# 10^6 rows, 10^5 groups (k = 0..99999), in four parts of 250,000
$node->safe_psql(
	'postgres', q{
CREATE TABLE src AS
SELECT g AS id, ((g::int8 * 7919) % 100000)::int AS k, g::int8 AS v, (g % 97) / 7.0::float8 AS f,
       'x' || (g % 13) AS s
FROM generate_series(0, 999999) g;
CREATE INDEX ON src (id);
SELECT cbt_create('c', group_by => 'k int',
                  aggregates => 'count(*) AS n, sum(v::int8) AS sv, avg(f::float8) AS af,
                                 max(s::text) AS ms, min(v) AS mn',
                  root_buffer => '1MB', node_buffer => '32kB', fanout => 4);
SELECT cbt_create('c_unl', group_by => 'k int', aggregates => 'count(*) AS n',
                  unlogged => true);
});

# "G groups, M missing, W wrong" against GROUP BY over src's rows id < $upto
sub check_sql
{
	my ($t, $upto) = @_;
	return qq{
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv, avg(f) AS af, max(s) AS ms,
                  min(v) AS mn
           FROM src WHERE id < $upto GROUP BY k)
SELECT count(*) || ' groups, ' ||
       count(*) FILTER (WHERE c.k IS NULL OR t.k IS NULL) || ' missing, ' ||
       count(*) FILTER (WHERE c.n IS DISTINCT FROM t.n OR c.sv IS DISTINCT FROM t.sv OR
                              c.ms IS DISTINCT FROM t.ms OR c.mn IS DISTINCT FROM t.mn OR
                              NOT abs(c.af - t.af) <= 1e-9) || ' wrong'
FROM t FULL JOIN $t c USING (k)};
}

# "L lookups, W wrong" for every 97th key (and absent keys)
sub lookup_sql
{
	my ($t, $upto) = @_;
	return qq{
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv, min(v) AS mn
           FROM src WHERE id < $upto AND (k + 5) % 97 = 0 GROUP BY k),
     q AS (SELECT k FROM generate_series(-5, 99999, 97) k)
SELECT count(*) || ' lookups, ' ||
       count(*) FILTER (WHERE l.n IS DISTINCT FROM t.n OR l.sv IS DISTINCT FROM t.sv OR
                              l.mn IS DISTINCT FROM t.mn) || ' wrong'
FROM q LEFT JOIN t USING (k) LEFT JOIN LATERAL cbt_lookup(NULL::$t, q.k) l ON true};
}

sub groups_of
{
	my ($upto) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(DISTINCT k) FROM src WHERE id < $upto");
}

sub check_exact
{
	my ($n, $upto, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $groups = groups_of($upto);
	is($n->safe_psql('postgres', check_sql('c', $upto)),
		"$groups groups, 0 missing, 0 wrong",
		"$what: every group equals GROUP BY's");
	is($n->safe_psql('postgres', lookup_sql('c', $upto)),
		"1031 lookups, 0 wrong", "$what: lookups equal GROUP BY's");
	return;
}

# 1. four parts; the rounds of the first three stop the server
my @points = ('pass_written', 'installed', 'finalize_written', undef);
foreach my $part (0 .. 3)
{
	my ($lo, $hi) = ($part * 250000, ($part + 1) * 250000);
	$node->safe_psql('postgres',
		"INSERT INTO c (k, v, f, s) SELECT k, v, f, s FROM src WHERE id >= $lo AND id < $hi ORDER BY id;\n"
		  . "INSERT INTO c_unl (k) SELECT k FROM src WHERE id >= $lo AND id < $hi");
	my $point = $points[$part];
	if (defined $point)
	{
		# the round (or cbt_finalize's) that runs the part into the tree
		my $stmt = $point eq 'finalize_written'
		  ? "SELECT cbt_finalize('c')"
		  : "SELECT count(*) FROM c";
		my $offset = -s $node->logfile;
		my ($err) = ss_run_sql($node,
			"SET streamsketch.test_cbt_crash = $point;\n$stmt;\n");
		is($err,
			"XX000: streamsketch.test_cbt_crash: stopping at \"$point\" in a round of \"c\"",
			"part $part: the round PANICs at $point");
		ss_wait_restart($node, $offset);
	}
	check_exact($node, $hi, "part $part"
		  . (defined $point ? ", after a crash at $point" : ''));
}
is( $node->safe_psql(
		'postgres',
		"VACUUM c;\nSELECT rows || ' rows, ' || (height >= 3) || ' ' || (splits > 0) || ' ' || (spills > 0) || ', ' || (free_extents > 128) || ' ' || leaked_pages FROM cbt_info('c')"
	),
	'1000000 rows, true true true, true 0',
	'the tree holds every row once, and grew, split and spilled; the free list went on in pages, and leaked nothing'
);
$node->safe_psql('postgres', "SELECT cbt_finalize('c')");
check_exact($node, 1000000, 'after cbt_finalize');

# 2. a clean restart, and an immediate stop
$node->restart;
check_exact($node, 1000000, 'after a restart');
$node->safe_psql('postgres',
	"INSERT INTO c (k, v, f, s) SELECT k, v, f, s FROM src WHERE id < 1000 ORDER BY id");
$node->safe_psql('postgres',
	"INSERT INTO src SELECT 1000000 + id, k, v, f, s FROM src WHERE id < 1000");
$node->stop('immediate');
$node->start;
check_exact($node, 1001000, 'after an immediate stop, with rows in the log');

# 3. the standby
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
check_exact($standby, 1001000, 'the standby');
my ($err) = ss_run_sql($standby, "SELECT cbt_finalize('c')");
like($err, qr/^25006: /, 'cbt_finalize is refused on a standby');

# 4. the unlogged cbt is empty after the crashes, and usable
is($node->safe_psql('postgres', 'SELECT count(*) FROM c_unl'),
	'0', 'the unlogged cbt is empty after the crash');
$node->safe_psql('postgres', 'INSERT INTO c_unl (k) VALUES (1), (1), (2)');
is($node->safe_psql('postgres', "SELECT string_agg(k || ':' || n, ' ' ORDER BY k) FROM c_unl"),
	'1:2 2:1', 'the unlogged cbt aggregates again');

# 5. concurrent writers, readers and finalizers
$node->safe_psql(
	'postgres', q{
SELECT cbt_create('cc', group_by => 'k int', aggregates => 'count(*) AS n, sum(v::int8) AS sv',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
CREATE TABLE log (run int, k int, v int8);
ALTER SYSTEM SET streamsketch.change_log_limit = '64kB';
SELECT pg_reload_conf();
});
my $dir = ss_pgbench_scripts(
	'ins.sql' => q{
\set k random(1, 3000)
BEGIN;
INSERT INTO cc (k, v) SELECT (:k + i * 101) % 3000, i FROM generate_series(0, 49) i;
INSERT INTO log SELECT :run, (:k + i * 101) % 3000, i FROM generate_series(0, 49) i;
COMMIT;
},
	'rollback.sql' => q{
\set k random(1, 3000)
BEGIN;
INSERT INTO cc (k, v) SELECT :k, 1 FROM generate_series(1, 50);
ROLLBACK;
},
	'read.sql' => q{
\set k random(1, 3000)
SELECT count(*), sum(n) FROM cc;
SELECT * FROM cbt_lookup(NULL::cc, :k);
},
	'finalize.sql' => q{
SELECT cbt_finalize('cc');
});

sub pgbench
{
	my ($run, @limit) = @_;
	return ss_pgbench_cmd($node, $dir, 4, $run, \@limit,
		'ins.sql@10', 'rollback.sql@2', 'read.sql@4', 'finalize.sql@1');
}

my $cc_check = q{
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv FROM log GROUP BY k)
SELECT count(*) || ' groups, ' ||
       count(*) FILTER (WHERE c.k IS NULL OR t.k IS NULL OR c.n <> t.n OR c.sv <> t.sv)
       || ' wrong'
FROM t FULL JOIN cc c USING (k)};

my ($out, $perr) = ('', '');
my $ok = IPC::Run::run(pgbench(1, '-T', 6), '>', \$out, '2>', \$perr);
ok($ok, 'concurrent run 1 completed') or diag($perr);
like($out, qr/number of failed transactions: 0/, 'run 1: no failed transaction');
my $groups = $node->safe_psql('postgres', 'SELECT count(DISTINCT k) FROM log');
is($node->safe_psql('postgres', $cc_check), "$groups groups, 0 wrong",
	'after concurrent run 1, the cbt equals GROUP BY over the committed rows');
cmp_ok($node->safe_psql('postgres', "SELECT rounds FROM cbt_info('cc')"),
	'>', 10, 'run 1: rounds ran while the clients inserted');

my $h = IPC::Run::start(pgbench(2, '-T', 30), '>', \$out, '2>', \$perr);
sleep(4);
$node->stop('immediate');
$h->finish;
$node->start;
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM log WHERE run = 2'),
	'>', 0, 'run 2 committed inserts before the stop');
$groups = $node->safe_psql('postgres', 'SELECT count(DISTINCT k) FROM log');
is($node->safe_psql('postgres', $cc_check), "$groups groups, 0 wrong",
	'after an immediate stop during run 2, the cbt equals GROUP BY over the committed rows');

# 6. a damaged page of the free list's overflow (a plausible extent of no
# pages, which a consolidator must not trust: it would reuse blocks the
# tree holds): the next round fails with XX001 and leaves the log as it
# was; readers, who never read the free list, answer while no round runs
$node->safe_psql('postgres', q{
SELECT cbt_create('c_fl', group_by => 'k int', aggregates => 'count(*) AS n',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 16);
SET streamsketch.change_log_limit = '64kB';
DO $$
BEGIN
	FOR i IN 1..120 LOOP
		INSERT INTO c_fl (k) SELECT (g * 7919 + i) % 40000 FROM generate_series(1, 5000) g;
		COMMIT;
	END LOOP;
END
$$;
SELECT cbt_finalize('c_fl');
});
is( $node->safe_psql('postgres',
		"SELECT (free_extents > 128) || ' ' || leaked_pages FROM cbt_info('c_fl')"),
	'true 0', 'c_fl: its free list went on in pages');
my $fl_file = $node->data_dir . '/'
  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('c_fl')");
$node->stop;
my $fl_img = do { open my $fh, '<:raw', $fl_file or die; local $/; <$fh> };
# the overflow pages: page type 18 (SS_PAGE_CBT_FREE), 8 bytes before the end
my @fl_pages = grep { unpack('v', substr($fl_img, $_ * 8192 + 8192 - 8, 2)) == 18 }
  1 .. length($fl_img) / 8192 - 1;
cmp_ok(scalar(@fl_pages), '>=', 1, 'c_fl: the free list has overflow pages');
# in each (the installed list's, and those earlier installs freed), the
# first extent's npages (page header 24, then generation 8, count 4,
# padding 4, then {start, npages, stamp}) becomes 0
open my $fh, '+<:raw', $fl_file or die;
foreach my $b (@fl_pages)
{
	seek($fh, $b * 8192 + 24 + 16 + 4, 0) or die;
	print $fh pack('V', 0);
}
close $fh;
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) || \' \' || sum(n) FROM c_fl'),
	'40000 600000', 'c_fl damaged: readers still answer');
# a committed row in the log, then the round that would take it in
$node->safe_psql('postgres', 'INSERT INTO c_fl (k) VALUES (1)');
my ($fl_err) = ss_run_sql($node, "SELECT cbt_finalize('c_fl')");
like($fl_err, qr/^XX001: /, 'c_fl damaged: the next round fails with XX001');
is( $node->safe_psql('postgres',
		"SELECT log_records FROM streamsketch_log_info('c_fl')"),
	'1', 'c_fl damaged: the failed round left the committed row in the log');

# 7. fragments stored in pieces (a tree of small nodes, whose freed
# extents are mostly smaller than the fragments cbt_finalize writes),
# exact; then a
# damaged piece list: in the first page of each fragment in pieces (page
# type 15, magic "CBTP" after the page header and the generation) the
# second piece names the first one's block; a reader that opens one fails
# with XX001 instead of reading blocks twice
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET streamsketch.change_log_limit;
SELECT pg_reload_conf();
SELECT cbt_create('cp', group_by => 'k int', aggregates => 'count(*) AS n, sum(v::int8) AS sv',
                  root_buffer => '1MB', node_buffer => '32kB', fanout => 4);
});
foreach my $part (0 .. 3)
{
	my ($lo, $hi) = ($part * 250000, ($part + 1) * 250000);
	$node->safe_psql('postgres',
		"INSERT INTO cp (k, v) SELECT k, v FROM src WHERE id >= $lo AND id < $hi ORDER BY id");
	$node->safe_psql('postgres', 'SELECT count(*) FROM cp');
}
# finalizing rewrites every leaf, with the extents the rounds freed at hand
$node->safe_psql('postgres', "SELECT cbt_finalize('cp')");
my $cp_check = q{
WITH t AS (SELECT k, count(*) AS n, sum(v) AS sv FROM src WHERE id < 1000000 GROUP BY k)
SELECT count(*) || ' groups, ' ||
       count(*) FILTER (WHERE c.k IS NULL OR t.k IS NULL OR c.n <> t.n OR c.sv <> t.sv) || ' wrong, '
       || (SELECT fragments_in_pieces > 0 FROM cbt_info('cp'))
FROM t FULL JOIN cp c USING (k)};
is($node->safe_psql('postgres', $cp_check), '100000 groups, 0 wrong, true',
	'cp: fragments stored in pieces, every group equals GROUP BY\'s');
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
is($standby->safe_psql('postgres', $cp_check), '100000 groups, 0 wrong, true',
	'cp on the standby: the same fragments in pieces, the same groups');
my $c_file = $node->data_dir . '/'
  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('cp')");
$node->stop;
my $c_img = do { open my $cfh, '<:raw', $c_file or die; local $/; <$cfh> };
my @pieced = grep {
	unpack('v', substr($c_img, $_ * 8192 + 8192 - 8, 2)) == 15
	  && substr($c_img, $_ * 8192 + 32, 4) eq 'CBTP'
} 1 .. length($c_img) / 8192 - 1;
cmp_ok(scalar(@pieced), '>=', 1, 'cp: first pages of fragments in pieces found');
# header 24 bytes from 32, then npieces, unused, piece[0] {start, npages}
# at 64, piece[1] at 72
open my $cfh, '+<:raw', $c_file or die;
foreach my $b (@pieced)
{
	my $first = substr($c_img, $b * 8192 + 64, 4);
	seek($cfh, $b * 8192 + 72, 0) or die;
	print $cfh $first;
}
close $cfh;
$node->start;
my ($pret, $pout, $perr2) = $node->psql('postgres', 'SELECT count(*) FROM cp',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($perr2, qr/ERROR:  XX001: block \d+ of cbt table "cp" is corrupted.*DETAIL:  Fragment: its piece list is impossible/s,
	'cp damaged: a scan fails with XX001 at the piece list');
is($node->safe_psql('postgres', 'SELECT count(*) FROM c'), '100000',
	'cp damaged: the server still answers, and the other cbt');

done_testing();
