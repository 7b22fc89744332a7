
# Copyright (c) streamsketch authors
#
# A bfile's sample holds committed rows only, and the same sample whatever
# crashes interrupt its rounds; standbys agree (docs/bfile.md,
# "Transactions and rounds").  Item i of the stream draws its level from
# the table's seed and i alone, given the draw of its insert (whether its
# level can reach L, docs/bfile.md), which streamsketch.test_bfile_coins
# repeats: two tables with one seed fed the same committed rows by
# sessions with the same coins, at the same L, hold the same sample: a
# reference table that no crash touches gives the answer exactly.  Items
# dropped at their insert are counted in the records of their
# transaction, which the crashes test as well.
#
#  1. A bfile and its reference get the same stream in four parts; the
#     round that takes each of the first three parts into the bfile is
#     stopped by a PANIC at a different point (streamsketch.test_bfile_crash:
#     after a discard freed a bucket, after an unroll, after the install
#     before the change log's head moved).  After each restart the sample,
#     its size, the rows seen, L, T, discards and unrolls are the
#     reference's.
#  2. An immediate stop with rows still in the change log changes nothing.
#  3. A failed COMMIT (an ERROR, and a PANIC, after the batch's WAL)
#     leaves no row and no count.
#  4. A streaming standby answers as the primary, also with rows still in
#     the change log (drawn by the reader as the primary's next round will
#     draw them, discards included).
#  5. An UNLOGGED bfile is empty after the crash, and usable.
#  6. pgbench clients insert (some roll back), read and flush concurrently,
#     each committed row logged in a heap in the same transaction; after
#     the run, and after an immediate stop in the middle of another, every
#     sampled row is a committed one, the rows seen are the committed
#     rows, and the sample is within its bounds.

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
shared_buffers = 32MB
max_connections = 20
max_wal_size = 1GB
log_statement = none
# the writers leave the log to the round each part triggers
streamsketch.change_log_limit = '256MB'
# which rows a round keeps depends on where rounds cut the stream, and the
# checks below compare samples cut at the same places (and a standby's
# log left unconsolidated): no background worker runs rounds of its own
streamsketch.background_consolidation = off
});
my $standby = ss_standby($node, 'standby');

$node->safe_psql(
	'postgres', q{
SET streamsketch.test_bfile_seed = 11;
SELECT bfile_create('b', 'id bigint, t text', sample_size => 2000, min_fraction => 0.8, buckets => 4);
SELECT bfile_create('r', 'id bigint, t text', sample_size => 2000, min_fraction => 0.8, buckets => 4);
SELECT bfile_create('u', 'id bigint', sample_size => 2000, unlogged => true);
});

# the sample (a digest of its rows) and what bfile_info counts
sub state_sql
{
	my ($t) = @_;
	return "SELECT (SELECT count(*) || ' ' || md5(string_agg(id || ':' || t, ',' ORDER BY id)) FROM $t)"
	  . " || ' | ' || (SELECT size || ' ' || seen || ' ' || level || ' ' || tail_level || ' '"
	  . " || discards || ' ' || unrolls FROM bfile_info('$t'))";
}

sub fill
{
	my ($from, $to, $only_b_r) = @_;
	foreach my $t ('b', 'r')
	{
		$node->safe_psql('postgres',
			"SET streamsketch.test_bfile_coins = $from;\n"
			  . "INSERT INTO $t SELECT g, 'row ' || g FROM generate_series($from, $to) g");
	}
	$node->safe_psql('postgres',
		"INSERT INTO u SELECT g FROM generate_series($from, $to) g")
	  unless $only_b_r;
	return;
}

# 1. crashes inside the rounds
my @points = ('discarded', 'unrolled', 'installed', undef);
foreach my $part (0 .. 3)
{
	fill($part * 50000 + 1, ($part + 1) * 50000);
	my $ref = $node->safe_psql('postgres', state_sql('r'));
	my $point = $points[$part];
	if (defined $point)
	{
		my $offset = -s $node->logfile;
		my ($err) = ss_run_sql($node,
			"SET streamsketch.test_bfile_crash = $point;\nSELECT count(*) FROM b;\n");
		is($err,
			"XX000: streamsketch.test_bfile_crash: stopping at \"$point\" in a round of \"b\"",
			"part $part: the round PANICs at $point");
		ss_wait_restart($node, $offset);
	}
	is($node->safe_psql('postgres', state_sql('b')), $ref,
		"part $part: the sample is the reference's"
		  . (defined $point ? " after a crash at $point" : ''));
}
like(
	$node->safe_psql('postgres',
		"SELECT seen || ' ' || (size < 2000) || ' ' || (discards > 20) || ' ' || (unrolls > 3) FROM bfile_info('b')"),
	qr/^200000 true true true$/,
	'the stream went through discards and unrolls, within the bound');

