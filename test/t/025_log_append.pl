
# Copyright (c) streamsketch authors
#
# Appending a batch to the change log builds its pages in backend memory
# before it locks the log, reserves the batch's range of the log under the
# append lock, and writes the rest of the batch afterwards
# (src/storage/ss_logappend.c).  Checked on a bcms and a cbt, with batches
# that spill to temporary files (streamsketch.pending_memory = 64kB) and
# need more new log pages than are built at once:
#
#  a. several sessions commit large and small batches into the same
#     structures at once, and roll some back: every answer equals the
#     committed rows exactly, before and after consolidation, on the
#     primary and on a streaming standby (whose replay of every page is
#     compared with the primary's: wal_consistency_checking);
#  b. an ERROR and a PANIC in the middle of an append
#     (streamsketch.test_fail_during_log_append): once the first of several
#     WAL records linking new pages is written, before the log's end moved
#     ("linking"), and once the batch is part of the log with bytes still
#     to write ("filling"): the failed transaction leaves no trace, and the
#     next commits (which reuse what the failed append left) are exact on
#     both nodes;
#  c. a batch that fits the tail page still commits with one WAL record
#     for the log (the tail page and the metapage together);
#  d. a record larger than what is built at once (a bcms_merge of a
#     1 MB sketch), last in its batch or not, is counted exactly.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $clients = 4;
my $big = 30000;    # rows of a big batch: 720 kB of log, about 90 pages

my $node = ss_node(
	'primary',
	streaming => 1,
	extension => 1,
	conf => q{
restart_after_crash = on
autovacuum = off
# the WAL records of one commit are counted: no background worker may write
# any in between
streamsketch.background_consolidation = off
# its batches repeat 30 keys, which a commit would combine into a few
# records: the appends and failures below need batches of many pages
streamsketch.test_combine_min_records = 2147483647
shared_buffers = 64MB
max_connections = 20
max_wal_size = 1GB
log_statement = none
});
ss_create_stop_and_wait($node);
my $standby = ss_standby($node, 'standby');

# keys 0..29: every row adds one to key r % 30; exact for these sizes
$node->safe_psql(
	'postgres', q{
SELECT bcms_create('cb', 'int8', epsilon => 0.001, delta => 0.01);
SELECT cbt_create('cc', 'k int8', 'count(*) AS n', root_buffer => '64kB');
CREATE TABLE committed (tbl text, n int8);
});

my @tables = ('cb', 'cc');
my %per_key = (cb => 0, cc => 0);    # rows per key committed so far

sub answer_sql
{
	my ($t) = @_;
	return $t eq 'cb'
	  ? "SELECT string_agg(DISTINCT bcms_estimate('cb', k::int8)::text, ',') "
	  . "|| ' items ' || (SELECT items FROM bcms_info('cb')) "
	  . "FROM generate_series(0, 29) k"
	  : "SELECT string_agg(DISTINCT coalesce((SELECT n FROM cbt_lookup(NULL::cc, k::int8)), 0)::text, ',') "
	  . "|| ' items ' || (SELECT coalesce(sum(n), 0) FROM cc) "
	  . "FROM generate_series(0, 29) k";
}

sub expected
{
	my ($t) = @_;
	return "$per_key{$t} items " . ($per_key{$t} * 30);
}

