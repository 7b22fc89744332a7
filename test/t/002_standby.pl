
# Copyright (c) streamsketch authors
#
# Streaming replication of bcms relations: every change reaches a streaming
# standby through WAL (generic WAL records), so after catching up the
# standby answers bcms_estimate and bcms_info exactly like the primary, for
# tables that existed when the base backup was taken and for tables created
# later.  On the standby the relations are read-only: point queries work,
# writes fail cleanly.  After promotion the standby carries on.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $primary = ss_node(
	'primary',
	streaming => 1,
	conf => q{
shared_buffers = 16MB
max_wal_size = 1GB
# the info rows of both nodes are compared: no worker may consolidate (and
# give log pages back) between the two reads
streamsketch.background_consolidation = off
});

my %keytype = (
	r_buf => 'int8',
	r_plain => 'int4',
	r_text => 'text',
	r_w => 'int8',
	r_late => 'int8');
my %weighted = (r_w => 1);
my @tables = sort keys %keytype;

sub ins
{
	my ($tbl, $sel) = @_;
	my $w = $weighted{$tbl} ? 'weight' : '1';
	return "INSERT INTO $tbl $sel;\n"
	  . "INSERT INTO exact SELECT '$tbl', key::text, $w FROM ($sel) d;\n";
}

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
CREATE TABLE exact (tbl text, key text, w int8);

CREATE TABLE r_buf (key int8) USING bcms;
SET streamsketch.bcms_mode = 'plain';
CREATE TABLE r_plain (key int4) USING bcms;
RESET streamsketch.bcms_mode;
SET streamsketch.bcms_conservative = on;
SET streamsketch.bcms_buffer_size = '256kB';
CREATE TABLE r_text (key text) USING bcms;
RESET ALL;
SELECT bcms_create('r_w', 'int8', epsilon => 0.001, delta => 0.001,
                   weighted => true, buffer_size => '128kB');
});

my $sql = "BEGIN;\n";
$sql .= ins('r_buf',
	'SELECT (i % 700)::int8 AS key FROM generate_series(1, 50000) i');
$sql .= ins('r_text',
	"SELECT 't' || (i % 700) AS key FROM generate_series(1, 50000) i");
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# a standby from a base backup taken with data in the tables
my $standby = ss_standby($primary, 'standby');

# more changes once the standby streams: a big insert, many small
# transactions, a flush, a rolled-back transaction, a table created after
# the backup
$sql = "BEGIN;\n";
$sql .= ins('r_buf',
	'SELECT (i % 1000)::int8 AS key FROM generate_series(1, 100000) i');
$sql .= ins('r_plain',
	'SELECT (i % 1000)::int4 AS key FROM generate_series(1, 100000) i');
$sql .= ins('r_text',
	"SELECT 't' || (i % 3000) AS key FROM generate_series(1, 100000) i");
$sql .= ins('r_w',
	'SELECT (i % 200)::int8 AS key, i::int8 AS weight FROM generate_series(1, 20000) i'
);
$sql .= "COMMIT;\n";
for my $i (1 .. 200)
{
	$sql .= "BEGIN;\n";
	$sql .= ins('r_buf', "SELECT ($i % 11)::int8 AS key");
	$sql .= ins('r_plain', "SELECT ($i % 11)::int4 AS key");
	$sql .= ins('r_text', "SELECT 'small$i' AS key") if $i % 2;
	$sql .= ins('r_w', "SELECT ($i % 3)::int8 AS key, 1000000::int8 AS weight")
	  if $i % 4 == 0;
	$sql .= "COMMIT;\n";
	$sql .= "SELECT FROM bcms_flush('r_buf') a, bcms_flush('r_text') b;\n"
	  if $i == 150;
}
$sql .= q{
BEGIN;
INSERT INTO r_buf SELECT 424242 FROM generate_series(1, 1000);
INSERT INTO r_w VALUES (424242, 5);
ROLLBACK;
};
$sql .= "BEGIN;\nSELECT FROM bcms_create('r_late', 'int8', epsilon => 0.0005, mode => 'plain');\n";
$sql .= ins('r_late',
	'SELECT (i % 300)::int8 AS key FROM generate_series(1, 30000) i');
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# what a node answers: the estimates of all keys inserted (plus some never
# inserted) and bcms_info, one line per table
sub answers
{
	my ($node) = @_;
	my %res;
	foreach my $t (@tables)
	{
		$res{"$t estimates"} = $node->safe_psql(
			'postgres', qq{
SELECT string_agg(key || ':' || bcms_estimate('$t', key::$keytype{$t}), ' '
                  ORDER BY key)
  FROM (SELECT key FROM exact WHERE tbl = '$t'
        UNION SELECT unnest(ARRAY['0', '424242', '-5'])) k});
		$res{"$t info"} = $node->safe_psql('postgres',
			"SELECT row(i.*)::text FROM bcms_info('$t') i");
	}
	return \%res;
}