# 2. an immediate stop with rows in the change log
fill(200001, 230000);
my $ref = $node->safe_psql('postgres', state_sql('r'));
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', state_sql('b')), $ref,
	'after an immediate stop with rows in the log, the reference\'s sample');

# 3. failed commits leave nothing
my $before = $node->safe_psql('postgres', state_sql('b'));
my ($err) = ss_run_sql($node,
	"SET streamsketch.test_fail_after_log_append = error;\n"
	  . "INSERT INTO b SELECT g, 'failed' FROM generate_series(1, 20000) g;\n");
is($err,
	'XX000: streamsketch.test_fail_after_log_append: failing after the change log append of "b"',
	'COMMIT fails after the append');
is($node->safe_psql('postgres', state_sql('b')), $before,
	'the failed commit left no row and no count');
my $offset = -s $node->logfile;
($err) = ss_run_sql($node,
	"SET streamsketch.test_fail_after_log_append = panic;\n"
	  . "INSERT INTO b SELECT g, 'failed' FROM generate_series(1, 20000) g;\n");
like($err, qr/^XX000: streamsketch.test_fail_after_log_append: stopping/,
	'COMMIT PANICs after the append');
ss_wait_restart($node, $offset);
is($node->safe_psql('postgres', state_sql('b')), $before,
	'the commit stopped by the PANIC left no row and no count');

# 4. the standby, with rows still in the change log (nothing on the
# primary has read b since they came: the standby draws them as the
# primary's next round will, through discards), then once the primary has
# drawn every row
fill(230001, 330000, 1);
# and a sample bounded by bytes, with its reference
$node->safe_psql('postgres',
	"SELECT bfile_create('$_', 'id bigint, t text', sample_size => '256kB', min_fraction => 0.8, buckets => 4)"
) foreach ('bb', 'rb');
foreach my $t ('bb', 'rb')
{
	$node->safe_psql('postgres',
		"SET streamsketch.test_bfile_coins = 7;\n"
		  . "INSERT INTO $t SELECT g, repeat('x', g % 300) FROM generate_series(1, 50000) g");
}
my $view_sql = sub {
	my ($t) = @_;
	return "SELECT (SELECT count(*) || ' ' || md5(string_agg(id || ':' || t, ',' ORDER BY id)) FROM $t)"
	  . " || ' | ' || (SELECT size || ' ' || seen || ' ' || level || ' ' || discards FROM bfile_info('$t'))"
	  . " || ' | ' || (SELECT count(*) FROM bfile_subsample(NULL::$t, 700))"
	  . " || ' ' || (SELECT count(*) || ' ' || sum(id) FROM bfile_window(NULL::$t, 200000, 250000))";
};
my $ref_view = $node->safe_psql('postgres', $view_sql->('r'));
my $bytes_sql = "SELECT (SELECT count(*) || ' ' || md5(string_agg(id || ':' || t, ',' ORDER BY id)) FROM %s)"
  . " || ' | ' || (SELECT size || ' ' || seen || ' ' || level || ' ' || discards || ' ' || data_bytes"
  . " FROM bfile_info('%s'))";
my $ref_bytes = $node->safe_psql('postgres', sprintf($bytes_sql, 'rb', 'rb'));
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
is($standby->safe_psql('postgres', sprintf($bytes_sql, 'bb', 'bb')),
	$ref_bytes, 'a sample bounded by bytes: the standby answers as the reference too');
like($ref_bytes, qr/^\d+ \w+ \| \d+ 50000 \d+ [1-9]\d* \d+$/,
	'the bytes\' reference saw every row and discarded');
like(
	$standby->safe_psql('postgres', "SELECT log_records > 100 FROM streamsketch_log_info('b')"),
	qr/^t$/, 'the standby\'s b has rows in its change log');
