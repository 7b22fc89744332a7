
# Copyright (c) streamsketch authors
#
# Transactions that do not commit leave no trace in structures kept on the
# change log (docs/change-log-design.md, "What must hold"), whatever made
# them fail:
#
#  a. an ERROR during COMMIT, after the batch was appended and WAL-logged
#     (streamsketch.test_fail_after_log_append = error), also once the
#     aborted batch was consolidated (the flush function, VACUUM);
#  b. a PANIC between the batch's WAL and the commit record (= panic): the
#     server restarts by itself, and a streaming standby agrees;
#  c. cancel and terminate of a long INSERT, cancel of a COMMIT while it
#     appends, cancel and terminate of a long consolidation (the flush),
#     which must also stop within a second;
#  d. ROLLBACK and ROLLBACK TO SAVEPOINT; inside the transaction the
#     estimates include its own rows, other sessions see them after COMMIT;
#  e. PREPARE TRANSACTION: the batch counts after COMMIT PREPARED only;
#  f. VACUUM (FREEZE) advances relfrozenxid, but never past the xid of a
#     transaction that may still append or has a batch in the log;
#  g. a fresh session sees every committed row; an ordinary role inserts,
#     reads, and its failed commit leaves no trace either;
#  h. a crash between VACUUM's record giving back the free tail of log
#     pages and the file's truncation: the blocks left past the log's end
#     are reused as the log grows again, and the next VACUUM truncates.
#
# Every answer (lookups of a fixed set of keys, the info function's items
# and, for bcms, total_weight) is compared with the exact answer computed from the rows
# the test committed, so a change that leaks or a change that is lost both
# fail.  The structures are table-driven: bcms (buffered, plain),
# bloom_filter (localized, elevator), quotient_filter, cascade_filter,
# lert (immediate), cbt and bfile (whose sample holds every row while the
# stream is shorter than its sample_size; a transaction's sample does not
# hold its own rows).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

# ---------------------------------------------------------------------
# The structures under test, one entry each:
#   tag             names its tables (small_TAG, crash_TAG, big_TAG)
#   create          {small, big}: SQL creating table %s, small (answers
#                   exact for the few keys used) or big (consolidating
#                   millions of rows is real work); keys are int8
#   lookups         SQL for table $_[0]: one line answering @keys
#   summary         SQL for table $_[0]: one line of totals
#   expect_lookups  that line given count(key) ($_[0]->(key))
#   expect_summary  that line given the number of rows inserted ($_[0])
#   long_batch      rows per key of the long consolidation (default 400:
#                   4 million rows; more where a flush of those is too
#                   quick to be stopped 0.3 s into it)
# ---------------------------------------------------------------------
my @keys = (0 .. 29);    # the keys every answer looks up

sub bcms_structure
{
	my ($tag, $opts) = @_;
	return {
		tag => $tag,
		create => {
			small => "SELECT bcms_create('%s', 'int8', epsilon => 0.001, delta => 0.01$opts)",
			big => "SELECT bcms_create('%s', 'int8', epsilon => 0.00001, delta => 0.01$opts)",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || bcms_estimate('$_[0]', k::int8), ' ' "
			  . "ORDER BY k) FROM unnest('{"
			  . join(',', @keys) . "}'::int[]) k";
		},
		summary => sub {
			"SELECT 'items ' || items || ' weight ' || total_weight FROM bcms_info('$_[0]')";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . $count->($_) } @keys);
		},
		expect_summary => sub { "items $_[0] weight $_[0]" },
		flush => sub { "SELECT bcms_flush('$_[0]')" },
		pages => sub { "SELECT relation_pages FROM bcms_info('$_[0]')" },
	};
}

