
# Copyright (c) streamsketch authors
#
# Crash recovery and streaming replication of quotient_filter relations.
#
# Every committed change to a filter is also logged in a heap table
# exact(tbl, key, n) in the same transaction (n < 0 for qf_delete), so the
# committed count of every key is known exactly.  The filters use
# fp_rate 1e-9, so no two of these keys share a fingerprint and qf_count
# is the exact committed count.
#
#  1. After an immediate shutdown (no shutdown checkpoint, WAL replay) every
#     qf_count and qf_info (items, total_count, pages, levels, remainder
#     bits, resizes, ...) is exactly what it was before the crash and equals
#     the committed counts: inserts, COPY, qf_delete, counted inserts,
#     automatic growth (five times the capacity), qf_resize (also one whose
#     transaction rolled back: it is not transactional), qf_merge (of a grown
#     filter into a smaller one, which grows in turn) and a filter created
#     and filled in one transaction all survive; rolled-back, failed and
#     still-open transactions (inserts, deletes, a merge) leave no trace;
#     no inserted key is missing (no false negatives).
#  2. A streaming standby (from a base backup taken with data in the
#     filters) answers exactly like the primary: every qf_count and
#     qf_contains, and qf_info, after catch-up, after the primary's crash,
#     and after resizes (explicit and automatic) on the primary made after
#     the crash.  Writes on the standby fail cleanly.
#  3. An UNLOGGED filter is empty after a crash, keeps its parameters
#     (capacity, fp_rate, fingerprint and remainder bits, pages, seed: its
#     growth is undone with its contents) and is usable at once, including
#     growing again; a clean restart keeps its contents.
#  4. A crash while qf_resize is writing the new level of a big filter
#     leaves the old level (or, if it finished, the new one) whole: counts
#     exact, pages and resizes consistent, qf_resize works afterwards.
#  5. A second crash after more work (and the work of 2.) changes nothing,
#     and a qf_resize that returned just before it survives it.
#  6. VACUUM FULL shrinks grown filters to their live levels and changes no
#     answer, on the primary, after a crash and on the standby.

use strict;
use warnings;

use IPC::Run;
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
checkpoint_timeout = 1h
max_wal_size = 1GB
# the standby may lag behind when the primary crashes: the end-of-recovery
# checkpoint must not remove the WAL it still needs
wal_keep_size = 1GB
});

# key type of each filter, and whether it is counted (key, count)
my %keytype = (
	q_int => 'int8',       # inserts, COPY, deletes
	q_grow => 'text',      # grows automatically (5x its capacity)
	q_cnt => 'int4',       # counted
	q_rs => 'int4',        # qf_resize
	q_msrc => 'int8',      # merged into q_mdst, after growing
	q_mdst => 'int8',
	q_new => 'int8');      # created and filled in one transaction
my %counted = (q_cnt => 1);
my @tables = sort keys %keytype;
# keys never committed: absent keys and the keys of the uncommitted
# transactions below
my @absent = ('-1', '-7', '424242', '424243', '424244');

# INSERT rows (key [, count]) given by $sel into $tbl and log them
sub ins
{
	my ($tbl, $sel) = @_;
	my $n = $counted{$tbl} ? 'count' : '1';
	return "INSERT INTO $tbl $sel;\n"
	  . "INSERT INTO exact SELECT '$tbl', key::text, $n FROM ($sel) d;\n";
}

# qf_delete $n copies of every key given by $sel from $tbl, and log it
sub del
{
	my ($tbl, $sel, $n) = @_;
	return
	    "SELECT count(qf_delete('$tbl', key::$keytype{$tbl}, $n)) FROM ($sel) d;\n"
	  . "INSERT INTO exact SELECT '$tbl', key::text, -$n FROM ($sel) d;\n";
}

# merge $src into $dst and log it
sub merge
{
	my ($dst, $src) = @_;
	return "SELECT qf_merge('$dst', '$src');\n"
	  . "INSERT INTO exact SELECT '$dst', key, n FROM exact WHERE tbl = '$src';\n";
}

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
CREATE TABLE exact (tbl text, key text, n int8);

