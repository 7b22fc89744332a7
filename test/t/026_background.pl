
# Copyright (c) streamsketch authors
#
# Background consolidation (src/storage/ss_worker.c): committed change logs
# are consolidated by a worker of their database that commits start on
# demand, with no other session touching the structures (autovacuum is
# off here, so nothing else does):
#
#  a. a client that LISTENs and never reads the LERT receives one
#     notification per report, with the reports' keys; a bulk load's log
#     leaves the file (its pages are given back) with no VACUUM; the worker
#     shows in pg_stat_activity and in streamsketch_background_stats, and
#     the standby runs none;
#  b. the worker consolidates as the table's owner, restricted;
#  c. a worker canceled, terminated or killed (SIGKILL: crash restart) in
#     the middle of a cbt round leaves every answer exact, and the next
#     commit gets the work done again;
#  d. DROP DATABASE of a database whose worker runs is not blocked, and
#     DROP EXTENSION makes the worker leave;
#  e. with streamsketch.background_consolidation off, the old behaviour:
#     no notification until a reader consolidates;
#  f. a worker's round shows in streamsketch_progress while it runs (held
#     there by streamsketch.test_progress_wait), and leaves it once done.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;
use Time::HiRes qw(usleep);

my $node = ss_node(
	'primary',
	streaming => 1,
	extension => 1,
	consistency => 0,
	conf => q{
restart_after_crash = on
autovacuum = off
shared_buffers = 64MB
log_statement = none
});
ss_create_stop_and_wait($node);
my $standby = ss_standby($node, 'standby');

# poll $sql on $db until it returns $want (at most 60 s); returns the last
# value
sub wait_for
{
	my ($db, $sql, $want) = @_;
	my $got = '';
	for (my $i = 0; $i < 600; $i++)
	{
		$got = $node->safe_psql($db, $sql);
		return $got if $got eq $want;
		usleep(100_000);
	}
	return $got;
}

my $workers_sql =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'streamsketch consolidation'";

# ---------------------------------------------------------------------------
# a. a listener that never reads the LERT

# A psql that LISTENs, then only sleeps: it prints each notification after
# the sleep during which it arrived.
sub start_listener
{
	my ($channel) = @_;
	my %l = (in => "LISTEN $channel;\n", out => '', err => '');
	$l{run} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$l{in}, '>', \$l{out}, '2>', \$l{err});
	return \%l;
}

# the payloads received so far, sorted
sub payloads
{
	my ($l) = @_;
	$l->{in} .= "SELECT pg_sleep(0.1);\n";
	$l->{run}->pump_nb;
	my @p = $l->{out} =~ /^Asynchronous notification "[^"]*" with payload "([^"]*)"/mg;
	return join(',', sort @p);
}

sub wait_payloads
{
	my ($l, $want, $secs) = @_;
	my $got = '';
	for (my $i = 0; $i < $secs * 10; $i++)
	{
		$got = payloads($l);
		last if $got eq $want;
		usleep(100_000);
	}
	return $got;
}

$node->safe_psql('postgres',
	"SELECT lert_create('hh', 'text', threshold => 8, notify => 'hh_chan')");
my $listener = start_listener('hh_chan');
payloads($listener);

# 12 keys, each observed in its own transactions: k0..k8 reach T = 8,
# k9..k11 stay below it
my @reach = map { "k$_" } 0 .. 8;
foreach my $round (1 .. 8)
{
	my $sql = join(";\n",
		map { "INSERT INTO hh VALUES ('$_')" }
		  (@reach, $round <= 5 ? qw(k9 k10 k11) : ()));
	$node->safe_psql('postgres', "BEGIN;\n$sql;\nCOMMIT;");
}
my $want = join(',', sort @reach);
is(wait_payloads($listener, $want, 60), $want,
	'a listener that never reads the lert gets one notification per key that reached T'
);
is( $node->safe_psql('postgres', $workers_sql . " AND datname = 'postgres'"),
	'1', 'the worker shows in pg_stat_activity');
is( $node->safe_psql('postgres',
		"SELECT string_agg(key, ',' ORDER BY key) FROM lert_reports('hh')"),
	$want, 'the notifications are the reports');
is(payloads($listener), $want, 'no notification twice');
$listener->{in} .= "\\q\n";
$listener->{run}->finish;

# a bulk load's change log leaves the file without a VACUUM
$node->safe_psql('postgres',
	"CREATE TABLE clicks (url text) USING bcms;
	 INSERT INTO clicks SELECT '/p' || (g % 1000) FROM generate_series(1, 300000) g");
# the commit appended 24 bytes a row of log into the file: 7.2 MB, which
# a file of less than that no longer holds
my $logged = 300000 * 24;
is( wait_for(
		'postgres',
		"SELECT log_bytes = 0 AND consolidations > 0 AND relation_pages * 8192 < $logged / 2 "
		  . "FROM streamsketch_pending WHERE relation = 'clicks'::regclass",
		't'),
	't',
	'the worker consolidated the load and gave its log pages back');
is( $node->safe_psql('postgres',
		"SELECT pg_relation_size('clicks') < $logged / 2 AND "
		  . "bcms_estimate('clicks', '/p7'::text) >= 300"),
	't', 'the file shrank and the counts are there');
cmp_ok($node->safe_psql('postgres', 'SELECT rounds FROM streamsketch_background_stats()'),
	'>=', 2, 'streamsketch_background_stats counts the rounds');

$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $workers_sql), '0', 'the standby runs no worker');
is( $standby->safe_psql('postgres', "SELECT bcms_estimate('clicks', '/p7'::text) >= 300"),
	't', 'the standby reads what the worker wrote');

