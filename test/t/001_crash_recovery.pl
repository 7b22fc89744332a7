
# Copyright (c) streamsketch authors
#
# Crash recovery of bcms relations: what was committed survives an
# immediate shutdown (no shutdown checkpoint, WAL replay at start-up) with
# exactly the same estimates and counters, and what was not committed is
# absent.  Covers a big INSERT ... SELECT, COPY, many small transactions,
# transactions whose pending changes spilled to a temporary file, explicit
# flushes of the buffer, a table created and filled in one transaction
# (wal_level = minimal skips WAL for it and syncs it at commit), weighted
# tables, every mode, and a second crash after recovery.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $node = ss_node(
	'main',
	conf => q{
shared_buffers = 16MB
checkpoint_timeout = 1h
max_wal_size = 1GB
max_prepared_transactions = 5
});

# key type of each bcms table, and whether it has a weight column
my %keytype = (
	b_buf => 'int8',
	b_plain => 'int4',
	b_text => 'text',
	b_w => 'int4',
	b_w2 => 'int8',
	b_new => 'int8');
my %weighted = (b_w => 1, b_w2 => 1);
my @tables = sort keys %keytype;

# Every row inserted into a bcms table is also recorded in the heap table
# exact(tbl, key, w), in the same transaction.  $sel is a SELECT returning
# the columns key [, weight].
sub ins
{
	my ($tbl, $sel) = @_;
	my $w = $weighted{$tbl} ? 'weight' : '1';
	return "INSERT INTO $tbl $sel;\n"
	  . "INSERT INTO exact SELECT '$tbl', key::text, $w FROM ($sel) d;\n";
}

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION streamsketch;
CREATE TABLE exact (tbl text, key text, w int8);
-- estimates and metadata recorded at each stage, compared across crashes
CREATE TABLE snap (label text, tbl text, key text, est int8);
CREATE TABLE info_snap (label text, tbl text, info text, items int8,
                        total_weight int8);

-- the default mode (buffered) with the default parameters
CREATE TABLE b_buf (key int8) USING bcms;

SET streamsketch.bcms_mode = 'plain';
CREATE TABLE b_plain (key int4) USING bcms;
RESET streamsketch.bcms_mode;

-- conservative update, and a small buffer so that sub-buffers fill up and
-- get applied to the sketch pages while the data is loaded
SET streamsketch.bcms_conservative = on;
SET streamsketch.bcms_buffer_size = '256kB';
CREATE TABLE b_text (key text) USING bcms;
RESET streamsketch.bcms_conservative;
RESET streamsketch.bcms_buffer_size;

SELECT bcms_create('b_w', 'int4', epsilon => 0.001, weighted => true,
                   buffer_size => '128kB');
CREATE TABLE b_w2 (key int8, weight int2) USING bcms;
});

# record the estimates of every key ever inserted plus a few never inserted
# (absent keys, and the keys of the uncommitted transactions below)
sub snapshot
{
	my ($label) = @_;
	my $sql = '';
	foreach my $t (@tables)
	{
		next
		  unless $node->safe_psql('postgres',
			"SELECT to_regclass('$t') IS NOT NULL") eq 't';
		# consolidated first, so that a background round between two
		# snapshots cannot move entries from the buffers to the sketch
		$sql .= qq{
VACUUM $t;
INSERT INTO snap
SELECT '$label', '$t', key, bcms_estimate('$t', key::$keytype{$t})
  FROM (SELECT key FROM exact WHERE tbl = '$t'
        UNION SELECT unnest(ARRAY['0', '424242', '424243', '-1'])) k;
INSERT INTO info_snap
SELECT '$label', '$t',
       row(mode, epsilon, delta, width, depth, sketch_pages, buffer_pages,
           subbuffer_capacity, conservative, seed, items, total_weight,
           buffered_entries, error_bound)::text,
       items, total_weight
  FROM bcms_info('$t');
};
	}
	$node->safe_psql('postgres', $sql);

	# guard against comparing empty snapshots
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM snap WHERE label = '$label' AND est > 0");
	cmp_ok($n, '>', 5000, "$label: recorded $n non-zero estimates");
	return;
}

