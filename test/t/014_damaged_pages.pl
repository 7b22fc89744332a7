
# Copyright (c) streamsketch authors
#
# Damaged pages (issue 9): random bytes written into the relation file of
# a stopped cluster give XX001, never a crash, a hang or runaway growth,
# and never a wrong answer when they hit the metapage's parameters.
#
# For each access method a source structure is filled with known keys (a
# flush in between, so sketch/bit/level pages, sub-buffers and change-log
# pages all hold data; the last commit stays in the change log), the
# cluster is stopped and the source's file saved as the pristine copy.
# Each batch then restores the pristine copy into a control table and into
# one table per trial, writes random bytes into each trial's copy, starts
# the cluster once and runs, per table, under statement_timeout: point
# queries of present and absent keys (one digest of 3,000 answers), the
# info function, an INSERT, a flush (VACUUM for the quotient filters), and
# the point queries and info again.  It asserts that
#
#   * the postmaster never restarted (no backend crashed) and no backend
#     was terminated by a signal;
#   * no statement hit statement_timeout (57014) or the harness timeout;
#   * every statement either succeeded or failed with XX001 (55000 only if
#     the damage turned the format version into an older one, 1 or 2;
#     54000 only for metapage damage, when a damaged alloc_end would take
#     the structure past streamsketch.max_structure_size);
#   * every answer is XX001 or the answer of the undamaged structure (the
#     pristine answers before the writes, the control's after them, or
#     the pristine ones again if the INSERT failed);
#   * the file takes at most the disk space the control's writes made it
#     take, plus eight pages (a damaged change-log alloc_end may move the
#     end of the sparse file: counted, not failed), plus 2% of it where
#     unnoticed damage changed the answers (the structure then holds other
#     values, and its merges write other runs);
#   * damage to the metapage's header and parameters gives no wrong answer.
#
# Damage to data pages (structure pages and change-log pages) can go
# unnoticed when what it leaves is plausible (a Bloom filter bit, a bcms
# counter that stays non-negative, a quotient filter remainder that keeps
# its run ordered): those trials are counted and printed, not failed;
# docs/fuzz-outcomes.md explains them.  Data-page damage skips the 24-byte
# PostgreSQL page header, which the server checks itself (and a damaged
# pd_lsn would break WAL flushes of the page, not our code).
#
# Trials per access method and region (metapage, data pages): 24 by
# default (CI: 12 x 2 x 24 = 576 trials, two batches of 24 trial tables
# per access method), 80 with STREAMSKETCH_TEST_SCALE=full (1,920 trials,
# what docs/fuzz-outcomes.md's table was made with), or
# STREAMSKETCH_FUZZ_TRIALS.  Seeds are fixed per batch, so a run is
# reproducible, and a smaller run's trials are the first batches of a
# larger one.  Fewer than 24 would save little (half the trials: a third
# of the time) and lose what the second batch reaches (under gcov, 12
# trials leave out 30 lines and 43 branches of error paths that 24
# reach).  The number of assertions follows the trials (three per
# metapage trial, two per data page trial, three per batch, one per
# access method).

use strict;
use warnings;

use File::Copy;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $trials = $ENV{STREAMSKETCH_FUZZ_TRIALS} // ss_scale(ci => 24, full => 80);
my $batch_size = 24;    # trial tables per cluster start
my $timeout = 20;       # statement_timeout, seconds
my $nkeys = 20000;      # keys 1..nkeys inserted

# metapage regions (offsets into the page): header and parameters of each
# kind, and for the quotient filters nlevels and each live level's shape;
# the counters after them (items, totals, flushes) are reported by the
# info functions only and cannot be checked (docs/fuzz-outcomes.md)
my $DATA = 24;
# (cbt: SSMetaHeader, 72 bytes, then CbtParams, 24: CbtMeta.root is at 96;
# bfile: SSMetaHeader, then BfileParams, 40: BfileMeta.level is at 112)
my %meta_end = (bcms => $DATA + 144, bloom => $DATA + 136, qf => $DATA + 136,
	lert => $DATA + 256, cbt => $DATA + 96, bfile => $DATA + 112);