# keys 0..29 of a filter with fp_rate 1e-6 give no false positive
sub bloom_structure
{
	my ($tag, $mode) = @_;
	return {
		tag => $tag,
		create => {
			small => "SELECT bloom_create('%s', 'int8', capacity => 100000, fp_rate => 0.000001, mode => '$mode', buffer_size => '64kB')",
			big => "SELECT bloom_create('%s', 'int8', capacity => 10000000, fp_rate => 0.000001, mode => '$mode')",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || bloom_contains('$_[0]', k::int8), ' ' "
			  . "ORDER BY k) FROM unnest('{"
			  . join(',', @keys) . "}'::int[]) k";
		},
		summary => sub {
			"SELECT 'items ' || items FROM bloom_info('$_[0]')";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . ($count->($_) > 0 ? 'true' : 'false') } @keys);
		},
		expect_summary => sub { "items $_[0]" },
		long_batch => 600,
		flush => sub { "SELECT bloom_flush('$_[0]')" },
		pages => sub { "SELECT relation_pages FROM bloom_info('$_[0]')" },
	};
}

# fp_rate 1e-9 keeps the fingerprints of keys 0..29 distinct, so qf_count
# is exact.  Totals come from lookups (which replay the change log, also on
# a standby), not from qf_info, whose counters show the levels only.  There
# is no flush function: VACUUM consolidates.  The long-consolidation case
# (c) is left out: summing 10,000 keys' counts on a standby that has not
# replayed a consolidation would scan a 4-million-record log per lookup.
sub qf_structure
{
	my ($tag, $opts) = @_;
	my $keys = join(',', @keys);
	return {
		tag => $tag,
		create => {
			small => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-9$opts)",
			big => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-9$opts)",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || qf_count('$_[0]', k::int8), ' ' "
			  . "ORDER BY k) FROM unnest('{$keys}'::int[]) k";
		},
		summary => sub {
			"SELECT 'total ' || sum(qf_count('$_[0]', k::int8)) FROM unnest('{$keys}'::int[]) k";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . $count->($_) } @keys);
		},
		expect_summary => sub { "total $_[0]" },
		flush => sub { "VACUUM $_[0]" },
		pages => sub { "SELECT relation_pages FROM qf_info('$_[0]')" },
		no_long_flush => 1,
	};
}

# counts are exact per key; the summary counts observations (committed,
# consolidated or still in the log)
sub lert_structure
{
	my ($tag, $opts) = @_;
	my $keys = join(',', @keys);
	return {
		tag => $tag,
		create => {
			small => "SELECT lert_create('%s', 'int8', buffer_size => '64kB'$opts)",
			big => "SELECT lert_create('%s', 'int8'$opts)",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || lert_count('$_[0]', k::int8), ' ' "
			  . "ORDER BY k) FROM unnest('{$keys}'::int[]) k";
		},
		summary => sub {
			"SELECT 'observations ' || observations FROM lert_info('$_[0]')";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . $count->($_) } @keys);
		},
		expect_summary => sub { "observations $_[0]" },
		long_batch => 1000,
		flush => sub { "SELECT lert_flush('$_[0]')" },
		pages => sub { "SELECT relation_pages FROM lert_info('$_[0]')" },
	};
}

# groups are exact; lookups read each key's path, the summary scans
sub cbt_structure
{
	my ($tag) = @_;
	my $keys = join(',', @keys);
	return {
		tag => $tag,
		create => {
			small => "SELECT cbt_create('%s', 'k int8', 'count(*) AS n', root_buffer => '64kB')",
			big => "SELECT cbt_create('%s', 'k int8', 'count(*) AS n')",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || coalesce((SELECT n FROM cbt_lookup(NULL::$_[0], k)), 0), ' ' "
			  . "ORDER BY k) FROM unnest('{$keys}'::int8[]) k";
		},
		summary => sub {
			"SELECT 'rows ' || coalesce(sum(n), 0) FROM $_[0]";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . $count->($_) } @keys);
		},
		expect_summary => sub { "rows $_[0]" },
		flush => sub { "SELECT cbt_finalize('$_[0]')" },
		pages => sub { "SELECT relation_pages FROM cbt_info('$_[0]')" },
	};
}

