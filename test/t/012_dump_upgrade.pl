# Copyright (c) streamsketch authors
#
# Parameters and contents across dumps and pg_upgrade (README, "Parameters,
# dumps and upgrades").
#
# A source cluster gets one structure of every access method, with
# non-default parameters set both ways (constructor arguments, and
# streamsketch.* settings + CREATE TABLE ... USING; one bcms keeps the
# defaults), unlogged ones, some in a non-public schema owned by a
# non-superuser role, and the table forms whose dump needs more than a
# CREATE TABLE: a typed table that kept a dropped attribute, a table OF a
# composite type, inheritance children of heap parents (one that kept a
# dropped column), the two partitions of a partitioned table (one attached
# after a constructor made it) and an identity key.  Every structure is
# filled; its catalog shape, parameters (info row minus counters, and its
# label), full info row and point-query answers are recorded.
#
# Dumps (pg_dump -Fc + pg_restore with the default settings and with other
# streamsketch.* settings, plain + psql, -t of one structure of each access
# method into a database that has the extension, -s): every structure comes
# back with the source's parameters, usable and empty (a dump has no rows);
# refilled with the same data, it gives the source's answers and info row.
# pg_restore --no-security-labels creates the structures with the restoring
# session's settings (documented).
#
# A lert's rows are its reports, so a dump carries them (README): restored,
# each reported key comes back as one observation (no count column) or as
# its count at the report (a count column, which reports it again with
# that count); the parameters are the source's.
#
# A cbt's rows are its groups, so a dump carries them too (docs/cbt.md,
# "Dumps"): two cbts (a constructor's arguments; a non-superuser role's,
# with streamsketch.cbt_* settings), filled through spills and splits,
# whose aggregates all have their state as their result, come back from
# every dump with the source's parameters and label and exactly the
# source's groups (-s: none; refilled, the source's groups), and go on
# aggregating from them.  A cbt whose results are not states (avg) is kept
# out of those dumps: its own dump restores the table, with the source's
# parameters, and its rows are refused with 0A000.
#
# A bfile's rows are its sample, so a dump carries them as well (README,
# bfile): two bfiles (a constructor's arguments, with a seed and a time
# column, filled until it discarded and unrolled; a non-superuser role's
# weighted one, with streamsketch.bfile_* settings) come back from every
# dump with the source's parameters and label and exactly the source's
# sample, which the restore inserted as their stream: seen restarts at
# the number of rows and level at 1, and the time column's window is the
# source's (-s: empty; refilled with the source's stream, the source's
# sample and info row, as the seed is the source's).  They go on
# sampling.  pg_restore --no-security-labels gives them the restoring
# session's parameters and the same rows.
#
# pg_upgrade (copy mode) keeps the shape, parameters, counters, contents
# and label of every structure, and they stay usable.
#
# No restore or upgrade may report any error: the guard rails (event
# triggers) allow everything pg_dump and pg_upgrade emit for a legal
# structure, including structures with dropped columns that versions
# before the guard rails could make (made here with the guard disabled).
# The one exception is a cbt restored by pg_restore --no-security-labels:
# without its label it has no definition, so its rows are refused (55000).
#
# (This test replaces 004_durable_params.pl, whose checks it includes.)

use strict;
use warnings;

