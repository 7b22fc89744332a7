
# Copyright (c) streamsketch authors
#
# Real concurrency for lert relations (the isolation test only interleaves
# whole statements): pgbench clients insert observations of keys 1..3000
# into an immediate-report lert (T = 10, a level 0 of 1,024 keys per cone,
# two cones, so the stream is flushed and merged all along) while others
# roll back, read (consolidating the change log), ask for counts and flush.
# Every committed insert is also logged in a heap table in the same
# transaction.
#
#  1. after a concurrent run every key's lert_count equals its logged
#     count, and the reports are exactly the keys logged T times or more,
#     each once, each with count T (immediate report);
#  2. an immediate stop in the middle of a concurrent run loses and adds
#     nothing: after recovery the counts equal the logged counts (the
#     change log commits with the transaction), the reports are still
#     exactly the keys that reached T, none twice;
#  3. after recovery a new concurrent run keeps all of it exact;
#  4. writers wait for the consolidation rounds once the change log is
#     four times streamsketch.change_log_limit long, so the log stays that
#     long plus one transaction per writer, and so do the pages it ever
#     took (appending is much cheaper than consolidating: writers that
#     never waited left gigabytes of log).

use strict;
use warnings;

use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;
use Time::HiRes qw(usleep);

my $clients = 4;
my $T = 10;

my $node = ss_node(
	'main',
	consistency => 0,
	extension => 1,
	conf => q{
shared_buffers = 32MB
max_connections = 20
max_wal_size = 1GB
log_statement = none
# writers consolidate often: rounds run while others append
streamsketch.change_log_limit = '64kB'
});

$node->safe_psql(
	'postgres', qq{
SELECT lert_create('c_lert', 'int8', threshold => $T, variant => 'immediate',
                   buffer_size => '128kB', cones => 2);
CREATE TABLE log (run int, key int8, n int8);
});

my %scripts = (
	'ins.sql' => q{
\set k random(1, 3000)
BEGIN;
INSERT INTO c_lert SELECT 1 + (:k + i * 101) % 3000 FROM generate_series(0, 29) i;
INSERT INTO log SELECT :run, 1 + (:k + i * 101) % 3000, 1 FROM generate_series(0, 29) i;
COMMIT;
},
	'rollback.sql' => q{
\set k random(1, 3000)
BEGIN;
INSERT INTO c_lert SELECT :k FROM generate_series(1, 50);
ROLLBACK;
},
	'read.sql' => q{
\set k random(1, 3000)
SELECT count(*) FROM c_lert;
SELECT lert_count('c_lert', :k::int8), lert_reported('c_lert', :k::int8);
},
	'flush.sql' => q{
SELECT lert_flush('c_lert');
});
my $dir = ss_pgbench_scripts(%scripts);

sub pgbench_cmd
{
	my ($run, @limit) = @_;
	return ss_pgbench_cmd($node, $dir, $clients, $run, \@limit,
		"ins.sql\@10", "rollback.sql\@2", "read.sql\@4", "flush.sql\@1");
}

# "N keys counted exactly, W wrong; R reports, D duplicates, E extra,
# M missing, C with a count other than T"
my $check_sql = qq{
WITH l AS (SELECT key, sum(n) AS n FROM log GROUP BY key),
     r AS (SELECT key::int8 AS key, count FROM lert_reports('c_lert'))
SELECT (SELECT count(*) FROM l) || ' keys, ' ||
       (SELECT count(*) FROM l WHERE lert_count('c_lert', key) <> n) || ' wrong counts; ' ||
       (SELECT count(*) FROM r) || ' reports, ' ||
       (SELECT count(*) - count(DISTINCT key) FROM r) || ' duplicates, ' ||
       (SELECT count(*) FROM r WHERE key NOT IN (SELECT key FROM l WHERE n >= $T)) || ' extra, ' ||
       (SELECT count(*) FROM l WHERE n >= $T AND key NOT IN (SELECT key FROM r)) || ' missing, ' ||
       (SELECT count(*) FROM r WHERE count <> $T) || ' not at T'
};

