
# Copyright (c) streamsketch authors
#
# LERT exactness and timeliness on the evaluation's streams, 10^6
# observations each, inside PostgreSQL: a Firehose-like active-set stream
# (lifetime counts power law, exponent -1.5, capped at 65,536; arrivals
# spread over each key's lifetime), and the paper's four robustness
# streams (24-50 in noise, 24 vs 23, round robin, uniform 1-25), each fed
# in ten transactions to count_stretch, immediate, time_stretch (a = 1,
# a = 4, and a = 2 in four cones, which flush on one schedule, staggered)
# and cascade lerts with a level 0 of 4,096 keys.  Against an
# offline count of the same rows: no false positive, no key missed that
# the variant must have reported (and none at all after lert_flush), each
# key at most once, the count and first position at the report exact,
# never before the T-th occurrence, and every variant's bound.
#
# Size: STREAMSKETCH_TEST_SCALE=full runs the streams above (10^6
# observations each); the CI default (ci) runs each at half the length,
# with half the keys (active set, heavy keys, round robin) and half the
# level 0 (a 128kB buffer), so that keys meet level 0, its flushes and the
# runs' merges as often per observation as in the full streams: every
# variant still flushes level 0 into every on-disk level and merges them,
# time stretch still spills young keys to a temporary file (asserted
# below), and the four cones still flush on their staggered schedule.
# STREAMSKETCH_LERT_STREAM=N sets the length (and with it the rest) to N
# observations.  The memory part keeps its volume at every scale (its
# bound is meant against a leak of that load).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $n = $ENV{STREAMSKETCH_LERT_STREAM}
  // ss_scale(ci => 500_000, full => 1_000_000);
# keys and level 0 follow the length (see above)
my $f = $n / 1_000_000;
my $active = int(65536 * $f);
my $heavy = int(10000 * $f);
my $rr = int(20000 * $f);
my $buffer = int(256 * $f) . 'kB';

my $node = ss_node(
	'streams',
	consistency => 0,
	extension => 1,
	conf => q{
autovacuum = off
shared_buffers = 128MB
fsync = off
max_wal_size = 4GB
log_statement = none
});

# the generators: rows (pos, k) in stream order
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION firehose(n bigint, active int) RETURNS TABLE (pos bigint, k bigint)
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
	ids bigint[] := array_fill(0::bigint, ARRAY[active]);
	left_ int[] := array_fill(0, ARRAY[active]);
	next_id bigint := 0;
	i int;
	u float8;
BEGIN
	PERFORM setseed(0.42);
	FOR j IN 1 .. active LOOP
		u := random();
		ids[j] := next_id;
		next_id := next_id + 1;
		left_[j] := least(floor(1.0 / (u * u)), 65536)::int;
	END LOOP;
	FOR p IN 0 .. n - 1 LOOP
		i := 1 + floor(random() * active)::int;
		pos := p;
		k := ids[i];
		RETURN NEXT;
		left_[i] := left_[i] - 1;
		IF left_[i] = 0 THEN
			u := random();
			ids[i] := next_id;
			next_id := next_id + 1;
			left_[i] := least(floor(1.0 / (u * u)), 65536)::int;
		END IF;
	END LOOP;
END;
$$;

-- keys with the given counts, shuffled by a hash, cut at n observations
CREATE FUNCTION counted(n bigint, counts bigint[]) RETURNS TABLE (pos bigint, k bigint)
LANGUAGE sql SET search_path = pg_catalog AS $$
SELECT row_number() OVER (ORDER BY md5(key::text || ':' || j::text)) - 1, key
FROM (SELECT key, j FROM unnest(counts) WITH ORDINALITY c(cnt, key),
                         generate_series(1, cnt) j) s
ORDER BY 1 LIMIT n
$$;
});

my %streams = (
	firehose => "SELECT * FROM firehose($n, $active)",
	noise => "SELECT * FROM counted($n, ARRAY(SELECT CASE WHEN g <= $heavy "
	  . "THEN 24 + (hashint8(g) & 32767) % 27 ELSE 1 END FROM generate_series(1, $n) g))",
	t24v23 => "SELECT * FROM counted($n, ARRAY(SELECT CASE WHEN g <= $heavy "
	  . "THEN 24 ELSE 23 END FROM generate_series(1, $n / 23) g))",
	roundrobin => "SELECT g - 1 AS pos, (g - 1) % $rr AS k FROM generate_series(1, $n) g",
	uniform => "SELECT * FROM counted($n, ARRAY(SELECT 1 + (hashint8(g) & 32767) % 25 "
	  . "FROM generate_series(1, $n / 13) g))");

