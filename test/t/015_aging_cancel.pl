
# Copyright (c) streamsketch authors
#
# Cancel latency and xid aging (docs/change-log-design.md):
#
#  A. Cancel latency: a long operation stops within a second of
#     pg_cancel_backend (or pg_terminate_backend) and loses nothing.
#     a. Creating a large structure is O(1): the largest structures
#        streamsketch.max_structure_size allows are created, written and
#        read in milliseconds, one page on disk; larger ones fail with
#        54000 and leave nothing; a transaction that created one and is
#        canceled during its long INSERT leaves neither table nor file.
#     b. The quotient filter family's long operations: a quotient_filter
#        growing (level 0 doubling) and a cascade_filter merging levels
#        while VACUUM consolidates a 1-million-key batch, and qf_resize of
#        a large quotient_filter (empty, and holding a million keys) and of
#        a cascade_filter.  Each is canceled and terminated mid-way, must
#        stop within a second with 57014 / 57P01, leave every count exact
#        (qf_count of every committed key, qf_info's items and total), and
#        a retry completes.
#  B. Aging: relfrozenxid advances under VACUUM, and the structures survive
#     xid aging, clog truncation and anti-wraparound autovacuum without a
#     wrong answer, for bcms (buffered, plain), bloom_filter (localized,
#     elevator), quotient_filter, cascade_filter, lert, cbt and bfile, each
#     holding committed
#     and aborted batches still in its change log while the xids age.
#     1. 1.1 million xids are consumed with the batches in the logs; every
#        other relation of every database is frozen: the structures alone
#        hold datfrozenxid back (at or before their oldest batch), so the
#        clog segment of the batches is kept, and a standby still answers
#        exactly.  Then vacuumdb --all --freeze: age(relfrozenxid) of every
#        structure and age(datfrozenxid) of every database drop to a few
#        xids, clog segment 0000 is removed on the primary and the standby,
#        and the answers stay exact (the aborted batches never count).
#     2. With autovacuum_freeze_max_age = 100000, another 1.2 million xids
#        are consumed with new committed and aborted batches in the logs:
#        anti-wraparound autovacuum alone vacuums the structures (their
#        last_autovacuum is set), relfrozenxid and datfrozenxid stay within
#        autovacuum_freeze_max_age, clog segment 0001 goes, and the answers
#        stay exact on both nodes.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;
use Time::HiRes qw(usleep time);
use POSIX qw(ceil floor);