# ---------------------------------------------------------------------------
# b. as the owner, restricted

$node->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
SET ROLE alice;
-- no SET search_path: the function reports the one it runs with, and
-- qualifies every name it uses
CREATE FUNCTION note_user(s bigint, v bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  restricted bool := false;
BEGIN
  IF s IS NULL THEN
    BEGIN
      CREATE TEMP TABLE probe (x int);
    EXCEPTION WHEN insufficient_privilege THEN
      restricted := true;
    END;
    RAISE LOG 'aggregate runs as %, search_path %, restricted %',
      pg_catalog.current_user(), pg_catalog.current_setting('search_path'),
      restricted;
  END IF;
  RETURN pg_catalog.int8pl(COALESCE(s, 0), v);
END $$;
CREATE AGGREGATE note_sum(bigint) (sfunc = note_user, stype = bigint,
  combinefunc = int8pl);
SELECT cbt_create('owned', 'k int', 'note_sum(v::bigint) AS s', root_buffer => '64kB');
});
my $log_offset = -s $node->logfile;
# the rows stay rows for the worker (a commit of that many would combine
# them, running the aggregate in the session)
$node->safe_psql('postgres',
	"SET streamsketch.test_combine_min_records = 2147483647;\n"
	  . "INSERT INTO owned (k, v) SELECT g % 10, 1 FROM generate_series(1, 20000) g");
$node->wait_for_log(qr/aggregate runs as/, $log_offset);
# the worker that ran it lives on for a few idle seconds
my $wpid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamsketch consolidation'");
like(
	slurp_file($node->logfile, $log_offset),
	qr/\[$wpid\] LOG:  aggregate runs as alice, search_path pg_catalog, pg_temp, restricted t/,
	'the worker runs the aggregate as the owner, restricted, with the pinned search_path');
unlike(slurp_file($node->logfile, $log_offset), qr/aggregate runs as (?!alice)/,
	'never as anyone else');

# a commit that combines its rows runs the aggregate in the session, as the
# owner too
$log_offset = -s $node->logfile;
my $spid = $node->safe_psql('postgres',
	"INSERT INTO owned (k, v) SELECT g % 10, 1 FROM generate_series(1, 20000) g;\n"
	  . "SELECT pg_backend_pid()");
$node->wait_for_log(qr/combining the changes of "owned" at commit/, $log_offset);
like(
	slurp_file($node->logfile, $log_offset),
	qr/\[$spid\] [^\n]*LOG:  aggregate runs as alice, search_path pg_catalog, pg_temp, restricted t\n[^\n]*\n\tcombining the changes of "owned" at commit/,
	'combining at commit runs the aggregate as the owner, restricted, with the pinned search_path');
unlike(slurp_file($node->logfile, $log_offset), qr/aggregate runs as (?!alice)/,
	'never as anyone else at commit either');

# ---------------------------------------------------------------------------
# c. a worker stopped in the middle of a round

$node->safe_psql('postgres',
	"SELECT cbt_create('groups', 'k int', 'count(*) AS n, sum(v::bigint) AS s', "
	  . "root_buffer => '64kB', node_buffer => '16kB')");
my $rows = 0;
my $exact = "SELECT count(*) FROM (SELECT k, n, s FROM groups EXCEPT "
  . "SELECT g % 5000, count(*), sum(g) FROM generate_series(1, %d) g GROUP BY 1) d";

# the worker's pid once it is in a round of `groups`, or ''
sub worker_in_round
{
	for (my $i = 0; $i < 600; $i++)
	{
		my $pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = "
			  . "'streamsketch consolidation' AND query = 'consolidating groups' "
			  . "AND state = 'active'");
		return $pid if $pid ne '';
		usleep(20_000);
	}
	return '';
}

foreach my $how (qw(cancel terminate kill))
{
	my $from = $rows + 1;
	$rows += 400_000;
	# uncombined at commit, so that the worker's round is a long one
	$node->safe_psql('postgres',
		"SET streamsketch.test_combine_min_records = 2147483647;\n"
		  . "INSERT INTO groups (k, v) SELECT g % 5000, g FROM generate_series($from, $rows) g");
	my $pid = worker_in_round();
	isnt($pid, '', "$how: the worker is in a round of the 400,000 rows");
	my $offset = -s $node->logfile;
	if ($how eq 'kill')
	{
		kill 'KILL', $pid;
		ss_wait_restart($node, $offset);
	}
	else
	{
		$node->safe_psql('postgres', "SELECT stop_and_wait($pid, '$how')");
	}
	# the next commit queues the structure again
	$rows++;
	$node->safe_psql('postgres', "INSERT INTO groups (k, v) VALUES ($rows % 5000, $rows)");
	is( wait_for(
			'postgres',
			"SELECT log_bytes FROM streamsketch_pending WHERE relation = 'groups'::regclass",
			'0'),
		'0', "$how: a worker consolidated everything afterwards");
	is($node->safe_psql('postgres', sprintf($exact, $rows)),
		'0', "$how: every group exact");
}