my @structures = (
	{
		tag => 'bcms_buf', kind => 'bcms',
		create => "SELECT bcms_create('%s', 'int8', epsilon => 0.0001, delta => 0.01, buffer_size => '256kB')",
		lookup => "bcms_estimate('%s', k::int8)::text",
		info => "SELECT (i.mode, i.width, i.depth, i.items, i.total_weight, i.buffered_entries)::text FROM bcms_info('%s') i",
		flush => "SELECT bcms_flush('%s')",
	},
	{
		tag => 'bcms_plain', kind => 'bcms',
		create => "SELECT bcms_create('%s', 'int8', epsilon => 0.0005, delta => 0.01, mode => 'plain')",
		lookup => "bcms_estimate('%s', k::int8)::text",
		info => "SELECT (i.mode, i.width, i.depth, i.items, i.total_weight)::text FROM bcms_info('%s') i",
		flush => "SELECT bcms_flush('%s')",
	},
	{
		tag => 'bloom_loc', kind => 'bloom',
		create => "SELECT bloom_create('%s', 'int8', capacity => 100000, fp_rate => 0.0001, mode => 'localized', buffer_size => '64kB')",
		lookup => "bloom_contains('%s', k::int8)::text",
		info => "SELECT (i.mode, i.bits, i.hashes, i.buffered_entries, i.items, i.bits_set)::text FROM bloom_info('%s') i",
		flush => "SELECT bloom_flush('%s')",
	},
	{
		tag => 'bloom_elev', kind => 'bloom',
		create => "SELECT bloom_create('%s', 'int8', capacity => 100000, fp_rate => 0.0001, mode => 'elevator', buffer_size => '64kB')",
		lookup => "bloom_contains('%s', k::int8)::text",
		info => "SELECT (i.mode, i.bits, i.hashes, i.buffered_entries, i.items, i.bits_set)::text FROM bloom_info('%s') i",
		flush => "SELECT bloom_flush('%s')",
	},
	{
		tag => 'qf', kind => 'qf',
		create => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-6)",
		lookup => "qf_count('%s', k::int8)::text",
		info => "VACUUM %1\$s;\nSELECT (i.levels, i.pages, i.items, i.total_count)::text FROM qf_info('%1\$s') i",
		flush => "VACUUM %s",
	},
	{
		tag => 'bqf', kind => 'qf',
		create => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-6, access_method => 'buffered_quotient_filter', buffer_size => '64kB')",
		lookup => "qf_count('%s', k::int8)::text",
		info => "VACUUM %1\$s;\nSELECT (i.levels, i.pages, i.items, i.total_count)::text FROM qf_info('%1\$s') i",
		flush => "VACUUM %s",
	},
	{
		tag => 'cf', kind => 'qf',
		create => "SELECT qf_create('%s', 'int8', capacity => 100000, fp_rate => 1e-6, access_method => 'cascade_filter', buffer_size => '16kB')",
		lookup => "qf_count('%s', k::int8)::text",
		info => "VACUUM %1\$s;\nSELECT (i.levels, i.pages, i.items, i.total_count)::text FROM qf_info('%1\$s') i",
		flush => "VACUUM %s",
	},
	{
		# level 0 of 1,024 keys: the 20,000 keys fill runs and report pages
		tag => 'lert', kind => 'lert',
		create => "SELECT lert_create('%s', 'int8', threshold => 2, buffer_size => '64kB', variant => 'cascade')",
		lookup => "lert_count('%s', k::int8)::text",
		info => "SELECT (i.observations, i.reports, i.level0_entries)::text FROM lert_info('%s') i",
		flush => "SELECT lert_flush('%s')",
	},
	{
		# count stretch, every key 16 times: counts between the levels'
		# thresholds (8, 4, 2) and T (24) stay in the runs as kept entries,
		# so the runs have Bloom filter pages of them too
		tag => 'lertcs', kind => 'lert', reps => 16,
		create => "SELECT lert_create('%s', 'int8', buffer_size => '64kB')",
		lookup => "lert_count('%s', k::int8)::text",
		info => "SELECT (i.observations, i.level_kept, i.level_entries)::text FROM lert_info('%s') i",
		flush => "SELECT lert_flush('%s')",
	},
	{
		# four cones: their rounds reserve free extents from one pool
		# (lert_store.c), which a failed round must leave free, not leak
		tag => 'lertcs4', kind => 'lert', reps => 16,
		create => "SELECT lert_create('%s', 'int8', buffer_size => '64kB', cones => 4)",
		lookup => "lert_count('%s', k::int8)::text",
		info => "SELECT (i.observations, i.level_kept, i.level_entries)::text FROM lert_info('%s') i",
		flush => "SELECT lert_flush('%s')",
	},
	{
		# small buffers: the 20,000 keys make node pages and fragment pages
		tag => 'cbt', kind => 'cbt',
		create => "SELECT cbt_create('%s', 'k int8', 'count(*) AS n', root_buffer => '64kB', node_buffer => '16kB', fanout => 4)",
		lookup => "coalesce((SELECT n FROM cbt_lookup(NULL::%s, k::int8)), 0)::text",
		info => "SELECT (i.rows, i.height, i.nodes, i.fragments)::text FROM cbt_info('%s') i",
		flush => "SELECT cbt_finalize('%s')",
	},
	{
		# a sample larger than the 20,000 keys, so that it holds every row
		# (in four buckets and the tail); a bfile has no point query: the
		# lookup reads the sample once (an InitPlan: a jsonb of the count of
		# each id, a NULL id counted under 'null') and gives each key's count
		tag => 'bfile', kind => 'bfile',
		create => "SELECT bfile_create('%s', 'id bigint', sample_size => 100000, buckets => 4)",
		lookup => "coalesce((SELECT jsonb_object_agg(coalesce(id::text, 'null'), n) "
		  . "FROM (SELECT id, count(*) AS n FROM %s GROUP BY id) c) ->> k::text, '0')",
		info => "SELECT (i.size, i.seen, i.level)::text FROM bfile_info('%s') i",
		flush => "SELECT bfile_flush('%s')",
	});