SET streamsketch.qf_capacity = 20000;
SET streamsketch.qf_fp_rate = 1e-9;
CREATE TABLE q_int (key int8) USING quotient_filter;
RESET ALL;
SELECT qf_create('q_grow', 'text', capacity => 4000, fp_rate => 1e-9);
SELECT qf_create('q_cnt', 'int4', capacity => 10000, fp_rate => 1e-9,
                 counted => true);
SELECT qf_create('q_rs', 'int4', capacity => 5000, fp_rate => 1e-9);
SELECT qf_create('q_msrc', 'int8', capacity => 5000, fp_rate => 1e-9);
SELECT qf_create('q_mdst', 'int8', capacity => 5000, fp_rate => 1e-9);
});

# data present when the base backup is taken
my $sql = "BEGIN;\n";
$sql .= ins('q_int',
	'SELECT (i % 10000)::int8 + 1 AS key FROM generate_series(1, 15000) i');
$sql .= ins('q_cnt',
	'SELECT i::int4 AS key, (i % 100 + 1)::int8 AS count FROM generate_series(1, 5000) i'
);
$sql .= ins('q_rs', 'SELECT i::int4 AS key FROM generate_series(1, 3000) i');
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# q_dur: resized just before the second crash (not compared like the others)
$primary->safe_psql('postgres', q{
SELECT qf_create('q_dur', 'int8', capacity => 1000, fp_rate => 1e-9);
INSERT INTO q_dur SELECT generate_series(1, 500);
});

my $standby = ss_standby($primary, 'standby');

# an UNLOGGED filter (not on the standby: unlogged relations cannot be read
# during recovery); its parameters before anything was inserted
my $uparams =
  'capacity, fp_rate, fingerprint_bits, remainder_bits, slot_bits, levels, '
  . 'pages, resizes, seed';
$primary->safe_psql('postgres',
	"SELECT qf_create('q_unl', 'int8', capacity => 1000, fp_rate => 1e-9, unlogged => true)"
);
is($primary->safe_psql('postgres',
		"SELECT relpersistence FROM pg_class WHERE relname = 'q_unl'"),
	'u', 'q_unl is unlogged');
my $unl_params = $primary->safe_psql('postgres',
	"SELECT row($uparams)::text FROM qf_info('q_unl')");

$primary->safe_psql('postgres', 'CHECKPOINT');

# From here on everything is replayed from WAL after the crash.
# 1. a big insert, growth, deletes, counted inserts
$sql = "BEGIN;\n";
$sql .= ins('q_grow',
	"SELECT 'k' || i AS key FROM generate_series(1, 20000) i");
$sql .= ins('q_int',
	'SELECT (i % 20000)::int8 + 1 AS key FROM generate_series(1, 20000) i');
$sql .= "COMMIT;\n";
$sql .= "BEGIN;\n";
# q_int: keys 2..5001 have 3 copies, 1 and 5002..10000 two, 10001..20000
# one; delete two copies of 1..1000 and the one of 15001..17500
$sql .= del('q_int', 'SELECT i::int8 AS key FROM generate_series(1, 1000) i', 2);
$sql .= del('q_int',
	'SELECT i::int8 AS key FROM generate_series(15001, 17500) i', 1);
$sql .= del('q_grow',
	"SELECT 'k' || i AS key FROM generate_series(1, 20000, 7) i", 1);
$sql .= ins('q_cnt',
	'SELECT i::int4 AS key, 1000000000000::int8 AS count FROM generate_series(1, 5) i'
);
# (these keys have 31..100 copies)
$sql .= del('q_cnt', 'SELECT i::int4 AS key FROM generate_series(130, 199) i',
	30);