sub check_exact
{
	my ($n, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $t (@tables)
	{
		is($n->safe_psql('postgres', answer_sql($t)),
			expected($t), "$t: $what: every key's count is exact");
	}
	return;
}

sub check_both
{
	my ($what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	check_exact($node, $what);
	$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
	check_exact($standby, "$what (standby)");
	return;
}

sub insert_sql
{
	my ($t, $rows) = @_;
	return "INSERT INTO $t SELECT (r % 30)::int8 FROM generate_series(1, $rows) r;\n";
}

# ---------------------------------------------------------------------
# a. Concurrent appends into one structure.
# ---------------------------------------------------------------------
my %scripts = (
	'big.sql' => "SET streamsketch.pending_memory = '64kB';\nBEGIN;\n"
	  . insert_sql('cb', $big) . insert_sql('cc', $big)
	  . "INSERT INTO committed VALUES ('cb', $big), ('cc', $big);\nCOMMIT;\n",
	'small.sql' => "BEGIN;\n" . insert_sql('cb', 30) . insert_sql('cc', 60)
	  . "INSERT INTO committed VALUES ('cb', 30), ('cc', 60);\nCOMMIT;\n",
	'rollback.sql' => "SET streamsketch.pending_memory = '64kB';\nBEGIN;\n"
	  . insert_sql('cb', $big) . insert_sql('cc', $big) . "ROLLBACK;\n",
	'one.sql' => "SET streamsketch.pending_memory = '64kB';\nBEGIN;\n"
	  . insert_sql('cb', $big)
	  . "INSERT INTO committed VALUES ('cb', $big);\nCOMMIT;\n");
my $dir = ss_pgbench_scripts(%scripts);

sub sync_model
{
	foreach my $t (@tables)
	{
		my $rows = $node->safe_psql('postgres',
			"SELECT coalesce(sum(n), 0) FROM committed WHERE tbl = '$t'");
		die "rows of $t are not a multiple of 30" if $rows % 30;
		$per_key{$t} = $rows / 30;
	}
	return;
}

my $limit = ss_scale(ci => 20, full => 60);
foreach my $run (1 .. 2)
{
	my ($out, $err);
	my $ok = IPC::Run::run(
		ss_pgbench_cmd(
			$node, $dir, $clients, $run, [ '-t', $limit ],
			'big.sql@4', 'small.sql@4', 'rollback.sql@1', 'one.sql@2'),
		'>', \$out, '2>', \$err);
	ok($ok, "run $run: pgbench ran without errors") or diag($err);
	like($out, qr/number of failed transactions: 0/, "run $run: no transaction failed");
	sync_model();
	check_both("run $run, log not consolidated");
	$node->safe_psql('postgres',
		"SELECT bcms_flush('cb'); SELECT cbt_finalize('cc');");
	check_both("run $run, after the flush functions");
}
$node->safe_psql('postgres', 'VACUUM cb; VACUUM cc;');
check_both('after VACUUM');

# ---------------------------------------------------------------------
# b. An ERROR and a PANIC in the middle of an append.
# ---------------------------------------------------------------------
foreach my $point ('linking', 'filling')
{
	foreach my $how ('error', 'panic')
	{
		foreach my $t (@tables)
		{
			my $before = $node->safe_psql('postgres', answer_sql($t));
			my $offset = -s $node->logfile;
			my ($err, $out) = ss_run_sql($node,
				"SET streamsketch.pending_memory = '64kB';\n"
				  . "SET streamsketch.test_fail_during_log_append = ${how}_$point;\n"
				  . "BEGIN;\n" . insert_sql($t, $big)
				  . "\\echo before commit\nCOMMIT;\n");
			my $verb = $how eq 'error' ? 'failing' : 'stopping';
			is($err,
				"XX000: streamsketch.test_fail_during_log_append: $verb while $point the change log batch of \"$t\"",
				"$t: $how while $point: COMMIT fails with the injected failure");
			is($out, 'before commit', "$t: $how while $point: raised by COMMIT");
			ss_wait_restart($node, $offset) if $how eq 'panic';
			is($node->safe_psql('postgres', answer_sql($t)),
				$before, "$t: $how while $point: answers unchanged");

			# the same batch commits; then a small one, into the tail
			$node->safe_psql('postgres',
				"SET streamsketch.pending_memory = '64kB';\n"
				  . insert_sql($t, $big) . insert_sql($t, 30));
			$per_key{$t} += $big / 30 + 1;
			check_both("$t: commits after an $how while $point");
		}
	}
}
$node->safe_psql('postgres',
	"SELECT bcms_flush('cb'); SELECT cbt_finalize('cc'); VACUUM cb; VACUUM cc;");
check_both('after the failures, consolidated');

# ---------------------------------------------------------------------
# c. A batch that fits the tail page: one WAL record for the log.
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE EXTENSION pg_walinspect');
$node->safe_psql('postgres', insert_sql('cb', 30));
my $start = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
$node->safe_psql('postgres', insert_sql('cb', 30));
my $end = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_get_wal_records_info('$start', '$end') "
		  . "WHERE resource_manager = 'Generic'"),
	1,
	'a batch that fits the tail page is one generic WAL record');
$per_key{cb} += 2;
check_both('after small batches');

# ---------------------------------------------------------------------
# d. A record larger than a build chunk (a bcms_merge of a 1 MB sketch) is
# produced piece by piece across chunks, last in its batch or followed
# by rows.
# ---------------------------------------------------------------------
my $merge = "SELECT bcms_merge('cm', cms_agg('page' || g % 1000, 0.0001, 0.01)) "
  . "FROM generate_series(1, 10000) g;\n";
$node->safe_psql('postgres',
	"SELECT bcms_create('cm', 'text', epsilon => 0.0001, delta => 0.01);\n"
	  . $merge
	  . "BEGIN;\n$merge"
	  . "INSERT INTO cm SELECT 'page42' FROM generate_series(1, 5);\nCOMMIT;\n"
	  . "BEGIN;\nINSERT INTO cm SELECT 'page42' FROM generate_series(1, 5);\n"
	  . $merge . "COMMIT;\n");
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
foreach my $n ($node, $standby)
{
	is($n->safe_psql('postgres', "SELECT bcms_estimate('cm', 'page42'::text)"),
		40, $n->name . ': merges larger than a build chunk are counted exactly');
}

done_testing();
