
# Copyright (c) streamsketch authors
#
# Crash recovery, streaming replication and concurrent writers for the
# buffered_quotient_filter and cascade_filter access methods, with a tiny
# level 0 (64kB, or one 8kB page) so that level merges happen constantly.
#
# Every committed change to a filter is also logged in a heap table
# exact(tbl, key, n) in the same transaction (n < 0 for qf_delete, never
# more than the key's committed count), so the committed count of every
# key is known exactly.  fp_rate 1e-9 (48-bit fingerprints) keeps the
# fingerprints of these ~100 000 keys distinct, so qf_count is the exact
# count.  qf_info's items adds the distinct fingerprints of each level (a
# key present in two levels counts twice), total_count the counts.
#
#  1. Hundreds of small committed transactions (fresh keys, re-inserts of
#     old keys that have moved to older levels, deletes of old keys across
#     levels, rolled-back transactions), a large transaction applied in
#     small batches with merges between them, qf_resize and qf_merge:
#     resizes (merges) grow, the cascade filters get several levels,
#     every count is exact, no committed key is missing, total_count is the
#     sum of the committed counts.
#  2. A streaming standby (from a base backup taken with data in the
#     filters) returns the same counts and qf_info (levels, items, pages,
#     ...) after catch-up: after the merges of 1. and at the end (after two
#     crashes of the primary, more merges and qf_resize); the same qf_info
#     after the primary's first crash and after the merges that follow.
#  3. An immediate stop in the middle of a pgbench run whose transactions
#     keep triggering merges (and delete copies of hot keys): after the
#     restart no committed key is missing and every count is within the
#     transactions in flight at the crash (whose commit may or may not have
#     been recorded when the server stopped); qf_info's total_count is
#     within them too, and once every level is merged into one (qf_resize)
#     items and total_count equal exactly the number and the sum of the
#     counts of every key that may be in the filter.
#  4. An UNLOGGED cascade filter (grown to several levels) is empty after a
#     crash, keeps its parameters (fanout, level 0 size, fingerprints) and
#     works, merging again; committed data survives a second immediate
#     stop after a qf_resize.
#  5. A COMMIT cancelled (pg_cancel_backend), or stopped by an immediate
#     stop, while it appends its changes to the change logs (held there by
#     streamsketch.test_log_append_wait) leaves no trace (no deleted
#     committed key, no inserted key), on the standby too.

use strict;
use warnings;

use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $clients = 3;

my $primary = ss_node(
	'primary',
	streaming => 1,
	conf => q{
shared_buffers = 32MB
# writers consolidate often: the inserts reach buffers and levels as they go
streamsketch.change_log_limit = '64kB'
max_connections = 20
checkpoint_timeout = 1h
max_wal_size = 1GB
# the standby may lag behind when the primary crashes
wal_keep_size = 1GB
});

# name => [access method, fanout, level 0 size, key type, counted]
my %def = (
	cf2 => [ 'cascade_filter', 2, '64kB', 'int8', 0 ],
	cf4 => [ 'cascade_filter', 4, '64kB', 'int8', 0 ],
	cf16 => [ 'cascade_filter', 16, '64kB', 'int8', 0 ],
	bqf => [ 'buffered_quotient_filter', undef, '64kB', 'int8', 0 ],
	# counted, one-page level 0: a merge every ~1000 keys
	cf_cnt => [ 'cascade_filter', 4, '8kB', 'int4', 1 ],
	# merged into cf16 by qf_merge
	cf_src => [ 'cascade_filter', 2, '8kB', 'int8', 0 ]);
my @tables = sort keys %def;
my @plain = qw(bqf cf16 cf2 cf4);    # uncounted, fed the same keys
# the filters the concurrent run writes to
my @busy = qw(bqf cf16 cf2);
# hot keys, 1000 copies each in @busy, deleted one copy at a time
my ($hot_lo, $hot_hi) = (900001, 900020);

sub create_sql
{
	my ($t) = @_;
	my ($am, $fanout, $bs, $kt, $cnt) = @{ $def{$t} };
	return
	    "SELECT qf_create('$t', '$kt', capacity => 200000, fp_rate => 1e-9, "
	  . "access_method => '$am'"
	  . (defined $fanout ? ", fanout => $fanout" : '')
	  . ", buffer_size => '$bs'"
	  . ($cnt ? ', counted => true' : '') . ");\n";
}

