
# Copyright (c) streamsketch authors
#
# A LERT's reports survive crashes exactly once, and standbys agree.
#
#  1. For each variant (count_stretch, immediate, time_stretch a = 2, and
#     count_stretch in two cones, whose rounds are lanes of their own), a
#     table and a reference table get the same stream in four parts.  The
#     reference consolidates normally; the table's consolidation of each
#     part is stopped by a PANIC at a different point of the round
#     (streamsketch.test_lert_crash: after a merge wrote its new levels,
#     after an install wrote its report pages, after a checkpoint's install
#     before any level-0 page was written back, after one page was written
#     back).  After the restart, the redone round must give exactly the
#     reference's reports (same keys, ids, counts, first and reported
#     positions: the rules are deterministic in the committed stream; with
#     two cones, whose rounds may install in either order, the same reports
#     by key) and the same exact count for every key.
#     The same for a round stopped after it wrote a new version of the
#     spill page of free extents (two-cone tables whose metapage lists two
#     free extents, a test setting).
#  2. An immediate stop changes nothing either.
#  3. A streaming standby answers exactly like the primary.
#  4. An UNLOGGED lert is empty after the crash and usable.
#  5. NOTIFY reaches a listener once per report, at the commit of the
#     transaction that made it.

use strict;
use warnings;

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
# writers leave the log to the readers: each part is one round
streamsketch.change_log_limit = '256MB'
max_wal_size = 2GB
});
my $standby = ss_standby($node, 'standby');

# 8,000 keys with lifetime counts 1..60, interleaved by a hash: ~244k
# observations, a quarter of the keys above T + sum(tau)
$node->safe_psql(
	'postgres', q{
CREATE TABLE stream AS
SELECT row_number() OVER (ORDER BY md5(k::text || ':' || j::text)) - 1 AS pos,
       k::int8 AS k
FROM generate_series(1, 8000) k, generate_series(1, 1 + (k * 7919) % 60) j;
CREATE INDEX ON stream (pos);
});
my $n = $node->safe_psql('postgres', 'SELECT count(*) FROM stream');

my %variant = (
	cs => "variant => 'count_stretch'",
	ir => "variant => 'immediate'",
	ts => "variant => 'time_stretch', age_bits => 2",
	c2 => "variant => 'count_stretch', cones => 2");
my @tags = sort keys %variant;
foreach my $v (@tags)
{
	foreach my $t ("l_$v", "ref_$v")
	{
		$node->safe_psql('postgres',
			"SELECT lert_create('$t', 'int8', buffer_size => '64kB', $variant{$v})");
	}
}
$node->safe_psql('postgres',
	"SELECT lert_create('l_unl', 'int8', buffer_size => '64kB', unlogged => true)");

# the reports, without their times, and every key's count, as one digest;
# report ids only where one cone makes them all (cones' rounds interleave)
sub state_sql
{
	my ($t) = @_;
	my $id = $t =~ /_(c2|sp|rs)$/ ? "0" : "report_id";
	return "SELECT (SELECT count(*) || ' reports ' || "
	  . "coalesce(md5(string_agg(format('%s %s %s %s %s %s', $id, key, count, "
	  . "first_position, reported_position, cone), ',' ORDER BY $id, key)), '-') "
	  . "FROM lert_reports('$t')) || ' counts ' || "
	  . "(SELECT md5(string_agg(lert_count('$t', k)::text, ',' ORDER BY k)) "
	  . "FROM generate_series(1, 8000) k)";
}

my @points = ('merged', 'reports_written', 'installed', 'writeback');
foreach my $part (0 .. 3)
{
	my $lo = int($n * $part / 4);
	my $hi = int($n * ($part + 1) / 4);
	foreach my $v (@tags)
	{
		foreach my $t ("l_$v", "ref_$v")
		{
			$node->safe_psql('postgres',
				"INSERT INTO $t SELECT k FROM stream WHERE pos >= $lo AND pos < $hi ORDER BY pos");
		}
	}
	$node->safe_psql('postgres',
		"INSERT INTO l_unl SELECT k FROM stream WHERE pos >= $lo AND pos < $hi ORDER BY pos");

	my $point = $points[$part];
	foreach my $v (@tags)
	{
		my $ref = $node->safe_psql('postgres', state_sql("ref_$v"));
		my $offset = -s $node->logfile;
		my ($err) = ss_run_sql($node,
			"SET streamsketch.test_lert_crash = $point;\nSELECT count(*) FROM l_$v;\n");
		is($err,
			"XX000: streamsketch.test_lert_crash: stopping at \"$point\" in the consolidation of \"l_$v\"",
			"l_$v: part $part: the consolidation PANICs at $point");
		ss_wait_restart($node, $offset);
		is($node->safe_psql('postgres', state_sql("l_$v")), $ref,
			"l_$v: part $part: after the crash at $point, the reports and counts are the reference's");
	}
}