my $node = ss_node(
	'fuzz',
	consistency => 0,
	conf => qq{
autovacuum = off
# each trial's answers and tree shapes are compared with the control's,
# both consolidated by their own statements
streamsketch.background_consolidation = off
shared_buffers = 64MB
statement_timeout = '${timeout}s'
log_statement = none
log_min_messages = warning
fsync = off
});
$node->safe_psql('postgres', 'CREATE EXTENSION streamsketch');
my $pgdata = $node->data_dir;

# one digest of the answers for 2,000 present and 1,000 absent keys
sub lookups_sql
{
	my ($s, $t) = @_;
	my $l = sprintf($s->{lookup}, $t);
	return "SELECT md5(string_agg($l, ',' ORDER BY k)) FROM "
	  . "(SELECT generate_series(1, $nkeys, 10) k UNION ALL "
	  . "SELECT generate_series(5000001, 5001000)) keys";
}

# Run one statement; returns 'ok:<output>', 'err:<sqlstate>' or 'hang'.
sub run_stmt
{
	my ($sql) = @_;
	my ($out, $err, $timed_out) = ('', '', 0);
	$node->psql(
		'postgres', "\\set VERBOSITY sqlstate\n$sql",
		stdout => \$out,
		stderr => \$err,
		timeout => 3 * $timeout,
		timed_out => \$timed_out);
	return 'hang' if $timed_out;
	if ($err =~ /ERROR:\s+([0-9A-Z]{5})/)
	{
		return 'hang' if $1 eq '57014';
		return "err:$1";
	}
	return "err:psql:$err" if $err =~ /\S/ && $err !~ /^(WARNING|NOTICE)/m;
	return "ok:$out";
}

sub file_of
{
	my ($t) = @_;
	return "$pgdata/"
	  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('$t')");
}

sub read_file_bytes
{
	my ($f) = @_;
	open my $fh, '<:raw', $f or die "open $f: $!";
	local $/;
	my $d = <$fh>;
	close $fh;
	return $d;
}

# write $bytes at $off of file $f
sub poke
{
	my ($f, $off, $bytes) = @_;
	open my $fh, '+<:raw', $f or die "open $f: $!";
	seek($fh, $off, 0) or die;
	print $fh $bytes;
	close $fh;
}

