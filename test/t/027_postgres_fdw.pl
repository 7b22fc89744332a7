# Copyright (c) streamsketch authors
#
# Partitions on other servers (docs/scale-out.md): a coordinator whose
# partitioned parents have foreign-table partitions of postgres_fdw on two
# shard servers that have the extension.
#
#  a. INSERT through a parent routes each row to its shard, in batches of
#     the foreign table's batch_size (the shard receives multi-row INSERTs);
#  b. every key function on the parent (bcms_estimate, qf_contains,
#     qf_count, lert_count, lert_reported) and the info functions answer
#     exactly as the same parent with local partitions fed the same stream
#     (count-min estimates never below the true count; lert counts exact);
#  c. plain SQL with a key predicate on a lert or cbt parent is pruned to
#     one foreign partition and ships the predicate; the shard answers
#     that remote query with its lookup path; every group of the cbt
#     parent equals the GROUP BY of the stream, asked in SQL or with
#     cbt_lookup (routed by the group keys of the shard's definition);
#     cbt_lookup refuses to combine a group of several servers (0A000);
#     lert_info, lert_reports, bcms_flush, bfile_subsample (uniform over
#     the whole stream by chi-square, drawn from each shard in proportion
#     to what it has seen) and bfile_window on the parent reach the shards
#     too;
#  d. the calls run as the caller's user mapping: a role with SELECT on
#     the parent and no mapping gets postgres_fdw's error; a foreign table
#     of another wrapper is refused 0A000;
#  e. a shard stopped in the middle of a stream of transactions: the
#     transaction that reaches it fails with a clear error, keys on the
#     other shard still answer, and once the shard is back every
#     committed row is counted, exactly, and nothing else.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use IPC::Run;
use Test::More;

# The shards consolidate only when asked (no background workers), so
# that a flush through the parent has work to do.
my @shards = map {
	ss_node("shard$_", consistency => 0, extension => 1,
		conf => "log_statement = 'all'\n"
		  . "streamsketch.background_consolidation = off\n")
} (0, 1);
my $coord = ss_node('coordinator', consistency => 0, extension => 1);
$coord->safe_psql('postgres', 'CREATE EXTENSION postgres_fdw');

# On each shard i: a bcms, a quotient filter and a lert, named _i.
for my $i (0, 1)
{
	$shards[$i]->safe_psql(
		'postgres', qq{
		CREATE TABLE clicks_$i (url text) USING bcms;
		CREATE TABLE seen_$i (url text) USING quotient_filter;
		SELECT lert_create('hh_$i', 'text', threshold => 10);
		SELECT cbt_create('views_$i', group_by => 'url text',
			aggregates => 'count(*) AS hits, sum(length(url)) AS chars');
		SELECT bfile_create('sample_$i', 'id int, ts int NOT NULL',
			sample_size => 2000, time_column => 'ts');
		SELECT bfile_create('wsample_$i', 'id int, w float8 NOT NULL',
			sample_size => 2000, mode => 'weighted', weight_column => 'w');
	});
	my ($host, $port) = ($shards[$i]->host, $shards[$i]->port);
	$coord->safe_psql(
		'postgres', qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER postgres_fdw
			OPTIONS (host '$host', port '$port', dbname 'postgres',
					 batch_size '100');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
	});
}