my $node = ss_node(
	'primary',
	streaming => 1,
	consistency => 0,
	extension => 1,
	conf => q{
autovacuum = off
# the logs below are consolidated by the VACUUMs, resizes and cancels
# under test, not by a background worker before them
streamsketch.background_consolidation = off
shared_buffers = 128MB
max_connections = 30
max_wal_size = 4GB
checkpoint_timeout = 1h
log_statement = none
vacuum_freeze_min_age = 0
vacuum_freeze_table_age = 0
log_autovacuum_min_duration = -1
});
ss_create_stop_and_wait($node);
$node->safe_psql(
	'postgres', q{
-- consume n xids, one transaction each
CREATE PROCEDURE burn_xids(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    PERFORM pg_current_xact_id();
    COMMIT;
  END LOOP;
END $$;
});

# the bytes of disk a relation's files (path, path.1, ...) take on node n
sub allocated
{
	my ($n, $path) = @_;
	my $bytes = 0;
	foreach my $f (glob($n->data_dir . "/$path") , glob($n->data_dir . "/$path.*"))
	{
		next unless $f =~ m{/\d+(?:\.\d+)?$};
		my @st = stat($f);
		$bytes += $st[12] * 512 if @st;
	}
	return $bytes;
}

# stop a long operation both ways, each time checking that it stopped
# mid-way, within a second, with the right SQLSTATE; $after runs after
# each stop (answers unchanged)
my @latencies;

sub stop_both_ways
{
	my ($what, $sql, $after, $delay, $before, $wait_key) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $how ('cancel', 'terminate')
	{
		$before->($how) if $before;
		my ($h, $secs, $client);
		if ($wait_key)
		{
			# held in the middle of its first counted phase
			# (streamsketch.test_progress_wait) while this test holds the
			# advisory lock, so that the stop lands there on any machine
			my $holder = $node->background_psql('postgres');
			$holder->query_safe("SELECT pg_advisory_lock($wait_key)");
			$h = ss_start_bg($node,
				"SET streamsketch.test_progress_wait = $wait_key", @$sql);
			$node->poll_query_until('postgres',
				"SELECT wait_event = 'advisory' FROM pg_stat_activity WHERE pid = '$h->{pid}'")
			  or die "$what: never reached the held point of its work";
			($secs, $client) = ss_stop_bg($h, $how, 0);
			$holder->query_safe("SELECT pg_advisory_unlock($wait_key)");
			$holder->quit;
		}
		else
		{
			$h = ss_start_bg($node, @$sql);
			($secs, $client) = ss_stop_bg($h, $how, $delay);
		}
		is($h->{error}, $how eq 'cancel' ? $SS_CANCELED : $SS_TERMINATED,
			$wait_key ? "$what: stopped by $how in the middle of its work"
			: "$what: stopped by $how (else it ended within $delay s: make it longer)");
		cmp_ok($secs, '<', 1.0,
			"$what: stopped $secs s after the $how (client saw it after $client s)");
		push @latencies, "$what, $how: $secs s (client $client s)";
		$after->($how) if $after;
	}
	return;
}

# ---------------------------------------------------------------------
# A.a  Creating the largest structures is O(1); too large ones fail and
# leave nothing.
# ---------------------------------------------------------------------

# A quotient_filter's pages as it is sized to its capacity (qf_sized_base):
# ceil(ceil(capacity / 0.95) / home slots per page), rounded up to 10
# significant bits.  The home slots per page at the rate's remainder bits
# are a qfilter's of several areas (the same sizing and area).
sub qf_home_slots
{
	my ($fp_rate) = @_;
	my $text = $node->safe_psql('postgres',
		"SELECT qfilter_agg(1::int8, 100000, $fp_rate)::text");
	my ($home, $pages) = $text =~ / home_slots=(\d+) pages=(\d+) /
	  or die "no home_slots in $text";
	die "a one-area qfilter: $text" if $pages < 2;
	return $home;
}

sub qf_sized_pages
{
	my ($capacity, $home) = @_;
	my $n = ceil(ceil($capacity / 0.95) / $home);
	my $shift = length(sprintf('%b', $n)) - 10;
	$n = ceil($n / 2**$shift) * 2**$shift if $shift > 0;
	return $n;
}

my $home_1e6 = qf_home_slots('1e-6');
my $limit_pages = $node->safe_psql('postgres',
	"LOAD 'streamsketch'; SELECT setting::bigint * 1024 * 1024 / 8192 "
	  . "FROM pg_settings WHERE name = 'streamsketch.max_structure_size'");
# the capacities whose filters take k pages of the limit's: refused at
# the limit's own (the metapage is one more), created 2^14 (one step of
# the rounding there) below
my $cap_pages = sub { floor(0.95 * $home_1e6 * $_[0]) };
my $over_cap = $cap_pages->($limit_pages - 1);
my $edge_cap = $cap_pages->($limit_pages - 16384);
cmp_ok(qf_sized_pages($over_cap, $home_1e6) + 1, '>', $limit_pages,
	"capacity $over_cap at 1e-6 is sized over streamsketch.max_structure_size ($limit_pages pages)");
cmp_ok(qf_sized_pages($edge_cap, $home_1e6) + 1, '<=', $limit_pages,
	"capacity $edge_cap at 1e-6 is sized within it");

my @huge = (
	[ 'huge_buf', "SELECT bcms_create('%s', 'int8', epsilon => 5e-9, delta => 0.01)",
	  "SELECT sketch_pages FROM bcms_info('%s')", 2_000_000,
	  "SELECT bcms_estimate('%s', 7::int8)", '1' ],
	[ 'huge_plain', "SELECT bcms_create('%s', 'int8', epsilon => 5e-9, delta => 0.01, mode => 'plain')",
	  "SELECT sketch_pages FROM bcms_info('%s')", 2_000_000,
	  "SELECT bcms_estimate('%s', 7::int8)", '1' ],
	[ 'huge_bloom', "SELECT bloom_create('%s', 'int8', capacity => 10000000000, fp_rate => 0.001)",
	  "SELECT pages FROM bloom_info('%s')", 2_000_000,
	  "SELECT bloom_contains('%s', 7::int8)", 't' ],
	[ 'huge_qf', "SELECT qf_create('%s', 'int8', capacity => 4000000000, fp_rate => 1e-6)",
	  "SELECT pages FROM qf_info('%s')", qf_sized_pages(4_000_000_000, $home_1e6),
	  "SELECT qf_count('%s', 7::int8)", '1' ],
	[ 'huge_cf', "SELECT qf_create('%s', 'int8', capacity => 4000000000, fp_rate => 1e-6, access_method => 'cascade_filter')",
	  "SELECT pages FROM qf_info('%s')", 1,
	  "SELECT qf_count('%s', 7::int8)", '1' ],
	[ 'edge_qf', "SELECT qf_create('%s', 'int8', capacity => $edge_cap, fp_rate => 1e-6)",
	  "SELECT pages FROM qf_info('%s')", qf_sized_pages($edge_cap, $home_1e6),
	  "SELECT qf_count('%s', 7::int8)", '1' ],
);
# (a quotient_filter has exactly its sized pages)
my %exact_pages = (huge_qf => 1, edge_qf => 1);
foreach my $c (@huge)
{
	my ($t, $create, $pages_sql, $min_pages, $lookup, $one) = @$c;
	my $t0 = time;
	$node->safe_psql('postgres', sprintf($create, $t));
	my $secs = sprintf('%.3f', time - $t0);
	cmp_ok($secs, '<', 1.0, "$t: created in $secs s");
	my $pages = $node->safe_psql('postgres', sprintf($pages_sql, $t));
	if ($exact_pages{$t})
	{
		is($pages, $min_pages, "$t: the structure has its capacity's $min_pages pages");
	}
	else
	{
		cmp_ok($pages, '>=', $min_pages, "$t: the structure has $pages pages");
	}
	is($node->safe_psql('postgres', "SELECT pg_relation_size('$t')"),
		8192, "$t: only its metapage is on disk");

	# the issue's "one-row INSERT into a fresh 1 GB bcms committed after
	# 1.3 s": bounded now, with a consolidating read
	my ($err, $out) = ss_run_sql($node, "SET statement_timeout = '1s';\n"
		  . "INSERT INTO $t VALUES (7);\n"
		  . sprintf($lookup, $t) . ";\n"
		  . "VACUUM $t;\n"
		  . sprintf($lookup, $t) . ";\n");
	is($err, '', "$t: a one-row INSERT, a lookup and VACUUM stay within statement_timeout = 1s");
	is($out, "$one\n$one", "$t: the row counts");
	my $path = $node->safe_psql('postgres', "SELECT pg_relation_filepath('$t')");
	cmp_ok(allocated($node, $path), '<', 10 << 20,
		"$t: and its files take less than 10 MB of disk");
}

# a structure over streamsketch.max_structure_size is refused, and nothing
# is left behind
foreach my $c (
	[ 'over_bcms', "SELECT bcms_create('over_bcms', 'int8', epsilon => 1e-9, delta => 0.01)" ],
	[ 'over_bloom', "SELECT bloom_create('over_bloom', 'int8', capacity => 100000000000, fp_rate => 0.001)" ],
	[ 'over_qf', "SELECT qf_create('over_qf', 'int8', capacity => $over_cap, fp_rate => 1e-6)" ])
{
	my ($t, $create) = @$c;
	my ($err) = ss_run_sql($node, $create);
	like($err, qr/^54000: the structure would exceed streamsketch.max_structure_size$/,
		"$t: refused over streamsketch.max_structure_size");
	is($node->safe_psql('postgres', "SELECT to_regclass('$t') IS NULL"),
		't', "$t: no table is left");
}

# a transaction that created a large structure, canceled (terminated)
# during its long INSERT: neither the table nor its file remain
foreach my $how ('cancel', 'terminate')
{
	my $t = "created_$how";
	my $h = ss_start_bg($node, 'BEGIN',
		"SELECT bcms_create('$t', 'int8', epsilon => 5e-9, delta => 0.01)",
		"SELECT pg_relation_filepath('$t')",
		"INSERT INTO $t SELECT k FROM generate_series(1, 20000000) k");
	my ($secs, $client) = ss_stop_bg($h, $how, 0.5);
	is($h->{error}, $how eq 'cancel' ? $SS_CANCELED : $SS_TERMINATED,
		"$t: the transaction was stopped by $how during its INSERT");
	cmp_ok($secs, '<', 1.0, "$t: stopped $secs s after the $how (client $client s)");
	push @latencies, "INSERT into a just-created 20 GB bcms, $how: $secs s (client $client s)";
	my ($path) = $h->{out} =~ /^(base\/\S+)$/m;
	ok(defined $path, "$t: the table existed in the transaction");
	is($node->safe_psql('postgres', "SELECT to_regclass('$t') IS NULL"),
		't', "$t: no table after the $how");
	# (the first segment of a dropped relation's main fork is kept, empty,
	# until the next checkpoint)
	$node->safe_psql('postgres', 'CHECKPOINT');
	ok(defined $path && !glob($node->data_dir . "/$path*"),
		"$t: its files $path* were removed");
}

# The huge structures are dropped before the standby is made: replaying the
# write of a far page zero-fills the file up to it (below).
$node->safe_psql('postgres', 'DROP TABLE ' . join(', ', map { $_->[0] } @huge));
my $standby = ss_standby($node, 'standby');

# A structure's pages are sparse on the primary (ss_extend_to writes the
# far page alone), but WAL replay extends a relation block by block up to
# the block a record references (PostgreSQL 15's XLogReadBufferExtended),
# so the first write to the far end of a 512 MB bcms makes the standby
# (and crash recovery) write 512 MB of zeros: the README tells users to
# plan disk for the full size (the 20 GB structures above filled the disk
# of the standby).  Checked: sparse on the primary, at most the full size
# on the standby.
$node->safe_psql('postgres', "SELECT bcms_create('far_plain', 'int8', epsilon => 2e-7, delta => 0.01, mode => 'plain')");
$node->safe_psql('postgres', "INSERT INTO far_plain VALUES (7)");
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
my $far_path = $node->safe_psql('postgres', "SELECT pg_relation_filepath('far_plain')");
my $far_bytes = $node->safe_psql('postgres', "SELECT relation_pages * 8192 FROM bcms_info('far_plain')");
my $far_mb = int($far_bytes / (1 << 20));
cmp_ok(allocated($node, $far_path), '<', 10 << 20,
	"far_plain: a $far_mb MB bcms holding one key is sparse on the primary");
my $far_standby = allocated($standby, $far_path);
cmp_ok($far_standby, '<=', $far_bytes + (1 << 20),
	"far_plain: ... and takes at most its full size on the standby ("
	  . int($far_standby / (1 << 20)) . " MB)");
$node->safe_psql('postgres', 'DROP TABLE far_plain');

# ---------------------------------------------------------------------
# A.b  Long operations of the quotient filter family.  Keys 0..29 are
# inserted 10 times, keys 1000..2000999 once (half a batch before each
# stopped consolidation); with 1e-9 false positives their counts are
# exact, and keys 30..999 were never inserted.
# ---------------------------------------------------------------------
my $half = 1_000_000;
my $fill_hi = 1000 + 2 * $half - 1;
my %fill_batch = (
	cancel => "SELECT k FROM generate_series(0, 29) k, generate_series(1, 10) r "
	  . "UNION ALL SELECT k FROM generate_series(1000, " . (999 + $half) . ") k",
	terminate => "SELECT k FROM generate_series(" . (1000 + $half) . ", $fill_hi) k");
my $exact = 'wrong 0 | items ' . (30 + 2 * $half) . ' total ' . (300 + 2 * $half);

# the counts of keys 0..fill_hi (or of keys 0..999 and every tenth key
# after them), and the info counters (qf_info consolidates first):
# $exact when every count is right
sub qf_exact
{
	my ($t, $full) = @_;
	my $sample = $full ? '' : 'WHERE k < 1000 OR k % 10 = 0';
	return $node->safe_psql('postgres', qq{
SELECT 'wrong ' || count(*) FILTER (WHERE qf_count('$t', k::int8) <>
         CASE WHEN k < 30 THEN 10 WHEN k < 1000 THEN 0 ELSE 1 END)
  || ' | items ' || (SELECT items FROM qf_info('$t'))
  || ' total ' || (SELECT total_count FROM qf_info('$t'))
FROM generate_series(0, $fill_hi) k $sample});
}

sub qf_layout
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT 'levels ' || levels || ' pages ' || pages || ' resizes ' || resizes FROM qf_info('$t')");
}