# ---------------------------------------------------------------------------
# d. DROP DATABASE and DROP EXTENSION

foreach my $drop ('database', 'extension')
{
	$node->safe_psql('postgres', "CREATE DATABASE d_$drop");
	$node->safe_psql("d_$drop",
		"CREATE EXTENSION streamsketch; CREATE TABLE b (k int) USING bcms;
		 INSERT INTO b SELECT g FROM generate_series(1, 100000) g");
	is( wait_for(
			'postgres', $workers_sql . " AND datname = 'd_$drop'", '1'),
		'1', "$drop: the database has its worker");
	if ($drop eq 'database')
	{
		my ($ret, $out, $err) =
		  $node->psql('postgres', "DROP DATABASE d_$drop");
		is($ret . $err, '0', 'DROP DATABASE is not blocked by the worker');
	}
	else
	{
		$node->safe_psql("d_$drop", 'DROP EXTENSION streamsketch CASCADE');
		is(wait_for('postgres', $workers_sql . " AND datname = 'd_$drop'", '0'),
			'0', 'DROP EXTENSION: the worker leaves');
	}
}

# ---------------------------------------------------------------------------
# e. switched off: notifications wait for a reader

# PostgreSQL 15's ALTER SYSTEM knows only the settings of loaded libraries
$node->safe_psql('postgres',
	"LOAD 'streamsketch'; ALTER SYSTEM SET streamsketch.background_consolidation = off; "
	  . "SELECT pg_reload_conf()");
is(wait_for('postgres', $workers_sql, '0'), '0', 'off: the workers leave');
$node->safe_psql('postgres',
	"SELECT lert_create('hh_off', 'text', threshold => 8, notify => 'off_chan')");
my $off = start_listener('off_chan');
payloads($off);
$node->safe_psql('postgres', "INSERT INTO hh_off SELECT 'x' FROM generate_series(1, 4)")
  foreach (1, 2);
is(wait_payloads($off, 'x', 3), '', 'off: no notification without a reader');
is($node->safe_psql('postgres', $workers_sql), '0', 'off: no worker started');
$node->safe_psql('postgres', "SELECT count(*) FROM lert_reports('hh_off')");
is(wait_payloads($off, 'x', 30), 'x', 'off: a reader consolidates and notifies');

$off->{in} .= "\\q\n";
$off->{run}->finish;

# ---------------------------------------------------------------------------
# f. a worker's round in streamsketch_progress

$node->safe_psql('postgres',
	"LOAD 'streamsketch'; ALTER SYSTEM RESET streamsketch.background_consolidation; "
	  . "ALTER SYSTEM SET streamsketch.test_progress_wait = 4545; SELECT pg_reload_conf()");
my %holder = (in => "SELECT pg_advisory_lock(4545);\n", out => '', err => '');
$holder{run} = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	'<', \$holder{in}, '>', \$holder{out}, '2>', \$holder{err});
my $locked = 0;
for (my $i = 0; $i < 600 && !$locked; $i++)
{
	$holder{run}->pump_nb;
	$locked = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4545 AND granted"
	) eq '1';
	usleep(100_000) unless $locked;
}
ok($locked, 'progress: the lock that holds the round is taken');
$node->safe_psql('postgres',
	"CREATE TABLE shown (k int) USING bcms; "
	  . "INSERT INTO shown SELECT g FROM generate_series(1, 100000) g");
is( wait_for(
		'postgres',
		"SELECT p.operation || ', ' || p.relation || ', ' || p.phase || ', ' || p.unit "
		  . "|| ', ' || (p.done > 0 AND p.done < p.total) FROM streamsketch_progress p "
		  . "JOIN pg_stat_activity a USING (pid) WHERE a.backend_type = 'streamsketch consolidation'",
		'background consolidation, shown, scanning change log, log bytes, true'),
	'background consolidation, shown, scanning change log, log bytes, true',
	'progress: the worker\'s round shows, in the middle of its log');
$holder{in} .= "SELECT pg_advisory_unlock(4545);\n\\q\n";
$holder{run}->finish;
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET streamsketch.test_progress_wait; SELECT pg_reload_conf()");
is( wait_for(
		'postgres',
		"SELECT log_bytes FROM streamsketch_pending WHERE relation = 'shown'::regclass",
		'0'),
	'0', 'progress: the round went on once the lock was free');
is(wait_for('postgres', 'SELECT count(*) FROM streamsketch_progress', '0'),
	'0', 'progress: no row once it ended');

$standby->stop;
$node->stop;
done_testing();