# 1b. the pool's spill page, with room for two extents in the metapage (a
# test setting), so that every install and reservation keeps the rest of
# the pool on a new version of the spill page:
# - sp (two cones): a round stopped after writing one, before its
#   metapage record, leaves the previous version in force;
# - rs (four cones): a round stopped right after a reservation's record,
#   with a reservation on the spill page, leaves it reserved for its cone's
#   next round, which takes it from there;
# either way the redone round gives the reference's reports and counts
foreach my $case (
	[ 'sp', 2, 'spilled', 'after writing its spill page' ],
	[ 'rs', 4, 'reserved', 'after a reservation, with reservations spilled' ])
{
	my ($s, $cones, $point, $when) = @$case;
	my ($l, $r) = ("l_$s", "ref_$s");
	foreach my $t ($l, $r)
	{
		$node->safe_psql('postgres',
			"SELECT lert_create('$t', 'int8', buffer_size => '64kB', cones => $cones)");
		foreach my $part (0 .. 3)
		{
			my $lo = int($n * $part / 4);
			my $hi = int($n * ($part + 1) / 4);
			$node->safe_psql('postgres',
				"SET streamsketch.test_lert_free_extents = 2;\n"
				  . "INSERT INTO $t SELECT k FROM stream WHERE pos >= $lo AND pos < $hi ORDER BY pos;\n"
				  . ($part < 3 || $t eq $r ? "SELECT count(*) FROM $t;\n" : ""));
		}
	}
	my $ref = $node->safe_psql('postgres', state_sql($r));
	my $offset = -s $node->logfile;
	my ($err) = ss_run_sql($node,
		"SET streamsketch.test_lert_free_extents = 2;\n"
		  . "SET streamsketch.test_lert_crash = $point;\nSELECT count(*) FROM $l;\n");
	is($err,
		"XX000: streamsketch.test_lert_crash: stopping at \"$point\" in the consolidation of \"$l\"",
		"$l: the consolidation PANICs $when");
	ss_wait_restart($node, $offset);
	is($node->safe_psql('postgres', state_sql($l)), $ref,
		"$l: after the crash at $point, the reports and counts are the reference's");
	$node->safe_psql('postgres',
		"SET streamsketch.test_lert_free_extents = 2;\n"
		  . "SELECT lert_flush('$l'), lert_flush('$r')");
	is($node->safe_psql('postgres', state_sql($l)),
		$node->safe_psql('postgres', state_sql($r)),
		"$l: after lert_flush, the reference's reports and counts");
}

# every heavy key is reported once lert_flush merged everything
foreach my $v (@tags)
{
	$node->safe_psql('postgres', "SELECT lert_flush('l_$v'), lert_flush('ref_$v')");
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FILTER (WHERE r.key IS NULL) || ' missed ' ||
       count(*) FILTER (WHERE t.k IS NULL) || ' false'
FROM (SELECT k FROM stream GROUP BY k HAVING count(*) >= 24) t
FULL JOIN lert_reports('l_$v') r ON r.key::int8 = t.k}),
		'0 missed 0 false',
		"l_$v: after lert_flush, exactly the keys with 24 observations are reported");
	is($node->safe_psql('postgres', state_sql("l_$v")),
		$node->safe_psql('postgres', state_sql("ref_$v")),
		"l_$v: after lert_flush, the reference's reports and counts");
}

# 2. an immediate stop
my %before = map { $_ => $node->safe_psql('postgres', state_sql("l_$_")) } @tags;
$node->stop('immediate');
$node->start;
foreach my $v (@tags)
{
	is($node->safe_psql('postgres', state_sql("l_$v")), $before{$v},
		"l_$v: unchanged by an immediate stop");
}

# 3. the standby
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
foreach my $v (@tags)
{
	is($standby->safe_psql('postgres', state_sql("l_$v")), $before{$v},
		"l_$v: the standby answers as the primary");
}
my ($err) = ss_run_sql($standby, "SELECT lert_flush('l_cs')");
like($err, qr/^25006: /, 'lert_flush is refused on a standby');

# 4. the unlogged table is empty after the crash and usable
is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || lert_count('l_unl', 1::int8) FROM l_unl"),
	'0 0', 'the unlogged lert is empty after the crash');
$node->safe_psql('postgres',
	"INSERT INTO l_unl SELECT 7 FROM generate_series(1, 30)");
is($node->safe_psql('postgres', "SELECT key FROM l_unl"), '7',
	'the unlogged lert reports again');

# 5. NOTIFY: the session that consolidates sends one notification per
# report at its commit; a LISTENing session gets it, and nothing for a
# key whose observations rolled back
$node->safe_psql('postgres',
	"SELECT lert_create('l_notify', 'text', threshold => 5, variant => 'immediate', notify => 'heavy')");
my ($nret, $nout, $nerr) = $node->psql(
	'postgres', q{
LISTEN heavy;
BEGIN;
INSERT INTO l_notify SELECT 'rolled back' FROM generate_series(1, 5);
ROLLBACK;
INSERT INTO l_notify SELECT 'k' || g % 3 FROM generate_series(1, 14) g;
SELECT count(*) FROM l_notify;
});
my @got = sort ($nout =~ /Asynchronous notification "heavy" with payload "([^"]*)" received/g);
is(join(',', @got), 'k1,k2',
	'the consolidating session notifies each report once, at its commit, nothing rolled back');
is($node->safe_psql('postgres', 'SELECT string_agg(key, \',\' ORDER BY key) FROM l_notify'),
	'k1,k2', 'the notified keys are the reports');

done_testing();