sub qf_pages
{
	my ($t) = @_;
	return $node->safe_psql('postgres', "SELECT pages FROM qf_info('$t')");
}

# 1. VACUUM consolidating a committed batch of a million keys: a
# quotient_filter created for 100,000 keys doubles level 0 several times, a
# cascade_filter with a 256 kB level 0 merges levels.  Each stop gets a
# fresh batch, so that it lands in the middle of real work.
foreach my $c (
	[ 'grow_qf', "SELECT qf_create('grow_qf', 'int8', capacity => 100000, fp_rate => 1e-9)",
	  'a quotient_filter growing in VACUUM' ],
	[ 'merge_cf', "SELECT qf_create('merge_cf', 'int8', capacity => 20000000, fp_rate => 1e-9, access_method => 'cascade_filter', buffer_size => '256kB')",
	  'a cascade_filter merging levels in VACUUM' ])
{
	my ($t, $create, $what) = @$c;
	$node->safe_psql('postgres', $create);
	my $before = qf_layout($t);
	# (held in the middle of the round: a quiet machine finished the
	# terminate case's VACUUM of a sized filter within 0.15 s)
	stop_both_ways("$t: $what", [ "VACUUM $t" ], undef, 0,
		sub { $node->safe_psql('postgres', "INSERT INTO $t $fill_batch{$_[0]}"); },
		15015);
	my ($err) = ss_run_sql($node, "VACUUM $t");
	is($err, '', "$t: a VACUUM after the stopped ones completes");
	isnt(qf_layout($t), $before, "$t: the structure changed shape ($before -> " . qf_layout($t) . ")");
	is(qf_exact($t), $exact, "$t: counts exact after the stopped consolidations (sample)");
}