$sql .= "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# 2. many small transactions (and one COPY)
$sql = '';
for my $i (1 .. 200)
{
	$sql .= "BEGIN;\n";
	$sql .= ins('q_int', "SELECT x::int8 AS key FROM (VALUES ($i % 17 + 1), (100000 + $i)) v(x)");
	$sql .= ins('q_cnt', "SELECT ($i % 13)::int4 AS key, ${i}::int8 AS count");
	$sql .= del('q_int', "SELECT (2000 + $i)::int8 AS key", 1) if $i % 3 == 0;
	$sql .= ins('q_grow', "SELECT 'small$i' AS key") if $i % 2 == 0;
	$sql .= "COMMIT;\n";
}
$primary->safe_psql('postgres', $sql);
$primary->safe_psql(
	'postgres',
	"BEGIN;\nCOPY q_int FROM STDIN;\n"
	  . join('', map { (200000 + $_ % 500) . "\n" } 1 .. 5000) . "\\.\n"
	  . "INSERT INTO exact SELECT 'q_int', (200000 + i % 500)::text, 1 FROM generate_series(1, 5000) i;\n"
	  . "COPY q_cnt (key, count) FROM STDIN;\n"
	  . join('', map { (300000 + $_ % 37) . "\t$_\n" } 1 .. 1000) . "\\.\n"
	  . "INSERT INTO exact SELECT 'q_cnt', (300000 + i % 37)::text, i FROM generate_series(1, 1000) i;\n"
	  . "COMMIT;\n");

# 3. qf_resize, twice, and once in a transaction that rolls back (not
# transactional: the layout changes, the contents do not)
my $rs_pages = $primary->safe_psql('postgres', "SELECT pages FROM qf_info('q_rs')");
$primary->safe_psql('postgres', "SELECT qf_resize('q_rs')");
$primary->safe_psql('postgres',
	"BEGIN;\n" . ins('q_rs', 'SELECT 424242::int4 AS key') . "SELECT qf_resize('q_rs');\nROLLBACK;\n");
is($primary->safe_psql('postgres', "SELECT resizes || ' ' || pages FROM qf_info('q_rs')"),
	'2 ' . 4 * $rs_pages, 'q_rs: qf_resize stays done when its transaction rolls back');
$primary->safe_psql('postgres',
	"BEGIN;\n"
	  . ins('q_rs', 'SELECT i::int4 AS key FROM generate_series(2001, 6000) i')
	  . "COMMIT;\n");

# 4. qf_merge of a grown filter into a smaller one
$sql = "BEGIN;\n";
$sql .= ins('q_msrc',
	'SELECT (i * 7)::int8 AS key FROM generate_series(1, 20000) i');
$sql .= del('q_msrc', 'SELECT (i * 7)::int8 AS key FROM generate_series(1, 500) i', 1);
$sql .= ins('q_mdst',
	'SELECT (i * 5)::int8 AS key FROM generate_series(1, 3000) i');
$sql .= "COMMIT;\n";
$sql .= "BEGIN;\n" . merge('q_mdst', 'q_msrc') . "COMMIT;\n";
$primary->safe_psql('postgres', $sql);

# 5. a filter created and filled in one transaction
$sql = "BEGIN;\nSELECT qf_create('q_new', 'int8', capacity => 2000, fp_rate => 1e-9);\n";
$sql .= ins('q_new',
	'SELECT (i % 6000)::int8 AS key FROM generate_series(1, 12000) i');
$sql .= "COMMIT;\n";
# consolidated (and so resized) now: combined per key, its 6,000 records
# are too few for a background worker to take them at once
$sql .= "SELECT qf_flush('q_new');\n";
$primary->safe_psql('postgres', $sql);

# 5b. a big filter (over 1,024 pages), resized at the moment of the crash below
$sql = "SELECT qf_create('q_big', 'int8', capacity => 2000000, fp_rate => 1e-9);\n";
$sql .= "BEGIN;\n"
  . ins('q_big', 'SELECT (i * 3)::int8 AS key FROM generate_series(1, 6000) i')
  . "COMMIT;\n";
$primary->safe_psql('postgres', $sql);
my $big_pages = $primary->safe_psql('postgres', "SELECT pages FROM qf_info('q_big')");
cmp_ok($big_pages, '>=', 1024, "q_big has $big_pages pages");

# 6. the unlogged filter grows too
$primary->safe_psql('postgres',
	"INSERT INTO q_unl SELECT i FROM generate_series(1, 5000) i;\nSELECT qf_flush('q_unl')");
is($primary->safe_psql('postgres',
		"SELECT qf_count('q_unl', 42::int8), resizes > 0, items FROM qf_info('q_unl')"),
	'1|t|5000', 'q_unl: filled and grown before the crash');