# the pristine file's non-zero blocks other than block 0, by page type
# (the uint16 at 8 bytes before the page's end): change log 8, else data
sub classify_blocks
{
	my ($img) = @_;
	my (@log, @data);
	my $n = length($img) / 8192;
	for my $b (1 .. $n - 1)
	{
		my $page = substr($img, $b * 8192, 8192);
		next if $page =~ /^\0*$/;
		my $type = unpack('v', substr($page, 8192 - 8, 2));
		if ($type == 8) { push @log, $b; }
		else { push @data, $b; }
	}
	return (\@log, \@data);
}

# the metapage ranges [from, to) that a metapage trial may hit
sub meta_ranges
{
	my ($s, $img) = @_;
	my @r = ([ $DATA, $meta_end{ $s->{kind} } ]);
	if ($s->{kind} eq 'qf')
	{
		# nlevels at 120, levels[] at 136, 32 bytes each (shape: 16)
		my $nlevels = unpack('V', substr($img, $DATA + 120, 4));
		push @r, [ $DATA + 120, $DATA + 124 ];
		push @r, [ $DATA + 136 + 32 * $_, $DATA + 136 + 32 * $_ + 16 ]
		  for 0 .. $nlevels - 1;
	}
	return @r;
}

my %total;
my @table_rows;