# 2. qf_resize of a large structure: merges every level into a level of
# twice the size, out of place, installed by one metapage record.  Grown
# first to 16,384 pages, so that the canceled resize writes 32,768.
sub resize_to
{
	my ($t, $pages) = @_;
	$node->safe_psql('postgres', "SELECT qf_resize('$t')")
	  while qf_pages($t) < $pages;
	return;
}

foreach my $t ('grow_qf', 'merge_cf')
{
	resize_to($t, 16384);
	my $before = qf_layout($t);
	stop_both_ways("$t: qf_resize", [ "SELECT qf_resize('$t')" ],
		sub {
			my ($how) = @_;
			is(qf_layout($t), $before, "$t: the $how resize installed nothing");
		}, 0.3);
	is(qf_exact($t), $exact, "$t: counts exact after the stopped resizes (sample)");
	my ($err) = ss_run_sql($node, "SELECT qf_resize('$t')");
	is($err, '', "$t: a resize after the stopped ones completes");
	my ($levels, $pages, $resizes) = (split ' ', $before)[ 1, 3, 5 ];
	like(qf_layout($t), qr/^levels $levels pages \d+ resizes @{[ $resizes + 1 ]}$/,
		"$t: ... and was installed");
	cmp_ok(qf_pages($t), '>=', $pages + 16384,
		"$t: ... adding at least 16,384 pages");
	is(qf_exact($t, 1), $exact, "$t: the count of every key exact after the resize");
}