# The same parents twice on the coordinator: partitions on the shards, and
# local partitions with the same parameters (the reference).  Hash
# partitioned by the key (routed); the filter by an expression of the key
# (combined: every partition answers).
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE clicks (url text) PARTITION BY HASH (url);
	CREATE FOREIGN TABLE clicks_0 PARTITION OF clicks
		FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER shard0;
	CREATE FOREIGN TABLE clicks_1 PARTITION OF clicks
		FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER shard1;
	CREATE TABLE seen (url text) PARTITION BY LIST (left(url, 2));
	CREATE FOREIGN TABLE seen_0 PARTITION OF seen FOR VALUES IN ('/a')
		SERVER shard0;
	CREATE FOREIGN TABLE seen_1 PARTITION OF seen DEFAULT SERVER shard1;
	CREATE TABLE hh (key text) PARTITION BY HASH (key);
	CREATE FOREIGN TABLE hh_0 PARTITION OF hh
		FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER shard0;
	CREATE FOREIGN TABLE hh_1 PARTITION OF hh
		FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER shard1;

	CREATE TABLE views (url text, hits bigint, chars bigint)
		PARTITION BY HASH (url);
	CREATE FOREIGN TABLE views_0 PARTITION OF views
		FOR VALUES WITH (MODULUS 2, REMAINDER 0) SERVER shard0;
	CREATE FOREIGN TABLE views_1 PARTITION OF views
		FOR VALUES WITH (MODULUS 2, REMAINDER 1) SERVER shard1;

	CREATE TABLE sample (id int, ts int NOT NULL) PARTITION BY RANGE (id);
	CREATE FOREIGN TABLE sample_0 PARTITION OF sample
		FOR VALUES FROM (1) TO (30001) SERVER shard0;
	CREATE FOREIGN TABLE sample_1 PARTITION OF sample
		FOR VALUES FROM (30001) TO (40001) SERVER shard1;

	CREATE TABLE l_clicks (url text) PARTITION BY HASH (url);
	CREATE TABLE l_clicks_0 PARTITION OF l_clicks
		FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING bcms;
	CREATE TABLE l_clicks_1 PARTITION OF l_clicks
		FOR VALUES WITH (MODULUS 2, REMAINDER 1) USING bcms;
	CREATE TABLE l_seen (url text) PARTITION BY LIST (left(url, 2));
	CREATE TABLE l_seen_0 PARTITION OF l_seen FOR VALUES IN ('/a')
		USING quotient_filter;
	CREATE TABLE l_seen_1 PARTITION OF l_seen DEFAULT USING quotient_filter;
	CREATE TABLE l_hh (key text) PARTITION BY HASH (key);
	SELECT lert_create('l_hh_0', 'text', threshold => 10);
	SELECT lert_create('l_hh_1', 'text', threshold => 10);
	ALTER TABLE l_hh ATTACH PARTITION l_hh_0
		FOR VALUES WITH (MODULUS 2, REMAINDER 0);
	ALTER TABLE l_hh ATTACH PARTITION l_hh_1
		FOR VALUES WITH (MODULUS 2, REMAINDER 1);

	CREATE TABLE stream (url text);
	INSERT INTO stream
		SELECT (ARRAY['/a', '/b', '/c'])[1 + g % 3] || (g * 7919 % 997) % 300
		FROM generate_series(1, 30000) g;
});

# a. the stream through each parent, in one statement each
$coord->safe_psql(
	'postgres', q{
	INSERT INTO clicks SELECT url FROM stream;
	INSERT INTO seen SELECT url FROM stream;
	INSERT INTO hh SELECT url FROM stream;
	INSERT INTO views (url) SELECT url FROM stream;
	INSERT INTO sample SELECT g, g % 1000 FROM generate_series(1, 40000) g;
	INSERT INTO l_clicks SELECT url FROM stream;
	INSERT INTO l_seen SELECT url FROM stream;
	INSERT INTO l_hh SELECT url FROM stream;
});
my $shard_rows = 0;
for my $i (0, 1)
{
	$shard_rows += $shards[$i]->safe_psql('postgres',
		"SELECT (bcms_info('clicks_$i')).items");
}
is($shard_rows, 30000, 'every row went to a shard');
my $log = slurp_file($shards[0]->logfile);
like(
	$log,
	qr/INSERT INTO public\.clicks_0\(url\) VALUES \(\$1\), \(\$2\)/,
	'the shard received the rows in multi-row batches (batch_size)');

# b. every key function on the parent against the local reference
my $keys = q{(SELECT DISTINCT url FROM stream
			  UNION ALL VALUES ('/a-absent'), ('/x-absent')) k(url)};
is( $coord->safe_psql(
		'postgres', qq{
	SELECT count(*) FROM $keys
	WHERE bcms_estimate('clicks', url) IS DISTINCT FROM bcms_estimate('l_clicks', url)
	   OR bcms_estimate('clicks', url) < (SELECT count(*) FROM stream s WHERE s.url = k.url)
	   OR qf_contains('seen', url) IS DISTINCT FROM qf_contains('l_seen', url)
	   OR qf_count('seen', url) IS DISTINCT FROM qf_count('l_seen', url)
	   OR lert_count('hh', url) IS DISTINCT FROM
			(SELECT count(*) FROM stream s WHERE s.url = k.url)
	   OR lert_reported('hh', url) IS DISTINCT FROM lert_reported('l_hh', url)}),
	'0',
	'bcms_estimate, qf_contains, qf_count, lert_count and lert_reported on a parent of foreign partitions answer as on local partitions'
);
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) FILTER (WHERE lert_reported('hh', url)),
		   count(*) FILTER (WHERE qf_contains('seen', url))
	FROM (SELECT DISTINCT url FROM stream) k}),
	'900|900',
	'every key of the stream is reported and contained');