for my $si (0 .. $#structures)
{
	my $s = $structures[$si];
	my $tag = $s->{tag};
	my $ntables = $batch_size;
	my @ops;    # per trial: its description

	# the source and every table of a batch get the same parameters, so
	# that the source's file is a valid file of each of them
	$node->safe_psql('postgres',
		join(";\n", map { sprintf($s->{create}, $_) }
			  ("src_$tag", "ctl_$tag", map { "t${_}_$tag" } 1 .. $ntables)));
	my $half = $nkeys / 2;
	# lert: every key twice, so that its reports fill report pages (or
	# as often as the structure says)
	my $reps =
	    $s->{reps} ? ", generate_series(1, $s->{reps}) r"
	  : $s->{kind} eq 'lert' ? ', generate_series(1, 2) r'
	  : '';
	$node->safe_psql('postgres',
		"INSERT INTO src_$tag SELECT g FROM generate_series(1, $half) g$reps");
	$node->safe_psql('postgres', sprintf($s->{flush}, "src_$tag"));
	# four more commits; the last stays in the change log (nothing reads)
	my $step = ($nkeys - $half) / 4;
	for my $i (0 .. 3)
	{
		my $from = $half + $i * $step + 1;
		my $to = $half + ($i + 1) * $step;
		$node->safe_psql('postgres',
			"INSERT INTO src_$tag SELECT g FROM generate_series($from, $to) g$reps"
		);
		$node->safe_psql('postgres', lookups_sql($s, "src_$tag"))
		  if $i < 3;    # consolidates the log, filling the sub-buffers
	}
	my %file = map { $_ => file_of($_) }
	  ("src_$tag", "ctl_$tag", map { "t${_}_$tag" } 1 .. $ntables);
	$node->stop('fast');
	my $pristine = read_file_bytes($file{"src_$tag"});
	my ($log_blocks, $data_blocks) = classify_blocks($pristine);
	my @meta_ranges = meta_ranges($s, $pristine);
	my $meta_bytes = 0;
	$meta_bytes += $_->[1] - $_->[0] for @meta_ranges;
	note sprintf("%s: %d pages, %d data pages and %d change-log pages not zero",
		$tag, length($pristine) / 8192, scalar(@$data_blocks),
		scalar(@$log_blocks));
	ok(@$log_blocks > 0 && @$data_blocks > 0,
		"$tag: the pristine copy has change-log and structure pages");

	# the trials: meta and data alternate, data alternates log/structure
	my @plan;
	for my $i (0 .. 2 * $trials - 1)
	{
		my $region = $i % 2 == 0 ? 'meta' : ($i % 4 == 1 ? 'log' : 'data');
		push @plan, $region;
	}

	my %count;
	my $pristine_answers;
	for (my $first = 0; $first < @plan; $first += $ntables)
	{
		my $bseed = 1000 * ($si + 1) + $first;
		srand($bseed);
		my @batch = @plan[ $first .. ($first + $ntables - 1 > $#plan ? $#plan : $first + $ntables - 1) ];

		# restore and damage (the server is stopped)
		for my $f (values %file) { copy_pristine($pristine, $f); }
		my @desc;
		for my $j (0 .. $#batch)
		{
			my $region = $batch[$j];
			my $t = "t" . ($j + 1) . "_$tag";
			my ($off, $len, $blk);
			if ($region eq 'meta')
			{
				# a random offset in the ranges, 1 to 4 random bytes
				my $pick = int(rand($meta_bytes));
				for my $r (@meta_ranges)
				{
					my $w = $r->[1] - $r->[0];
					if ($pick < $w) { $off = $r->[0] + $pick; last; }
					$pick -= $w;
				}
				$len = 1 + int(rand(4));
				$blk = 0;
			}
			else
			{
				my $set = $region eq 'log' ? $log_blocks : $data_blocks;
				$blk = $set->[ int(rand(@$set)) ];
				$len = 1 + int(rand(16));
				$off = $blk * 8192 + $DATA + int(rand(8192 - $DATA - $len + 1));
			}
			my $bytes = join('', map { chr(int(rand(256))) } 1 .. $len);
			poke($file{$t}, $off, $bytes);
			my $version = unpack('V',
				substr(read_file_bytes($file{$t}), $DATA + 4, 4));
			push @desc, {
				region => $region, table => $t,
				what => sprintf("block %d offset %d: %d bytes %s",
					$blk, $off % 8192, $len, unpack('H*', $bytes)),
				older_version => ($version == 1 || $version == 2),
			};
		}
		$node->start;
		my $started = $node->safe_psql('postgres',
			'SELECT pg_postmaster_start_time()');
		my $log_start = -s $node->logfile;

		# the control: pristine answers, then the writes and answers after
		my $ctl = "ctl_$tag";
		my %ctl;
		$ctl{l1} = run_stmt(lookups_sql($s, $ctl));
		$ctl{i1} = run_stmt(sprintf($s->{info}, $ctl));
		$ctl{ins} = run_stmt(
			"INSERT INTO $ctl SELECT g FROM generate_series(7000001, 7000100) g");
		$ctl{flush} = run_stmt(sprintf($s->{flush}, $ctl));
		$ctl{l2} = run_stmt(lookups_sql($s, $ctl));
		$ctl{i2} = run_stmt(sprintf($s->{info}, $ctl));
		for my $k (qw(l1 i1 ins flush l2 i2))
		{
			BAIL_OUT("$tag: the undamaged control failed: $k $ctl{$k}")
			  unless $ctl{$k} =~ /^ok:/;
		}
		$pristine_answers //= "$ctl{l1} $ctl{i1}";
		is("$ctl{l1} $ctl{i1}", $pristine_answers,
			"$tag: the control answers as before the restart");

		for my $d (@desc)
		{
			my $t = $d->{table};
			my %r;
			$r{l1} = run_stmt(lookups_sql($s, $t));
			$r{i1} = run_stmt(sprintf($s->{info}, $t));
			$r{ins} = run_stmt(
				"INSERT INTO $t SELECT g FROM generate_series(7000001, 7000100) g");
			$r{flush} = run_stmt(sprintf($s->{flush}, $t));
			$r{l2} = run_stmt(lookups_sql($s, $t));
			$r{i2} = run_stmt(sprintf($s->{info}, $t));

			my $inserted = $r{ins} =~ /^ok:/;
			my %want = (
				l1 => $ctl{l1}, i1 => $ctl{i1},
				l2 => $inserted ? $ctl{l2} : $ctl{l1},
				i2 => $inserted ? $ctl{i2} : $ctl{i1});
			# a flush refused by the damage (an error counted below) leaves
			# the structure laid out as before it: its counters of pages,
			# nodes or levels are not the control's, its answers are
			delete $want{i2} if $inserted && $r{flush} !~ /^ok:/;
			my ($err, $wrong, $hang, $bad, $bad_answer) = (0, 0, 0, '', '');
			for my $k (qw(l1 i1 ins flush l2 i2))
			{
				my $v = $r{$k};
				if ($v eq 'hang') { $hang = 1; $bad .= " $k:hang"; }
				elsif ($v eq 'err:XX001') { $err = 1; }
				elsif ($v eq 'err:55000' && $d->{older_version}) { $err = 1; }
				# the change log's alloc_end damaged upwards: a write
				# would pass max_structure_size (docs/fuzz-outcomes.md)
				elsif ($v eq 'err:54000' && $d->{region} eq 'meta') { $err = 1; $d->{limit} = 1; }
				elsif ($v =~ /^err:/) { $bad .= " $k:$v"; }
				elsif (exists $want{$k} && $v ne $want{$k})
				{
					$wrong = 1;
					$bad_answer .= " $k:wrong";
				}
			}
			$d->{wrong} = $wrong;
			$d->{outcome} =
			    $hang ? 'hang'
			  : $bad ne '' ? 'bad'
			  : $wrong ? 'wrong'
			  : $err ? 'xx001'
			  : 'none';
			$count{ $d->{region} }{ $d->{outcome} }++;
			$count{ $d->{region} }{limit}++ if $d->{limit};
			$count{ $d->{region} }{trials}++;
			ok($bad eq '', "$tag $d->{region} trial ($d->{what}): no hang, no other error")
			  or diag("$t:$bad");
			ok(!$wrong, "$tag $d->{region} trial ($d->{what}): no wrong answer")
			  or diag("$t:$bad_answer")
			  if $d->{region} eq 'meta';
			note "$tag $d->{region} ($d->{what}): wrong answer" if $wrong;
		}

		my $now = $node->safe_psql('postgres',
			'SELECT pg_postmaster_start_time()');
		is($now, $started, "$tag batch $first: the server did not restart");
		my $log = slurp_file($node->logfile, $log_start);
		unlike($log, qr/terminated by signal|was terminated|PANIC/,
			"$tag batch $first: no backend died");
		$node->stop('fast');

		# growth: the disk space taken (the structures are sparse files: a
		# damaged change-log alloc_end moves the end of the file by one
		# written block, see docs/fuzz-outcomes.md) at most the control's,
		# plus eight pages; where damage went unnoticed and changed the
		# answers, the structure holds other values than the control's
		# (a count become large makes a report, merges write other runs),
		# and may take 2% more
		my $ctl_size = disk_bytes($file{$ctl});
		my $base_limit = $ctl_size + 8 * 8192;
		$base_limit = length($pristine) + 8 * 8192 if length($pristine) + 8 * 8192 > $base_limit;
		for my $d (@desc)
		{
			my $limit = $base_limit;
			$limit += 8192 * int($ctl_size / 8192 / 50) if $d->{wrong};
			my $size = disk_bytes($file{ $d->{table} });
			ok($size <= $limit,
				"$tag $d->{region} trial ($d->{what}): file takes $size <= $limit bytes");
			$count{ $d->{region} }{growth}++ if $size > $limit;
			$count{ $d->{region} }{sparse}++
			  if -s $file{ $d->{table} } > $limit;
		}
	}
	$node->start;

	for my $region (qw(meta data log))
	{
		my $c = $count{$region} || {};
		my @n = map { $c->{$_} // 0 } qw(trials xx001 none wrong hang bad growth limit sparse);
		push @table_rows, sprintf("| %s | %s | %s |", $tag, $region, join(' | ', @n));
		$total{$region}[$_] += $n[$_] for 0 .. $#n;
	}
}

sub disk_bytes
{
	my @st = stat($_[0]) or die "stat $_[0]: $!";
	return $st[12] * 512;
}

sub copy_pristine
{
	my ($img, $f) = @_;
	open my $fh, '>:raw', $f or die "open $f: $!";
	print $fh $img;
	close $fh;
}

diag("| access method | region | trials | XX001 | no effect | wrong | hang | other error | growth | of the XX001: 54000 | sparse end moved |");
diag($_) for @table_rows;
for my $region (qw(meta data log))
{
	diag(sprintf("| all | %s | %s |", $region,
		join(' | ', map { $_ // 0 } @{ $total{$region} })));
}
is($total{meta}[3] // 0, 0, 'metapage damage gave no wrong answer');

$node->stop;
done_testing();