my $sql = q{
CREATE EXTENSION streamsketch;
CREATE TABLE exact (tbl text, key int8, n int8);
CREATE INDEX ON exact (tbl, key);
-- the concurrent run takes its keys (b * 1000 + 0..199) from here
CREATE SEQUENCE kseq START 1000;
};
$sql .= create_sql($_) foreach @tables;
$primary->safe_psql('postgres', $sql);

is( $primary->safe_psql(
		'postgres',
		"SELECT string_agg(t || ' ' || access_method || ' ' || levels || ' ' || pages, ', ' ORDER BY t) "
		  . "FROM unnest(ARRAY['bqf', 'cf16', 'cf_cnt']) t, qf_info(t::regclass)"
	),
	'bqf buffered_quotient_filter 1 8, cf16 cascade_filter 1 8, cf_cnt cascade_filter 1 1',
	'level 0 is 64kB (8 pages) or 8kB (1 page)');

# INSERT the keys of $sel (a query returning key [, count]) into @$tabs
# and log them
sub ins
{
	my ($tabs, $sel) = @_;
	my $s = '';
	foreach my $t (@$tabs)
	{
		my $cols = $def{$t}[4] ? 'key::int4, count' : "key::$def{$t}[3]";
		my $n = $def{$t}[4] ? 'count' : '1';
		$s .= "INSERT INTO $t SELECT $cols FROM ($sel) d;\n";
		$s .= "INSERT INTO exact SELECT '$t', key, $n FROM ($sel) d;\n";
	}
	return $s;
}

# qf_delete $n copies of the keys of $sel from @$tabs, logging what it
# removes (at most the committed count, including this transaction's)
sub del
{
	my ($tabs, $sel, $n) = @_;
	my $s = '';
	foreach my $t (@$tabs)
	{
		$s .=
		  "SELECT count(qf_delete('$t', key::$def{$t}[3], $n)) FROM ($sel) d;\n";
		$s .=
		    "INSERT INTO exact SELECT '$t', key, -least($n, s) FROM ($sel) d, "
		  . "LATERAL (SELECT sum(n) AS s FROM exact e WHERE e.tbl = '$t' AND e.key = d.key) x "
		  . "WHERE s > 0;\n";
	}
	return $s;
}

# data present when the base backup is taken; hot keys with 1000 copies
$sql = "BEGIN;\n";
$sql .= ins([@plain, 'cf_cnt'],
	'SELECT i::int8 AS key, (i % 5 + 1)::int8 AS count FROM generate_series(1, 3000) i');
$sql .= ins(\@busy,
	"SELECT h::int8 AS key FROM generate_series($hot_lo, $hot_hi) h, generate_series(1, 1000)");
$sql .= ins(['cf_src'],
	'SELECT (i * 13 + 500000)::int8 AS key FROM generate_series(1, 3000) i');
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

my $standby = ss_standby($primary, 'standby');

# an UNLOGGED cascade filter (not on the standby: unlogged relations cannot
# be read during recovery); its parameters as created
my $uparams =
    'access_method, capacity, fp_rate, fingerprint_bits, remainder_bits, '
  . 'slot_bits, levels, pages, items, total_count, resizes, seed';
$primary->safe_psql('postgres',
	"SELECT qf_create('cf_unl', 'int8', capacity => 200000, fp_rate => 1e-9, "
	  . "access_method => 'cascade_filter', fanout => 4, buffer_size => '64kB', unlogged => true)"
);
is($primary->safe_psql('postgres',
		"SELECT relpersistence FROM pg_class WHERE relname = 'cf_unl'"),
	'u', 'cf_unl is unlogged');
my $unl_params = $primary->safe_psql('postgres',
	"SELECT row($uparams)::text FROM qf_info('cf_unl')");

$primary->safe_psql('postgres', 'CHECKPOINT');

# ---------------------------------------------------------------------------
# 1. From here on everything is replayed from WAL after the crash.
my $resizes_before = $primary->safe_psql('postgres',
	"SELECT string_agg(resizes::text, ' ' ORDER BY t) FROM unnest(ARRAY['"
	  . join("', '", @tables)
	  . "']) t, qf_info(t::regclass)");