# 3. qf_resize of a large, empty quotient_filter: the merge has no source
# page to read, only about 32,000 empty target pages to write (which
# ignored cancels before qfam_write_page checked for interrupts).
my $empty_cap = 41_000_000;
my $empty_pages = qf_sized_pages($empty_cap, $home_1e6);
$node->safe_psql('postgres',
	"SELECT qf_create('empty_qf', 'int8', capacity => $empty_cap, fp_rate => 1e-6)");
is(qf_pages('empty_qf'), $empty_pages, "empty_qf: its capacity's $empty_pages pages");
stop_both_ways('empty_qf: qf_resize', [ "SELECT qf_resize('empty_qf')" ],
	sub {
		my ($how) = @_;
		is(qf_pages('empty_qf'), $empty_pages, "empty_qf: the $how resize installed nothing");
	}, 0.3);
$node->safe_psql('postgres', "INSERT INTO empty_qf VALUES (1), (2), (2)");
my ($rerr) = ss_run_sql($node, "SELECT qf_resize('empty_qf')");
is($rerr, '', 'empty_qf: a resize after the stopped ones completes');
is( $node->safe_psql('postgres',
		"SELECT pages || ' ' || qf_count('empty_qf', 1::int8) || qf_count('empty_qf', 2::int8) "
		  . "|| qf_count('empty_qf', 3::int8) FROM qf_info('empty_qf')"),
	2 * $empty_pages . ' 120', 'empty_qf: doubled, counts exact');

# ---------------------------------------------------------------------
# B. Aging.  The small structures of 013, keys 0..29.
# ---------------------------------------------------------------------
my @keys = (0 .. 29);
my $keylist = join(',', @keys);

sub lookups_bcms
{
	my ($t) = @_;
	return "SELECT string_agg(k || ':' || bcms_estimate('$t', k::int8), ' ' ORDER BY k) "
	  . "FROM unnest('{$keylist}'::int[]) k";
}