# 7. transactions that do not commit
$primary->safe_psql(
	'postgres', q{
BEGIN;
INSERT INTO q_int SELECT 424242 FROM generate_series(1, 100);
SELECT qf_delete('q_int', i::int8) FROM generate_series(1, 100) i;
INSERT INTO q_grow SELECT 'k' || i FROM generate_series(30001, 60000) i;
ROLLBACK;
BEGIN;
SELECT qf_merge('q_mdst', 'q_msrc');
INSERT INTO q_cnt VALUES (424242, 5);
ROLLBACK;
});
my ($ret) = $primary->psql(
	'postgres', q{
BEGIN;
INSERT INTO q_int SELECT 424243 FROM generate_series(1, 1000);
SELECT qf_delete('q_int', 5::int8, 100);
INSERT INTO q_int SELECT 1 / 0;
COMMIT;
});
isnt($ret, 0, 'a transaction with a failing statement is rolled back');

# open at the crash: inserts (enough for growth), deletes and a merge
my $bg1 = $primary->background_psql('postgres');
$bg1->query_safe(
	q{BEGIN;
INSERT INTO q_int SELECT 424244 FROM generate_series(1, 10);
SELECT count(qf_delete('q_int', i::int8, 10)) FROM generate_series(1, 3000) i;
INSERT INTO q_rs SELECT i FROM generate_series(100001, 200000) i;
SELECT qf_merge('q_msrc', 'q_mdst');
});
my $bg2 = $primary->background_psql('postgres');
$bg2->query_safe(
	q{BEGIN;
SET LOCAL streamsketch.pending_memory = '64kB';
INSERT INTO q_grow SELECT 'k' || i FROM generate_series(1, 20000) i;
INSERT INTO q_cnt SELECT 424243, 7 FROM generate_series(1, 10000);
});
# (key 3000 has 3 committed copies)
is($bg1->query_safe(q{SELECT qf_count('q_int', 424244::int8), qf_count('q_int', 3000::int8)}),
	'10|0', 'an open transaction sees its own pending inserts and deletes');
is($primary->safe_psql('postgres', q{SELECT qf_count('q_int', 424244::int8), qf_count('q_int', 3000::int8)}),
	'0|3', 'other sessions do not see them');

# ---------------------------------------------------------------------------
# What a node answers, one line per table and check: "key:count:contains"
# for every key ever logged plus the absent keys, and qf_info without
# relation_pages (the relation may keep blocks that were extended but never
# written, e.g. for a page whose apply was abandoned to grow the filter),
# each filter consolidated first on a primary (ss_qf_flush_sql).
# One psql call per node.
my $infocols =
  'access_method, capacity, fp_rate, fingerprint_bits, remainder_bits, '
  . 'slot_bits, levels, pages, items, total_count, load_factor, '
  . 'false_positive_rate, resizes, seed';
my $absent_sql = "unnest(ARRAY['" . join("', '", @absent) . "'])";

# the tables that exist on $node (q_new appears late)
sub existing
{
	my ($node) = @_;
	my %have = map { $_ => 1 } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT relname FROM pg_class WHERE relname LIKE 'q\\_%' AND relkind = 'r'");
	return grep { $have{$_} } @tables;
}

sub answers
{
	my ($node) = @_;
	my @t = existing($node);
	my $sql = '';
	foreach my $t (@t)
	{
		my $kt = $keytype{$t};
		$sql .= ss_qf_flush_sql($t) . qq{
SELECT string_agg(key || ':' || qf_count('$t', key::$kt) || ':' ||
                  qf_contains('$t', key::$kt), ' ' ORDER BY key)
  FROM (SELECT key FROM exact WHERE tbl = '$t' UNION SELECT $absent_sql) k;
SELECT row($infocols)::text FROM qf_info('$t');};
	}
	my @lines = split /\n/, $node->safe_psql('postgres', $sql);
	die "unexpected answers: " . scalar(@lines) . " lines" if @lines != 2 * @t;
	my %res;
	foreach my $t (@t)
	{
		$res{"$t counts and contains"} = shift @lines;
		$res{"$t info"} = shift @lines;
	}
	return \%res;
}