# many small transactions: 80 fresh keys each (counted ones in cf_cnt),
# 20 old keys again (they are in older levels by now), every 4th deletes 1
# or 2 copies of 30 old keys, every 13th rolls back
$sql = '';
my $fresh = 3000;
for my $i (1 .. 200)
{
	my $lo = $fresh + 1;
	my $hi = $fresh + 80;
	my $a = ($i * 7919) % $fresh + 1;
	my $b = ($i * 104729) % $fresh + 1;
	$sql .= "BEGIN;\n";
	$sql .= ins([ @plain, 'cf_cnt' ],
		"SELECT i::int8 AS key, (i % 7 + 1)::int8 AS count FROM generate_series($lo, $hi) i");
	$sql .= ins([ @plain, 'cf_cnt' ],
		"SELECT i::int8 AS key, 2::int8 AS count FROM generate_series($a, $a + 19) i");
	$sql .= del([ @plain, 'cf_cnt' ],
		"SELECT i::int8 AS key FROM generate_series($b, $b + 29) i",
		1 + $i % 2)
	  if $i % 4 == 0;
	# a huge count (counter slots) in an old level, more copies in a newer
	# one, then all but 3 of them deleted
	$sql .= ins(['cf_cnt'], 'SELECT 1999999999::int8 AS key, 1000000000000::int8 AS count')
	  if $i == 1;
	$sql .= ins(['cf_cnt'], 'SELECT 1999999999::int8 AS key, 5::int8 AS count')
	  if $i == 100;
	$sql .= del(['cf_cnt'], 'SELECT 1999999999::int8 AS key', 1000000000002)
	  if $i == 180;
	if ($i % 13 == 0)
	{
		$sql .= "ROLLBACK;\n";
	}
	else
	{
		$sql .= "COMMIT;\n";
		$fresh = $hi;
	}
}
$primary->safe_psql('postgres', $sql);

# a large transaction applied in batches of 64kB (~1600 ops) with merges
# between them, deleting copies of keys that other batches insert
$sql = "BEGIN;\nSET LOCAL streamsketch.pending_memory = '64kB';\n";
$sql .= ins([ @plain, 'cf_cnt' ],
	'SELECT i::int8 AS key, 3::int8 AS count FROM generate_series(40001, 48000) i');
$sql .= del([ @plain, 'cf_cnt' ],
	'SELECT i::int8 AS key FROM generate_series(1, 6000, 3) i', 1);
$sql .= ins([ @plain, 'cf_cnt' ],
	'SELECT i::int8 AS key, 1::int8 AS count FROM generate_series(1, 6000, 2) i');
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# qf_resize (merges every level into one twice as large) and qf_merge of a
# cascade filter of several levels into another
$primary->safe_psql('postgres', "SELECT qf_resize('cf4'), qf_resize('bqf')");
$primary->safe_psql('postgres', ss_qf_flush_sql('cf_src'));
like($primary->safe_psql('postgres', "SELECT levels FROM qf_info('cf_src')"),
	qr/^[2-9]$/, 'cf_src has several levels');
# (500 of the source's keys again, in its level 0 while the others are in
# older levels: qf_merge must carry both copies)
$primary->safe_psql('postgres', ins(['cf_src'],
	'SELECT (i * 13 + 500000)::int8 AS key FROM generate_series(1, 500) i'));
$primary->safe_psql('postgres',
	"BEGIN;\nSELECT qf_merge('cf16', 'cf_src');\n"
	  . "INSERT INTO exact SELECT 'cf16', key, n FROM exact WHERE tbl = 'cf_src';\n"
	  . ins(\@plain,
		'SELECT i::int8 AS key FROM generate_series(52001, 54000) i')
	  . "COMMIT;\n");

# a rolled-back transaction that would have merged, and a failed one
$primary->safe_psql('postgres', q{
BEGIN;
INSERT INTO cf2 SELECT -i FROM generate_series(1, 20000) i;
SELECT count(qf_delete('cf4', i::int8, 5)) FROM generate_series(1, 3000) i;
ROLLBACK;
});
my ($ret) = $primary->psql('postgres', q{
BEGIN;
INSERT INTO cf16 SELECT -i FROM generate_series(1, 20000) i;
SELECT count(qf_delete('bqf', i::int8, 5)) FROM generate_series(1, 3000) i;
INSERT INTO cf16 SELECT 1 / 0;
COMMIT;
});
isnt($ret, 0, 'a transaction with a failing statement is rolled back');

# the levels as consolidated are what qf_info describes: consolidate now
$primary->safe_psql('postgres', join('', map { ss_qf_flush_sql($_) } @tables));
my $resizes_after = $primary->safe_psql('postgres',
	"SELECT string_agg(resizes::text, ' ' ORDER BY t) FROM unnest(ARRAY['"
	  . join("', '", @tables)
	  . "']) t, qf_info(t::regclass)");