my @structures = (
	{
		tag => 'buf',
		create => "SELECT bcms_create('%s', 'int8', epsilon => 0.001, delta => 0.01)",
		lookups => \&lookups_bcms,
		summary => sub { "SELECT 'items ' || items || ' weight ' || total_weight FROM bcms_info('$_[0]')" },
		value => sub { $_[0] },
		expect_summary => sub { "items $_[0] weight $_[0]" },
	},
	{
		tag => 'plain',
		create => "SELECT bcms_create('%s', 'int8', epsilon => 0.001, delta => 0.01, mode => 'plain')",
		lookups => \&lookups_bcms,
		summary => sub { "SELECT 'items ' || items || ' weight ' || total_weight FROM bcms_info('$_[0]')" },
		value => sub { $_[0] },
		expect_summary => sub { "items $_[0] weight $_[0]" },
	},
	map({
		my $mode = $_;
		{
			tag => $mode eq 'localized' ? 'bloc' : 'belev',
			create => "SELECT bloom_create('%s', 'int8', capacity => 100000, fp_rate => 0.000001, mode => '$mode', buffer_size => '64kB')",
			lookups => sub {
				"SELECT string_agg(k || ':' || bloom_contains('$_[0]', k::int8), ' ' ORDER BY k) "
				  . "FROM unnest('{$keylist}'::int[]) k";
			},
			summary => sub { "SELECT 'items ' || items FROM bloom_info('$_[0]')" },
			value => sub { $_[0] > 0 ? 'true' : 'false' },
			expect_summary => sub { "items $_[0]" },
		}
	} ('localized', 'elevator')),
	map({
		my ($tag, $opts) = @$_;
		{
			tag => $tag,
			create => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-9$opts)",
			lookups => sub {
				"SELECT string_agg(k || ':' || qf_count('$_[0]', k::int8), ' ' ORDER BY k) "
				  . "FROM unnest('{$keylist}'::int[]) k";
			},
			# qf_info's counters show the levels only: totals from lookups
			summary => sub {
				"SELECT 'total ' || sum(qf_count('$_[0]', k::int8)) FROM unnest('{$keylist}'::int[]) k";
			},
			value => sub { $_[0] },
			expect_summary => sub { "total $_[0]" },
		}
	} ([ 'qf', '' ], [ 'cf', ", access_method => 'cascade_filter', buffer_size => '16kB'" ])),
	{
		# a threshold no key reaches: every count is the exact one
		tag => 'lert',
		create => "SELECT lert_create('%s', 'int8', threshold => 1000000)",
		lookups => sub {
			"SELECT string_agg(k || ':' || lert_count('$_[0]', k::int8), ' ' ORDER BY k) "
			  . "FROM unnest('{$keylist}'::int[]) k";
		},
		summary => sub {
			"SELECT 'total ' || sum(lert_count('$_[0]', k::int8)) FROM unnest('{$keylist}'::int[]) k";
		},
		value => sub { $_[0] },
		expect_summary => sub { "total $_[0]" },
	},
	{
		tag => 'cbt',
		create => "SELECT cbt_create('%s', 'k int8', 'count(*) AS n', root_buffer => '64kB')",
		lookups => sub {
			"SELECT string_agg(k || ':' || coalesce((SELECT n FROM cbt_lookup(NULL::$_[0], k::int8)), 0), "
			  . "' ' ORDER BY k) FROM unnest('{$keylist}'::int[]) k";
		},
		summary => sub { "SELECT 'total ' || coalesce(sum(n), 0) FROM $_[0]" },
		value => sub { $_[0] },
		expect_summary => sub { "total $_[0]" },
	},
	{
		# a sample larger than the stream: it holds every committed row
		tag => 'bfile',
		create => "SELECT bfile_create('%s', 'k int8', sample_size => 100000)",
		lookups => sub {
			"SELECT string_agg(u.k || ':' || (SELECT count(*) FROM $_[0] b WHERE b.k = u.k), "
			  . "' ' ORDER BY u.k) FROM unnest('{$keylist}'::int[]) u(k)";
		},
		summary => sub { "SELECT 'total ' || count(*) FROM $_[0]" },
		value => sub { $_[0] },
		expect_summary => sub { "total $_[0]" },
	});

my %committed;    # table => [ [from, to, reps], ... ]

sub rows
{
	my ($from, $to, $reps) = @_;
	return "SELECT k::int8 FROM generate_series($from, $to) k, generate_series(1, $reps) r";
}