# the first few differences of two answer strings
sub first_diffs
{
	my ($a, $b) = @_;
	my %b = map { (split /:/)[0] => $_ } split / /, $b;
	my @d;
	foreach my $x (split / /, $a)
	{
		my $k = (split /:/, $x)[0];
		push @d, "$x vs " . ($b{$k} // 'missing')
		  if !defined $b{$k} || $b{$k} ne $x;
		last if @d >= 10;
	}
	return join(', ', @d) || substr($b, 0, 300);
}

sub same_answers
{
	my ($got, $ref, $what) = @_;
	foreach my $k (sort keys %$ref)
	{
		ok(defined $got->{$k} && $got->{$k} eq $ref->{$k}, "$what: $k")
		  or diag("differences (expected vs got): "
			  . first_diffs($ref->{$k}, $got->{$k} // ''));
	}
	return;
}

# On $node: every qf_count equals the logged committed count, no key with a
# committed count is missing (qf_contains), the absent keys are absent,
# items and total_count equal the committed keys and counts.  @only: just
# these tables.
sub exact_on
{
	my ($node, $what, @only) = @_;
	my @t = existing($node);
	if (@only)
	{
		my %only = map { $_ => 1 } @only;
		@t = grep { $only{$_} } @t;
	}
	my $sql = join('', map { ss_qf_exact_sql($_, $keytype{$_}, $absent_sql) } @t);
	my @lines = split /\n/, $node->safe_psql('postgres', $sql);
	foreach my $t (@t)
	{
		my ($items, $total, $keys, $sum) =
		  ss_qf_exact_check(shift @lines // '', "$what: $t");
		is(($items // '') . '/' . ($total // ''), ($keys // '-') . '/' . ($sum // '-'),
			"$what: $t items/total_count equal the committed keys/counts");
	}
	return;
}

my %grown = (q_grow => 1, q_msrc => 1, q_mdst => 1, q_new => 1, q_rs => 1);
foreach my $t (sort keys %grown)
{
	like(
		$primary->safe_psql('postgres',
			"SELECT resizes || ' ' || pages FROM qf_info('$t')"),
		qr/^[1-9]\d* /,
		"$t has been resized before the crash");
}

note($primary->safe_psql('postgres',
	"SELECT string_agg(relname || ': pages ' || pages || ', resizes ' || resizes || ', items ' || items || ', total ' || total_count, E'\n' ORDER BY relname) "
	  . "FROM pg_class, qf_info(oid) WHERE relname LIKE 'q\\_%' AND relkind = 'r'"));
my $before = answers($primary);
my $new_resizes_before = $primary->safe_psql('postgres',
	"SELECT resizes FROM qf_info('q_new')");
exact_on($primary, 'before the crash');

# the standby agrees before the crash
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $before, 'standby before the crash');

# ---------------------------------------------------------------------------
# crash, while q_big is being resized (once the resize has begun to write
# the new level; the crash may come after it finished, then it must be
# kept whole)
my $big_size = $primary->safe_psql('postgres', "SELECT pg_relation_size('q_big')");
my ($rs_out, $rs_err) = ('', '');
my $rs = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $primary->connstr('postgres'), '-c',
		"SELECT qf_resize('q_big')" ],
	'>', \$rs_out, '2>', \$rs_err);
$primary->poll_query_until('postgres',
	"SELECT pg_relation_size('q_big') > $big_size", 't')
  or die 'timed out waiting for the resize of q_big to start';
$primary->stop('immediate');
$rs->finish;
$bg1->quit;
$bg2->quit;
$primary->start;

same_answers(answers($primary), $before, 'after the crash');
exact_on($primary, 'after the crash');

# q_big: the resize interrupted by the crash is either undone or complete
my ($big_resizes, $big_pages_now) = split /\|/,
  $primary->safe_psql('postgres', "SELECT resizes, pages FROM qf_info('q_big')");
note("q_big after the crash: resizes $big_resizes, pages $big_pages_now"
	  . ($rs_out ne '' ? ' (the resize had finished)' : ' (the resize was interrupted)'));
ok( ($big_resizes == 0 && $big_pages_now == $big_pages)
	  || ($big_resizes == 1 && $big_pages_now == 2 * $big_pages),
	'q_big: a resize interrupted by a crash is all or nothing');
ok($big_resizes == 1, 'q_big: a resize that had returned survives the crash')
  if $rs_out ne '';
$keytype{q_big} = 'int8';
@tables = sort keys %keytype;
exact_on($primary, 'after the crash in a resize', 'q_big');
is($primary->safe_psql('postgres', "SELECT qf_resize('q_big')"),
	2 * $big_pages_now, 'q_big: qf_resize works after the crash');
exact_on($primary, 'after the resize that follows the crash', 'q_big');

# the unlogged filter: empty, same parameters, usable, grows again
is( $primary->safe_psql('postgres',
		"SELECT row($uparams)::text FROM qf_info('q_unl')"),
	$unl_params,
	'q_unl: parameters as created (growth undone) after the crash');
is( $primary->safe_psql('postgres',
		"SELECT items || '/' || total_count FROM qf_info('q_unl')"),
	'0/0', 'q_unl: empty after the crash');
is( $primary->safe_psql('postgres',
		'SELECT count(*) FILTER (WHERE qf_contains(\'q_unl\', i::int8)) FROM generate_series(1, 5000) i'),
	'0', 'q_unl: no key left after the crash');
$primary->safe_psql('postgres',
	"INSERT INTO q_unl SELECT i FROM generate_series(1, 4000) i; INSERT INTO q_unl VALUES (7), (7);\n"
	  . "SELECT qf_flush('q_unl')");
is( $primary->safe_psql(
		'postgres', q{
SELECT qf_count('q_unl', 7::int8) || ' ' ||
       count(*) FILTER (WHERE NOT qf_contains('q_unl', i::int8)) || ' ' ||
       (SELECT items || '/' || total_count || ' ' || (resizes > 0)
          FROM qf_info('q_unl'))
  FROM generate_series(1, 4000) i}),
	'3 0 4000/4002 true',
	'q_unl: usable after the crash, grows again, no false negatives');

# the standby follows the restarted primary
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $before,
	'standby after the primary crashed');

# ---------------------------------------------------------------------------
# resizes on the primary after the crash, streamed to the standby:
# qf_resize of a filter, automatic growth of another, a merge, deletes
my $pages_before = $primary->safe_psql('postgres',
	"SELECT pages FROM qf_info('q_cnt')");
is($primary->safe_psql('postgres', "SELECT qf_resize('q_cnt')"),
	2 * $pages_before, 'qf_resize after the crash doubles the pages');
$sql = "BEGIN;\n";
$sql .= ins('q_new',
	'SELECT (10000 + i)::int8 AS key FROM generate_series(1, 10000) i');
$sql .= del('q_int', 'SELECT i::int8 AS key FROM generate_series(1, 100) i', 1);
$sql .= ins('q_cnt', 'SELECT 5::int4 AS key, 5::int8 AS count');
$sql .= "COMMIT;\n";
$sql .= "SELECT qf_flush('q_new');\n";
$primary->safe_psql('postgres', $sql);
my $new_resizes = $primary->safe_psql('postgres',
	"SELECT resizes FROM qf_info('q_new')");
cmp_ok($new_resizes, '>', $new_resizes_before,
	'q_new grew again after the crash');

my $after = answers($primary);
exact_on($primary, 'after resizes on the restarted primary');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $after,
	'standby after resizes on the restarted primary');