# every row is in the sample while the stream is shorter than
# sample_size (L = 1: nothing is dropped or discarded), so the sample's rows
# per key are the committed rows per key and seen counts them; a sample
# holds committed rows only, so a transaction does not see its own
sub bfile_structure
{
	my ($tag) = @_;
	my $keys = join(',', @keys);
	return {
		tag => $tag,
		create => {
			small => "SELECT bfile_create('%s', 'k int8', sample_size => 1000000)",
			big => "SELECT bfile_create('%s', 'k int8', sample_size => 100000000)",
		},
		lookups => sub {
			"SELECT string_agg(k || ':' || coalesce(n, 0), ' ' ORDER BY k) "
			  . "FROM unnest('{$keys}'::int8[]) k "
			  . "LEFT JOIN (SELECT k, count(*) AS n FROM $_[0] GROUP BY k) c USING (k)";
		},
		summary => sub {
			"SELECT 'seen ' || seen || ' size ' || size FROM bfile_info('$_[0]')";
		},
		expect_lookups => sub {
			my ($count) = @_;
			join(' ', map { "$_:" . $count->($_) } @keys);
		},
		expect_summary => sub { "seen $_[0] size $_[0]" },
		flush => sub { "SELECT bfile_flush('$_[0]')" },
		pages => sub { "SELECT relation_pages FROM bfile_info('$_[0]')" },
		own_rows_hidden => 1,
	};
}

my @structures = (
	{ %{ bcms_structure('buf', '') }, long_batch => 1000 },
	bcms_structure('plain', ", mode => 'plain'"),
	bloom_structure('bloc', 'localized'),
	bloom_structure('belev', 'elevator'),
	qf_structure('qf', ''),
	qf_structure('cf', ", access_method => 'cascade_filter', buffer_size => '16kB'"),
	lert_structure('lert', ", variant => 'immediate'"),
	cbt_structure('cbt'),
	bfile_structure('bfile'));

# ---------------------------------------------------------------------
# The nodes: a primary that restarts by itself after a PANIC, and a
# streaming standby.  Autovacuum is off so that relfrozenxid changes only
# when the test vacuums (consolidation by readers and writers still runs),
# and so are the background workers: the flushes, VACUUMs and crash points
# below must find the logs the test left.  Their transactions repeat 30
# keys (the model's counts stay exact), which would make a record a key
# if combined: the appends, cancels and crashes below need long batches.
# ---------------------------------------------------------------------
my $node = ss_node(
	'primary',
	streaming => 1,
	extension => 1,
	conf => q{
restart_after_crash = on
autovacuum = off
streamsketch.background_consolidation = off
streamsketch.test_combine_min_records = 2147483647
shared_buffers = 128MB
max_connections = 30
max_prepared_transactions = 5
max_wal_size = 2GB
log_statement = none
});
ss_create_stop_and_wait($node);
my $standby = ss_standby($node, 'standby');

# ---------------------------------------------------------------------
# The model: the rows each table received in committed transactions, as
# [first key, last key, repetitions] ranges.
# ---------------------------------------------------------------------
my %committed;

sub rows
{
	my ($from, $to, $reps) = @_;
	return "SELECT k::int8 FROM generate_series($from, $to) k, "
	  . "generate_series(1, $reps) r";
}

sub insert_sql
{
	my ($t, @range) = @_;
	return "INSERT INTO $t " . rows(@range) . ";\n";
}

sub expected
{
	my ($s, $t, @pending) = @_;
	my @ranges = (@{ $committed{$t} || [] }, @pending);
	my $count = sub {
		my ($k) = @_;
		my $n = 0;
		$n += $_->[2] for grep { $_->[0] <= $k && $k <= $_->[1] } @ranges;
		return $n;
	};
	my $items = 0;
	$items += ($_->[1] - $_->[0] + 1) * $_->[2] for @ranges;
	return $s->{expect_lookups}->($count) . ' | '
	  . $s->{expect_summary}->($items);
}

sub answer_sql
{
	my ($s, $t) = @_;
	return "SELECT (" . $s->{lookups}->($t) . ") || ' | ' || ("
	  . $s->{summary}->($t) . ")";
}

sub answer
{
	my ($n, $s, $t) = @_;
	return $n->safe_psql('postgres', answer_sql($s, $t));
}

# the expected lookups alone (what a transaction sees of its own rows)
sub expected_lookups
{
	my $e = expected(@_);
	$e =~ s/ \| .*//;
	return $e;
}