my %variants = (
	cs => "variant => 'count_stretch'",
	ir => "variant => 'immediate'",
	ts1 => "variant => 'time_stretch', age_bits => 1",
	ts4 => "variant => 'time_stretch', age_bits => 4",
	# four cones on one schedule: each flushes every K C0 / 2^a observations
	ts2c4 => "variant => 'time_stretch', age_bits => 2, cones => 4",
	cf => "variant => 'cascade'");

# every property; all zero
my $check = q{
WITH r AS (SELECT report_id, key::int8 AS k, count, first_position,
                  reported_position, cone FROM lert_reports('%1$s')),
     i AS (SELECT * FROM lert_info('%1$s')),
     must AS (SELECT k FROM truth, i
              WHERE %3$s AND total >= 24
                 OR i.variant = 'immediate' AND total >= 24
                 OR i.variant = 'count_stretch' AND total >= i.count_stretch_bound)
SELECT format('fp %%s missed %%s dup %%s count %%s first %%s early %%s cbound %%s tbound %%s order %%s',
  (SELECT count(*) FROM r LEFT JOIN truth USING (k) WHERE truth.total IS NULL OR truth.total < 24),
  (SELECT count(*) FROM must WHERE k NOT IN (SELECT k FROM r)),
  (SELECT count(*) - count(DISTINCT k) FROM r),
  (SELECT count(*) FROM r WHERE r.count <> (SELECT count(*) FROM %2$s s
                                            WHERE s.k = r.k AND s.pos <= r.reported_position)),
  (SELECT count(*) FROM r JOIN truth USING (k) WHERE r.first_position <> truth.first_pos),
  (SELECT count(*) FROM r JOIN truth USING (k) WHERE r.reported_position < truth.t_pos
      OR (i.variant = 'immediate' AND r.reported_position <> truth.t_pos)),
  (SELECT count(*) FROM r WHERE i.count_stretch_bound IS NOT NULL AND r.count > i.count_stretch_bound),
  (SELECT count(*) FROM r JOIN truth USING (k) WHERE i.time_stretch_bound IS NOT NULL
      AND (r.reported_position - truth.first_pos)::float8 / (truth.t_pos - truth.first_pos)
          > i.time_stretch_bound),
  (SELECT count(*) FROM (SELECT reported_position < lag(reported_position)
                           OVER (PARTITION BY cone ORDER BY report_id) AS descends
                         FROM r) d WHERE descends))
FROM i
};
my $clean = 'fp 0 missed 0 dup 0 count 0 first 0 early 0 cbound 0 tbound 0 order 0';

my $spooled = 0;
foreach my $sname (sort keys %streams)
{
	my $st = "s_$sname";
	$node->safe_psql('postgres',
		"CREATE TABLE $st AS $streams{$sname};\n"
		  . "CREATE INDEX ON $st (k, pos);\n"
		  . "DROP TABLE IF EXISTS truth;\n"
		  . "CREATE TABLE truth AS SELECT k, count(*) AS total, min(pos) AS first_pos, "
		  . "(array_agg(pos ORDER BY pos))[24] AS t_pos FROM $st GROUP BY k;\n"
		  . "CREATE INDEX ON truth (k); ANALYZE $st, truth;");
	my ($rows, $heavy) = split /\|/, $node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM $st), count(*) FILTER (WHERE total >= 24) FROM truth");
	cmp_ok($heavy, '>', 100, "$sname: $rows observations, $heavy keys reach T");

	foreach my $v (sort keys %variants)
	{
		my $t = "l_${sname}_$v";
		$node->safe_psql('postgres',
			"SELECT lert_create('$t', 'int8', buffer_size => '$buffer', $variants{$v})");
		# ten transactions, in stream order; time stretch with a small
		# consolidation memory (work_mem, streamsketch.pending_memory), so
		# that the young keys a flush puts back in level 0 exceed a quarter
		# of it and go through a temporary file
		my $set =
		  $v =~ /^ts/
		  ? "SET work_mem = '64kB'; SET streamsketch.pending_memory = '64kB'; "
		  . "SET client_min_messages = debug1;"
		  : '';
		for my $part (0 .. 9)
		{
			my $lo = int($rows * $part / 10);
			my $hi = int($rows * ($part + 1) / 10);
			my ($ret, $out, $err) = $node->psql('postgres',
				"$set INSERT INTO $t SELECT k FROM $st WHERE pos >= $lo AND pos < $hi ORDER BY pos");
			is($ret, 0, "$sname $v: part $part loaded") or diag($err);
			$spooled++ if $err =~ /spooling them to a temporary file/;
		}
		my $info = $node->safe_psql('postgres',
			"SELECT flushes || ' flushes, ' || reports || ' reports, level 0 max ' || "
			  . "max_level0_entries || ', levels ' || level_entries::text FROM lert_info('$t')");
		is($node->safe_psql('postgres', sprintf($check, $t, $st, 'false')),
			$clean, "$sname $v: reports exact and within the bounds ($info)");
		$node->safe_psql('postgres', "SELECT lert_flush('$t')");
		is($node->safe_psql('postgres', sprintf($check, $t, $st, 'true')),
			$clean, "$sname $v: after lert_flush, every key that reached T is reported once");
		$node->safe_psql('postgres', "DROP TABLE $t");
	}
	$node->safe_psql('postgres', "DROP TABLE $st");
}