is($standby->safe_psql('postgres', $view_sql->('b')),
	$ref_view, 'the standby answers with the change log\'s rows as the reference');
like($ref_view, qr/^\d+ \w+ \| \d+ 330000 \d+ \d+ \| 700 \d+ \d+$/,
	'the reference saw every row');
cmp_ok((split / /, (split / \| /, $ref_view)[1])[3], '>',
	(split / /, (split / \| /, $before)[1])[4],
	'the rows in the change log discarded levels');
$node->safe_psql('postgres', "SELECT bfile_flush('b')");
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
is($standby->safe_psql('postgres', state_sql('b')),
	$node->safe_psql('postgres', state_sql('b')),
	'the standby answers as the primary');
($err) = ss_run_sql($standby, "SELECT bfile_flush('b')");
like($err, qr/^25006: /, 'bfile_flush is refused on a standby');

# 5. the unlogged bfile
is($node->safe_psql('postgres', 'SELECT count(*) FROM u'),
	'0', 'the unlogged bfile is empty after the crash');
$node->safe_psql('postgres', 'INSERT INTO u SELECT g FROM generate_series(1, 10) g');
is($node->safe_psql('postgres', 'SELECT count(*) FROM u'),
	'10', 'the unlogged bfile samples again');

# 6. concurrent writers, readers and flushes
$node->safe_psql(
	'postgres', q{
SELECT bfile_create('c', 'id bigint', sample_size => 500, min_fraction => 0.8, buckets => 4);
CREATE TABLE log (run int, id bigint);
CREATE SEQUENCE ids;
ALTER SYSTEM SET streamsketch.change_log_limit = '64kB';
SELECT pg_reload_conf();
});
my $dir = ss_pgbench_scripts(
	'ins.sql' => q{
WITH n AS (SELECT nextval('ids') AS id FROM generate_series(1, 40)),
     l AS (INSERT INTO log SELECT :run, id FROM n RETURNING id)
INSERT INTO c SELECT id FROM l;
},
	'rollback.sql' => q{
BEGIN;
INSERT INTO c SELECT -g FROM generate_series(1, 40) g;
ROLLBACK;
},
	'read.sql' => q{
SELECT count(*) FROM c;
},
	'flush.sql' => q{
SELECT bfile_flush('c');
});

sub pgbench
{
	my ($run, @limit) = @_;
	return ss_pgbench_cmd($node, $dir, 4, $run, \@limit,
		'ins.sql@10', 'rollback.sql@2', 'read.sql@4', 'flush.sql@1');
}

# "S sampled, U not committed, D duplicates; seen N of C committed; bound"
my $check = q{
SELECT (SELECT count(*) FROM c) || ' sampled, '
       || (SELECT count(*) FROM c WHERE id NOT IN (SELECT id FROM log)) || ' not committed, '
       || (SELECT count(*) - count(DISTINCT id) FROM c) || ' duplicates; '
       || (SELECT CASE WHEN seen = (SELECT count(*) FROM log) THEN 'seen all' ELSE 'seen ' || seen END
           FROM bfile_info('c')) || ', '
       || (SELECT CASE WHEN size < 500 THEN 'bounded' ELSE 'over' END FROM bfile_info('c'))};

my ($out, $perr) = ('', '');
my $ok = IPC::Run::run(pgbench(1, '-T', 5), '>', \$out, '2>', \$perr);
ok($ok, 'concurrent run 1 completed') or diag($perr);
like($out, qr/number of failed transactions: 0/, 'run 1: no failed transaction');
$node->safe_psql('postgres', "SELECT bfile_flush('c')");
like($node->safe_psql('postgres', $check),
	qr/^\d+ sampled, 0 not committed, 0 duplicates; seen all, bounded$/,
	'after concurrent run 1, only committed rows, every one seen');

my $h = IPC::Run::start(pgbench(2, '-T', 30), '>', \$out, '2>', \$perr);
sleep(3);
$node->stop('immediate');
$h->finish;
$node->start;
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM log WHERE run = 2'),
	'>', 0, 'run 2 committed inserts before the stop');
$node->safe_psql('postgres', "SELECT bfile_flush('c')");
like($node->safe_psql('postgres', $check),
	qr/^\d+ sampled, 0 not committed, 0 duplicates; seen all, bounded$/,
	'after an immediate stop during run 2, only committed rows, every one seen');

done_testing();