note("resizes before: $resizes_before, after: $resizes_after");
is( $primary->safe_psql(
		'postgres', q{
SELECT string_agg(t, ' ' ORDER BY t) FROM unnest(ARRAY['bqf', 'cf16', 'cf2', 'cf4', 'cf_cnt']) t,
       qf_info(t::regclass)
 WHERE NOT (resizes >= 3 AND levels > 1)}),
	'',
	"many merges in every filter ($resizes_after merges)");
like($primary->safe_psql('postgres',
		"SELECT levels || ' ' || resizes FROM qf_info('cf2')"),
	qr/^[3-9] \d+$/, 'cf2 (fanout 2) has at least 3 levels');
like($primary->safe_psql('postgres',
		"SELECT levels || ' ' || resizes FROM qf_info('cf_cnt')"),
	qr/^[3-9] [3-9]\d+$/,
	'cf_cnt (one-page level 0) has merged at least 30 times into 3 levels');

# keys that were never committed
my @absent = (-1, -7, -20000, 424242, 99999999);
my $absent_sql = 'unnest(ARRAY[' . join(', ', @absent) . ']::int8[])';

# On $node: per table, the committed keys (sum of logged n > 0), false
# negatives (qf_contains), counts that differ from the logged ones (also
# for the absent keys), and qf_info's items/total_count against the
# committed keys/counts.
sub exact_on
{
	my ($node, $what, @only) = @_;
	my @t = @only ? @only : @tables;
	my $s = join('', map { ss_qf_exact_sql($_, $def{$_}[3], $absent_sql) } @t);
	my @lines = split /\n/, $node->safe_psql('postgres', $s);
	foreach my $t (@t)
	{
		my ($items, $total, $keys, $sum) =
		  ss_qf_exact_check(shift @lines // '', "$what: $t");
		is($total, $sum, "$what: $t total_count is the sum of the committed counts");
		ok(defined $items && $items >= $keys,
			"$what: $t items ($items) >= the committed keys ($keys)");
	}
	return;
}

exact_on($primary, 'after many merges');

# keys of more than one level: items (per level) exceed the distinct keys
cmp_ok(
	$primary->safe_psql('postgres', "SELECT items FROM qf_info('cf2')"),
	'>',
	$primary->safe_psql('postgres',
		"SELECT count(*) FROM (SELECT key FROM exact WHERE tbl = 'cf2' GROUP BY key HAVING sum(n) > 0) k"),
	'cf2 holds keys in several levels');

# ---------------------------------------------------------------------------
# What a node answers: per table "key:count" for every key that may be in
# it (logged keys, the concurrent run's keys up to kseq's last value, the
# absent keys), and qf_info without relation_pages (the relation may keep
# blocks that were extended but never written).
my $infocols =
    'access_method, capacity, fp_rate, fingerprint_bits, remainder_bits, '
  . 'slot_bits, levels, pages, items, total_count, load_factor, '
  . 'false_positive_rate, resizes, seed';

sub keys_sql
{
	my ($t) = @_;
	my $s = "SELECT key FROM exact WHERE tbl = '$t' UNION SELECT $absent_sql";
	$s .=
	  " UNION SELECT b * 1000 + i FROM generate_series(1000, (SELECT last_value FROM kseq)) b, generate_series(0, 199) i"
	  if grep { $_ eq $t } @busy;
	return $s;
}

sub answers
{
	my ($node, $info_only) = @_;
	my $s = '';
	foreach my $t (@tables)
	{
		my $kt = $def{$t}[3];
		$s .= qq{
SELECT md5(string_agg(key || ':' || qf_count('$t', key::$kt), ' ' ORDER BY key)) ||
       ' ' || count(*) FROM (} . keys_sql($t) . qq{) k;} unless $info_only;
		$s .= ss_qf_flush_sql($t) . qq{
SELECT row($infocols)::text FROM qf_info('$t');};
	}
	my @lines = split /\n/, $node->safe_psql('postgres', $s);
	die "unexpected answers: " . scalar(@lines) . " lines"
	  if @lines != ($info_only ? 1 : 2) * @tables;
	my %res;
	foreach my $t (@tables)
	{
		$res{"$t counts"} = shift @lines unless $info_only;
		$res{"$t info"} = shift @lines;
	}
	return \%res;
}

sub same_answers
{
	my ($got, $ref, $what) = @_;
	foreach my $k (sort keys %$ref)
	{
		is($got->{$k}, $ref->{$k}, "$what: $k");
	}
	return;
}

my $before = answers($primary);
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $before, 'standby after many merges');