sub check_exact
{
	my ($what) = @_;
	my $got = $node->safe_psql('postgres', $check_sql);
	my $heavy = $node->safe_psql('postgres',
		"SELECT count(*) FROM (SELECT key FROM log GROUP BY key HAVING sum(n) >= $T) h");
	like($got,
		qr/^\d+ keys, 0 wrong counts; $heavy reports, 0 duplicates, 0 extra, 0 missing, 0 not at T$/,
		"$what: counts exact, exactly the $heavy keys at T reported once ($got)");
	return;
}

# 1. a concurrent run
my ($out, $err) = ('', '');
my $ok = IPC::Run::run(pgbench_cmd(1, '-T', 8), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 1 completed') or diag($err);
like($out, qr/number of failed transactions: 0/, 'run 1: no failed transaction');
cmp_ok($node->safe_psql('postgres', "SELECT flushes FROM lert_info('c_lert')"),
	'>', 5, 'run 1: level 0 was flushed while the clients inserted');
check_exact('after run 1');

# 2. an immediate stop in the middle of a run
my $h = IPC::Run::start(pgbench_cmd(2, '-T', 30), '>', \$out, '2>', \$err);
sleep(5);
$node->stop('immediate');
$h->finish;
$node->start;
check_exact('after an immediate stop during run 2');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM log WHERE run = 2'),
	'>', 0, 'run 2 committed inserts before the stop');

# 3. a run after recovery
$ok = IPC::Run::run(pgbench_cmd(3, '-T', 5), '>', \$out, '2>', \$err);
ok($ok, 'concurrent run 3 completed') or diag($err);
check_exact('after run 3');

# 4. the change log's length under writers only.  A writer that finds the
# log longer than four limits waits for the round in progress and runs the
# next; a round stops at a batch whose transaction is still committing, so
# the log may briefly hold a little more than four limits plus one
# transaction per writer: twice that is the bound tested (writers that
# never waited left over 50 times more).
# With four cones, the writers' rounds are lanes (lert_lanes.c): the head
# moves to the slowest cone, and the same bound holds.
foreach my $cones (1, 4)
{
	my $rows = 2000;
	$node->safe_psql('postgres', qq{
	SELECT lert_create('b_lert$cones', 'int8', buffer_size => '128kB', cones => $cones);
	SET streamsketch.change_log_limit = '1GB';
	INSERT INTO b_lert$cones SELECT g FROM generate_series(1, $rows) g;
	});
	my $batch = $node->safe_psql('postgres',
		"SELECT log_bytes FROM streamsketch_log_info('b_lert$cones')");
	cmp_ok($batch, '>', 16 * $rows, "b_lert$cones: a $rows-row transaction appends $batch bytes");
	my $bound = 2 * (4 * 64 * 1024 + $clients * $batch);
	my $bdir = ss_pgbench_scripts('bins.sql' => qq{
\\set k random(1, 50000)
INSERT INTO b_lert$cones SELECT 1 + (:k + g * 7919) % 50000 FROM generate_series(1, $rows) g;
	});
	$h = IPC::Run::start(ss_pgbench_cmd($node, $bdir, $clients, 4, [ '-T', 8 ], 'bins.sql'),
		'>', \$out, '2>', \$err);
	my ($max_bytes, $samples) = (0, 0);
	my $until = time + 8;
	while (time < $until)
	{
		my $b = $node->safe_psql('postgres',
			"SELECT log_bytes FROM streamsketch_log_info('b_lert$cones')");
		$max_bytes = $b if $b > $max_bytes;
		$samples++;
		usleep(50_000);
	}
	ok($h->finish, "b_lert$cones: writers-only run completed") or diag($err);
	my ($log_pages, $rounds) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT log_pages + free_log_pages, consolidations FROM streamsketch_log_info('b_lert$cones')});
	my ($txns) = $out =~ /number of transactions actually processed: (\d+)/;
	cmp_ok($txns, '>', 40, "b_lert$cones: run 4 committed $txns transactions of $rows rows in $rounds rounds");
	cmp_ok($max_bytes, '<=', $bound,
		"b_lert$cones: the change log never held more than $bound bytes ($max_bytes at most in $samples samples)");
	cmp_ok($log_pages, '<=', int($bound / 8000) + 2,
		"b_lert$cones: the change log took $log_pages pages at most");
	is($node->safe_psql('postgres', "SELECT observations FROM lert_info('b_lert$cones')"),
		($txns + 1) * $rows, "b_lert$cones: every committed observation was counted");
}

done_testing();