sub check_exact
{
	my ($s, $t, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(answer($node, $s, $t), expected($s, $t), "$t: $what: answers exact");
	return;
}

# the standby, once caught up, answers exactly as the primary
sub check_standby
{
	my ($what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
	foreach my $s (@structures)
	{
		foreach my $t (tables($s))
		{
			is(answer($standby, $s, $t), expected($s, $t),
				"$t: $what: the standby's answers are exact");
		}
	}
	return;
}

# each structure's tables: small_TAG for most cases, crash_TAG for b (a
# fresh log: no free log pages), big_TAG for the long consolidations
my %size_of = (small => 'small', crash => 'small', big => 'big');
sub tables { my ($s) = @_; return map { "${_}_$s->{tag}" } sort keys %size_of; }

# the "SQLSTATE: message" expected of the failure injected after the append
sub injected
{
	my ($how, $t) = @_;
	return $how eq 'error'
	  ? "XX000: streamsketch.test_fail_after_log_append: failing after the change log append of \"$t\""
	  : "XX000: streamsketch.test_fail_after_log_append: stopping after the change log append of \"$t\"";
}

foreach my $s (@structures)
{
	foreach my $t (tables($s))
	{
		my ($use) = $t =~ /^([a-z]+)_/;
		$node->safe_psql('postgres',
			sprintf($s->{create}{ $size_of{$use} }, $t));
		$committed{$t} = [];
	}
	# committed rows to start from, partly still in the change log
	my $t = "small_$s->{tag}";
	$node->safe_psql('postgres',
		insert_sql($t, 0, 19, 10) . $s->{flush}->($t) . ";\n" . insert_sql($t, 5, 9, 3));
	push @{ $committed{$t} }, [ 0, 19, 10 ], [ 5, 9, 3 ];
	check_exact($s, $t, 'start');
}

# ---------------------------------------------------------------------
# a. An ERROR during COMMIT, after the batch was appended.
# ---------------------------------------------------------------------
foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	my $before = answer($node, $s, $t);
	my ($err, $out) = ss_run_sql($node, 
		"SET streamsketch.test_fail_after_log_append = error;\n"
		  . "BEGIN;\n"
		  . insert_sql($t, 0, 29, 7)
		  . "\\echo before commit\nCOMMIT;\n\\echo after commit\n");
	is($err, injected(error => $t), "$t: COMMIT fails with the injected error");
	is($out, 'before commit', "$t: the error is raised by COMMIT");
	is(answer($node, $s, $t), $before, "$t: answers unchanged by the failed commit");

	# the same INSERT commits once the setting is reset: answers go up by it
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 7));
	push @{ $committed{$t} }, [ 0, 29, 7 ];
	check_exact($s, $t, 'the INSERT committed after the failed one');

	# consolidation drops the aborted batch and applies the committed one
	$node->safe_psql('postgres', $s->{flush}->($t));
	check_exact($s, $t, 'after the flush function');
	$node->safe_psql('postgres', "VACUUM $t");
	check_exact($s, $t, 'after VACUUM');
}
check_standby('after failed commits');

# ---------------------------------------------------------------------
# b. A PANIC between the batch's WAL and the commit record.  The batch
# (2100 rows of weight 1, 24 bytes each in the log: 50 kB) needs 6 or 7
# new log pages, which crash recovery replays (relation_pages shows them);
# every reader must skip it until consolidation drops it.
# ---------------------------------------------------------------------
foreach my $s (@structures)
{
	my $t = "crash_$s->{tag}";
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 3));
	push @{ $committed{$t} }, [ 0, 29, 3 ];
	check_standby("$t: before the crash");
	my $before = answer($node, $s, $t);
	my $pages = $node->safe_psql('postgres',
		$s->{pages}->($t));

	my $offset = -s $node->logfile;
	my ($err, $out) = ss_run_sql($node, 
		"SET streamsketch.test_fail_after_log_append = panic;\n"
		  . "BEGIN;\n"
		  . insert_sql($t, 0, 29, 70)
		  . "COMMIT;\n");
	is($err, injected(panic => $t), "$t: COMMIT PANICs after the append");
	ss_wait_restart($node, $offset);

	is(answer($node, $s, $t), $before, "$t: answers unchanged after the crash");
	cmp_ok(
		$node->safe_psql('postgres', $s->{pages}->($t)),
		'>=', $pages + 5,
		"$t: the crashed batch's log pages were replayed");
	check_standby("$t: after the crash");

	# committed inserts after recovery reach both nodes exactly
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 1) . insert_sql($t, 3, 3, 5));
	push @{ $committed{$t} }, [ 0, 29, 1 ], [ 3, 3, 5 ];
	check_exact($s, $t, 'commits after the crash');
	check_standby("$t: commits after the crash");
}