# the standby is read-only: writes fail cleanly, it stays up
my ($out, $err);
($ret, $out, $err) =
  $standby->psql('postgres', 'INSERT INTO q_int VALUES (1)');
isnt($ret, 0, 'INSERT on the standby fails');
like($err, qr/read-only|recovery/, 'INSERT on the standby: read-only error');
($ret, $out, $err) = $standby->psql('postgres', "SELECT qf_resize('q_int')");
isnt($ret, 0, 'qf_resize on the standby fails');
like($err, qr/ERROR/, 'qf_resize on the standby reports an ERROR');
($ret, $out, $err) =
  $standby->psql('postgres', "SELECT qf_delete('q_int', 1::int8)");
isnt($ret, 0, 'qf_delete on the standby fails');
is($standby->safe_psql('postgres', 'SELECT 1'), '1', 'the standby is still up');

# ---------------------------------------------------------------------------
# a second crash right after the resizes, with an open transaction, and
# right after a qf_resize of q_dur has returned: a change that was reported
# done must survive an immediate stop like a commit.  The WAL writer is
# slowed down so that only a flush by the resize itself (or its commit)
# can make it durable: the check does not depend on timing.
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET wal_writer_delay = '10s';\nSELECT pg_reload_conf();");
sleep(1);    # the WAL writer reloads within its former delay (200ms)
my $dur_ret = $primary->safe_psql('postgres', "SELECT qf_resize('q_dur')");
my $dur_info = $primary->safe_psql('postgres',
	"SELECT resizes || ' ' || pages FROM qf_info('q_dur')");
