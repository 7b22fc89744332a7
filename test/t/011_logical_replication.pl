
# Copyright (c) streamsketch authors
#
# Logical replication and structures: a FOR ALL TABLES publication includes
# them, but their changes are generic WAL, which is not decoded, so a
# subscriber's structure gets none of the publisher's inserts.  A TRUNCATE
# on the publisher is decoded and replayed on the subscriber: it must leave
# the subscriber's structure as it was (the subscriber keeps what was
# inserted there), while ordinary tables in the same publication replicate
# as usual.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->start;

my $schema = q{
CREATE EXTENSION streamsketch;
CREATE TABLE s_bcms (k int) USING bcms;
CREATE TABLE s_qf (k int) USING quotient_filter;
CREATE TABLE s_cf (k int) USING cascade_filter;
CREATE TABLE s_bloom (k int) USING bloom_filter;
CREATE TABLE plain_rows (k int PRIMARY KEY);
};
$pub->safe_psql('postgres', $schema);
$sub->safe_psql('postgres', $schema);

# what each structure answers for keys 1 and 2
my $answers = q{
SELECT bcms_estimate('s_bcms', 1) || ' ' || bcms_estimate('s_bcms', 2) || ' ' ||
	   qf_count('s_qf', 1) || ' ' || qf_count('s_qf', 2) || ' ' ||
	   qf_count('s_cf', 1) || ' ' || qf_count('s_cf', 2) || ' ' ||
	   bloom_contains('s_bloom', 1) || ' ' || bloom_contains('s_bloom', 2)
};
my $fill = q{
INSERT INTO s_bcms VALUES (%1$d), (%1$d);
INSERT INTO s_qf VALUES (%1$d), (%1$d);
INSERT INTO s_cf VALUES (%1$d);
INSERT INTO s_bloom VALUES (%1$d);
};

$pub->safe_psql('postgres', sprintf($fill, 1));
$sub->safe_psql('postgres', sprintf($fill, 2));
$pub->safe_psql('postgres', 'CREATE PUBLICATION p FOR ALL TABLES');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p");
$sub->wait_for_subscription_sync($pub, 's');

is($sub->safe_psql('postgres', $answers),
	'0 2 0 2 0 1 false true',
	'initial sync copies nothing into the subscriber\'s structures');

# inserts on the publisher are not decoded; the heap row is
$pub->safe_psql('postgres',
	sprintf($fill, 1) . 'INSERT INTO plain_rows VALUES (1), (2)');
$pub->wait_for_catchup('s');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM plain_rows'),
	'2', 'ordinary rows replicate');
is($sub->safe_psql('postgres', $answers),
	'0 2 0 2 0 1 false true',
	'structure inserts do not replicate');

# a TRUNCATE of everything on the publisher
$pub->safe_psql('postgres',
	'TRUNCATE s_bcms, s_qf, s_cf, s_bloom, plain_rows');
$pub->wait_for_catchup('s');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM plain_rows'),
	'0', 'the TRUNCATE of the ordinary table replicated');
is($sub->safe_psql('postgres', $answers),
	'0 2 0 2 0 1 false true',
	'the replicated TRUNCATE left the subscriber\'s structures as they were');
is($pub->safe_psql('postgres', $answers),
	'0 0 0 0 0 0 false false',
	'the publisher\'s structures were truncated');
ok( $sub->log_contains(
		'logical replication keeps the contents of bcms table "s_bcms" on TRUNCATE'
	),
	'the subscriber logs why it kept the contents');

# the subscriber's structures still work and keep their parameters
$sub->safe_psql('postgres', sprintf($fill, 2));
is($sub->safe_psql('postgres', $answers),
	'0 4 0 4 0 2 false true',
	'the subscriber\'s structures keep counting');
is( $sub->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_seclabels WHERE provider = 'streamsketch'"),
	'4',
	'the subscriber\'s structures keep their parameter labels');

$sub->safe_psql('postgres', 'DROP SUBSCRIPTION s');
done_testing();