# the unlogged filter merges too
$primary->safe_psql('postgres',
	'INSERT INTO cf_unl SELECT i FROM generate_series(1, 30000) i;'
	  . ss_qf_flush_sql('cf_unl'));
like( $primary->safe_psql('postgres',
		"SELECT levels || ' ' || (resizes > 0) || ' ' || total_count FROM qf_info('cf_unl')"),
	qr/^[2-9] true 30000$/,
	'cf_unl: several levels before the crash');

# ---------------------------------------------------------------------------
# 3. an immediate stop in the middle of a concurrent run that keeps
# merging: each transaction inserts 200 fresh keys into @busy (level 0
# fills every ~40 transactions) and deletes a copy of a hot key, then
# looks its keys up while other clients merge
my $dir = PostgreSQL::Test::Utils::tempdir;
my $ins_busy = '';
foreach my $t (@busy)
{
	$ins_busy .= "INSERT INTO $t SELECT :b * 1000 + i FROM generate_series(0, 199) i;\n";
}
my $busy_arr = "ARRAY['" . join("', '", @busy) . "']";
open my $fh, '>', "$dir/merge.sql" or die $!;
print $fh qq{
\\set h random($hot_lo, $hot_hi)
SELECT nextval('kseq') AS b \\gset
BEGIN;
${ins_busy}INSERT INTO exact SELECT t, :b * 1000 + i, 1 FROM unnest($busy_arr) t, generate_series(0, 199) i;
SELECT qf_delete(t::regclass, :h::int8) FROM unnest($busy_arr) t;
INSERT INTO exact SELECT t, :h, -1 FROM unnest($busy_arr) t;
COMMIT;
-- while other clients merge: a committed key that is not found, or a hot
-- key that lost copies, fails the client (division by zero)
SELECT 1 / (count(*) FILTER (WHERE qf_contains(t::regclass, :b * 1000 + i)) = 600)::int AS all_found,
       1 / (min(qf_count(t::regclass, :h::int8)) >= 500)::int AS hot_counted
  FROM unnest($busy_arr) t, generate_series(0, 199) i;
};
close $fh;

my %merges = map {
	$_ => $primary->safe_psql('postgres', "SELECT resizes FROM qf_info('$_')")
} @busy;
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[
		'pgbench', '-n', '-h', $primary->host, '-p', $primary->port,
		'-c', $clients, '-j', $clients, '-T', 120,
		'-f', "$dir/merge.sql", 'postgres'
	],
	'>', \$out, '2>', \$err);
$primary->poll_query_until('postgres',
	"SELECT bool_and(resizes >= CASE t "
	  . join(' ', map { "WHEN '$_' THEN $merges{$_} + 3" } @busy)
	  . " END) FROM unnest($busy_arr) t, qf_info(t::regclass)")
  or die "timed out waiting for merges during the pgbench run: $out $err";
$primary->stop('immediate');
$h->finish;    # pgbench fails: connections lost
$primary->start;
unlike($err, qr/division by zero/,
	'during the concurrent run every committed key was found at once');

my $crash_keys = $primary->safe_psql('postgres',
	"SELECT count(*) FROM exact WHERE key >= 1000000 AND tbl = 'cf2'");
note("committed keys of the concurrent run: $crash_keys");
foreach my $t (@busy)
{
	# (every merge but the last is followed by commits that flush it)
	cmp_ok($primary->safe_psql('postgres', "SELECT resizes FROM qf_info('$t')"),
		'>=', $merges{$t} + 2, "$t: the merges of the concurrent run survived the crash");
}