is( $coord->safe_psql(
		'postgres', q{
	SELECT (SELECT row(items, total_weight, width, depth, error_bound) FROM bcms_info('clicks'))
		 = (SELECT row(items, total_weight, width, depth, error_bound) FROM bcms_info('l_clicks')),
		   (SELECT row(items, total_count) FROM qf_info('seen'))
		 = (SELECT row(items, total_count) FROM qf_info('l_seen'))}),
	't|t',
	'bcms_info and qf_info merge the shards\' rows as the local partitions\'');

is( $coord->safe_psql(
		'postgres', q{
	SELECT (SELECT row(observations, reports) FROM lert_info('hh'))
		 = (SELECT row(observations, reports) FROM lert_info('l_hh')),
		   (SELECT count(*) FROM (
				(SELECT key, count FROM lert_reports('hh')
				 EXCEPT ALL SELECT key, count FROM lert_reports('l_hh'))
				UNION ALL
				(SELECT key, count FROM lert_reports('l_hh')
				 EXCEPT ALL SELECT key, count FROM lert_reports('hh'))) d),
		   (SELECT count(*) FROM lert_reports('hh'))}),
	't|0|900',
	'lert_info and lert_reports on the parent merge the shards as the local partitions');

# flushes through the parent reach every shard's change log
is( $coord->safe_psql(
		'postgres', q{
	INSERT INTO clicks SELECT url FROM stream LIMIT 1000;
	SELECT (SELECT pending_records > 0 FROM bcms_info('clicks')),
		   bcms_flush('clicks') > 0,
		   (SELECT pending_records FROM bcms_info('clicks'))}),
	't|t|0',
	'bcms_flush on the parent consolidates every shard\'s change log');

# bfile: a subsample of the parent is a uniform sample of the whole
# stream, drawn from each shard in proportion to what it has seen (3:1
# here): chi-square of one subsample of 1,200 over 8 equal ranges of the
# stream, 7 degrees of freedom, refused above 40 (p = 1.3e-6).  A
# concatenation or an even split of the shards would be far above.
my $chi2 = $coord->safe_psql(
	'postgres', q{
	SELECT round(sum((n - 150.0) ^ 2 / 150.0), 1)
	FROM (SELECT b, count(s.id) AS n
		  FROM generate_series(0, 7) b
		  LEFT JOIN bfile_subsample(NULL::sample, 1200) s
			ON (s.id - 1) / 5000 = b
		  GROUP BY b) c});
cmp_ok($chi2, '<', 40,
	"a subsample of the parent is uniform over the whole stream (chi-square $chi2)");
my $smallest = (sort { $a <=> $b }
	  map { $shards[$_]->safe_psql('postgres', "SELECT size FROM bfile_info('sample_$_')") }
	  (0, 1))[0];
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*), count(DISTINCT id) FROM bfile_subsample(NULL::sample, 100000)}),
	"$smallest|$smallest",
	'a subsample is at most the smallest sample that left rows out, no row twice');
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE wsample (id int, w float8 NOT NULL) PARTITION BY RANGE (id);
	CREATE FOREIGN TABLE wsample_0 PARTITION OF wsample
		FOR VALUES FROM (1) TO (1001) SERVER shard0;
	CREATE FOREIGN TABLE wsample_1 PARTITION OF wsample
		FOR VALUES FROM (1001) TO (2001) SERVER shard1;
	INSERT INTO wsample SELECT g, 1 + g % 4 FROM generate_series(1, 2000) g;
});
my ($werr) =
  ss_run_sql($coord, "SELECT * FROM bfile_subsample(NULL::wsample, 10)");