use Cwd qw(getcwd);
use File::Find qw(find);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# ---------------------------------------------------------------------------
# The structures.  key: the point-query key as an expression of g (queried
# for g in -20..30: the fills use keys 0..96, so negative g are absent);
# fill: statements (one transaction each) that fill the structure, refill:
# the same data again on a restored copy (default: fill); w: has a second
# (weight/count) column.  part0's fill goes through the partitioned parent
# and feeds part1 too.
my @S = (
	{ t => 'bcms_default', am => 'bcms', key => 'g::int8',
	  fill => ['INSERT INTO bcms_default SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'bcms_fn', am => 'bcms', key => 'g::int8', w => 1,
	  fill => ['INSERT INTO bcms_fn SELECT i % 97, i % 5 + 1 FROM generate_series(1, 3000) i'] },
	{ t => 'bcms_guc', am => 'bcms', key => "'k' || g",
	  fill => [
		"INSERT INTO bcms_guc SELECT 'k' || (i % 97) FROM generate_series(1, 2000) i",
		"INSERT INTO bcms_guc SELECT 'k' || (i % 13) FROM generate_series(1, 1000) i"] },
	{ t => 'bcms_unlogged', am => 'bcms', key => 'g::int4',
	  fill => ['INSERT INTO bcms_unlogged SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'qf_fn', am => 'quotient_filter', key => 'g::int8', w => 1,
	  fill => ['INSERT INTO qf_fn SELECT i % 97, i % 3 + 1 FROM generate_series(1, 3000) i'] },
	{ t => 'qf_guc', am => 'quotient_filter', key => "'k' || g",
	  fill => ["INSERT INTO qf_guc SELECT 'k' || (i % 97) FROM generate_series(1, 3000) i"] },
	{ t => 'bqf_fn', am => 'buffered_quotient_filter', key => "'k' || g",
	  fill => ["INSERT INTO bqf_fn SELECT 'k' || (i % 4000) FROM generate_series(1, 12000) i"] },
	{ t => 'bqf_guc', am => 'buffered_quotient_filter', key => 'g::int4', w => 1,
	  fill => ['INSERT INTO bqf_guc SELECT i % 3000, 2 FROM generate_series(1, 6000) i'] },
	{ t => 'cf_fn', am => 'cascade_filter', key => 'g::int4', w => 1,
	  fill => [
		'INSERT INTO cf_fn SELECT i % 20000, 1 FROM generate_series(1, 24000) i',
		'INSERT INTO cf_fn SELECT i % 97, 3 FROM generate_series(1, 500) i'] },
	{ t => 'bloom_fn', am => 'bloom_filter', key => 'g::int8',
	  fill => ['INSERT INTO bloom_fn SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'bloom_guc', am => 'bloom_filter', key => "'k' || g",
	  fill => ["INSERT INTO bloom_guc SELECT 'k' || (i % 3000) FROM generate_series(1, 10000) i"] },
	{ t => 'app.bcms_app', am => 'bcms', key => "'k' || g", w => 1,
	  fill => ["INSERT INTO app.bcms_app SELECT 'k' || (i % 97), 7 FROM generate_series(1, 3000) i"] },
	{ t => 'app.cf_guc', am => 'cascade_filter', key => 'g::int8',
	  fill => ['INSERT INTO app.cf_guc SELECT i % 3000 FROM generate_series(1, 9000) i'] },
	{ t => 'app.bloom_loc', am => 'bloom_filter', key => 'g::int4',
	  fill => ['INSERT INTO app.bloom_loc SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'part0', am => 'bcms', key => 'g::int4', probe => 0,
	  fill => ['INSERT INTO part SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'part1', am => 'bcms', key => 'g::int4', fill => [] },
	{ t => 't_ident', am => 'bcms', key => 'g::int8',
	  fill => [
		'INSERT INTO t_ident SELECT FROM generate_series(1, 40)',
		'INSERT INTO t_ident OVERRIDING SYSTEM VALUE SELECT i % 97 FROM generate_series(1, 2000) i'],
	  refill => [
		'INSERT INTO t_ident OVERRIDING SYSTEM VALUE SELECT g FROM generate_series(1, 41) g',
		'INSERT INTO t_ident OVERRIDING SYSTEM VALUE SELECT i % 97 FROM generate_series(1, 2000) i'] },
	{ t => 't_typed_drop', am => 'bcms', key => 'g::int2',
	  fill => ['INSERT INTO t_typed_drop SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 't_of', am => 'bloom_filter', key => "'k' || g",
	  fill => ["INSERT INTO t_of SELECT 'k' || (i % 97) FROM generate_series(1, 3000) i"] },
	{ t => 'h_child', am => 'quotient_filter', key => 'g::int8',
	  fill => ['INSERT INTO h_child SELECT i % 97 FROM generate_series(1, 3000) i'] },
	{ t => 'h_child2', am => 'cascade_filter', key => 'g::int8', w => 1,
	  fill => ['INSERT INTO h_child2 SELECT i % 97, 2 FROM generate_series(1, 3000) i'] },
);
$_->{probe} //= 7 foreach @S;    # (7 is in part1, 0 in part0)
my %S = map { $_->{t} => $_ } @S;


my %FAMILY = (
	bcms => {
		info => 'bcms_info',
		# (where the rows wait, change log or sub-buffers, depends on when
		# a reader last consolidated, not on the contents)
		placement => 'buffered_entries',
		query => 'bcms_estimate',
		empty => '0',
		params => 'mode, epsilon, delta, width, depth, sketch_pages, '
		  . 'buffer_pages, subbuffer_capacity, conservative, seed'
	},
	qf => {
		info => 'qf_info',
		query => 'qf_count',
		empty => '0',
		# (remainder_bits is state: a cascade filter's deeper levels and a
		# resize steal remainder bits)
		params => 'access_method, capacity, fp_rate, fingerprint_bits, '
		  . 'slot_bits, seed'
	},
	bloom => {
		info => 'bloom_info',
		query => 'bloom_contains',
		empty => 'false',
		params => 'mode, capacity, fp_rate, bits, hashes, pages, '
		  . 'buffer_pages, subbuffer_capacity, seed'
	});
sub fam
{
	my ($am) = @_;
	return $FAMILY{ $am eq 'bcms' ? 'bcms' : $am eq 'bloom_filter' ? 'bloom' : 'qf' };
}

# ---------------------------------------------------------------------------
# helpers.  Queries are batched, one psql per database and batch; a
# statement that fails (a structure that is missing) gives "ERROR" for its
# value instead of stopping the test, so that the assertions about it fail
# and the test goes on.

sub query
{
	my ($node, $db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql);
	return $ret == 0 ? $out : "ERROR: $err";
}

# the SQL giving one value of structure $t
sub value_sql
{
	my ($t, $kind) = @_;
	my $f = fam($S{$t}{am});
	if ($kind eq 'params')
	{
		return "SELECT row($f->{params})::text FROM $f->{info}('$t')";
	}
	elsif ($kind eq 'info')
	{
		return "SELECT i::text FROM $f->{info}('$t') i" unless $f->{placement};
		return "SELECT (to_jsonb(i) - '$f->{placement}')::text FROM $f->{info}('$t') i";
	}
	elsif ($kind eq 'answers')
	{
		return "SELECT string_agg($f->{query}('$t', $S{$t}{key})::text, ',' ORDER BY g) "
		  . 'FROM generate_series(-20, 30) g';
	}
	elsif ($kind eq 'probe')
	{
		return "SELECT $f->{query}('$t', $S{$t}{key})::text FROM (VALUES ($S{$t}{probe})) v(g)";
	}
	elsif ($kind eq 'label')
	{
		return "SELECT coalesce(label, '(none)') FROM pg_seclabels "
		  . "WHERE provider = 'streamsketch' AND objoid = '$t'::regclass";
	}
	elsif ($kind eq 'shape' || $kind eq 'logical_shape')
	{
		# kind, persistence, access method, owner, type, parents, partition
		# bound, columns (name:type:identity:dropped); a logical dump does
		# not keep dropped columns
		my $dropped = $kind eq 'shape' ? '' : 'AND NOT attisdropped';
		return qq{
SELECT concat_ws('|', c.relkind, c.relpersistence, a.amname, c.relowner::regrole,
       CASE WHEN c.reloftype <> 0 THEN c.reloftype::regtype::text ELSE '' END,
       coalesce((SELECT string_agg(inhparent::regclass::text, ',') FROM pg_inherits
                  WHERE inhrelid = c.oid), ''),
       coalesce(pg_get_expr(c.relpartbound, c.oid), ''),
       (SELECT string_agg(format('%s:%s:%s:%s', attname,
                                 CASE WHEN attisdropped THEN '-' ELSE format_type(atttypid, NULL) END,
                                 attidentity, attisdropped), ',' ORDER BY attnum)
          FROM pg_attribute WHERE attrelid = c.oid AND attnum > 0 $dropped))
  FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = '$t'::regclass};
	}
	die "unknown kind $kind";
}

# { structure => { kind => value } } for every structure and kind; the
# info functions describe the structures as consolidated (or read the
# change log without consolidating it), so before an info row every
# structure is consolidated by VACUUM, wherever its log stood
sub collect
{
	my ($node, $db, $tables, @kinds) = @_;
	my (@sql, %v);
	$node->psql($db, join("\n", map { "VACUUM $_;" } @$tables),
		on_error_stop => 0)
	  if grep { $_ eq 'info' } @kinds;
	foreach my $t (@$tables)
	{
		foreach my $k (@kinds)
		{
			push @sql, "SELECT '$t/$k' || E'\\t' || coalesce(("
			  . value_sql($t, $k) . "), '(null)');";
			$v{$t}{$k} = 'ERROR';
		}
	}
	my ($ret, $out, $err) =
	  $node->psql($db, join("\n", @sql), on_error_stop => 0);
	foreach my $line (split /\n/, $out)
	{
		my ($tag, $value) = split /\t/, $line, 2;
		my ($t, $k) = split m{/}, $tag, 2;
		$v{$t}{$k} = $value;
	}
	return \%v;
}

sub all_labels
{
	my ($node, $db) = @_;
	return query($node, $db,
		"SELECT string_agg(objname || ' = ' || label, ' ; ' ORDER BY objname) "
		  . "FROM pg_seclabels WHERE provider = 'streamsketch'");
}

# run the fills (or refills) of the structures; '' or the errors
sub run_fills
{
	my ($node, $db, $tables, $which) = @_;
	my @sql = map { @{ $S{$_}{$which} // $S{$_}{fill} } } @$tables;
	return '' unless @sql;
	my ($ret, $out, $err) = $node->psql($db, join(";\n", @sql) . ';');
	return $ret == 0 ? '' : $err;
}

# one more row whose key is the structure's probe (and weight/count 1)
sub insert_probe_sql
{
	my ($t) = @_;
	my $w = $S{$t}{w} ? ', 1' : '';
	return "INSERT INTO $t OVERRIDING SYSTEM VALUE "
	  . "SELECT $S{$t}{key}$w FROM (VALUES ($S{$t}{probe})) v(g)";
}

# n + 1 (bcms, qf) or true (bloom): the probe's answer after one more row
sub plus1
{
	my ($t, $n) = @_;
	return 'true' if $S{$t}{am} eq 'bloom_filter';
	return $n =~ /^\d+$/ ? $n + 1 : "($n) + 1";
}

# insert a probe row into every structure; checks that each answer went up
sub check_usable
{
	my ($node, $db, $how, $tables) = @_;
	my $before = collect($node, $db, $tables, 'probe');
	my %err;
	foreach my $t (@$tables)
	{
		my $r = query($node, $db, insert_probe_sql($t));
		$err{$t} = $r =~ /^ERROR/ ? $r : '';
	}
	my $after = collect($node, $db, $tables, 'probe');
	foreach my $t (@$tables)
	{
		is($err{$t} . '|' . $after->{$t}{probe},
			'|' . plus1($t, $before->{$t}{probe}),
			"$how: $t is usable (insert + point query)");
	}
	return;
}

# t_ident's identity makes key $next (its answer goes up by one)
sub check_identity
{
	my ($node, $db, $how, $next) = @_;
	my $q = "SELECT bcms_estimate('t_ident', ${next}::int8)";
	my $before = query($node, $db, $q);
	my $r = query($node, $db, 'INSERT INTO t_ident DEFAULT VALUES');
	is($r . '|' . query($node, $db, $q), '|' . plus1('t_ident', $before),
		"$how: t_ident's identity makes key $next");
	return;
}

# ---------------------------------------------------------------------------
# the source

my $t0 = time;
my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
# the upgrade compares page counts: no autovacuum may consolidate a change
# log (and truncate its pages) between reading the source and copying it,
# nor may a background worker
$old->append_conf('postgresql.conf',
	"autovacuum = off\nstreamsketch.background_consolidation = off");
$old->start;

$old->safe_psql('postgres', 'CREATE ROLE ss_owner LOGIN; CREATE DATABASE src');
$old->safe_psql(
	'src', q{
CREATE EXTENSION streamsketch;
CREATE SCHEMA app AUTHORIZATION ss_owner;
GRANT CREATE ON SCHEMA public TO ss_owner;

-- the defaults
CREATE TABLE bcms_default (key int8) USING bcms;

-- constructors
SELECT bcms_create('bcms_fn', 'int8', width => 5000, depth => 3,
                   weighted => true, mode => 'plain');
SELECT bcms_create('bcms_unlogged', 'int4', epsilon => 0.001, delta => 0.05,
                   conservative => true, buffer_size => '128kB', unlogged => true);
SELECT qf_create('qf_fn', 'int8', capacity => 50000, fp_rate => 0.01, counted => true);
SELECT qf_create('bqf_fn', 'text', capacity => 20000, fp_rate => 0.0001,
                 access_method => 'buffered_quotient_filter', buffer_size => '64kB');
SELECT qf_create('cf_fn', 'int4', capacity => 30000, fp_rate => 0.005, counted => true,
                 access_method => 'cascade_filter', fanout => 8, buffer_size => '16kB');
SELECT bloom_create('bloom_fn', 'int8', capacity => 30000, fp_rate => 0.005,
                    mode => 'plain');

-- settings + CREATE TABLE ... USING
SET streamsketch.bcms_epsilon = 0.002;
SET streamsketch.bcms_delta = 0.02;
SET streamsketch.bcms_conservative = on;
SET streamsketch.bcms_buffer_size = '256kB';
CREATE TABLE bcms_guc (k text) USING bcms;
SET streamsketch.qf_capacity = 20000;
SET streamsketch.qf_fp_rate = 0.0001;
CREATE UNLOGGED TABLE qf_guc (k text) USING quotient_filter;
SET streamsketch.qf_capacity = 40000;
SET streamsketch.qf_fp_rate = 0.002;
SET streamsketch.qf_buffer_size = '32kB';
CREATE TABLE bqf_guc (k int4, c int2) USING buffered_quotient_filter;
SET streamsketch.bloom_capacity = 40000;
SET streamsketch.bloom_fp_rate = 0.02;
SET streamsketch.bloom_mode = 'elevator';
SET streamsketch.bloom_buffer_size = '64kB';
CREATE TABLE bloom_guc (k text) USING bloom_filter;
RESET ALL;

-- owned by a non-superuser role (app is its schema)
SET ROLE ss_owner;
SELECT bcms_create('app.bcms_app', 'text', epsilon => 0.005, delta => 0.1,
                   weighted => true);
SET streamsketch.qf_capacity = 25000;
SET streamsketch.qf_fp_rate = 0.003;
SET streamsketch.qf_fanout = 2;
SET streamsketch.qf_buffer_size = '16kB';
CREATE TABLE app.cf_guc (k int8) USING cascade_filter;
RESET streamsketch.qf_capacity;
RESET streamsketch.qf_fp_rate;
RESET streamsketch.qf_fanout;
RESET streamsketch.qf_buffer_size;
SELECT bloom_create('app.bloom_loc', 'int4', capacity => 20000, fp_rate => 0.01,
                    mode => 'localized', buffer_size => '128kB', unlogged => true);

-- the partitions of a partitioned table: one by PARTITION OF with the
-- settings, one made by a constructor and attached
CREATE TABLE part (key int4) PARTITION BY HASH (key);
SET streamsketch.bcms_epsilon = 0.004;
SET streamsketch.bcms_mode = 'plain';
CREATE TABLE part0 PARTITION OF part
  FOR VALUES WITH (MODULUS 2, REMAINDER 0) USING bcms;
SELECT bcms_create('part1', 'int4', width => 3000, depth => 4,
                   mode => 'buffered', conservative => true);
ALTER TABLE part ATTACH PARTITION part1 FOR VALUES WITH (MODULUS 2, REMAINDER 1);

-- an identity column as the key
SET streamsketch.bcms_epsilon = 0.003;
CREATE TABLE t_ident (k bigint GENERATED ALWAYS AS IDENTITY) USING bcms;
RESET streamsketch.bcms_epsilon;
RESET streamsketch.bcms_mode;
RESET ROLE;

-- Structures with dropped columns, as versions before the guard rails
-- could make them: the guard is disabled while they are made.
ALTER EVENT TRIGGER streamsketch_guard_start DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_end DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_rewrite DISABLE;
ALTER EVENT TRIGGER streamsketch_guard_drop DISABLE;

-- a typed table that keeps a dropped attribute: created with the type's
-- (key, weight), whose weight is then dropped (CASCADE reaches the table)
CREATE TYPE ct_drop AS (k int2, junk int4);
SET streamsketch.bcms_delta = 0.001;
CREATE TABLE t_typed_drop OF ct_drop USING bcms;
RESET ALL;
ALTER TYPE ct_drop DROP ATTRIBUTE junk CASCADE;

-- a table OF a composite type (whose type had an attribute dropped before)
CREATE TYPE ct_key AS (k text, junk int4);
ALTER TYPE ct_key DROP ATTRIBUTE junk;
SET streamsketch.bloom_mode = 'plain';
SET streamsketch.bloom_capacity = 10000;
CREATE TABLE t_of OF ct_key USING bloom_filter;
RESET ALL;

-- inheritance children of heap parents: one keeps a column its parent
-- dropped, one has a column of its own
CREATE TABLE hparent (k int8, junk int4);
SET streamsketch.qf_capacity = 15000;
CREATE TABLE h_child () INHERITS (hparent) USING quotient_filter;
ALTER TABLE hparent DROP COLUMN junk;
ALTER EVENT TRIGGER streamsketch_guard_start ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_end ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_rewrite ENABLE ALWAYS;
ALTER EVENT TRIGGER streamsketch_guard_drop ENABLE ALWAYS;
CREATE TABLE hparent2 (k int8);
SET streamsketch.qf_fanout = 4;
SET streamsketch.qf_buffer_size = '8kB';
CREATE TABLE h_child2 (k int8, c int4) INHERITS (hparent2) USING cascade_filter;
RESET ALL;
ALTER TABLE h_child2 OWNER TO ss_owner;

-- lert: a constructor, and settings + CREATE TABLE (with a count column)
SELECT lert_create('lert_fn', 'int8', threshold => 5, variant => 'time_stretch',
                   age_bits => 2, growth => 8, buffer_size => '64kB', notify => 'hot');
SET ROLE ss_owner;
SET streamsketch.lert_threshold = 7;
SET streamsketch.lert_variant = 'immediate';
SET streamsketch.lert_growth = 2;
SET streamsketch.lert_levels = 2;
SET streamsketch.lert_buffer_size = '128kB';
SET streamsketch.lert_cones = 2;
CREATE TABLE app.lert_guc (k text, c int4) USING lert;
RESET ALL;
RESET ROLE;

-- cbt: a constructor (non-default parameters but compression), and
-- settings, in a non-superuser role's schema.  (CREATE TABLE ... USING
-- cbt cannot say what to group by: only its dump's label gives it a
-- definition.)  Every result is its aggregate's state, so that a dump
-- restores the groups.
SELECT cbt_create('cbt_fn', group_by => 'k int8, t text',
                  aggregates => 'count(*) AS n, sum(v::int4) AS sv, min(v) AS mn,
                                 max(x::int) AS x, bool_and(b::bool) AS ba',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
-- a definition naming user objects, whose ids an upgraded cluster does not
-- share (pg_upgrade restores them with ids from the old cluster's next)
CREATE FUNCTION app.dbl(int4) RETURNS int4 LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
CREATE AGGREGATE app.tot(int4) (sfunc = int4pl, stype = int4, combinefunc = int4pl);
SELECT cbt_create('app.cbt_ua', 'k int4', 'count(*) AS n, app.tot(app.dbl(w::int4)) AS tw',
                  root_buffer => '64kB', node_buffer => '16kB', fanout => 4);
SET ROLE ss_owner;
SET streamsketch.cbt_root_buffer = '128kB';
SET streamsketch.cbt_node_buffer = '32kB';
SET streamsketch.cbt_fanout = 8;
SET streamsketch.cbt_compression = off;
SELECT cbt_create('app.cbt_guc', 'k text',
                  'count(*) AS n, sum(w::float8) AS sw, min(w) AS lo, bit_or(f::int4) AS f');
RESET ALL;
RESET ROLE;

-- bfile: a constructor with a seed of its own (the seed is a parameter,
-- in the label) and a time column, and settings in a non-superuser role's
-- schema (weighted, the default seed, arrival order)
SET streamsketch.test_bfile_seed = 4242;
SELECT bfile_create('bf_fn', 'id bigint, t text, ts timestamptz', sample_size => 500,
                    min_fraction => 0.7, buckets => 4, mode => 'uniform',
                    time_column => 'ts');
RESET streamsketch.test_bfile_seed;
SET ROLE ss_owner;
SET streamsketch.bfile_sample_size = 3000;
SET streamsketch.bfile_min_fraction = 0.9;
SET streamsketch.bfile_buckets = 6;
SET streamsketch.bfile_mode = 'weighted';
SET streamsketch.bfile_weight_column = 'w';
CREATE TABLE app.bf_guc (id int, w float8) USING bfile;
RESET ALL;
-- a sample bounded in bytes, made by the ordinary role
SELECT bfile_create('app.bf_bytes', 'id int, pad text', sample_size => '256kB',
                    buckets => 4);
RESET ALL;
RESET ROLE;
});

my @all = map { $_->{t} } @S;
is(run_fills($old, 'src', \@all, 'fill'), '', 'source: every structure filled');
# the fill made keys 1..40 by the identity, this makes 41
check_identity($old, 'src', 'source', 41);

my $src = collect($old, 'src', \@all,
	qw(shape logical_shape params label info answers));
my $all_labels = all_labels($old, 'src');

# qfilter values in a heap table (docs/qfilter.md): one trimmed area, a
# filter of several areas with counts, and a value of format version 2 as
# earlier builds wrote it (converted when read).  Every dump and pg_upgrade
# gives them back byte for byte, with the same answers.
$old->safe_psql(
	'src', q{
CREATE TABLE qfv (id int PRIMARY KEY, f qfilter);
INSERT INTO qfv SELECT 1, qfilter_agg(g, 1000, 0.01) FROM generate_series(1, 500) g;
INSERT INTO qfv SELECT 2, qfilter_agg(g::text, g % 3 + 1, 20000, 1.0 / 4096)
FROM generate_series(1, 20000) g;
INSERT INTO qfv VALUES (3, 'version=2 seed=1592598101 capacity=1000 fp_rate=0.001 rbits=10 slot_bits=11 page_bits=0 area_bytes=8136 total=6 type="integer" areas=UUZBMgAKAAB5CwAAAwAAAAUAAAAACAAABgAA.19.AAAQ.23.EAAA.8.gAAA.174.AAAg.32.AAEA.546.AEoK.232.AADLAgAA.90.wAEA.1570.');
});
my $qfv_sql = q{
SELECT string_agg(id || ':' || md5(f::text) || ':' || (qfilter_info(f)).bytes || ':' ||
				  (SELECT sum(CASE id WHEN 2 THEN qfilter_count(f, g::text)
								  ELSE qfilter_count(f, g) END)
				   FROM generate_series(-100, 1000) g), ',' ORDER BY id)
FROM qfv};
my $qfv_src = query($old, 'src', $qfv_sql);
like($qfv_src, qr/^1:\w+:\d+:\d+,2:\w+:\d+:\d+,3:\w+:\d+:\d+$/,
	'source: qfilter values stored');

# the qfilter values of a restored or upgraded database are the source's
sub check_qfv
{
	my ($node, $db, $how) = @_;
	is(query($node, $db, $qfv_sql), $qfv_src, "$how: qfilter values as stored");
	return;
}
sub empty_answers { return join(',', (fam($S{ $_[0] }{am})->{empty}) x 51); }

# sanity of the source: the forms are what they claim, and the parameters
# are the requested ones, not the defaults
is($src->{t_typed_drop}{shape},
	'r|p|bcms|postgres|ct_drop|||k:smallint::f,........pg.dropped.2........:-::t',
	'source: t_typed_drop is OF ct_drop and kept its dropped attribute');
is($src->{t_of}{shape}, 'r|p|bloom_filter|postgres|ct_key|||k:text::f',
	'source: t_of is OF ct_key');
is($src->{h_child}{shape},
	'r|p|quotient_filter|postgres||hparent||k:bigint::f,........pg.dropped.2........:-::t',
	'source: h_child inherits and kept its dropped column');
is($src->{h_child2}{shape},
	'r|p|cascade_filter|ss_owner||hparent2||k:bigint::f,c:integer::f',
	'source: h_child2 inherits');
is($src->{part0}{shape},
	'r|p|bcms|ss_owner||part|FOR VALUES WITH (modulus 2, remainder 0)|key:integer::f',
	'source: part0 is a partition');
is($src->{part1}{shape},
	'r|p|bcms|ss_owner||part|FOR VALUES WITH (modulus 2, remainder 1)|key:integer::f',
	'source: part1 is a partition');
is($src->{t_ident}{shape}, 'r|p|bcms|ss_owner||||k:bigint:a:f',
	'source: t_ident has an identity key');
is(query($old, 'src', 'SELECT last_value FROM t_ident_k_seq'), '41',
	'source: the identity made keys 1..41');
is($src->{bcms_unlogged}{shape}, 'r|u|bcms|postgres||||key:integer::f',
	'source: bcms_unlogged is unlogged');
is($src->{'app.cf_guc'}{shape}, 'r|p|cascade_filter|ss_owner||||k:bigint::f',
	'source: app.cf_guc belongs to ss_owner');
is($src->{bcms_guc}{params}, '(buffered,0.002,0.02,1524,4,6,6,508,t,1592598101)',
	'source: bcms_guc has the settings\' parameters');
is($src->{bcms_default}{label},
	'mode=buffered epsilon=0.0001 delta=0.01 width=27183 depth=5 '
	  . 'buffer_size_kb=8192 conservative=off seed=1592598101',
	'source: bcms_default has the default parameters');
is($src->{bcms_fn}{label},
	'mode=plain epsilon=0.000543656365691809 delta=0.049787068367863944 '
	  . 'width=5000 depth=3 buffer_size_kb=8192 conservative=off seed=1592598101',
	'source: bcms_fn has the constructor\'s parameters');
is($src->{'app.cf_guc'}{label},
	'capacity=25000 fp_rate=0.003 fanout=2 buffer_pages=2 seed=1592598101',
	'source: app.cf_guc has the settings\' parameters');
is($src->{cf_fn}{label},
	'capacity=30000 fp_rate=0.005 fanout=8 buffer_pages=2 seed=1592598101',
	'source: cf_fn has the constructor\'s parameters');
is($src->{bloom_guc}{label},
	'mode=elevator capacity=40000 fp_rate=0.02 buffer_size_kb=64 seed=1592598101',
	'source: bloom_guc has the settings\' parameters');
is($src->{t_of}{label},
	'mode=plain capacity=10000 fp_rate=0.001 buffer_size_kb=8192 seed=1592598101',
	'source: t_of has the settings\' parameters');
like($src->{cf_fn}{info}, qr/^\(cascade_filter,30000,0\.005,\d+,\d+,\d+,[2-9],/,
	'source: cf_fn has more than one level');
foreach my $t (@all)
{
	isnt($src->{$t}{answers}, empty_answers($t), "source: $t answers are not empty");
}

# lert: filled so that some keys are reported (lert_fn: keys 0..9 reach 5;
# app.lert_guc: k1, k2 and k4 reach 7, k2 inside a row of count 2, and an
# immediate lert reports the count at the T-th observation), then
# flushed, so that reading the source (the dumps) changes nothing
my %LERT = (lert_fn => 'g::int8', 'app.lert_guc' => "'k' || g");
my @lerts = sort keys %LERT;
$old->safe_psql(
	'src', q{
INSERT INTO lert_fn SELECT i % 50 FROM generate_series(1, 200) i;
INSERT INTO lert_fn SELECT i % 10 FROM generate_series(1, 20) i;
INSERT INTO app.lert_guc SELECT 'k' || (i % 30), i % 3 FROM generate_series(1, 90) i;
INSERT INTO app.lert_guc SELECT 'k' || (i % 5), 2 FROM generate_series(1, 10) i;
SELECT lert_flush('lert_fn'), lert_flush('app.lert_guc');
});

# { lert => { kind => value } }
sub lert_collect
{
	my ($node, $db) = @_;
	my %v;
	foreach my $t (@lerts)
	{
		my $key = $LERT{$t};
		my %q = (
			params => "SELECT row(variant, threshold, age_bits, growth, levels, "
			  . "level_thresholds, cones, level0_capacity, notify, seed)::text "
			  . "FROM lert_info('$t')",
			label => "SELECT coalesce(label, '(none)') FROM pg_seclabels "
			  . "WHERE provider = 'streamsketch' AND objoid = '$t'::regclass",
			rows => "SELECT coalesce(string_agg(r::text, ';' ORDER BY r::text), '(none)') "
			  . "FROM $t r",
			counts => "SELECT string_agg(lert_count('$t', $key)::text, ',' ORDER BY g) "
			  . 'FROM generate_series(-20, 30) g',
			# what a restore of the reports gives: one observation per
			# reported key without a count column, its count at the report
			# with one
			restored_counts => "SELECT string_agg(coalesce((SELECT CASE WHEN "
			  . "'$t' = 'lert_fn' THEN 1 ELSE r.count END FROM lert_reports('$t') r "
			  . "WHERE r.key = ($key)::text), 0)::text, ',' ORDER BY g) "
			  . 'FROM generate_series(-20, 30) g',
			info => "SELECT i::text FROM lert_info('$t') i",
			reports => "SELECT string_agg(r::text, ';' ORDER BY report_id) "
			  . "FROM lert_reports('$t') r");
		$v{$t}{$_} = query($node, $db, $q{$_}) foreach keys %q;
	}
	return \%v;
}
my $lsrc = lert_collect($old, 'src');
is($lsrc->{lert_fn}{rows}, join(';', map { "($_)" } sort { "($a)" cmp "($b)" } 0 .. 9),
	'source: lert_fn reported keys 0..9');
is($lsrc->{'app.lert_guc'}{rows}, '(k1,7);(k2,7);(k4,7)',
	'source: app.lert_guc reported k1, k2 and k4 with their counts');
is($lsrc->{lert_fn}{params}, '(time_stretch,5,2,8,3,"{2,1,1}",1,1024,hot,1592598101)',
	'source: lert_fn has the constructor\'s parameters');
is($lsrc->{'app.lert_guc'}{params},
	'(immediate,7,1,2,2,"{1,1}",2,1024,,1592598101)',
	'source: app.lert_guc has the settings\' parameters');

# the checks of a restored database's lerts: the source's parameters and
# label; the rows restored as observations (none with -s)
sub check_lert_restored
{
	my ($db, $how, $schema_only) = @_;
	my $v = lert_collect($old, $db);
	foreach my $t (@lerts)
	{
		is($v->{$t}{params}, $lsrc->{$t}{params}, "$how: $t has the source's parameters");
		is($v->{$t}{label}, $lsrc->{$t}{label}, "$how: $t has the source's label");
		my $counts = $schema_only ? join(',', (0) x 51) : $lsrc->{$t}{restored_counts};
		is($v->{$t}{counts}, $counts,
			"$how: $t counts " . ($schema_only ? 'nothing' : 'the dumped reports as observations'));
	}
	is($v->{lert_fn}{rows}, '(none)',
		"$how: lert_fn reports nothing (one observation per reported key)");
	is($v->{'app.lert_guc'}{rows}, $schema_only ? '(none)' : $lsrc->{'app.lert_guc'}{rows},
		"$how: app.lert_guc " . ($schema_only ? 'reports nothing'
			: 'reports the same keys with the same counts'));
	return;
}

# cbt: filled through spills and splits (small buffers), then read once,
# which consolidates the change log's last rows, so that reading the
# source (the dumps) changes nothing.  inputs: the rows fed, for i in a
# range; groups: the aggregates of the GROUP BY over them that gives the
# table's rows (input columns read back NULL).
my %CBT = (
	cbt_fn => {
		keys => 'k, t',
		cols => 'k, t, v, x, b',
		inputs => sub {
			"SELECT i % 1500, CASE WHEN i % 7 = 0 THEN NULL ELSE 't' || (i % 3) END, "
			  . "CASE WHEN i % 11 = 0 THEN NULL ELSE i END, i % 50, i % 13 <> 0 "
			  . "FROM generate_series($_[0], $_[1]) i";
		},
		groups => 'count(*) AS n, sum(v) AS sv, min(v) AS mn, max(x) AS x, '
		  . 'bool_and(b) AS ba, NULL::int4 AS v, NULL::bool AS b',
		fill => [ [ 1, 12000 ], [ 12001, 14000 ] ],
		more => [ 14001, 15000 ] },
	'app.cbt_guc' => {
		keys => 'k',
		cols => 'k, w, f',
		# (floats that add up exactly in any order)
		inputs => sub {
			"SELECT 'k' || (i % 2500), ((i % 8) * 0.25)::float8, 1 << (i % 20) "
			  . "FROM generate_series($_[0], $_[1]) i";
		},
		groups => 'count(*) AS n, sum(w) AS sw, min(w) AS lo, bit_or(f) AS f, '
		  . 'NULL::float8 AS w',
		fill => [ [ 1, 9000 ], [ 9001, 16000 ] ],
		more => [ 16001, 17000 ] },
	'app.cbt_ua' => {
		keys => 'k',
		cols => 'k, w',
		inputs => sub {
			"SELECT i % 1500, i % 100 FROM generate_series($_[0], $_[1]) i";
		},
		groups => 'count(*) AS n, app.tot(app.dbl(w)) AS tw, NULL::int4 AS w',
		fill => [ [ 1, 12000 ], [ 12001, 14000 ] ],
		more => [ 14001, 15000 ] });
my @cbts = sort keys %CBT;

# the INSERT of the inputs $from..$to of cbt $t
sub cbt_insert_sql
{
	my ($t, $from, $to) = @_;
	return "INSERT INTO $t ($CBT{$t}{cols}) " . $CBT{$t}{inputs}->($from, $to);
}

# the fill of cbt $t (one transaction per range)
sub cbt_fill_sql
{
	my ($t) = @_;
	return join(";\n", map { cbt_insert_sql($t, @$_) } @{ $CBT{$t}{fill} }) . ';';
}

# '<groups> <md5 of the rows in key order>' of $from (cbt $t's rows, or
# the GROUP BY that should equal them); '0 -' if empty
sub cbt_digest_sql
{
	my ($t, $from) = @_;
	return "SELECT count(*) || ' ' || coalesce(md5(string_agg(r::text, ';' "
	  . "ORDER BY $CBT{$t}{keys})), '-') FROM $from r";
}

# the digest of the GROUP BY over cbt $t's inputs 1..$to
sub cbt_expected_sql
{
	my ($t, $to) = @_;
	my $c = $CBT{$t};
	return cbt_digest_sql($t,
		"(SELECT $c->{keys}, $c->{groups} FROM (" . $c->{inputs}->(1, $to)
		  . ") i($c->{cols}) GROUP BY $c->{keys})");
}

# { cbt => { kind => value } }; params: the info row minus the tree's
# shape and counters
sub cbt_collect
{
	my ($node, $db, $tables) = @_;
	my %v;
	foreach my $t (@$tables)
	{
		my %q = (
			params => "SELECT row(definition, root_buffer, node_buffer, fanout, "
			  . "compression)::text FROM cbt_info('$t')",
			info => "SELECT i::text FROM cbt_info('$t') i",
			rows => cbt_digest_sql($t, $t),
			map { $_ => value_sql($t, $_) } qw(label shape logical_shape));
		$v{$t}{$_} = query($node, $db, $q{$_}) foreach keys %q;
	}
	return \%v;
}

# insert cbt $t's further inputs: its rows must become the GROUP BY over
# all its inputs (the restored groups merged with the new rows)
sub check_cbt_usable
{
	my ($node, $db, $how, $t) = @_;
	my ($from, $to) = @{ $CBT{$t}{more} };
	my $r = query($node, $db, cbt_insert_sql($t, $from, $to));
	is($r . '|' . query($node, $db, cbt_digest_sql($t, $t)),
		'|' . query($node, $db, cbt_expected_sql($t, $to)),
		"$how: $t goes on aggregating from its groups");
	return;
}

# (the count(*) is the read that settles the change log)
my $cfilled = '';
foreach my $t (@cbts)
{
	my $r = query($old, 'src', cbt_fill_sql($t) . "\nSELECT count(*) FROM $t;");
	$cfilled .= "$t: $r\n" if $r =~ /^ERROR/;
}
is($cfilled, '', 'source: every cbt filled');
my $csrc = cbt_collect($old, 'src', \@cbts);
foreach my $t (@cbts)
{
	my $last = $CBT{$t}{fill}[-1][1];
	is($csrc->{$t}{rows}, query($old, 'src', cbt_expected_sql($t, $last)),
		"source: $t has the GROUP BY's groups");
	isnt($csrc->{$t}{rows}, '0 -', "source: $t is not empty");
	is( query(
			$old, 'src',
			"SELECT height > 1 AND spills > 0 AND splits > 0 AND rows = $last "
			  . "FROM cbt_info('$t')"),
		't', "source: $t spilled and split, and holds every row");
}
is($csrc->{cbt_fn}{label},
	'root_buffer_kb=64 node_buffer_kb=16 fanout=4 compression=on hash_bits=64 '
	  . 'seed=1592598101 definition=' . query($old, 'src',
		"SELECT translate(encode(convert_to(definition, 'UTF8'), 'base64'), E'\\n', '') "
		  . "FROM cbt_info('cbt_fn')"),
	'source: cbt_fn has the constructor\'s parameters');
like($csrc->{'app.cbt_guc'}{label},
	qr/^root_buffer_kb=128 node_buffer_kb=32 fanout=8 compression=off hash_bits=64 seed=1592598101 definition=[A-Za-z0-9+\/=]+$/,
	'source: app.cbt_guc has the settings\' parameters');
is($csrc->{'app.cbt_guc'}{shape}, 'r|p|cbt|ss_owner||||k:text::f,n:bigint::f,'
	  . 'sw:double precision::f,lo:double precision::f,f:integer::f,w:double precision::f',
	'source: app.cbt_guc belongs to ss_owner, with its keys, results and inputs');

# the checks of a restored database's cbts: the source's shape,
# parameters, label and groups (-s: none, and refilled with the same
# rows, the source's groups), and it goes on aggregating from them
sub check_cbt_restored
{
	my ($db, $how, $tables, %opt) = @_;
	my $v = cbt_collect($old, $db, $tables);
	foreach my $t (@$tables)
	{
		is($v->{$t}{logical_shape}, $csrc->{$t}{logical_shape},
			"$how: $t has the source's shape");
		is($v->{$t}{params}, $csrc->{$t}{params}, "$how: $t has the source's parameters");
		is($v->{$t}{label}, $csrc->{$t}{label}, "$how: $t has the source's label");
		if ($opt{schema_only})
		{
			is($v->{$t}{rows}, '0 -', "$how: $t is empty");
			is(query($old, $db, cbt_fill_sql($t)), '', "$how: $t refilled");
			is(query($old, $db, cbt_digest_sql($t, $t)), $csrc->{$t}{rows},
				"$how: $t refilled has the source's groups");
		}
		else
		{
			is($v->{$t}{rows}, $csrc->{$t}{rows}, "$how: $t has the source's groups");
		}
		check_cbt_usable($old, $db, $how, $t);
	}
	return;
}

# bfile: filled past their sample sizes (bf_fn: 20,000 rows into at most
# 499, so that it discarded and unrolled; app.bf_guc: 10,000 rows of
# weights 1 to 4 into at most 2,999; app.bf_bytes: 20,000 rows of about
# 100 bytes into at most 256 kB), then flushed, so that reading the
# source (the dumps) changes nothing.  A dump carries the sample's rows
# (README, bfile): a restore inserts them as the new table's stream, so
# the restored sample is exactly those rows (fewer than sample_size, and
# of weight at least 1: a weighted row below 1 would be kept with
# probability its weight), with the source's parameters, and seen and
# level restart (seen = the rows restored, level 1, no discard).  A time
# column's values come back with the rows, so bf_fn's window (a day of its
# 20,000 minutes) is the source's; positions in the stream do not (they
# restart), so app.bf_guc's window is not compared.  pg_upgrade keeps
# everything.
my $bf_ts = "timestamptz '2026-01-01 00:00+00' + i * interval '1 minute'";
my %BFILE = (
	bf_fn => {
		fill => [
			"INSERT INTO bf_fn SELECT i, 't' || (i % 7), $bf_ts FROM generate_series(1, 12000) i",
			"INSERT INTO bf_fn SELECT i, NULL, $bf_ts FROM generate_series(12001, 20000) i"],
		more => "INSERT INTO bf_fn SELECT i, 'more', $bf_ts FROM generate_series(20001, 21000) i",
		window => "bfile_window(NULL::bf_fn, timestamptz '2026-01-05 00:00+00', "
		  . "timestamptz '2026-01-06 00:00+00')",
		filter => "(SELECT * FROM bf_fn WHERE ts BETWEEN '2026-01-05 00:00+00' AND "
		  . "'2026-01-06 00:00+00')" },
	'app.bf_guc' => {
		fill => [
			'INSERT INTO app.bf_guc SELECT i, 1 + i % 4 FROM generate_series(1, 6000) i',
			'INSERT INTO app.bf_guc SELECT i, 1.5 FROM generate_series(6001, 10000) i'],
		more => 'INSERT INTO app.bf_guc SELECT i, 2 FROM generate_series(10001, 11000) i' },
	'app.bf_bytes' => {
		fill => [
			"INSERT INTO app.bf_bytes SELECT i, repeat('p', 50 + i % 100) FROM generate_series(1, 20000) i"],
		more => "INSERT INTO app.bf_bytes SELECT i, 'more' FROM generate_series(20001, 21000) i" });
my @bfiles = sort keys %BFILE;
my $bfile_more = 1000;    # the rows of each "more"

# the fill of bfile $t (one transaction per statement), then its flush
# (whose output is the sample's size); the inserts' draws repeat, so a
# refill gives the source's sample
sub bfile_fill_sql
{
	my ($t) = @_;
	return join(";\n", 'SET streamsketch.test_bfile_coins = 12',
		@{ $BFILE{$t}{fill} }, "SELECT bfile_flush('$t')") . ';';
}

# '<rows> <md5 of the sorted rows>' of $from ('0 -' if empty)
sub bfile_digest_sql
{
	my ($from) = @_;
	return "SELECT count(*) || ' ' || coalesce(md5(string_agg(r::text, ';' "
	  . "ORDER BY r::text)), '-') FROM $from r";
}

# { bfile => { kind => value } }; params: the info row's parameters;
# restart: what a restore restarts (size, seen, level, discards); rows:
# the sample's digest; window: bfile_window's (bf_fn)
sub bfile_collect
{
	my ($node, $db, $tables) = @_;
	my %v;
	foreach my $t (@$tables)
	{
		my %q = (
			params => "SELECT row(mode, sample_size, min_size, buckets, unroll_every, sample_bytes, min_bytes)::text "
			  . "FROM bfile_info('$t')",
			info => "SELECT i::text FROM bfile_info('$t') i",
			restart => "SELECT row(size, seen, level, discards)::text FROM bfile_info('$t')",
			rows => bfile_digest_sql($t),
			$BFILE{$t}{window} ? (window => bfile_digest_sql($BFILE{$t}{window})) : (),
			map { $_ => value_sql($t, $_) } qw(label shape logical_shape));
		$v{$t}{$_} = query($node, $db, $q{$_}) foreach keys %q;
	}
	return \%v;
}

# insert bfile $t's further rows: it goes on sampling (seen grew by the
# rows inserted, the sample stays below sample_size)
sub check_bfile_usable
{
	my ($node, $db, $how, $t) = @_;
	my $q = "SELECT seen || ' ' || (size < sample_size OR data_bytes < sample_bytes) "
	  . "FROM bfile_info('$t')";
	my ($seen) = split / /, query($node, $db, $q);
	my $r = query($node, $db, $BFILE{$t}{more});
	is($r . '|' . query($node, $db, $q),
		'|' . ($seen =~ /^\d+$/ ? $seen + $bfile_more : "($seen) + $bfile_more") . ' true',
		"$how: $t goes on sampling");
	return;
}

my $bfilled = '';
foreach my $t (@bfiles)
{
	my $r = query($old, 'src', bfile_fill_sql($t));
	$bfilled .= "$t: $r\n" if $r =~ /^ERROR/;
}
is($bfilled, '', 'source: every bfile filled');
my $bsrc = bfile_collect($old, 'src', \@bfiles);
is( query(
		$old, 'src',
		"SELECT string_agg(row(seen, size < sample_size, discards > 0, unrolls > 0, level > 1)::text, "
		  . "' ' ORDER BY t) FROM unnest(ARRAY['app.bf_guc', 'bf_fn']) t, bfile_info(t::regclass)"),
	'(10000,t,t,t,t) (20000,t,t,t,t)',
	'source: both bfiles saw every row, discarded and unrolled');
is($bsrc->{bf_fn}{label},
	'sample_size=500 min_fraction=0.7 buckets=4 mode=uniform weight_attnum=0 seed=4242 '
	  . 'time_attnum=3',
	'source: bf_fn has the constructor\'s parameters, seed and time column');
is($bsrc->{'app.bf_guc'}{label},
	'sample_size=3000 min_fraction=0.9 buckets=6 mode=weighted weight_attnum=2 '
	  . 'seed=1592598101 time_attnum=0',
	'source: app.bf_guc has the settings\' parameters');
is($bsrc->{bf_fn}{window}, query($old, 'src', bfile_digest_sql($BFILE{bf_fn}{filter})),
	'source: bf_fn\'s window is the filter of its sample');
isnt($bsrc->{bf_fn}{window}, '0 -', 'source: bf_fn\'s window is not empty');
is($bsrc->{bf_fn}{params}, '(uniform,500,350,4,3,,)',
	'source: bf_fn\'s info row shows the constructor\'s parameters');
is($bsrc->{'app.bf_guc'}{shape}, 'r|p|bfile|ss_owner||||id:integer::f,w:double precision::f',
	'source: app.bf_guc belongs to ss_owner');
is( query(
		$old, 'src',
		"SELECT row(seen, data_bytes < sample_bytes, discards > 0)::text FROM bfile_info('app.bf_bytes')"
	)
	  . ' ' . $bsrc->{'app.bf_bytes'}{params} . ' ' . $bsrc->{'app.bf_bytes'}{label},
	'(20000,t,t) (uniform,,,4,4,262144,209715) sample_size=256kB min_fraction=0.8 buckets=4 mode=uniform '
	  . 'weight_attnum=0 seed=1592598101 time_attnum=0',
	'source: app.bf_bytes is bounded in bytes and discarded');

# the checks of a restored database's bfiles: the source's shape,
# parameters and label; the source's sample as the rows, seen and level
# restarted (-s: empty; refilled with the source's stream, the source's
# sample and info row, as the seed is the source's); it goes on sampling
sub check_bfile_restored
{
	my ($db, $how, $tables, %opt) = @_;
	my $v = bfile_collect($old, $db, $tables);
	foreach my $t (@$tables)
	{
		is($v->{$t}{logical_shape}, $bsrc->{$t}{logical_shape},
			"$how: $t has the source's shape");
		is($v->{$t}{params}, $bsrc->{$t}{params}, "$how: $t has the source's parameters");
		is($v->{$t}{label}, $bsrc->{$t}{label}, "$how: $t has the source's label");
		if ($opt{schema_only})
		{
			is($v->{$t}{rows} . '|' . $v->{$t}{restart}, '0 -|(0,0,1,0)',
				"$how: $t is empty");
			my ($n) = split / /, $bsrc->{$t}{rows};
			is(query($old, $db, bfile_fill_sql($t)), $n,
				"$how: $t refilled (its flush gives the source's size)");
			my $w = bfile_collect($old, $db, [$t]);
			is($w->{$t}{rows}, $bsrc->{$t}{rows},
				"$how: $t refilled has the source's sample");
			is($w->{$t}{info}, $bsrc->{$t}{info},
				"$how: $t refilled has the source's info row");
			is($w->{$t}{window}, $bsrc->{$t}{window},
				"$how: $t refilled has the source's window")
			  if $BFILE{$t}{window};
		}
		else
		{
			is($v->{$t}{rows}, $bsrc->{$t}{rows}, "$how: $t has the source's sample");
			my ($n) = split / /, $bsrc->{$t}{rows};
			is($v->{$t}{restart}, "($n,$n,1,0)",
				"$how: $t restarted from its rows (seen $n, level 1)");
			is($v->{$t}{window}, $bsrc->{$t}{window}, "$how: $t has the source's window")
			  if $BFILE{$t}{window};
		}
		check_bfile_usable($old, $db, $how, $t);
	}
	return;
}
# ---------------------------------------------------------------------------
# dumps

my $tempdir = PostgreSQL::Test::Utils::tempdir;
my $srcconn = $old->connstr('src');

# restoring-session settings that differ from every structure's parameters
my $pgoptions = join(' ',
	map { "-c streamsketch.$_" } qw(
	  bcms_epsilon=0.01 bcms_delta=0.1 bcms_mode=buffered bcms_conservative=off
	  bcms_buffer_size=64kB qf_capacity=8000 qf_fp_rate=0.05 qf_fanout=16
	  qf_buffer_size=48kB bloom_capacity=5000 bloom_fp_rate=0.1
	  bloom_mode=localized bloom_buffer_size=24kB cbt_root_buffer=256kB
	  cbt_node_buffer=64kB cbt_fanout=32 cbt_compression=off
	  bfile_sample_size=5000 bfile_min_fraction=0.5 bfile_buckets=8
	  bfile_mode=decayed));

# run a restore command (with the settings above if $settings): it must
# report no errors but the @$expected ones (in any order; it then exits
# with an error)
sub restore
{
	my ($how, $cmd, $settings, $expected) = @_;
	local $ENV{PGOPTIONS} = $settings ? $pgoptions : '';
	my ($stdout, $stderr);
	my $ok = IPC::Run::run($cmd, '>', \$stdout, '2>', \$stderr);
	my @errors = sort($stderr =~ /ERROR:  (.*)/g);
	my @want = sort @{ $expected // [] };
	is_deeply([ $ok ? 'exit 0' : 'exit > 0', @errors ],
		[ @want ? 'exit > 0' : 'exit 0', @want ],
		"$how: restore has " . (@want ? 'only the expected errors' : 'no errors'))
	  or diag($stderr);
	return;
}

# the checks of a restored database: shape, parameters, label, emptiness;
# refilled with the same data, the source's answers and info row
sub check_restored
{
	my ($db, $how, $tables, %opt) = @_;
	my $v = collect($old, $db, $tables, qw(logical_shape params label answers));
	foreach my $t (@$tables)
	{
		is($v->{$t}{logical_shape}, $src->{$t}{logical_shape},
			"$how: $t has the source's shape");
		is($v->{$t}{params}, $src->{$t}{params}, "$how: $t has the source's parameters");
		is($v->{$t}{label}, $src->{$t}{label}, "$how: $t has the source's label");
		is($v->{$t}{answers}, empty_answers($t), "$how: $t is empty (a dump has no rows)");
	}
	is(run_fills($old, $db, $tables, 'refill'), '', "$how: refilled");
	$v = collect($old, $db, $tables, qw(answers info));
	foreach my $t (@$tables)
	{
		is($v->{$t}{answers}, $src->{$t}{answers},
			"$how: $t refilled gives the source's answers");
		is($v->{$t}{info}, $src->{$t}{info},
			"$how: $t refilled has the source's info row");
	}
	# the identity goes on from the dumped sequence (-s: from 1)
	check_identity($old, $db, $how, $opt{schema_only} ? 1 : 42)
	  if grep { $_ eq 't_ident' } @$tables;
	return;
}

# custom format + pg_restore, with the default settings and with others
command_ok([ 'pg_dump', '-Fc', '-f', "$tempdir/src.dump", '-d', $srcconn ],
	'pg_dump -Fc');
foreach my $case ([ 'dst_custom', 0, 'pg_restore' ],
	[ 'dst_opts', 1, 'pg_restore, other settings' ])
{
	my ($db, $settings, $how) = @$case;
	$old->safe_psql('postgres', "CREATE DATABASE $db");
	restore($how, [ 'pg_restore', '-d', $old->connstr($db), "$tempdir/src.dump" ],
		$settings);
	check_restored($db, $how, \@all);
	check_qfv($old, $db, $how);
	check_lert_restored($db, $how, 0);
	check_cbt_restored($db, $how, \@cbts);
	check_bfile_restored($db, $how, \@bfiles);
}

# plain + psql, with other settings
command_ok([ 'pg_dump', '-f', "$tempdir/src.sql", '-d', $srcconn ],
	'pg_dump (plain)');
$old->safe_psql('postgres', 'CREATE DATABASE dst_plain');
restore('plain',
	[ 'psql', '-X', '-q', '-d', $old->connstr('dst_plain'), '-f', "$tempdir/src.sql" ],
	1);
check_restored('dst_plain', 'plain', \@all);
check_qfv($old, 'dst_plain', 'plain');
check_lert_restored('dst_plain', 'plain', 0);
check_cbt_restored('dst_plain', 'plain', \@cbts);
check_bfile_restored('dst_plain', 'plain', \@bfiles);

# schema only, with other settings
command_ok([ 'pg_dump', '-s', '-f', "$tempdir/src_s.sql", '-d', $srcconn ],
	'pg_dump -s');
$old->safe_psql('postgres', 'CREATE DATABASE dst_schema');
restore('pg_dump -s',
	[ 'psql', '-X', '-q', '-d', $old->connstr('dst_schema'), '-f', "$tempdir/src_s.sql" ],
	1);
check_restored('dst_schema', 'pg_dump -s', \@all, schema_only => 1);
check_lert_restored('dst_schema', 'pg_dump -s', 1);
check_cbt_restored('dst_schema', 'pg_dump -s', \@cbts, schema_only => 1);
check_bfile_restored('dst_schema', 'pg_dump -s', \@bfiles, schema_only => 1);

# -t: one structure of each access method, into a database that has the
# extension, with other settings (a cbt's dump carries its groups, a
# bfile's its sample)
my @one_each = qw(bcms_fn qf_fn bqf_fn cf_fn bloom_fn);
$old->safe_psql('postgres', 'CREATE DATABASE dst_t');
$old->safe_psql('dst_t', 'CREATE EXTENSION streamsketch');
foreach my $t (@one_each, 'cbt_fn', 'bf_fn')
{
	command_ok([ 'pg_dump', '-t', $t, '-f', "$tempdir/$t.sql", '-d', $srcconn ],
		"pg_dump -t $t");
	restore(
		"pg_dump -t $t",
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
			$old->connstr('dst_t'), '-f', "$tempdir/$t.sql"
		],
		1);
}
check_restored('dst_t', 'pg_dump -t', \@one_each);
check_cbt_restored('dst_t', 'pg_dump -t', ['cbt_fn']);
check_bfile_restored('dst_t', 'pg_dump -t', ['bf_fn']);
is( query(
		$old, 'dst_t',
		"SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class c "
		  . "JOIN pg_am a ON a.oid = c.relam WHERE a.amname <> 'heap' AND relkind = 'r'"),
	'bcms_fn,bf_fn,bloom_fn,bqf_fn,cbt_fn,cf_fn,qf_fn',
	'pg_dump -t: the dumped structures only');

# pg_restore --no-security-labels: the restoring session's settings make
# the parameters (documented); references are made with the same settings.
# A cbt gets no definition (only the label has it), so its rows are
# refused: the restore's only errors.  A bfile takes its rows as its
# stream under those parameters (a larger sample_size than the rows).
$old->safe_psql('postgres', 'CREATE DATABASE refs');
{
	local $ENV{PGOPTIONS} = $pgoptions;
	$old->safe_psql(
		'refs', q{
CREATE EXTENSION streamsketch;
CREATE TABLE ref_bcms (k int8) USING bcms;
CREATE TABLE ref_quotient_filter (k int8) USING quotient_filter;
CREATE TABLE ref_buffered_quotient_filter (k int8) USING buffered_quotient_filter;
CREATE TABLE ref_cascade_filter (k int8) USING cascade_filter;
CREATE TABLE ref_bloom_filter (k int8) USING bloom_filter;
CREATE TABLE ref_cbt (k int8, n int8) USING cbt;
CREATE TABLE ref_bfile (id int8) USING bfile;
});
}
$old->safe_psql('postgres', 'CREATE DATABASE dst_nolabel');
{
	my $how = 'pg_restore --no-security-labels';
	restore($how,
		[ 'pg_restore', '--no-security-labels', '-d',
		  $old->connstr('dst_nolabel'), "$tempdir/src.dump" ],
		1, [ map { my $n = s/.*\.//r; qq{cbt "$n" has no definition} } @cbts ]);
	my $v = collect($old, 'dst_nolabel', \@all, qw(params label answers));
	foreach my $t (@all)
	{
		my $am = $S{$t}{am};
		my $f = fam($am);
		my $ref_params = query($old, 'refs',
			"SELECT row($f->{params})::text FROM $f->{info}('ref_$am')");
		my $ref_label = query($old, 'refs',
			"SELECT label FROM pg_seclabels WHERE objname = 'ref_$am'");
		is($v->{$t}{params}, $ref_params,
			"$how: $t has the restoring session's parameters");
		isnt($ref_params, $src->{$t}{params},
			"$how: (the restoring session's parameters differ from the source's for $t)");
		is($v->{$t}{label}, $ref_label,
			"$how: $t has the label of the restoring session's parameters");
		is($v->{$t}{answers}, empty_answers($t), "$how: $t is empty");
	}
	check_usable($old, 'dst_nolabel', $how, \@all);
	my $ref = cbt_collect($old, 'refs', ['ref_cbt']);
	my $cv = cbt_collect($old, 'dst_nolabel', \@cbts);
	foreach my $t (@cbts)
	{
		is($cv->{$t}{params} . ' | ' . $cv->{$t}{label},
			$ref->{ref_cbt}{params} . ' | ' . $ref->{ref_cbt}{label},
			"$how: $t has the restoring session's parameters, no definition, "
			  . 'and their label');
	}
	my $bref = bfile_collect($old, 'refs', ['ref_bfile']);
	my $bv = bfile_collect($old, 'dst_nolabel', \@bfiles);
	foreach my $t (@bfiles)
	{
		is($bv->{$t}{params} . ' | ' . $bv->{$t}{label},
			$bref->{ref_bfile}{params} . ' | ' . $bref->{ref_bfile}{label},
			"$how: $t has the restoring session's parameters and their label");
		isnt($bref->{ref_bfile}{params}, $bsrc->{$t}{params},
			"$how: (the restoring session's parameters differ from the source's for $t)");
		my ($n) = split / /, $bsrc->{$t}{rows};
		is($bv->{$t}{rows} . ' | ' . $bv->{$t}{restart}, "$bsrc->{$t}{rows} | ($n,$n,1,0)",
			"$how: $t has the source's sample as its rows, seen $n, level 1");
		check_bfile_usable($old, 'dst_nolabel', $how, $t);
	}
}

# the dumps left the source as it was
my $src_again = collect($old, 'src', \@all, 'info');
foreach my $t (@all)
{
	is($src_again->{$t}{info}, $src->{$t}{info}, "source: $t unchanged by the dumps");
}
my $lsrc_again = lert_collect($old, 'src');
foreach my $t (@lerts)
{
	is($lsrc_again->{$t}{info} . '|' . $lsrc_again->{$t}{reports},
		$lsrc->{$t}{info} . '|' . $lsrc->{$t}{reports}, "source: $t unchanged by the dumps");
}
my $csrc_again = cbt_collect($old, 'src', \@cbts);
foreach my $t (@cbts)
{
	is($csrc_again->{$t}{info} . '|' . $csrc_again->{$t}{rows},
		$csrc->{$t}{info} . '|' . $csrc->{$t}{rows}, "source: $t unchanged by the dumps");
}
my $bsrc_again = bfile_collect($old, 'src', \@bfiles);
foreach my $t (@bfiles)
{
	is($bsrc_again->{$t}{info} . '|' . $bsrc_again->{$t}{rows},
		$bsrc->{$t}{info} . '|' . $bsrc->{$t}{rows}, "source: $t unchanged by the dumps");
}

# A cbt whose results are not their states (avg's final function) cannot
# take its groups back: its dump restores the table, empty, with the
# source's parameters, and psql reports the refusal of its rows (0A000;
# docs/cbt.md, "Dumps").  It has a database of its own, so that the dumps
# above, which must restore without an error, do not hold it.
$old->safe_psql('postgres', 'CREATE DATABASE src_avg');
$old->safe_psql(
	'src_avg', q{
CREATE EXTENSION streamsketch;
SELECT cbt_create('cbt_avg', 'k int4', 'count(*) AS n, avg(f::float8) AS af', fanout => 4);
INSERT INTO cbt_avg (k, f) SELECT i % 10, i FROM generate_series(1, 100) i;
});
command_ok(
	[ 'pg_dump', '-t', 'cbt_avg', '-f', "$tempdir/cbt_avg.sql", '-d', $old->connstr('src_avg') ],
	'pg_dump -t cbt_avg');
$old->safe_psql('postgres', 'CREATE DATABASE dst_avg');
$old->safe_psql('dst_avg', 'CREATE EXTENSION streamsketch');
{
	my ($stdout, $stderr);
	IPC::Run::run(
		[
			'psql', '-X', '-q', '-v', 'VERBOSITY=verbose', '-d',
			$old->connstr('dst_avg'), '-f', "$tempdir/cbt_avg.sql"
		],
		'>', \$stdout, '2>', \$stderr);
	is_deeply([ $stderr =~ /ERROR:  (.*)/g ],
		[ q{0A000: cbt "cbt_avg" cannot take a group's final values back} ],
		'pg_dump -t cbt_avg: the restore refuses its rows, with 0A000')
	  or diag($stderr);
	my @q = (
		"SELECT row(definition, root_buffer, node_buffer, fanout, compression)::text "
		  . "FROM cbt_info('cbt_avg')",
		value_sql('cbt_avg', 'label'));
	is(join(' | ', map { query($old, 'dst_avg', $_) } 'SELECT count(*) FROM cbt_avg', @q),
		join(' | ', '0', map { query($old, 'src_avg', $_) } @q),
		'pg_dump -t cbt_avg: restored empty, with the source\'s parameters and label');
}
note sprintf('dumps done after %d s', time - $t0);

# ---------------------------------------------------------------------------
# pg_upgrade (copy mode), of the source database only

foreach my $db (qw(dst_custom dst_opts dst_plain dst_schema dst_t dst_nolabel refs
	src_avg dst_avg))
{
	$old->safe_psql('postgres', "DROP DATABASE $db");
}

my $bindir = $old->config_data('--bindir');
my $updir = PostgreSQL::Test::Utils::tempdir;
my $cwd = getcwd();

# run pg_upgrade from $old into a new cluster (with $old stopped, and from
# a directory it can write into); returns (success, new node, the errors
# of its logs)
sub upgrade
{
	my ($name) = @_;
	my $new = PostgreSQL::Test::Cluster->new($name);
	$new->init;
	$new->append_conf('postgresql.conf',
		"autovacuum = off\nstreamsketch.background_consolidation = off");
	$old->stop;
	chdir $updir or die "chdir $updir: $!";
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'pg_upgrade', '--no-sync',
			'-d', $old->data_dir, '-D', $new->data_dir,
			'-b', $bindir, '-B', $bindir,
			'-s', $new->host, '-p', $old->port,
			'-P', $new->port
		],
		'>', \$stdout, '2>', \$stderr);
	chdir $cwd or die "chdir $cwd: $!";
	my @log;
	my $logdir = $new->data_dir . '/pg_upgrade_output.d';
	find(
		sub {
			return unless /\.log$/;
			my $text = slurp_file($File::Find::name);
			push @log, $text =~ /^(pg_restore: error: .*)$/mg;
		},
		$logdir) if -d $logdir;
	note "pg_upgrade into $name:\n$stdout$stderr" unless $ok;
	return ($ok, $new, @log);
}

my ($up_ok, $new, @up_log) = upgrade('new');
ok($up_ok, 'pg_upgrade with every structure');
is_deeply(\@up_log, [], 'pg_upgrade: no errors') or diag(join("\n", @up_log));
$new->start;

my $up = collect($new, 'src', \@all, qw(shape info label answers));
foreach my $t (@all)
{
	is($up->{$t}{shape}, $src->{$t}{shape}, "pg_upgrade: $t has the source's shape");
	is($up->{$t}{info}, $src->{$t}{info},
		"pg_upgrade: $t has the source's parameters and counters");
	is($up->{$t}{label}, $src->{$t}{label}, "pg_upgrade: $t has the source's label");
	is($up->{$t}{answers}, $src->{$t}{answers},
		"pg_upgrade: $t has the source's contents");
}
is(all_labels($new, 'src'), $all_labels, 'pg_upgrade: every label survived');
check_qfv($new, 'src', 'pg_upgrade');

check_usable($new, 'src', 'pg_upgrade', \@all);
my $lup = lert_collect($new, 'src');
foreach my $t (@lerts)
{
	foreach my $k (qw(params label info reports counts rows))
	{
		is($lup->{$t}{$k}, $lsrc->{$t}{$k}, "pg_upgrade: $t has the source's $k");
	}
	# usable: one more observation of key 3 (lert_fn: reported before, so
	# only counted; app.lert_guc: k3 had 4, a count of 3 reaches T)
	my $w = $t eq 'lert_fn' ? '' : ', 3';
	my $key = $LERT{$t};
	my $r = query($new, 'src', "INSERT INTO $t SELECT $key$w FROM (VALUES (3)) v(g)");
	is($r . '|' . query($new, 'src', "SELECT lert_count('$t', $key) FROM (VALUES (3)) v(g)"),
		'|7', "pg_upgrade: $t is usable (insert + lert_count)");
}
# app.cbt_ua's metapage holds the old cluster's ids: each backend resolves
# its label until a round stores the tree bound to the new ids.  A rename
# of what the label names cannot be followed before that, and is refused
# (undone); after cbt_finalize it is followed.
is(query($new, 'src', "SELECT count(*) FROM app.cbt_ua"), '1500',
	'pg_upgrade: a cbt naming user objects is read through its label');
like(
	query($new, 'src',
		"\\set VERBOSITY verbose\nALTER FUNCTION app.dbl(int4) RENAME TO dbl2"),
	qr/ERROR:  0A000: cbt "cbt_ua" cannot follow this statement/,
	'pg_upgrade: a rename before the definition is bound here is refused');
is(query($new, 'src', "SELECT count(*) FROM pg_proc WHERE proname = 'dbl'"), '1',
	'pg_upgrade: the refused rename is undone');
my $cup = cbt_collect($new, 'src', \@cbts);
foreach my $t (@cbts)
{
	is($cup->{$t}{shape}, $csrc->{$t}{shape}, "pg_upgrade: $t has the source's shape");
	is($cup->{$t}{info}, $csrc->{$t}{info},
		"pg_upgrade: $t has the source's parameters and counters");
	is($cup->{$t}{label}, $csrc->{$t}{label}, "pg_upgrade: $t has the source's label");
	is($cup->{$t}{rows}, $csrc->{$t}{rows}, "pg_upgrade: $t has the source's groups");
	check_cbt_usable($new, 'src', 'pg_upgrade', $t);
}
is(query($new, 'src', "SELECT cbt_finalize('app.cbt_ua')"), '1500',
	'pg_upgrade: cbt_finalize binds the definition in the new cluster');
is(query($new, 'src', "ALTER FUNCTION app.dbl(int4) RENAME TO dbl2; "
	  . "ALTER AGGREGATE app.tot(int4) RENAME TO tot2"), '',
	'pg_upgrade: then renames are followed');
like(query($new, 'src', "SELECT definition FROM cbt_info('app.cbt_ua')"),
	qr/app\.tot2\(app\.dbl2\(w\)\)/, 'pg_upgrade: the definition names the new names');
is( query(
		$new, 'src',
		"ALTER FUNCTION app.dbl2(int4) RENAME TO dbl; "
		  . "ALTER AGGREGATE app.tot2(int4) RENAME TO tot"), '',
	'pg_upgrade: and renamed back');
my $bup = bfile_collect($new, 'src', \@bfiles);
foreach my $t (@bfiles)
{
	is($bup->{$t}{shape}, $bsrc->{$t}{shape}, "pg_upgrade: $t has the source's shape");
	is($bup->{$t}{info}, $bsrc->{$t}{info},
		"pg_upgrade: $t has the source's parameters and counters");
	is($bup->{$t}{label}, $bsrc->{$t}{label}, "pg_upgrade: $t has the source's label");
	is($bup->{$t}{rows}, $bsrc->{$t}{rows}, "pg_upgrade: $t has the source's sample");
	is($bup->{$t}{window}, $bsrc->{$t}{window}, "pg_upgrade: $t has the source's window")
	  if $BFILE{$t}{window};
	check_bfile_usable($new, 'src', 'pg_upgrade', $t);
}
is(query($new, 'src', "SELECT string_agg(key || ':' || count, ',' ORDER BY key) FROM "
		  . "lert_reports('app.lert_guc', 3)"), 'k3:7',
	'pg_upgrade: app.lert_guc reports after the upgrade, with ids after the source\'s');
check_identity($new, 'src', 'pg_upgrade', 42);

$new->stop;
note sprintf('total %d s', time - $t0);
done_testing();