# ---------------------------------------------------------------------
# c. Cancel and terminate (ss_start_bg, ss_stop_bg), ~0.3 s after the
# statement started.
# ---------------------------------------------------------------------

foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	my $before = answer($node, $s, $t);

	# a long INSERT (5 million rows of the keys looked up), autocommit
	foreach my $how ('cancel', 'terminate')
	{
		my $h = ss_start_bg($node, insert_sql($t, 0, 29, 166_667));
		ss_stop_bg($h, $how);
		is($h->{error}, $how eq 'cancel' ? $SS_CANCELED : $SS_TERMINATED,
			"$t: the long INSERT was stopped by $how");
		is(answer($node, $s, $t), $before,
			"$t: answers unchanged after $how of a long INSERT");
	}

	# a COMMIT canceled while it appends a 5-million-row batch (cancels
	# are allowed until the batch is complete): held in the middle of the
	# append (streamsketch.test_log_append_wait) by an advisory lock this
	# test holds, so that the cancel lands there on any machine
	my $wait_key = 13013;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe("SELECT pg_advisory_lock($wait_key)");
	my $h = ss_start_bg($node,
		"SET streamsketch.test_log_append_wait = $wait_key",
		'BEGIN', insert_sql($t, 0, 29, 166_667), 'COMMIT');
	$node->poll_query_until('postgres',
		"SELECT wait_event = 'advisory' FROM pg_stat_activity WHERE pid = '$h->{pid}'")
	  or die "$t: the COMMIT never reached the held point of its append";
	ss_stop_bg($h, 'cancel', 0);
	$holder->query_safe("SELECT pg_advisory_unlock($wait_key)");
	$holder->quit;
	is($h->{error}, $SS_CANCELED, "$t: COMMIT canceled during its append");
	is(answer($node, $s, $t), $before,
		"$t: answers unchanged after a canceled COMMIT");
}