like($werr, qr/^0A000: .*wsample/,
	'a weighted subsample of partitions on other servers is refused');
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (
		(SELECT * FROM bfile_window(NULL::sample, 100, 300)
		 EXCEPT ALL SELECT * FROM sample WHERE ts BETWEEN 100 AND 300)
		UNION ALL
		(SELECT * FROM sample WHERE ts BETWEEN 100 AND 300
		 EXCEPT ALL SELECT * FROM bfile_window(NULL::sample, 100, 300))) d}),
	'0',
	'bfile_window on the parent returns the shards\' sampled rows in the window');
# a parent's row type with a dropped column: the rows still come back
$coord->safe_psql('postgres',
	'ALTER TABLE sample ADD COLUMN junk int; ALTER TABLE sample DROP COLUMN junk;');
is( $coord->safe_psql(
		'postgres', q{
	SELECT (SELECT count(*) FROM bfile_window(NULL::sample, 100, 300))
		 = (SELECT count(*) FROM sample WHERE ts BETWEEN 100 AND 300),
		   (SELECT count(*) FROM bfile_subsample(NULL::sample, 50))}),
	't|50',
	'set functions on a parent whose row type has a dropped column');

# c. plain SQL on the lert parent: pruned, and the key shipped
my $plan = $coord->safe_psql('postgres',
	"EXPLAIN (VERBOSE, COSTS OFF) SELECT key FROM hh WHERE key = '/b17'");
my ($remote_sql) = $plan =~ /Remote SQL: (.*)$/m;
like($remote_sql, qr/WHERE \(\(key = '\/b17'\)\)/,
	'the key predicate is shipped to the one shard partition pruning kept');
my @scanned = $plan =~ /Foreign Scan on (\S+)/g;
is(scalar(@scanned), 1, 'one foreign partition is scanned');
my ($shard_of_key) = $scanned[0] =~ /hh_(\d)$/;
like(
	$shards[$shard_of_key]
	  ->safe_psql('postgres', "EXPLAIN (COSTS OFF) $remote_sql"),
	qr/Custom Scan \(lert lookup\)/,
	'the shard answers the shipped query with its lookup path');
is( $coord->safe_psql('postgres', "SELECT count(*) FROM hh WHERE key = '/b17'"),
	$coord->safe_psql('postgres', "SELECT count(*) FROM l_hh WHERE key = '/b17'"),
	'the shipped query returns what the local parent returns');

# ... and on the cbt parent: each group, shipped to its shard, is the
# group a GROUP BY of the stream gives
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (SELECT url, count(*) AS hits, sum(length(url)) AS chars
						  FROM stream GROUP BY url) g
	WHERE (SELECT row(v.hits, v.chars) FROM views v WHERE v.url = g.url)
		  IS DISTINCT FROM row(g.hits, g.chars)}),
	'0',
	'every group of a cbt parent asked in SQL equals the GROUP BY of the stream');
$plan = $coord->safe_psql('postgres',
	"EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM views WHERE url = '/c5'");
($remote_sql) = $plan =~ /Remote SQL: (.*)$/m;
($shard_of_key) = $plan =~ /Foreign Scan on public\.views_(\d)/;
like(
	$shards[$shard_of_key]
	  ->safe_psql('postgres', "EXPLAIN (COSTS OFF) $remote_sql"),
	qr/Custom Scan \(cbt lookup\)/,
	'the shard answers a group shipped to it with its cbt lookup');
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (SELECT url, count(*) AS hits, sum(length(url)) AS chars
						  FROM stream GROUP BY url) g
	WHERE (SELECT row(v.hits, v.chars) FROM cbt_lookup(NULL::views, g.url) v)
		  IS DISTINCT FROM row(g.hits, g.chars)}),
	'0',
	'cbt_lookup on the parent asks the one shard that holds the group');
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE views_by_prefix (url text, hits bigint, chars bigint)
		PARTITION BY LIST (left(url, 2));
	CREATE FOREIGN TABLE views_by_prefix_0 PARTITION OF views_by_prefix
		FOR VALUES IN ('/a') SERVER shard0 OPTIONS (table_name 'views_0');
	CREATE FOREIGN TABLE views_by_prefix_1 PARTITION OF views_by_prefix
		DEFAULT SERVER shard1 OPTIONS (table_name 'views_1');
});
my ($err) = ss_run_sql($coord,
	"SELECT * FROM cbt_lookup(NULL::views_by_prefix, '/c5'::text)");
like($err, qr/^0A000: partition "views_by_prefix_\d" of "views_by_prefix" is a foreign table/,
	'cbt_lookup refuses to combine a group over servers (plain SQL reaches them)');