cmp_ok($spooled, '>', 0,
	"time stretch: young keys put back in level 0 went through a temporary file ($spooled loads)");

# Memory of a consolidation round, and level 0 bounded by its capacity.
# 100,000 keys seen 20 times each (above the on-disk thresholds' sum of
# 14, below T) keep their counts above the thresholds until reported; they
# go with the keys' entries in the runs (level_kept), and each key takes
# its count back into level 0 when it is observed again, so level 0 (64kB:
# a few thousand keys) never holds more than its capacity while the kept
# counts outnumber it 50 times.  The loading backend's private memory,
# polled from /proc while it loads and consolidates, must stay near the
# consolidation memory (before a fix every checkpoint's copies stayed until
# the end of the round: 8 GB on twice this load; before the kept counts
# went to the runs, level 0 grew to the 100,000 keys).
$node->safe_psql('postgres',
	"SELECT lert_create('l_mem', 'int8', buffer_size => '64kB')");
my ($mem_out, $mem_err) = ('', '');
my $loader = IPC::Run::start(
	[
		'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres') . " application_name=lert_mem_load",
		# this backend's own rounds are measured: no background worker's
		'-c', 'SET streamsketch.background_consolidation = off',
		'-c', 'INSERT INTO l_mem SELECT g % 100000 FROM generate_series(0, 999999) g',
		'-c', 'INSERT INTO l_mem SELECT g % 100000 FROM generate_series(1000000, 1999999) g',
		# the writers or this scan consolidate the log (work_mem); lert_info
		# then finds nothing left in it
		'-c', 'SELECT count(*) FROM l_mem',
		'-c', "SELECT log_observations FROM lert_info('l_mem')"
	],
	'>', \$mem_out, '2>', \$mem_err);
my ($loader_pid, $peak_kb, $polls) = (undef, 0, 0);
while ($loader->pumpable)
{
	$loader->pump_nb;
	$loader_pid //= $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'lert_mem_load'")
	  || undef;
	if (defined $loader_pid
		&& open(my $fh, '<', "/proc/$loader_pid/status"))
	{
		while (<$fh>)
		{
			$peak_kb = $1 if /^RssAnon:\s+(\d+)/ && $1 > $peak_kb;
		}
		close $fh;
		$polls++;
	}
	select(undef, undef, undef, 0.01);
}
ok($loader->finish, 'memory: the load succeeds') or diag($mem_err);
is($mem_out, "0\n0\n",
	'memory: the log was consolidated while the backend was polled (no report, nothing left in the log)');
my ($l0, $cap, $kept, $reports) = split /\|/, $node->safe_psql('postgres',
	"SELECT max_level0_entries, level0_capacity, "
	  . "(SELECT sum(k) FROM unnest(level_kept) k), reports FROM lert_info('l_mem')");
cmp_ok($l0, '<=', $cap,
	"memory: level 0 stays within its capacity ($l0 of $cap entries)");
cmp_ok($kept, '>=', 100000, "memory: the runs keep the 100,000 counts ($kept kept entries)");
is($reports, 0, 'memory: no key reached T');
cmp_ok($polls, '>', 10, "memory: the loading backend was polled ($polls times)");
cmp_ok($peak_kb, '<', 200 * 1024,
	"memory: peak private memory of the loading backend ${peak_kb} kB, under 200 MB");

# Four more observations each bring every key to T: each takes its kept
# count back (a filter probe and a point query), and every one is
# reported once, with its exact count.
$node->safe_psql('postgres',
	"INSERT INTO l_mem SELECT g % 100000 FROM generate_series(0, 399999) g");
$node->safe_psql('postgres', "SELECT lert_flush('l_mem')");
is( $node->safe_psql(
		'postgres',
		"SELECT count(*), count(DISTINCT key), min(count), max(count), "
		  . "count(*) FILTER (WHERE key::int8 NOT BETWEEN 0 AND 99999) "
		  . "FROM lert_reports('l_mem')"),
	'100000|100000|24|24|0',
	'memory: after four more observations each, all 100,000 kept keys are reported once at count 24');

done_testing();