# On $node, for the filters the concurrent run wrote to: no committed key
# is missing, no count is off by more than the transactions in flight at
# the crash (a committed insert is never lost: only hot keys may lose an
# in-flight delete's copies), keys of no logged transaction come only from
# those transactions, total_count likewise.
my $slack = $clients;
sub crash_check
{
	my ($node, $what) = @_;
	my $s = '';
	my $inflight = $clients * 201;
	foreach my $t (@busy)
	{
		$s .= ss_qf_flush_sql($t) . qq{
WITH e AS (SELECT key, sum(n) AS n FROM exact WHERE tbl = '$t' GROUP BY key),
     c AS (SELECT k.key, coalesce(e.n, 0) AS n, e.key IS NOT NULL AS logged,
                  qf_count('$t', k.key) AS est,
                  CASE WHEN e.n > 0 THEN qf_contains('$t', k.key) END AS contains
             FROM (} . keys_sql($t) . qq{) k LEFT JOIN e USING (key))
SELECT count(*) FILTER (WHERE n > 0 AND NOT contains) || ' false negatives, ' ||
       count(*) FILTER (WHERE key NOT BETWEEN $hot_lo AND $hot_hi AND est < n) ||
       ' lost inserts, ' ||
       count(*) FILTER (WHERE abs(est - n) > $slack) || ' counts off by more than $slack, ' ||
       count(*) FILTER (WHERE NOT logged AND key < 1000000 AND est > 0) || ' phantoms, ' ||
       (count(DISTINCT key / 1000) FILTER (WHERE NOT logged AND key >= 1000000 AND est > 0)
        <= $clients) || ' in-flight keys, ' ||
       (SELECT abs(total_count - sum(n)) <= $inflight FROM qf_info('$t')) || ' total_count' ||
       coalesce(': ' || string_agg(key || '=' || est || '<>' || n, ' ')
                          FILTER (WHERE abs(est - n) > $slack OR (est < n AND
                                  key NOT BETWEEN $hot_lo AND $hot_hi)), '')
  FROM c;};
	}
	my @lines = split /\n/, $node->safe_psql('postgres', $s);
	foreach my $t (@busy)
	{
		is(shift @lines,
			"0 false negatives, 0 lost inserts, 0 counts off by more than $slack, "
			  . '0 phantoms, true in-flight keys, true total_count',
			"$what: $t lost nothing committed, counts within the transactions in flight");
	}
	return;
}
crash_check($primary, 'after a crash during merges');
exact_on($primary, 'after the crash', grep { my $t = $_; !grep { $_ eq $t } @busy } @tables);

# the unlogged filter: empty, same parameters, usable, merges again
is($primary->safe_psql('postgres', "SELECT row($uparams)::text FROM qf_info('cf_unl')"),
	$unl_params, 'cf_unl: empty with its parameters (fanout, level 0) after the crash');
is( $primary->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE qf_contains(\'cf_unl\', i::int8)) FROM generate_series(1, 30000) i'),
	'0', 'cf_unl: no key left after the crash');
$primary->safe_psql('postgres',
	'INSERT INTO cf_unl SELECT i FROM generate_series(1, 20000) i; INSERT INTO cf_unl VALUES (7), (7);'
	  . ss_qf_flush_sql('cf_unl'));
is( $primary->safe_psql(
		'postgres', q{
SELECT qf_count('cf_unl', 7::int8) || ' ' ||
       count(*) FILTER (WHERE NOT qf_contains('cf_unl', i::int8)) || ' ' ||
       (SELECT total_count || ' ' || (levels > 1) || ' ' || (resizes > 0) FROM qf_info('cf_unl'))
  FROM generate_series(1, 20000) i}),
	'3 0 20002 true true',
	'cf_unl: usable after the crash, merges again, no false negatives');

# the standby follows the restarted primary
my $after_crash = answers($primary, 1);
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby, 1), $after_crash, 'standby after the primary crashed');

# more merges after the crash, streamed to the standby: small transactions,
# deletes of keys of the concurrent run (now in older levels)
$sql = '';
for my $i (1 .. 60)
{
	my $lo = 60000 + $i * 100;
	$sql .= "BEGIN;\n";
	$sql .= ins([ @plain, 'cf_cnt' ],
		"SELECT i::int8 AS key, 1::int8 AS count FROM generate_series($lo, $lo + 199) i");
	$sql .= del(\@busy,
		"SELECT key FROM exact WHERE tbl = 'cf2' AND key >= 1000000 AND key % 97 = $i GROUP BY key",
		1)
	  if $i % 10 == 0;
	$sql .= "COMMIT;\n";
}
my @merging = ('bqf', 'cf16', 'cf2', 'cf4', 'cf_cnt');
$primary->safe_psql('postgres', join('', map { ss_qf_flush_sql($_) } @merging));
my $m0 = $primary->safe_psql('postgres',
	"SELECT sum(resizes) FROM unnest(ARRAY['bqf', 'cf16', 'cf2', 'cf4', 'cf_cnt']) t, qf_info(t::regclass)");