# compare the estimates and metadata recorded under two labels
sub same_as
{
	my ($label, $ref, $what) = @_;
	my $diff = $node->safe_psql(
		'postgres', qq{
SELECT a.tbl || ' ' || a.key || ': ' || coalesce(b.est::text, 'missing') ||
       ' (was ' || a.est || ')'
  FROM snap a LEFT JOIN snap b
    ON b.label = '$label' AND b.tbl = a.tbl AND b.key = a.key
 WHERE a.label = '$ref' AND b.est IS DISTINCT FROM a.est
 ORDER BY 1 LIMIT 20});
	is($diff, '', "$what: every estimate is the same as $ref");
	my $idiff = $node->safe_psql(
		'postgres', qq{
SELECT a.tbl || ': ' || coalesce(b.info, 'missing') || ' (was ' || a.info || ')'
  FROM info_snap a LEFT JOIN info_snap b
    ON b.label = '$label' AND b.tbl = a.tbl
 WHERE a.label = '$ref' AND b.info IS DISTINCT FROM a.info
 ORDER BY 1});
	is($idiff, '', "$what: bcms_info is the same as $ref");
	return;
}

# the estimates recorded under a label against the exact counts
sub exact_as
{
	my ($label, $what) = @_;
	my $under = $node->safe_psql(
		'postgres', qq{
SELECT s.tbl || ' ' || s.key || ': ' || s.est || ' < ' || e.n
  FROM snap s JOIN (SELECT tbl, key, sum(w) AS n FROM exact GROUP BY 1, 2) e
    ON e.tbl = s.tbl AND e.key = s.key
 WHERE s.label = '$label' AND s.est < e.n
 ORDER BY 1 LIMIT 20});
	is($under, '', "$what: no estimate is below the exact count");

	# with these few keys per sketch page the estimates are exact (the
	# chance of a key colliding with another one in all rows is ~1e-7)
	my $wrong = $node->safe_psql(
		'postgres', qq{
SELECT s.tbl || ' ' || s.key || ': ' || s.est || ' <> ' || coalesce(e.n, 0)
  FROM snap s LEFT JOIN (SELECT tbl, key, sum(w) AS n FROM exact GROUP BY 1, 2) e
    ON e.tbl = s.tbl AND e.key = s.key
 WHERE s.label = '$label' AND s.est <> coalesce(e.n, 0)
 ORDER BY 1 LIMIT 20});
	is($wrong, '',
		"$what: estimates equal the committed counts, uncommitted keys are absent"
	);

	my $counts = $node->safe_psql(
		'postgres', qq{
SELECT i.tbl || ': items ' || i.items || ', total_weight ' || i.total_weight ||
       ' (committed: ' || e.items || ' rows, weight ' || e.n || ')'
  FROM info_snap i
  JOIN (SELECT tbl, count(*) AS items, sum(w) AS n FROM exact GROUP BY 1) e
    ON e.tbl = i.tbl
 WHERE i.label = '$label'
   AND (i.items, i.total_weight) IS DISTINCT FROM (e.items, e.n)
 ORDER BY 1});
	is($counts, '',
		"$what: bcms_info items and total_weight equal the committed rows and weights"
	);
	return;
}

# 1. Big INSERT ... SELECT into every table, then a checkpoint.
my $sql = "BEGIN;\n";
$sql .= ins('b_buf',
	'SELECT (i % 1000)::int8 AS key FROM generate_series(1, 100000) i');
$sql .= ins('b_plain',
	'SELECT (i % 1000)::int4 AS key FROM generate_series(1, 100000) i');
$sql .= ins('b_text',
	"SELECT 'k' || (i % 1000) AS key FROM generate_series(1, 100000) i");