is($dur_info, "1 $dur_ret", 'q_dur: resized');
$bg1 = $primary->background_psql('postgres');
$bg1->query_safe(
	q{BEGIN; INSERT INTO q_new SELECT 424242 FROM generate_series(1, 100);});
$primary->stop('immediate');
$bg1->quit;
$primary->start;
$primary->safe_psql('postgres',
	"ALTER SYSTEM RESET wal_writer_delay;\nSELECT pg_reload_conf();");
same_answers(answers($primary), $after, 'after the second crash');
is($primary->safe_psql('postgres',
		"SELECT resizes || ' ' || pages FROM qf_info('q_dur')"),
	$dur_info,
	'q_dur: a qf_resize that returned before an immediate stop survives it');
is($primary->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE NOT qf_contains('q_dur', i::int8)) FROM generate_series(1, 500) i"),
	'0', 'q_dur: no false negatives after the crash');

is( $primary->safe_psql('postgres',
		"SELECT row($uparams)::text || ' ' || items || '/' || total_count FROM qf_info('q_unl')"),
	"$unl_params 0/0",
	'q_unl: empty with its parameters again after the second crash');

# a clean restart keeps everything, the unlogged filter included
$primary->safe_psql('postgres',
	'INSERT INTO q_unl SELECT i FROM generate_series(1, 3000) i; INSERT INTO q_unl VALUES (7), (7)');
my $unl = $primary->safe_psql('postgres',
	"SELECT row($infocols)::text FROM qf_info('q_unl')");
$primary->restart;
same_answers(answers($primary), $after, 'after a clean restart');
is($primary->safe_psql('postgres',
		"SELECT row($infocols)::text FROM qf_info('q_unl')"),
	$unl, 'q_unl: kept across a clean restart');
is($primary->safe_psql('postgres', "SELECT qf_count('q_unl', 7::int8)"),
	'3', 'q_unl: counts kept across a clean restart');

# VACUUM FULL keeps the live levels only: the grown filters shrink, every
# answer stays the same, on the primary, after an immediate stop, and on
# the standby (the copy is WAL-logged page by page)
my $rel_pages_sql =
  "SELECT string_agg(relname || ' ' || relation_pages, ', ' ORDER BY relname) "
  . "FROM pg_class, qf_info(oid) WHERE relname IN ('q_grow', 'q_msrc', 'q_mdst', 'q_rs')";
my $pages_before_vf = $primary->safe_psql('postgres', $rel_pages_sql);
$primary->safe_psql('postgres', 'VACUUM FULL q_grow, q_msrc, q_mdst, q_rs, q_unl');
my $pages_after_vf = $primary->safe_psql('postgres', $rel_pages_sql);
note("relation pages before VACUUM FULL: $pages_before_vf; after: $pages_after_vf");
my %vf_before = map { split / / } split /, /, $pages_before_vf;
my %vf_after = map { split / / } split /, /, $pages_after_vf;
foreach my $t (sort keys %vf_before)
{
	cmp_ok($vf_after{$t}, '<', $vf_before{$t},
		"$t: VACUUM FULL drops the runs left by growth");
}
same_answers(answers($primary), $after, 'after VACUUM FULL');
is($primary->safe_psql('postgres', "SELECT qf_count('q_unl', 7::int8)"),
	'3', 'q_unl: VACUUM FULL of an unlogged filter keeps its contents');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $after, 'standby after VACUUM FULL');
$primary->stop('immediate');
$primary->start;
same_answers(answers($primary), $after, 'after VACUUM FULL and a crash');
is($primary->safe_psql('postgres', "SELECT qf_count('q_unl', 7::int8)"),
	'0', 'q_unl: after VACUUM FULL, an unlogged filter is still reset by a crash');

$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
same_answers(answers($standby), $after, 'standby at the end');

$standby->stop;
$primary->stop;
done_testing();
