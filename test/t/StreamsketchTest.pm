# Copyright (c) streamsketch authors
#
# The set-up the TAP tests share: nodes with the settings every test wants,
# standbys, running SQL that is expected to fail, waiting for a crash
# restart, and statements run in the background to be canceled or
# terminated.  A test uses it with
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use StreamsketchTest;
#
# The size knob: STREAMSKETCH_TEST_SCALE=full runs the long stream and fuzz
# volumes; unset (or ci, what CI runs) smaller ones, which still reach
# every code path the full ones reach (each file's header says what it
# scales and what its CI volume still exercises).  ss_scale picks the
# value for the scale in force.

package StreamsketchTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use Time::HiRes qw(usleep time);

our @EXPORT = qw(ss_node ss_standby ss_run_sql ss_wait_restart
  ss_create_stop_and_wait ss_start_bg ss_stop_bg ss_pgbench_scripts
  ss_pgbench_cmd ss_qf_flush_sql ss_qf_exact_sql ss_qf_exact_check ss_scale
  $SS_CANCELED $SS_TERMINATED);

# the "SQLSTATE: message" of a canceled and of a terminated statement
our $SS_CANCELED = '57014: canceling statement due to user request';
our $SS_TERMINATED =
  '57P01: terminating connection due to administrator command';

# ss_scale(ci => X, full => Y): X or Y, as STREAMSKETCH_TEST_SCALE says
# (ci when unset); dies on another value.
sub ss_scale
{
	my (%by) = @_;
	my $scale = $ENV{STREAMSKETCH_TEST_SCALE} || 'ci';
	die "STREAMSKETCH_TEST_SCALE is '$scale': ci or full expected\n"
	  unless exists $by{$scale};
	return $by{$scale};
}

# A started node.  Options: streaming => 1 (it will have standbys),
# conf => more postgresql.conf lines, consistency => 0 to leave out
# wal_consistency_checking (on by default: every replayed generic WAL
# record, in crash recovery or on a standby, is compared with the page the
# primary wrote, which checks the deltas src/storage/ss_xlog.c computes),
# extension => 1 to create the extension.
sub ss_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => $opt{streaming} ? 1 : 0);
	my $conf = '';
	$conf .= "wal_consistency_checking = 'generic'\n"
	  if $opt{consistency} // 1;
	$conf .= $opt{conf} // '';
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION streamsketch')
	  if $opt{extension};
	return $node;
}

# A started streaming standby of $primary, from a new base backup.  It
# streams through a physical replication slot: a primary that crashes and
# writes a lot of WAL while the standby reconnects must not remove the
# segments the standby still needs.
sub ss_standby
{
	my ($primary, $name) = @_;
	my $backup = "${name}_base";
	$primary->safe_psql('postgres',
		"SELECT pg_catalog.pg_create_physical_replication_slot('$name', true)");
	$primary->backup($backup);
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, $backup, has_streaming => 1);
	$standby->append_conf('postgresql.conf', "primary_slot_name = '$name'");
	$standby->start;
	return $standby;
}

# Run SQL in a new session; returns its first error as "SQLSTATE: message"
# ('' if none), and its stdout.
sub ss_run_sql
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $e = $err =~ /(?:ERROR|FATAL|PANIC):  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : '';
	return ($e, $out);
}

# Wait until a node that crashed (restart_after_crash) accepts connections
# again; $offset is the size of its log before the crash.
sub ss_wait_restart
{
	my ($node, $offset) = @_;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$offset);
	$node->wait_for_log(qr/database system is ready to accept connections/,
		$offset);
	return;
}

# stop_and_wait(pid, 'cancel' | 'terminate'): stop a backend's statement
# and wait until it no longer runs one; returns the seconds that took.
sub ss_create_stop_and_wait
{
	my ($node) = @_;
	$node->safe_psql(
		'postgres', q{
CREATE FUNCTION stop_and_wait(p int, how text) RETURNS float8
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
  t0 timestamptz;
BEGIN
  IF how = 'cancel' THEN
    PERFORM pg_cancel_backend(p);
  ELSE
    PERFORM pg_terminate_backend(p);
  END IF;
  t0 := clock_timestamp();
  LOOP
    PERFORM pg_stat_clear_snapshot();  -- else the first read is kept
    EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity
                           WHERE pid = p AND state = 'active');
    EXIT WHEN clock_timestamp() - t0 > interval '60 s';
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;
});
	return;
}

# Run statements in a new session in the background, the last one tagged
# so that pg_stat_activity finds it; returns once it runs (pid '' if it
# ended before it could be seen).
my $tagno = 0;