$sql .= ins('b_w',
	'SELECT (i % 100)::int4 AS key, (i % 7 + 1)::int8 AS weight FROM generate_series(1, 20000) i'
);
$sql .= ins('b_w2',
	'SELECT (i % 50)::int8 AS key, (i % 30000 + 1)::int2 AS weight FROM generate_series(1, 20000) i'
);
$sql .= "COMMIT;\n";
$node->safe_psql('postgres', $sql);
$node->safe_psql('postgres', 'CHECKPOINT');

# 2. Many small transactions after the checkpoint (replayed from WAL), with
# explicit flushes of the buffer in between.
$sql = '';
for my $i (1 .. 300)
{
	$sql .= "BEGIN;\n";
	$sql .= ins('b_buf',
		"SELECT x::int8 AS key FROM (VALUES ($i % 17), (100000 + $i)) v(x)");
	$sql .= ins('b_plain', "SELECT ($i % 13)::int4 AS key");
	$sql .= ins('b_text',
		"SELECT x AS key FROM (VALUES ('k$i'), ('small$i')) v(x)")
	  if $i % 3 == 0;
	$sql .= ins('b_w',
		"SELECT ($i % 10)::int4 AS key, ($i * 1000)::int8 AS weight")
	  if $i % 5 == 0;
	$sql .= ins('b_w2',
		"SELECT ($i % 50)::int8 AS key, 32767::int2 AS weight")
	  if $i % 7 == 0;
	$sql .= "COMMIT;\n";
	$sql .= "SELECT FROM bcms_flush('b_buf') a, bcms_flush('b_text') b;\n"
	  if $i == 100;
	$sql .= "SELECT FROM bcms_flush('b_w');\n" if $i == 200;
}
$node->safe_psql('postgres', $sql);

# a rolled-back transaction and a failed one, which must leave no trace
$node->safe_psql('postgres', q{
BEGIN;
INSERT INTO b_buf SELECT 424242 FROM generate_series(1, 1000);
INSERT INTO b_text SELECT '424242' FROM generate_series(1, 1000);
ROLLBACK;
});
my ($ret) = $node->psql('postgres', q{
BEGIN;
INSERT INTO b_w SELECT 424242, 1 FROM generate_series(1, 1000);
INSERT INTO b_w SELECT 424242, 1 / 0;
COMMIT;
});
isnt($ret, 0, 'a transaction with a failing statement is rolled back');

# 3. COPY.
$node->safe_psql(
	'postgres',
	"BEGIN;\nCOPY b_buf FROM STDIN;\n"
	  . join('', map { ($_ % 500) . "\n" } 1 .. 10000) . "\\.\n"
	  . "INSERT INTO exact SELECT 'b_buf', (i % 500)::text, 1 FROM generate_series(1, 10000) i;\n"
	  . "COPY b_w (key, weight) FROM STDIN;\n"
	  . join('', map { ($_ % 37) . "\t$_\n" } 1 .. 3000) . "\\.\n"
	  . "INSERT INTO exact SELECT 'b_w', (i % 37)::text, i FROM generate_series(1, 3000) i;\n"
	  . "COMMIT;\n");

# 4. A committed transaction whose pending changes outgrow
# streamsketch.pending_memory and spill to a temporary file.
$sql = "BEGIN;\nSET LOCAL streamsketch.pending_memory = '64kB';\n";
$sql .= ins('b_buf',
	'SELECT (5000 + i % 2000)::int8 AS key FROM generate_series(1, 100000) i'
);
$sql .= ins('b_text',
	"SELECT 'spill' || (i % 3000) AS key FROM generate_series(1, 60000) i");
$sql .= "COMMIT;\n";
$node->safe_psql('postgres', $sql);

