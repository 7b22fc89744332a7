
# Copyright (c) streamsketch authors
#
# Every ```sql block of README.md runs as written: the blocks are extracted
# in order and run, each as one psql script with ON_ERROR_STOP, in one
# fresh database, so a later block may use what an earlier one created.
# A block whose first line is "-- not run" only illustrates and is
# skipped (README.md says so next to the first block); there must be
# few of them.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = ($ENV{TESTDIR} // '.') . '/README.md';
open(my $fh, '<', $readme) or die "could not open $readme: $!";
my @blocks;
my ($block, $start);
my $lineno = 0;
while (my $line = <$fh>)
{
	$lineno++;
	if (defined $block)
	{
		if ($line =~ /^```\s*$/)
		{
			push @blocks, { line => $start, sql => $block };
			undef $block;
		}
		else
		{
			$block .= $line;
		}
	}
	elsif ($line =~ /^```sql\s*$/)
	{
		$block = '';
		$start = $lineno;
	}
}
close($fh);
die "README.md: the ```sql block of line $start is not closed"
  if defined $block;
ok(scalar(@blocks) > 0, 'README.md has sql blocks');

my $skipped = grep { $_->{sql} =~ /\A-- not run\b/ } @blocks;
cmp_ok($skipped, '<=', 3, 'few README blocks are marked "-- not run"');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_buffers = 64MB\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');

foreach my $b (@blocks)
{
	my $what = "README.md block at line $b->{line}";
	if ($b->{sql} =~ /\A-- not run\b/)
	{
		note("$what: not run");
		next;
	}
	my ($ret, $out, $err) = $node->psql(
		'readme', $b->{sql},
		on_error_stop => 1,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	is($ret, 0, "$what runs without error")
	  or diag("stderr:\n$err");
	unlike($err, qr/ERROR/, "$what: no ERROR on stderr");
}

$node->stop;
done_testing();