# A long consolidation: a batch of 4 million rows or more in the log of a
# large structure (10,000 keys), which the flush function moves into it.  The
# standby reads the log without consolidating it (on the primary, the info
# functions and lookups consolidate a long log), so the totals are checked
# there while the batch must stay in the primary's log.
foreach my $s (grep { !$_->{no_long_flush} } @structures)
{
	my $t = "big_$s->{tag}";
	my @batch = (0, 9999, $s->{long_batch} // 400);
	my $summary = $s->{expect_summary}->(10_000 * $batch[2]);
	$node->safe_psql('postgres',
		"BEGIN;\n" . insert_sql($t, @batch) . "COMMIT;\n");
	push @{ $committed{$t} }, [@batch];
	$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
	is($standby->safe_psql('postgres', $s->{summary}->($t)), $summary,
		"$t: the batch is committed");

	foreach my $how ('cancel', 'terminate')
	{
		my $h = ss_start_bg($node, $s->{flush}->($t));
		my ($secs) = ss_stop_bg($h, $how);
		is($h->{error}, $how eq 'cancel' ? $SS_CANCELED : $SS_TERMINATED,
			"$t: the flush was stopped by $how (else it finished in 0.3 s: scale the batch up)");
		cmp_ok($secs, '<', 1.0, "$t: the flush stopped $secs s after the $how");
		$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
		is($standby->safe_psql('postgres', $s->{summary}->($t)), $summary,
			"$t: totals unchanged after $how of the flush");
	}
	my $applied = $node->safe_psql('postgres', $s->{flush}->($t));
	like($applied, qr/^\d+$/, "$t: a flush after the stopped ones completes");
	check_exact($s, $t, 'after the stopped consolidations and a complete one');
}
check_standby('after cancel and terminate');

# ---------------------------------------------------------------------
# d. ROLLBACK, ROLLBACK TO SAVEPOINT, and reading one's own writes.
# ---------------------------------------------------------------------
foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	my $lookups = $s->{lookups}->($t);
	# what the transaction reads: its own rows too, but for a sample
	my $own = sub { expected_lookups($s, $t, $s->{own_rows_hidden} ? () : @_) };
	my $bg = $node->background_psql('postgres');
	$bg->query_safe('BEGIN; ' . insert_sql($t, 0, 9, 3));
	is($bg->query_safe($lookups), $own->([ 0, 9, 3 ]),
		"$t: the transaction's answers "
		  . ($s->{own_rows_hidden} ? 'leave out its rows (a sample holds committed rows)' : 'include its rows'));
	is(answer($node, $s, $t), expected($s, $t),
		"$t: another session does not see them");
	$bg->query_safe('SAVEPOINT a; ' . insert_sql($t, 0, 4, 5));
	is($bg->query_safe($lookups), $own->([ 0, 9, 3 ], [ 0, 4, 5 ]),
		"$t: ... and its subtransaction's rows");
	$bg->query_safe('ROLLBACK TO SAVEPOINT a');
	is($bg->query_safe($lookups), $own->([ 0, 9, 3 ]),
		"$t: ROLLBACK TO SAVEPOINT drops the subtransaction's rows");
	$bg->query_safe('ROLLBACK');
	is(answer($node, $s, $t), expected($s, $t),
		"$t: ROLLBACK leaves the answers unchanged");

	# commit after a rolled-back savepoint: only the rows outside it count
	$bg->query_safe('BEGIN; '
		  . insert_sql($t, 20, 24, 2)
		  . 'SAVEPOINT b; '
		  . insert_sql($t, 0, 29, 9)
		  . 'ROLLBACK TO SAVEPOINT b; '
		  . insert_sql($t, 25, 29, 4));
	is(answer($node, $s, $t), expected($s, $t),
		"$t: another session sees nothing before COMMIT");
	$bg->query_safe('COMMIT');
	push @{ $committed{$t} }, [ 20, 24, 2 ], [ 25, 29, 4 ];
	check_exact($s, $t, 'commit after ROLLBACK TO SAVEPOINT');
	$bg->quit;
}

# ---------------------------------------------------------------------
# e. PREPARE TRANSACTION: the batch is appended at PREPARE and counts once
# COMMIT PREPARED runs (in another session); ROLLBACK PREPARED leaves no
# trace.
# ---------------------------------------------------------------------
foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	my $before = answer($node, $s, $t);
	my ($err) = ss_run_sql($node, "BEGIN;\n" . insert_sql($t, 0, 29, 4) . "PREPARE TRANSACTION 'p_$t';\n");
	is($err, '', "$t: PREPARE TRANSACTION succeeds");
	is($node->safe_psql('postgres', "SELECT gid FROM pg_prepared_xacts"),
		"p_$t", "$t: the transaction is prepared");
	is(answer($node, $s, $t), $before, "$t: a prepared batch does not count");
	$node->safe_psql('postgres', "COMMIT PREPARED 'p_$t'");
	push @{ $committed{$t} }, [ 0, 29, 4 ];
	check_exact($s, $t, 'after COMMIT PREPARED');

	$before = answer($node, $s, $t);
	($err) = ss_run_sql($node, "BEGIN;\n" . insert_sql($t, 0, 29, 5) . "PREPARE TRANSACTION 'q_$t';\n");
	is($err, '', "$t: a second PREPARE TRANSACTION succeeds");
	$node->safe_psql('postgres', "ROLLBACK PREPARED 'q_$t'");
	is(answer($node, $s, $t), $before, "$t: ROLLBACK PREPARED leaves no trace");
	$node->safe_psql('postgres', $s->{flush}->($t));
	check_exact($s, $t, 'after ROLLBACK PREPARED and a flush');
}

# ---------------------------------------------------------------------
# f. VACUUM and relfrozenxid.
# ---------------------------------------------------------------------
sub age_of
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT age(relfrozenxid) FROM pg_class WHERE oid = '$t'::regclass");
}

sub frozen_of
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT relfrozenxid::text::bigint FROM pg_class WHERE oid = '$t'::regclass");
}