$primary->safe_psql('postgres', $sql . join('', map { ss_qf_flush_sql($_) } @merging));
cmp_ok(
	$primary->safe_psql('postgres',
		"SELECT sum(resizes) FROM unnest(ARRAY['bqf', 'cf16', 'cf2', 'cf4', 'cf_cnt']) t, qf_info(t::regclass)"),
	'>=', $m0 + 8, 'more merges after the crash');
my $after = answers($primary, 1);
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby, 1), $after, 'standby after merges on the restarted primary');

# merge every level into one: items and total_count are then exactly the
# keys and counts found by qf_count among every key that may be in the
# filter, whatever the crash left of the in-flight transactions
$primary->safe_psql('postgres',
	'SELECT ' . join(', ', map { "qf_resize('$_')" } @tables));
foreach my $t (@tables)
{
	my $kt = $def{$t}[3];
	like( $primary->safe_psql(
			'postgres', qq{
SELECT (SELECT items || ' ' || total_count FROM qf_info('$t')) || ' = ' ||
       count(*) FILTER (WHERE c > 0) || ' ' || sum(c)
  FROM (SELECT qf_count('$t', key::$kt) AS c FROM (} . keys_sql($t) . qq{) k) x}),
		qr/^(\d+ \d+) = \1$/,
		"$t: after qf_resize items and total_count are exactly those of its keys");
}

# ---------------------------------------------------------------------------
# a second immediate stop right after the resizes and more merges: nothing
# changes (the WAL writer is slowed down so only the commits make the
# changes durable)
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET wal_writer_delay = '10s';\nSELECT pg_reload_conf();");
sleep(1);
$sql = "BEGIN;\n"
  . ins([ @plain, 'cf_cnt' ],
	'SELECT i::int8 AS key, 2::int8 AS count FROM generate_series(80001, 90000) i')
  . "COMMIT;\n";
$primary->safe_psql('postgres', $sql);
my $bg = $primary->background_psql('postgres');
$bg->query_safe(
	q{BEGIN; INSERT INTO cf2 SELECT 424242 FROM generate_series(1, 100);});
my $final = answers($primary);
$primary->stop('immediate');
$bg->quit;
$primary->start;
$primary->safe_psql('postgres',
	"ALTER SYSTEM RESET wal_writer_delay;\nSELECT pg_reload_conf();");
same_answers(answers($primary), $final, 'after the second crash');
exact_on($primary, 'after the second crash',
	grep { my $t = $_; !grep { $_ eq $t } @busy } @tables);
crash_check($primary, 'after the second crash');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $final, 'standby at the end');

# ---------------------------------------------------------------------------
# 5. A transaction that does not commit leaves no trace, even when its
# COMMIT is cancelled, or the server stops, while the commit appends its
# changes to the change logs (one relation after the other, in the order
# the transaction first changed them): here it deletes a committed key of
# cf_txn (appended first) and inserts 2 million keys into cf_big (whose
# batch of about 80 MB takes seconds to append).  Whether the COMMIT is
# cancelled or the server stops, the transaction either committed whole or
# left nothing: a committed key is not missing, and none of its inserts
# count (README, Semantics).
$primary->safe_psql(
	'postgres', q{
SELECT qf_create('cf_txn', 'int8', capacity => 200000, fp_rate => 1e-9,
                 access_method => 'cascade_filter', fanout => 4, buffer_size => '64kB');
SELECT qf_create('cf_big_cancel', 'int8', capacity => 200000, fp_rate => 1e-9,
                 access_method => 'cascade_filter', fanout => 2, buffer_size => '8kB');
SELECT qf_create('cf_big_crash', 'int8', capacity => 200000, fp_rate => 1e-9,
                 access_method => 'cascade_filter', fanout => 2, buffer_size => '8kB');
CREATE TABLE marker (how text);
CREATE TABLE other (x int);
INSERT INTO cf_txn VALUES (42), (43), (52), (53);
});