# compare the answers of the standby with the primary's, and with the
# exact counts
sub check_standby
{
	my ($what) = @_;
	# the primary's lookups consolidate its change logs: read them first,
	# then let the standby replay that too
	my $p = answers($primary);
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	my $s = answers($standby);
	foreach my $k (sort keys %$p)
	{
		# a failure prints both sides: keep the message short
		ok($s->{$k} eq $p->{$k}, "$what: $k equal on the standby")
		  or diag("primary: "
			  . substr($p->{$k}, 0, 500)
			  . "\nstandby: "
			  . substr($s->{$k}, 0, 500));
	}
	foreach my $t (@tables)
	{
		is( $standby->safe_psql(
				'postgres', qq{
SELECT count(*) FROM (SELECT key, sum(w) AS n FROM exact WHERE tbl = '$t'
                      GROUP BY key) e
 WHERE bcms_estimate('$t', key::$keytype{$t}) <> n}),
			'0',
			"$what: $t estimates on the standby equal the committed counts");
		is( $standby->safe_psql(
				'postgres', qq{
SELECT i.items = e.items AND i.total_weight = e.n
  FROM bcms_info('$t') i,
       (SELECT count(*) AS items, sum(w) AS n FROM exact WHERE tbl = '$t') e}),
			't',
			"$what: $t items and total_weight on the standby are the committed ones"
		);
	}
	is( $standby->safe_psql('postgres',
			"SELECT bcms_estimate('r_buf', 424242::int8)"),
		'0',
		"$what: the rolled-back inserts did not reach the standby");
	return;
}

check_standby('after catch-up');

# read-only on the standby: queries work (checked above), writes fail
# cleanly and the standby stays up
my ($ret, $out, $err) =
  $standby->psql('postgres', 'INSERT INTO r_buf VALUES (1)');
isnt($ret, 0, 'INSERT on the standby fails');
like($err, qr/read-only|recovery/, 'INSERT on the standby: read-only error');

# the SQLSTATE of the error a statement raises on a node ('success' if none)
sub sqlstate_of
{
	my ($node, $sql) = @_;
	my ($r, $o, $e) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return 'success' if $r == 0;
	return $e =~ /ERROR:  ([0-9A-Z]{5}): / ? $1 : "no SQLSTATE in: $e";
}

# the other structures, logged and unlogged, reach the standby
$primary->safe_psql(
	'postgres', q{
CREATE TABLE s_qf (key int8) USING quotient_filter;
SELECT bloom_create('s_bloom', 'int8', mode => 'elevator');
CREATE UNLOGGED TABLE u_bcms (key int8) USING bcms;
CREATE UNLOGGED TABLE u_qf (key int8) USING cascade_filter;
CREATE UNLOGGED TABLE u_bloom (key int8) USING bloom_filter;
INSERT INTO s_qf VALUES (1), (2);
INSERT INTO s_bloom VALUES (1);
INSERT INTO u_bcms VALUES (1);
INSERT INTO u_qf VALUES (1);
INSERT INTO u_bloom VALUES (1);
-- qf_info counts what consolidation moved into the levels: qf_flush
-- consolidates on the primary, which the standby then replays (a standby
-- never consolidates: its lookups read the change log instead)
SELECT qf_flush('s_qf');
});
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is( $standby->safe_psql(
		'postgres',
		"SELECT qf_count('s_qf', 1::int8), bloom_contains('s_bloom', 1::int8), "
		  . "(SELECT items FROM qf_info('s_qf'))"),
	'1|t|2',
	'readers of logged filters work on the standby');