my $consume_xids = q{
DO $$BEGIN FOR i IN 1..200 LOOP PERFORM txid_current(); COMMIT; END LOOP; END$$;
};
my $vacuum_freeze = "SET vacuum_freeze_min_age = 0;\nVACUUM (FREEZE) %s;\n";

foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	# a committed and an aborted batch in the log, then 200 xids more
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 2));
	push @{ $committed{$t} }, [ 0, 29, 2 ];
	my ($err) = ss_run_sql($node, "SET streamsketch.test_fail_after_log_append = error;\n"
		  . insert_sql($t, 0, 29, 50));
	is($err, injected(error => $t), "$t: an aborted batch for VACUUM");
	$node->safe_psql('postgres', $consume_xids);
	my $age = age_of($t);
	cmp_ok($age, '>=', 200, "$t: relfrozenxid aged to $age");
	$node->safe_psql('postgres', sprintf($vacuum_freeze, $t));
	cmp_ok(age_of($t), '<', 5, "$t: VACUUM (FREEZE) made age(relfrozenxid) small");
	check_exact($s, $t, 'after VACUUM (FREEZE)');
}

# relfrozenxid is never advanced past the xid of a transaction that can
# still append a batch, or whose batch is still in the log.  For the
# latter, a COMMIT that waits for a synchronous standby that never comes
# ('nobody') is held after its commit record and still running; every
# other session commits with synchronous_commit = local.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET synchronous_standby_names = 'nobody';
ALTER SYSTEM SET synchronous_commit = 'local';
SELECT pg_reload_conf();
});
foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";

	# an open transaction with rows pending (not yet in the log)
	my $bg = $node->background_psql('postgres');
	my $xid = $bg->query_safe('BEGIN; ' . insert_sql($t, 0, 29, 3) . 'SELECT txid_current()');
	$node->safe_psql('postgres', $consume_xids . sprintf($vacuum_freeze, $t));
	cmp_ok(frozen_of($t), '<=', $xid,
		"$t: relfrozenxid not past an open writer's xid $xid");
	$bg->query_safe('COMMIT');
	push @{ $committed{$t} }, [ 0, 29, 3 ];

	# batches in the log behind one whose transaction is still running:
	# VACUUM cannot consolidate them, and the later one has an older xid
	# than the running one (its transaction took an xid first and was
	# still open), which only the log can tell VACUUM about
	my $old = $node->background_psql('postgres');
	my $oldxid = $old->query_safe('BEGIN; SELECT txid_current()');
	$bg->query_safe('SET synchronous_commit = on');
	$xid = $bg->query_safe('BEGIN; ' . insert_sql($t, 0, 9, 6) . 'SELECT txid_current()');
	my $bgpid = $bg->query_safe('SELECT pg_backend_pid()');
	$bg->query_until(qr/sent/, "\\echo sent\nCOMMIT;\n");
	$node->poll_query_until('postgres',
		"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $bgpid")
	  or die 'the COMMIT did not wait for the synchronous standby';
	$old->query_safe(insert_sql($t, 5, 5, 8) . 'COMMIT');
	$old->quit;
	$node->safe_psql('postgres', $consume_xids . sprintf($vacuum_freeze, $t));
	cmp_ok(frozen_of($t), '<=', $oldxid,
		"$t: relfrozenxid not past xid $oldxid of a batch behind the running $xid");

	# release the COMMIT (it committed locally): every batch counts once
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($bgpid)");
	$bg->quit;
	push @{ $committed{$t} }, [ 0, 9, 6 ], [ 5, 5, 8 ];
	check_exact($s, $t, 'after the held COMMIT');
	$node->safe_psql('postgres', sprintf($vacuum_freeze, $t));
	cmp_ok(age_of($t), '<', 5, "$t: relfrozenxid advances once it ended");
	check_exact($s, $t, 'after the last VACUUM');
}
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET synchronous_standby_names;
ALTER SYSTEM RESET synchronous_commit;
SELECT pg_reload_conf();
});