# d. the user mapping and the wrapper
$coord->safe_psql(
	'postgres', q{
	CREATE ROLE fdw_reader;
	GRANT SELECT ON clicks TO fdw_reader;
	CREATE FOREIGN DATA WRAPPER other_fdw;
	CREATE SERVER other_server FOREIGN DATA WRAPPER other_fdw;
	CREATE TABLE mixed (url text) PARTITION BY LIST (url);
	CREATE FOREIGN TABLE mixed_other PARTITION OF mixed DEFAULT
		SERVER other_server;
});
($err) = ss_run_sql($coord,
	"SET ROLE fdw_reader; SELECT bcms_estimate('clicks', '/a1'::text)");
like($err, qr/^42704: user mapping not found for "fdw_reader"/,
	'a role without a user mapping for the shard gets postgres_fdw\'s error');
($err) = ss_run_sql($coord, "SELECT bcms_estimate('mixed', 'x'::text)");
like($err, qr/^0A000: .*not of postgres_fdw/,
	'a foreign partition of another wrapper is refused');

# e. a shard stopped in the middle of a stream.  Each transaction inserts
# keys of one shard (range partitioning by the key's first letter) and
# records them in a local table: postgres_fdw commits each server of a
# transaction in turn, so only a transaction on one shard is atomic across
# a stopped shard.
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE obs (key text COLLATE "C") PARTITION BY RANGE (key);
	CREATE FOREIGN TABLE obs_a PARTITION OF obs FOR VALUES FROM ('a') TO ('b')
		SERVER shard0 OPTIONS (table_name 'obs_a');
	CREATE FOREIGN TABLE obs_b PARTITION OF obs FOR VALUES FROM ('b') TO ('c')
		SERVER shard1 OPTIONS (table_name 'obs_b');
	CREATE TABLE sent (key text);
});
$shards[0]->safe_psql('postgres',
	"SELECT lert_create('obs_a', 'text', threshold => 1000000)");
$shards[1]->safe_psql('postgres',
	"SELECT lert_create('obs_b', 'text', threshold => 1000000)");

my $stream = '';
for my $t (1 .. 400)
{
	my $k = ($t % 2 ? 'a' : 'b') . ($t % 7);
	$stream .= "BEGIN;\n"
	  . "INSERT INTO obs SELECT '$k' FROM generate_series(1, 25);\n"
	  . "INSERT INTO sent SELECT '$k' FROM generate_series(1, 25);\n"
	  . "COMMIT;\n";
	$stream .= "SELECT pg_sleep(0.05);\n" if $t % 10 == 0;
}
my $stream_file = "$PostgreSQL::Test::Utils::tmp_check/027_stream.sql";
append_to_file($stream_file, $stream);
my ($stdout, $stderr) = ('', '');
my $writer = IPC::Run::start(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-f', $stream_file,
		'-d', $coord->connstr('postgres')
	],
	'>' => \$stdout,
	'2>' => \$stderr);
$coord->poll_query_until('postgres', 'SELECT count(*) > 1000 FROM sent')
  or die 'the stream did not start';
$shards[1]->stop('immediate');
$writer->finish;
like(
	$stderr,
	qr/ERROR:  could not connect to server "shard1"|server closed the connection unexpectedly|connection to server .* failed/,
	'the transactions that reach the stopped shard fail with a clear error');
is( $coord->safe_psql('postgres', "SELECT lert_count('obs', 'a1'::text)"),
	$coord->safe_psql('postgres', "SELECT count(*) FROM sent WHERE key = 'a1'"),
	'a key of the running shard still answers, exactly');
($err) = ss_run_sql($coord, "SELECT lert_count('obs', 'b2'::text)");
like($err, qr/^08001: could not connect to server "shard1"/,
	'a key of the stopped shard gets postgres_fdw\'s connection error');
$shards[1]->start;
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) FROM (SELECT key, count(*) AS n FROM sent GROUP BY key) s
	WHERE lert_count('obs', key) <> n}),
	'0',
	'once the shard is back, every committed observation is counted, and nothing else'
);
cmp_ok($coord->safe_psql('postgres', 'SELECT count(*) FROM sent'),
	'<', 400 * 25, 'the stream lost transactions to the stopped shard');

done_testing();
