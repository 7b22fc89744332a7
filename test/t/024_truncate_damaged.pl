# Copyright (c) streamsketch authors
#
# TRUNCATE starts a structure with a damaged metapage over (the damage
# hint recommends it): the new, empty structure gets the parameters of the
# table's label, with a WARNING, and works.  The damaged read fails in
# different places: with data_checksums, in the buffer manager (a
# checksum failure, while the buffer is pinned and its read in progress);
# without, in the metapage checks, under the page's lock.  Either way
# nothing of the failed read may outlive it: after TRUNCATE, every kind
# takes inserts and answers, later reads of the same block do not hang,
# and the server log has no leaked pin or lock.  One cluster with
# checksums, one without; every access method.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

# name => [ creation, insert of 1..100, what is read back ]
my %S = (
	bcms => [
		"SELECT bcms_create('t_bcms', 'int8', epsilon => 0.0001)",
		'INSERT INTO t_bcms SELECT g FROM generate_series(1, 100) g',
		"SELECT bcms_estimate('t_bcms', 7::int8) || '/' || bcms_estimate('t_bcms', 1000::int8)",
		'1/0' ],
	quotient_filter => [
		"SELECT qf_create('t_qf', 'int8', capacity => 1000)",
		'INSERT INTO t_qf SELECT g FROM generate_series(1, 100) g',
		"SELECT qf_contains('t_qf', 7::int8) || '/' || qf_count('t_qf', 7::int8)",
		'true/1' ],
	cascade_filter => [
		'CREATE TABLE t_cf (k int8) USING cascade_filter',
		'INSERT INTO t_cf SELECT g FROM generate_series(1, 100) g',
		"SELECT qf_contains('t_cf', 7::int8)::text", 'true' ],
	bloom_filter => [
		'CREATE TABLE t_bloom (k int8) USING bloom_filter',
		'INSERT INTO t_bloom SELECT g FROM generate_series(1, 100) g',
		"SELECT bloom_contains('t_bloom', 7::int8)::text", 'true' ],
	lert => [
		"SELECT lert_create('t_lert', 'int8', threshold => 4)",
		'INSERT INTO t_lert SELECT g % 10 FROM generate_series(1, 100) g',
		"SELECT lert_count('t_lert', 7::int8)::text", '10' ],
	cbt => [
		"SELECT cbt_create('t_cbt', 'k int8', 'count(*) AS n, sum(v::int4) AS s')",
		'INSERT INTO t_cbt (k, v) SELECT g % 10, g FROM generate_series(1, 100) g',
		"SELECT n || '/' || s FROM t_cbt WHERE k = 7", '10/520' ],
	bfile => [
		"SELECT bfile_create('t_bfile', 'id int8', sample_size => 1000)",
		'INSERT INTO t_bfile SELECT g FROM generate_series(1, 100) g',
		'SELECT count(*)::text FROM t_bfile', '100' ]);
my @kinds = sort keys %S;

# the first data byte of a page (after the 24-byte header): a metapage's
# magic number
my $DATA = 24;

foreach my $checksums (0, 1)
{
	my $how = $checksums ? 'with data_checksums' : 'without data_checksums';
	my $node = PostgreSQL::Test::Cluster->new($checksums ? 'sums' : 'nosums');
	$node->init(extra => $checksums ? ['--data-checksums'] : []);
	$node->append_conf('postgresql.conf', "autovacuum = off\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION streamsketch');
	my $pgdata = $node->data_dir;

	my %label;
	foreach my $k (@kinds)
	{
		$node->safe_psql('postgres', "$S{$k}[0];\n$S{$k}[1];\nCHECKPOINT;");
		my $t = "t_$k" =~ s/t_quotient_filter/t_qf/r =~ s/t_cascade_filter/t_cf/r
		  =~ s/t_bloom_filter/t_bloom/r;
		$S{$k}[4] = $t;
		$label{$k} = $node->safe_psql('postgres',
			"SELECT label FROM pg_seclabels WHERE objoid = '$t'::regclass");
		is($node->safe_psql('postgres', $S{$k}[2]), $S{$k}[3], "$how: $k answers");
	}

	# damage every metapage's magic number while the server is stopped (so
	# that no buffer holds the good page)
	my %file = map {
		$_ => "$pgdata/"
		  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('$S{$_}[4]')")
	} @kinds;
	$node->stop;
	foreach my $k (@kinds)
	{
		open my $fh, '+<:raw', $file{$k} or die "open $file{$k}: $!";
		seek($fh, $DATA, 0) or die;
		print $fh "\xde\xad\xbe\xef";
		close $fh;
	}
	$node->start;

	foreach my $k (@kinds)
	{
		my $t = $S{$k}[4];
		my ($ret, $out, $err) =
		  $node->psql('postgres', "\\set VERBOSITY verbose\n$S{$k}[2]");
		like($err, qr/ERROR:  XX001:/, "$how: $k reports its damaged metapage");

		($ret, $out, $err) = $node->psql('postgres',
			"\\set VERBOSITY verbose\nTRUNCATE $t;\n$S{$k}[1];\n$S{$k}[2]");
		is($ret . '|' . $out, "0|$S{$k}[3]",
			"$how: $k after TRUNCATE takes inserts and answers");
		like($err, qr/WARNING:  XX001:/,
			"$how: ${k}'s TRUNCATE warns that the label's parameters are used");
		is( $node->safe_psql('postgres',
				"SELECT label FROM pg_seclabels WHERE objoid = '$t'::regclass"),
			$label{$k}, "$how: $k keeps its label's parameters");
		# the same block read again, in another session, does not wait for
		# an I/O or a lock the failed read left behind
		is($node->safe_psql('postgres', $S{$k}[2], timeout => 60),
			$S{$k}[3], "$how: $k answers in a new session");
	}
	my $log = slurp_file($node->logfile);
	unlike($log, qr/buffer refcount leak|lock .* still held|PANIC|TRAP/,
		"$how: no leaked buffer pin or lock, no crash");
	$node->stop;
}

done_testing();