# 5. A table created and filled in one transaction (with wal_level =
# minimal its changes are not WAL-logged but synced at commit).
$sql = "BEGIN;\nSELECT FROM bcms_create('b_new', 'int8', epsilon => 0.0005);\n";
$sql .= ins('b_new',
	'SELECT (i % 300)::int8 AS key FROM generate_series(1, 30000) i');
$sql .= "COMMIT;\n";
$node->safe_psql('postgres', $sql);

# 6. Transactions still open at the crash: one with plain pending changes,
# one whose pending changes spilled to a temporary file.
my $bg1 = $node->background_psql('postgres');
$bg1->query_safe(
	q{BEGIN;
INSERT INTO b_buf SELECT 424242 FROM generate_series(1, 5000);
INSERT INTO b_buf SELECT 1 FROM generate_series(1, 777);
INSERT INTO b_plain SELECT 424242 FROM generate_series(1, 100);
INSERT INTO b_w VALUES (424242, 99), (1, 1000000);
});
my $bg2 = $node->background_psql('postgres');
$bg2->query_safe(
	q{BEGIN;
SET LOCAL streamsketch.pending_memory = '64kB';
INSERT INTO b_text SELECT '424243' FROM generate_series(1, 100000);
INSERT INTO b_buf SELECT 424243 FROM generate_series(1, 100000);
INSERT INTO b_new SELECT 424242 FROM generate_series(1, 100000);
});
is( $bg1->query_safe(q{SELECT bcms_estimate('b_buf', 424242::int8)}),
	'5000', 'an open transaction sees its own pending inserts');

snapshot('before');
exact_as('before', 'before the crash');

# crash
$node->stop('immediate');
$bg1->quit;
$bg2->quit;
$node->start;

snapshot('after1');
same_as('after1', 'before', 'after the crash');
exact_as('after1', 'after the crash');

# 7. The tables keep working after recovery: new commits add up exactly.
$sql = "BEGIN;\n";
foreach my $t (@tables)
{
	my $k = $keytype{$t} eq 'text' ? "'k7'" : '7';
	$sql .= ins($t,
		$weighted{$t}
		? "SELECT ${k}::$keytype{$t} AS key, 3::int2 AS weight"
		: "SELECT ${k}::$keytype{$t} AS key FROM generate_series(1, 3)");
}
$sql .= "COMMIT;\n";
$node->safe_psql('postgres', $sql);
foreach my $t (@tables)
{
	my $k = $keytype{$t} eq 'text' ? "'k7'" : '7';
	is( $node->safe_psql(
			'postgres',
			"SELECT bcms_estimate('$t', ${k}::$keytype{$t}) - est FROM snap "
			  . "WHERE label = 'after1' AND tbl = '$t' AND key = ${k}::text"),
		'3',
		"$t: a commit after recovery adds exactly its count");
}

# 8. A second crash, after more commits, flushes and no checkpoint.
$sql = '';
for my $i (1 .. 50)
{
	$sql .= "BEGIN;\n";
	$sql .= ins('b_buf', "SELECT ($i % 5)::int8 AS key");
	$sql .= ins('b_text', "SELECT 'again$i' AS key");
	$sql .= ins('b_new', "SELECT ($i % 3)::int8 AS key");
	$sql .= "COMMIT;\n";
	$sql .= "SELECT FROM bcms_flush('b_buf') a, bcms_flush('b_new') b;\n"
	  if $i == 25;
}
$node->safe_psql('postgres', $sql);
$bg1 = $node->background_psql('postgres');
$bg1->query_safe(
	q{BEGIN; INSERT INTO b_buf SELECT 424242 FROM generate_series(1, 100);});
snapshot('before2');
$node->stop('immediate');
$bg1->quit;
$node->start;
snapshot('after2');
same_as('after2', 'before2', 'after the second crash');
exact_as('after2', 'after the second crash');

# 9. A clean restart changes nothing either.
$node->restart;
snapshot('after3');
same_as('after3', 'before2', 'after a clean restart');

$node->stop;
done_testing();