sub expected
{
	my ($s, $t) = @_;
	my @ranges = @{ $committed{$t} };
	my $count = sub {
		my ($k) = @_;
		my $n = 0;
		$n += $_->[2] for grep { $_->[0] <= $k && $k <= $_->[1] } @ranges;
		return $n;
	};
	my $n = 0;
	$n += ($_->[1] - $_->[0] + 1) * $_->[2] for @ranges;
	return join(' ', map { "$_:" . $s->{value}->($count->($_)) } @keys)
	  . ' | ' . $s->{expect_summary}->($n);
}

sub answer
{
	my ($n, $s, $t) = @_;
	return $n->safe_psql('postgres',
		"SELECT (" . $s->{lookups}->($t) . ") || ' | ' || (" . $s->{summary}->($t) . ")");
}

sub check_all
{
	my ($n, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'))
	  if $n == $standby;
	foreach my $s (@structures)
	{
		my $t = "age_$s->{tag}";
		is(answer($n, $s, $t), expected($s, $t), "$t: $what: answers exact");
	}
	return;
}

# a committed batch; returns its xid
sub commit_batch
{
	my ($t, @range) = @_;
	my $xid = $node->safe_psql('postgres',
		"BEGIN;\nINSERT INTO $t " . rows(@range) . ";\nSELECT txid_current();\nCOMMIT;");
	push @{ $committed{$t} }, [@range];
	return $xid;
}

# a batch appended to the log by a transaction that then fails at commit
sub aborted_batch
{
	my ($t, @range) = @_;
	my ($err, $xid) = ss_run_sql($node, "SET streamsketch.test_fail_after_log_append = error;\n"
		  . "BEGIN;\nINSERT INTO $t " . rows(@range) . ";\nSELECT txid_current();\nCOMMIT;\n");
	is($err,
		"XX000: streamsketch.test_fail_after_log_append: failing after the change log append of \"$t\"",
		"$t: an aborted batch (xid $xid) is left in the log");
	return $xid;
}

# the clog segment files of node n, once a checkpoint (restartpoint) wrote
# the clog pages still in shared memory
sub xact_segments
{
	my ($n) = @_;
	$node->safe_psql('postgres', 'CHECKPOINT');
	if ($n == $standby)
	{
		$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
		$standby->safe_psql('postgres', 'CHECKPOINT');
	}
	opendir(my $d, $n->data_dir . '/pg_xact') or die "pg_xact: $!";
	my @s = sort grep { /^[0-9A-F]{4}$/ } readdir($d);
	closedir($d);
	return join(' ', @s);
}

sub current_xid
{
	return $node->safe_psql('postgres', 'SELECT txid_current()');
}

# consume xids until the next xid is at least $upto
sub burn_to
{
	my ($upto) = @_;
	my $n = $upto - current_xid();
	$node->safe_psql('postgres', "SET synchronous_commit = off; CALL burn_xids($n)")
	  if $n > 0;
	return;
}

sub rel_frozen
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT relfrozenxid::text::bigint FROM pg_class WHERE oid = '$t'::regclass");
}

sub rel_age
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT age(relfrozenxid) FROM pg_class WHERE oid = '$t'::regclass");
}

my %oldest_batch;    # table => xid of its oldest batch in the log
foreach my $s (@structures)
{
	my $t = "age_$s->{tag}";
	$node->safe_psql('postgres', sprintf($s->{create}, $t));
	$committed{$t} = [];
	# consolidated, then in the log: committed, aborted, committed
	commit_batch($t, 0, 19, 10);
	$node->safe_psql('postgres', "VACUUM $t");
	$oldest_batch{$t} = commit_batch($t, 5, 9, 3);
	aborted_batch($t, 0, 29, 50);
	commit_batch($t, 0, 29, 2);
	cmp_ok(rel_frozen($t), '<=', $oldest_batch{$t},
		"$t: relfrozenxid is at or before its oldest batch");
}
# (no reads on the primary from here on: lookups consolidate)
check_all($standby, 'batches in the log, before aging');
is(xact_segments($node), '0000', 'one clog segment before aging');

# B.1  1.1 million xids later, everything but the structures frozen
burn_to(1_150_000);
my $others = $node->safe_psql('postgres', q{
SELECT string_agg(c.oid::regclass::text, ', ')
FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam
WHERE c.relkind IN ('r', 'm')
  AND coalesce(a.amname, 'heap') NOT IN ('bcms', 'bloom_filter', 'quotient_filter',
                                         'buffered_quotient_filter', 'cascade_filter',
                                         'lert', 'cbt', 'bfile')});