# $how: 'cancel' (pg_cancel_backend) or 'crash' (immediate stop, after
# the batch's WAL so far was flushed); $k: the committed key the
# transaction deletes, $k + 2 the key it inserts.  The COMMIT is held in
# the middle of cf_big's append (streamsketch.test_log_append_wait) by an
# advisory lock another session holds, so the cancel or the stop lands
# there every time.
sub interrupted_commit
{
	my ($how, $k) = @_;
	# a fresh table per case: the log pages a cancelled append leaves free
	# would be reused, and the file would not grow as the poll expects
	my $big = "cf_big_$how";
	my $wait_key = 9009;
	$primary->safe_psql('postgres', "SELECT qf_flush('$big')");
	my $big0 = $primary->safe_psql('postgres',
		"SELECT total_count FROM qf_info('$big')");
	my $size0 = $primary->safe_psql('postgres',
		"SELECT pg_relation_size('$big')");
	my ($hout, $herr) = ('', '');
	my $holder = IPC::Run::start(
		[
			'psql', '-XAtq', '-d',
			$primary->connstr('postgres') . " application_name=holder_$how",
			'-c', "SELECT pg_advisory_lock($wait_key); SELECT pg_sleep(3600);"
		],
		'>', \$hout, '2>', \$herr);
	$primary->poll_query_until('postgres',
		"SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND objid = $wait_key AND granted)")
	  or die "timed out waiting for the advisory lock: $herr";
	my ($o, $e) = ('', '');
	my $psql = IPC::Run::start(
		[
			'psql', '-XAtq', '-d',
			$primary->connstr('postgres') . " application_name=commit_$how",
			'-c', "SET streamsketch.test_log_append_wait = $wait_key;
BEGIN;
SELECT qf_delete('cf_txn', ${k}::int8);
INSERT INTO cf_txn VALUES ($k + 2);
INSERT INTO $big SELECT generate_series(1, 2000000);
INSERT INTO marker VALUES ('$how');
COMMIT;"
		],
		'>', \$o, '2>', \$e);
	# the COMMIT has appended cf_txn's batch and part of cf_big's (its log
	# pages grew the file) and waits; readers still count the deleted key,
	# its transaction has not committed
	$primary->poll_query_until('postgres',
		"SELECT pg_relation_size('$big') > $size0 + 8 * 1024 * 1024"
		  . " AND EXISTS (SELECT FROM pg_stat_activity"
		  . " WHERE application_name = 'commit_$how' AND wait_event = 'advisory')")
	  or die "timed out waiting for the commit to append its changes: $o $e";
	is($primary->safe_psql('postgres', "SELECT qf_count('cf_txn', ${k}::int8)"),
		'1', "$how during COMMIT: the delete is not seen before its transaction commits");
	if ($how eq 'cancel')
	{
		$primary->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'commit_cancel'"
		);
		$psql->finish;
		$primary->safe_psql('postgres',
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder_cancel'"
		);
		$holder->finish;
		like($e, qr/canceling statement due to user request/,
			"cancel during COMMIT: the COMMIT was cancelled");
	}
	else
	{
		$primary->stop('immediate');
		$psql->finish;
		$holder->finish;
		$primary->start;
	}
	is($primary->safe_psql('postgres', "SELECT count(*) FROM marker WHERE how = '$how'"),
		'0', "$how during COMMIT: the transaction did not commit");
	$primary->safe_psql('postgres', "SELECT qf_flush('$big')");
	my $state = $primary->safe_psql('postgres',
		"SELECT string_agg(k || ':' || qf_count('cf_txn', k::int8), ' ' ORDER BY k) || ' ' || "
		  . "(SELECT total_count - $big0 FROM qf_info('$big')) "
		  . "FROM unnest(ARRAY[$k, $k + 1, $k + 2]) k");
	my ($k0, $k1, $k2) = ($k, $k + 1, $k + 2);
	is($state, "$k0:1 $k1:1 $k2:0 0",
		"$how during COMMIT: the transaction left no trace "
		  . "(committed key $k0 still there, key $k2 and cf_big's keys absent)");
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	is( $standby->safe_psql('postgres',
			"SELECT qf_count('cf_txn', ${k0}::int8) || ' ' || qf_count('cf_txn', ${k2}::int8)"),
		'1 0',
		"$how during COMMIT: the standby agrees");

	# a later delete counts once it commits, on both nodes
	$primary->safe_psql('postgres', "SELECT qf_delete('cf_txn', ${k1}::int8)");
	is( $primary->safe_psql('postgres', "SELECT qf_count('cf_txn', ${k1}::int8)"),
		'0', "$how during COMMIT: a later delete counts");
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
	is( $standby->safe_psql('postgres', "SELECT qf_count('cf_txn', ${k1}::int8)"),
		'0', "$how during COMMIT: the standby agrees on the later delete");
	return;
}
interrupted_commit('cancel', 42);
interrupted_commit('crash', 52);

$standby->stop;
$primary->stop;
done_testing();