# ---------------------------------------------------------------------
# g. A fresh session, and an ordinary role.
# ---------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE ROLE ss_user LOGIN;
});
foreach my $s (@structures)
{
	my $t = "small_$s->{tag}";
	$node->safe_psql('postgres', "GRANT INSERT, SELECT ON $t TO ss_user");

	# committed rows still in the log, read by a session that has not
	# loaded the library yet
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 1));
	push @{ $committed{$t} }, [ 0, 29, 1 ];
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_settings WHERE name LIKE 'streamsketch.%';\n"
			  . answer_sql($s, $t)),
		"0\n" . expected($s, $t),
		"$t: a fresh session (library not loaded) reads exact answers");

	# the role inserts and reads
	$node->safe_psql('postgres', insert_sql($t, 0, 4, 2), extra_params => [ '-U', 'ss_user' ]);
	push @{ $committed{$t} }, [ 0, 4, 2 ];
	is( $node->safe_psql('postgres', 'SELECT (' . $s->{lookups}->($t) . ')',
			extra_params => [ '-U', 'ss_user' ]),
		expected_lookups($s, $t),
		"$t: the ordinary role reads exact estimates");

	# its failed commit (set as superuser before SET ROLE, in a session
	# that has not loaded the library yet) leaves no trace
	my ($err, $out) = ss_run_sql($node, 
		"SET streamsketch.test_fail_after_log_append = error;\n"
		  . "SET ROLE ss_user;\n"
		  . "BEGIN;\n"
		  . insert_sql($t, 0, 29, 11)
		  . "\\echo before commit\nCOMMIT;\n");
	is($err, injected(error => $t), "$t: the role's COMMIT fails with the injected error");
	is($out, 'before commit', "$t: the role's error is raised by COMMIT");
	check_exact($s, $t, "after the role's failed commit");
}

# ---------------------------------------------------------------------
# h. A crash between VACUUM's metapage record and the truncation, on a
# fresh table of three of the structures (the log code is shared; what
# consolidation does is not).
# ---------------------------------------------------------------------
my @trunc_tables;
foreach my $s (grep { $_->{tag} =~ /^(buf|bloc|cf)$/ } @structures)
{
	my $t = "trunc_$s->{tag}";
	my $size_sql = "SELECT pg_relation_size('$t')";
	$node->safe_psql('postgres', sprintf($s->{create}{small}, $t));
	$committed{$t} = [];
	push @trunc_tables, [ $s, $t ];
	my $size = $node->safe_psql('postgres', $size_sql);

	# one transaction larger than the free log pages grows the file
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 2000));
	push @{ $committed{$t} }, [ 0, 29, 2000 ];
	my $grown = $node->safe_psql('postgres', $size_sql);
	cmp_ok($grown, '>', $size, "$t: a large transaction grows the file");

	my $offset = -s $node->logfile;
	my ($err) = ss_run_sql($node, 
		"SET streamsketch.test_crash_before_log_truncate = on;\nVACUUM $t;\n");
	is($err,
		"XX000: streamsketch.test_crash_before_log_truncate: stopping before truncating \"$t\"",
		"$t: VACUUM stops between its record and the truncation");
	ss_wait_restart($node, $offset);
	is($node->safe_psql('postgres', $size_sql), $grown,
		"$t: after the crash the file keeps its blocks past the log's end");
	check_exact($s, $t, 'after the crash before the truncation');

	# the log grows into those blocks again, and the next VACUUM truncates
	$node->safe_psql('postgres', insert_sql($t, 0, 29, 2000) . insert_sql($t, 7, 9, 4));
	push @{ $committed{$t} }, [ 0, 29, 2000 ], [ 7, 9, 4 ];
	check_exact($s, $t, 'the log reuses the blocks past its end');
	$node->safe_psql('postgres', "VACUUM $t");
	cmp_ok($node->safe_psql('postgres', $size_sql), '<', $grown,
		"$t: the next VACUUM gives the tail back");
	check_exact($s, $t, 'after the next VACUUM');
}
$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
foreach my $st (@trunc_tables)
{
	my ($s, $t) = @$st;
	is(answer($standby, $s, $t), expected($s, $t),
		"$t: the standby's answers are exact");
}
check_standby('at the end');

$standby->stop;
$node->stop;
done_testing();