$node->safe_psql('postgres', 'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS true');
$node->safe_psql($_, 'VACUUM (FREEZE)') foreach ('template0', 'template1');
$node->safe_psql('postgres', "VACUUM (FREEZE) $others");
my $xid_now = current_xid();
my $min_oldest = (sort { $a <=> $b } values %oldest_batch)[0];
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_database WHERE datname <> 'postgres' AND age(datfrozenxid) > 100"),
	'0', 'the template databases are frozen');
cmp_ok(
	$node->safe_psql('postgres',
		"SELECT datfrozenxid::text::bigint FROM pg_database WHERE datname = 'postgres'"),
	'<=', $min_oldest,
	"the structures hold datfrozenxid at or before their oldest batch (xid $min_oldest)");
is(xact_segments($node), '0000 0001', "the batches' clog segment is kept at xid $xid_now");
foreach my $s (@structures)
{
	my $t = "age_$s->{tag}";
	my $age = rel_age($t);
	cmp_ok($age, '>', 1_000_000, "$t: age(relfrozenxid) grew to $age");
}
check_all($standby, '1.1 million xids after the batches');

# everything frozen, the structures too: their logs are consolidated, the
# aborted batches dropped, and the clog truncated
$node->command_ok([ 'vacuumdb', '--all', '--freeze' ],
	'vacuumdb --all --freeze');
$node->safe_psql('postgres', 'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS false');
foreach my $s (@structures)
{
	my $t = "age_$s->{tag}";
	my $age = rel_age($t);
	cmp_ok($age, '<', 100, "$t: VACUUM (FREEZE) brought age(relfrozenxid) down to $age");
	cmp_ok(rel_frozen($t), '>', $oldest_batch{$t}, "$t: relfrozenxid is past its batches");
}
is( $node->safe_psql('postgres',
		'SELECT max(age(datfrozenxid)) < 100 FROM pg_database'),
	't', 'every database frozen');
is(xact_segments($node), '0001', 'clog segment 0000 removed');
check_all($node, 'after the database-wide VACUUM FREEZE');
check_all($standby, 'after the database-wide VACUUM FREEZE');
is(xact_segments($standby), '0001', 'the standby removed clog segment 0000 too');

# B.2  Anti-wraparound autovacuum.  New batches in the logs, then another
# 1.2 million xids with autovacuum_freeze_max_age = 100000.
foreach my $s (@structures)
{
	my $t = "age_$s->{tag}";
	$oldest_batch{$t} = commit_batch($t, 10, 29, 4);
	aborted_batch($t, 0, 29, 60);
	commit_batch($t, 3, 3, 7);
}
check_all($standby, 'new batches in the log');
my %frozen_before = map { ("age_$_->{tag}" => rel_frozen("age_$_->{tag}")) } @structures;
$node->append_conf(
	'postgresql.conf', qq{
autovacuum = on
autovacuum_naptime = 1s
autovacuum_freeze_max_age = 100000
});
$node->restart;
burn_to(2_350_000);
$xid_now = current_xid();
my $structs = join(',', map { "'age_$_->{tag}'::regclass" } @structures);
ok( $node->poll_query_until(
		'postgres', qq{
SELECT (SELECT max(age(datfrozenxid)) FROM pg_database) <= 100000
   AND (SELECT bool_and(age(c.relfrozenxid) <= 100000 AND s.last_autovacuum IS NOT NULL)
          FROM pg_class c JOIN pg_stat_all_tables s ON s.relid = c.oid
         WHERE c.oid IN ($structs))}),
	"anti-wraparound autovacuum froze every database and structure by xid $xid_now");
foreach my $s (@structures)
{
	my $t = "age_$s->{tag}";
	cmp_ok(rel_frozen($t), '>', $frozen_before{$t} + 1_000_000,
		"$t: autovacuum advanced relfrozenxid by over a million xids (age now "
		  . rel_age($t) . ')');
}
# the clog is truncated by the worker that advanced the last datfrozenxid
for (my $i = 0; $i < 60 && xact_segments($node) ne '0002'; $i++)
{
	usleep(500_000);
}
is(xact_segments($node), '0002', 'autovacuum removed clog segment 0001');
check_all($node, 'after anti-wraparound autovacuum');
check_all($standby, 'after anti-wraparound autovacuum');
is(xact_segments($standby), '0002', 'the standby removed clog segment 0001 too');

diag("cancel latencies:\n  " . join("\n  ", @latencies));

$standby->stop;
$node->stop;
done_testing();