is( $primary->safe_psql(
		'postgres',
		"SELECT bcms_estimate('u_bcms', 1::int8), qf_count('u_qf', 1::int8), "
		  . "bloom_contains('u_bloom', 1::int8)"),
	'1|1|t',
	'the unlogged structures work on the primary');

# writers on the standby: 25006 "cannot execute ... during recovery", not
# "cannot assign TransactionIds during recovery" (XX000)
foreach my $w (
	"SELECT bcms_flush('r_buf')",
	"SELECT bcms_merge('r_buf', cms_agg(1::int8, 0.0001, 0.01))",
	"SELECT bloom_flush('s_bloom')",
	"SELECT qf_delete('s_qf', 1::int8)",
	"SELECT qf_merge('s_qf', 's_qf')",
	"SELECT qf_merge_value('s_qf', qfilter_agg(1::int8, 1000000, 0.001))",
	"SELECT qf_resize('s_qf')",
	"SELECT bcms_flush('u_bcms')",
	"SELECT qf_delete('u_qf', 1::int8)")
{
	is(sqlstate_of($standby, $w), '25006', "on the standby: $w gives 25006");
}
($ret, $out, $err) =
  $standby->psql('postgres', "SELECT bcms_flush('r_buf')");
like(
	$err,
	qr/ERROR:  cannot execute bcms_flush\(\) during recovery/,
	'bcms_flush on the standby: the message says why');

# readers of an unlogged structure on the standby, which has none of its
# pages: 0A000 with a hint, not an internal error
foreach my $r (
	"SELECT bcms_estimate('u_bcms', 1::int8)",
	"SELECT bcms_info('u_bcms')",
	"SELECT qf_count('u_qf', 1::int8)",
	"SELECT qf_contains('u_qf', 1::int8)",
	"SELECT qf_info('u_qf')",
	"SELECT bloom_contains('u_bloom', 1::int8)",
	"SELECT bloom_info('u_bloom')")
{
	is(sqlstate_of($standby, $r), '0A000', "on the standby: $r gives 0A000");
}
($ret, $out, $err) =
  $standby->psql('postgres', "SELECT bcms_estimate('u_bcms', 1::int8)");
like(
	$err,
	qr/cannot access unlogged structure "u_bcms" during recovery.*HINT:  Query it on the primary/s,
	'an unlogged structure on the standby: message and hint');
is($standby->safe_psql('postgres', 'SELECT 1'), '1',
	'the standby is still up');

# more changes after a checkpoint (full-page images again), then a restart
# of the standby, which resumes streaming
$primary->safe_psql('postgres', 'CHECKPOINT');
$sql = '';
for my $i (1 .. 50)
{
	$sql .= "BEGIN;\n";
	$sql .= ins('r_buf', "SELECT ($i % 7)::int8 AS key");
	$sql .= ins('r_late', "SELECT ($i % 7)::int8 AS key");
	$sql .= ins('r_w', "SELECT ($i % 7)::int8 AS key, ${i}::int8 AS weight");
	$sql .= "COMMIT;\n";
}
$sql .= "SELECT FROM bcms_flush('r_buf') a, bcms_flush('r_w') b;\n";
$primary->safe_psql('postgres', $sql);
check_standby('after a checkpoint and flushes');

$standby->restart;
$primary->safe_psql('postgres',
	"BEGIN;\n" . ins('r_text', "SELECT 'after restart' AS key") . "COMMIT;\n");
check_standby('after a restart of the standby');

# promotion: the former standby accepts inserts, which add up exactly
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'timed out waiting for promotion';
$standby->safe_psql('postgres',
	"INSERT INTO r_buf SELECT 1 FROM generate_series(1, 10);\n"
	  . "INSERT INTO r_w VALUES (1, 1000);\n"
	  . "INSERT INTO r_text VALUES ('t1'), ('t1');\n");
foreach my $c (['r_buf', '1::int8', 10], ['r_w', '1::int8', 1000],
	['r_text', "'t1'::text", 2])
{
	my ($t, $k, $n) = @$c;
	is( $standby->safe_psql('postgres', "SELECT bcms_estimate('$t', $k)")
		  - $primary->safe_psql('postgres', "SELECT bcms_estimate('$t', $k)"),
		$n,
		"$t: inserts on the promoted standby add exactly their count");
}

$standby->stop;
$primary->stop;
done_testing();