sub ss_start_bg
{
	my ($node, @sql) = @_;
	my $tag = 'bg' . ++$tagno;
	my %h = (out => '', err => '', tag => $tag, node => $node);
	$sql[-1] = "/* $tag */ $sql[-1]";
	$h{run} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
			'-d', $node->connstr('postgres'), map { ('-c', $_) } @sql
		],
		'>', \$h{out}, '2>', \$h{err});
	$h{pid} = '';
	# the statements before the tagged one may take long on a busy machine
	my $deadline = time + 300;
	while (time < $deadline && $h{pid} eq '')
	{
		$h{run}->pump_nb;
		last unless $h{run}->pumpable;
		$h{pid} = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE state = 'active' "
			  . "AND query LIKE '/* $tag */%'");
	}
	$h{started} = time;
	return \%h;
}

# Cancel or terminate a background session $delay s (default 0.3) after it
# started running; needs stop_and_wait (ss_create_stop_and_wait).  Returns
# the seconds until the backend stopped running the statement (server
# side) and until the client had its error; sets $h->{error} ("SQLSTATE:
# message" or '') and $h->{ran} (seconds it ran in all).
sub ss_stop_bg
{
	my ($h, $how, $delay) = @_;
	my ($secs, $client) = (0, 0);
	if ($h->{pid} ne '')
	{
		usleep(int(($delay // 0.3) * 1e6));
		my $t0 = time;
		$secs = $h->{node}->safe_psql('postgres',
			"SELECT stop_and_wait($h->{pid}, '$how')");
		$h->{run}->finish;
		$client = time - $t0;
	}
	else
	{
		$h->{run}->finish;
	}
	$h->{error} = $h->{err} =~ /(?:ERROR|FATAL):  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : '';
	$h->{ran} = time - $h->{started};
	return ($secs, sprintf('%.3f', $client));
}

# Write pgbench scripts (name => text) to a new temporary directory;
# returns it.
sub ss_pgbench_scripts
{
	my (%scripts) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	foreach my $f (keys %scripts)
	{
		open my $fh, '>', "$dir/$f" or die $!;
		print $fh $scripts{$f};
		close $fh;
	}
	return $dir;
}

# The pgbench command running the weighted scripts ("name\@weight") of
# $dir with $clients clients against $node; run=$run is set for the
# scripts, @limit is -t N or -T secs.
sub ss_pgbench_cmd
{
	my ($node, $dir, $clients, $run, $limit, @scripts) = @_;
	return [
		'pgbench', '-n', '-h', $node->host, '-p', $node->port,
		'-c', $clients, '-j', 2, '-D', "run=$run", @$limit,
		(map { ('-f', "$dir/$_") } @scripts), 'postgres'
	];
}

# A statement that prints nothing and, on a primary, consolidates the
# quotient filter $t (qf_flush), so that qf_info's counters, which
# describe the levels as consolidated, include every committed change and
# stay put while they are compared (a background worker finds nothing
# left to do); on a standby it does nothing.
sub ss_qf_flush_sql
{
	my ($t) = @_;
	return qq{
DO \$\$BEGIN IF NOT pg_is_in_recovery() THEN PERFORM qf_flush('$t'); END IF; END\$\$;};
}

# One line checking a quotient filter $t (keys of type $kt) against the
# committed counts of table exact (tbl, key, n) and the keys of
# $absent_sql (a set-returning expression) that were never inserted, after
# ss_qf_flush_sql:
#   "P present, F false negatives, W wrong counts[: key=est<>n ...];
#    ITEMS TOTAL info, KEYS SUM committed"
sub ss_qf_exact_sql
{
	my ($t, $kt, $absent_sql) = @_;
	return ss_qf_flush_sql($t) . qq{
WITH e AS (SELECT key, sum(n) AS n FROM exact WHERE tbl = '$t' GROUP BY key),
     c AS (SELECT key, n, qf_count('$t', key::$kt) AS est,
                  qf_contains('$t', key::$kt) AS contains
             FROM (SELECT * FROM e
                   UNION ALL
                   SELECT key, 0 FROM $absent_sql key
                    WHERE key NOT IN (SELECT key FROM e)) x)
SELECT count(*) FILTER (WHERE n > 0) || ' present, ' ||
       count(*) FILTER (WHERE n > 0 AND NOT contains) || ' false negatives, ' ||
       count(*) FILTER (WHERE est <> n) || ' wrong counts' ||
       coalesce(': ' || string_agg(key || '=' || est || '<>' || n, ' ')
                          FILTER (WHERE est <> n), '') || '; ' ||
       (SELECT items || ' ' || total_count FROM qf_info('$t')) || ' info, ' ||
       count(*) FILTER (WHERE n > 0) || ' ' || sum(n) || ' committed'
  FROM c;};
}

# Check one line of ss_qf_exact_sql: some keys present, no false negative,
# every count exact; returns (items, total_count, committed keys, sum).
sub ss_qf_exact_check
{
	my ($res, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	Test::More::like($res,
		qr/^[1-9]\d* present, 0 false negatives, 0 wrong counts;/,
		"$what: counts equal the committed counts, no false negatives")
	  or Test::More::diag(substr($res, 0, 2000));
	return $res =~ /; (\d+) (\d+) info, (\d+) (\d+) committed$/;
}

1;
