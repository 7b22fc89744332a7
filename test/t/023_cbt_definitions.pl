# Copyright (c) streamsketch authors
#
# A cbt's definition is made of objects, not of text (DESIGN.md,
# "Definitions are objects, not text", and "Security"): what it names is
# bound by object id when it is created, never looked up by name again in
# anyone's session, and its code runs as the table's owner.
#
# Planted code never runs.  Four cbts, two owned by a superuser and two
# by an ordinary role with CREATE on a schema, whose stored definitions
# carry type names (casts to text, date, inet, uuid, jsonb, a string
# literal's text, an enum and a domain of another schema; keys of text,
# date, inet, uuid, jsonb and the enum).  Then a role with only INSERT, a
# role with only SELECT and the owner, each in a fresh session whose
# search_path is pg_temp, public, pg_catalog, plant pg_temp domains named
# after every one of those types (their CHECK logs to planted_log and
# makes the session's role a superuser if it runs as another role), on
# top of public aggregates, functions and operators with the signatures
# the definitions use (count(*), sum(integer), max(text), max(date),
# min(inet), max of the enum, abs(integer), +, *, ->>), all logging; and
# each does what it may: INSERT and cbt_finalize, SELECT *, cbt_lookup
# and cbt_info.  Nothing may fail, planted_log stays empty, no role
# becomes a superuser, and every group read in those sessions (and in a
# clean one after) equals the GROUP BY over a heap copy of the rows
# (<table>_ref, fed the same rows in the same transactions).
#
# Renames follow.  A cbt (rt) with a user aggregate, a user function in
# an argument and a user enum (key and input), and one (rcoll) with a
# user ICU collation in an argument, all in schema lib: the aggregate and
# the function are renamed, then the type and the collation, then the
# schema (lib -> lib2), then the function and the type are moved (SET
# SCHEMA lib3), and last rt's key column, a result column, an input
# column and an input column its sum's result carries are renamed.
# After each step a new session (search_path: pg_temp, lib, lib2,
# public, pg_catalog) inserts, finalizes, reads and looks up: every group
# equals GROUP BY, and cbt_info's definition and the label (the dump
# copy) name the new names and none of the old ones.  A rename may
# instead be refused with 0A000 (then nothing changed and the table still
# works); any other outcome, or a table that fails later, fails the test.
# After the object renames, the schema rename and the moves, impostors
# are created under every old name, in the old schema and in public
# (aggregates and functions that log, domains whose CHECK logs, C
# collations): they never run, and rcoll's maxima stay the ICU
# collation's.
#
# A dump after the renames restores.  pg_dump -Fc of the database (but
# rcoll, dumped on its own with -t so that the two stand apart) and
# pg_restore into a new database, where the impostors are restored too,
# report no error; every restored cbt has the source's definition and
# the GROUP BY's groups (all six are restorable: each aggregate's result
# is its state), goes on aggregating, and nothing planted runs.
#
# About 10 s: one node, a few hundred rows per table, one psql per step.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use MIME::Base64 qw(decode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StreamsketchTest;
use Test::More;

my $node = ss_node(
	'cbt_definitions',
	extension => 1,
	consistency => 0,
	conf => qq{autovacuum = off\nshared_buffers = 16MB\n});
my $su = $node->safe_psql('postgres', 'SELECT current_user');
my @moods = qw(sad ok happy);

# ---------------------------------------------------------------------------
# helpers

# Run $sql as $user in a new session of $db (default postgres), stopping at
# the first error.  Returns that error as "SQLSTATE: message" ('' if none)
# and the output split into sections: a line "== name" (\echo) starts one.
sub session
{
	my ($user, $sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres', $sql,
		extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
	my $e = $err =~ /(?:ERROR|FATAL|PANIC):  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : '';
	$e = "psql exit $ret: $err" if $e eq '' && $ret != 0;
	my (%sec, $cur);
	foreach my $line (split /\n/, $out)
	{
		if ($line =~ /^== (.+)$/)
		{
			$cur = $1;
			$sec{$cur} = [];
			next;
		}
		push @{ $sec{$cur} }, $line if defined $cur;
	}
	return ($e, { map { $_ => join("\n", @{ $sec{$_} }) } keys %sec });
}

# Run $sql as the superuser with search_path = pg_catalog alone (nothing
# planted in public or anywhere else is found); its output, or "ERROR: ..."
sub clean
{
	my ($sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres',
		"SET search_path = pg_catalog;\n$sql",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $ret == 0 ? $out : "ERROR: $err";
}

# the lines of a result, sorted (groups come in hash order)
sub sorted
{
	my ($text) = @_;
	return '(no output)' unless defined $text;
	return join("\n", sort split /\n/, $text);
}

# planted_log rows after id $mark, grouped:
# "what: run as cur in sess's session N times; ..."
sub planted_since
{
	my ($mark, $db) = @_;
	return clean(
		"SELECT coalesce(string_agg(format('%s: run as %s in %s''s session %s times', "
		  . "what, cur, sess, n), '; ' ORDER BY first), '') "
		  . "FROM (SELECT what, cur, sess, count(*) AS n, min(id) AS first "
		  . "FROM public.planted_log WHERE id > $mark GROUP BY what, cur, sess) l", $db);
}

sub planted_mark
{
	my ($db) = @_;
	return clean('SELECT coalesce(max(id), 0) FROM public.planted_log', $db);
}

sub superusers
{
	return clean(
		"SELECT coalesce(string_agg(rolname, ',' ORDER BY rolname), '') "
		  . "FROM pg_roles WHERE rolsuper AND rolname <> '$su'");
}

# '' or what is wrong with a definition: a name of @$present it lacks, a
# name of @$absent it has (names as whole words, qualified or not)
sub def_problems
{
	my ($def, $present, $absent) = @_;
	return "no definition: $def" if !defined $def || $def =~ /^ERROR/;
	my @p;
	push @p, "does not name $_"
	  foreach grep { $def !~ /(?<!\w)\Q$_\E(?!\w)/ } @$present;
	push @p, "still names $_"
	  foreach grep { $def =~ /(?<!\w)\Q$_\E(?!\w)/ } @$absent;
	push @p, "definition: $def" if @p;
	return join('; ', @p);
}

# ---------------------------------------------------------------------------
# Part 1: planted code never runs

# Two kinds of definitions.  args: type names in argument expressions
# only (keys and inputs of types whose names are grammar keywords), so
# that a definition resolved again by name runs the planted domains'
# CHECK.  keys: keys of types with ordinary names.  groups: the GROUP BY
# over the heap copy, in the cbt's column order (input columns read NULL).
my %KIND = (
	args => {
		group_by => 'k int',
		aggregates => q{count(*) AS n, max(v::int::text) AS mt,
			max(s::varchar::date) AS md, min(a::varchar::inet) AS mi,
			max(u::varchar::uuid::text) AS mu,
			sum((j::varchar::jsonb ->> 'a')::int) AS sj,
			max(e::varchar::ut.mood) AS me, sum(x::int::ut.posint) AS sx,
			sum(abs(w::int * 2 + 1)) AS sw},
		cols => 'k, v, s, a, u, j, e, x, w',
		ref_columns => 'k int, v int, s varchar, a varchar, u varchar, '
		  . 'j varchar, e varchar, x int, w int',
		groups => q{k, count(*), max(v::text), max(s::date), min(a::inet),
			max(u::uuid::text), sum((j::jsonb ->> 'a')::int), max(e::ut.mood),
			sum(x::ut.posint), sum(abs(w * 2 + 1)),
			NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
		group_keys => 'k',
		# the definition names these types
		stored => [qw(text date inet uuid jsonb ut.mood ut.posint)],
		row => sub {
			my ($i) = @_;
			return '(' . join(', ',
				$i % 4,
				$i % 10 == 0 ? 'NULL' : ($i * 7) % 50,
				sprintf("'2024-%02d-%02d'", 1 + $i % 2, 1 + ($i * 5) % 28),
				$i % 7 == 0 ? 'NULL'
				: sprintf("'10.%d.%d.%d'", $i % 3, ($i * 7) % 256, ($i * 13) % 256),
				sprintf("'%08x-0000-4000-8000-%012x'", ($i * 2654435761) % 4294967296, $i),
				sprintf(q{'{"a": %d, "b": "x%d"}'}, ($i * 11) % 17, $i),
				"'$moods[($i * 5) % 3]'",
				($i * 3) % 20,
				$i % 9 - 4) . ')';
		},
		lookup => '1',
		lookup_where => 'k = 1',
	},
	keys => {
		group_by => 'kt text, kd date, ki inet, ku uuid, kj jsonb, km ut.mood',
		aggregates => 'count(*) AS n, sum(v::int) AS sv',
		cols => 'kt, kd, ki, ku, kj, km, v',
		ref_columns => 'kt text, kd date, ki inet, ku uuid, kj jsonb, km ut.mood, v int',
		groups => 'kt, kd, ki, ku, kj, km, count(*), sum(v), NULL',
		group_keys => 'kt, kd, ki, ku, kj, km',
		stored => [qw(text date inet uuid jsonb ut.mood)],
		row => sub {
			my ($i) = @_;
			my $g = $i % 5;
			return sprintf(
				q{(%s, '2024-03-%02d', '192.168.0.%d', '00000000-0000-4000-8000-%012d', '{"g": %d}', '%s', %s)},
				$g == 4 ? 'NULL' : "'k$g'", $g + 1, $g, $g, $g, $moods[ $g % 3 ],
				$i % 11 == 0 ? 'NULL' : ($i * 7) % 30);
		},
		lookup => q{'k1', '2024-03-02', '192.168.0.1', '00000000-0000-4000-8000-000000000001', '{"g": 1}', 'ok'},
		lookup_where => q{kt = 'k1'},
	});

# the cbts, each with its heap copy <t>_ref; the ordinary role's first
my @PT = (
	{ t => 'app.own_args', kind => 'args', owner => 'tab_owner' },
	{ t => 'app.own_keys', kind => 'keys', owner => 'tab_owner' },
	{ t => 'public.su_args', kind => 'args', owner => $su },
	{ t => 'public.su_keys', kind => 'keys', owner => $su });
my %PT = map { $_->{t} => $_ } @PT;

my $rowno = 0;

# a transaction inserting the next $n rows into cbt $t and its copy
sub insert_sql
{
	my ($t, $n) = @_;
	my $k = $KIND{ $PT{$t}{kind} };
	my $values = join(",\n  ", map { $k->{row}->($_) } ($rowno + 1 .. $rowno + $n));
	$rowno += $n;
	return "BEGIN;\nINSERT INTO $t ($k->{cols}) VALUES\n  $values;\n"
	  . "INSERT INTO ${t}_ref ($k->{cols}) VALUES\n  $values;\nCOMMIT;\n";
}

# the GROUP BY over $t's copy (of the group $where)
sub ref_sql
{
	my ($t, $where) = @_;
	my $k = $KIND{ $PT{$t}{kind} };
	return "SELECT $k->{groups} FROM ${t}_ref"
	  . ($where ? " WHERE $where" : '')
	  . " GROUP BY $k->{group_keys};";
}

# the reads a role with SELECT does, each in its section
sub read_sql
{
	my ($t) = @_;
	my $k = $KIND{ $PT{$t}{kind} };
	return "\\echo == $t rows\nSELECT * FROM $t;\n"
	  . "\\echo == $t lookup\nSELECT * FROM public.cbt_lookup(NULL::$t, $k->{lookup});\n"
	  . "\\echo == $t definition\nSELECT definition FROM public.cbt_info('$t');\n";
}

sub finalize_sql
{
	my ($t) = @_;
	return "\\echo == $t finalize\nSELECT public.cbt_finalize('$t');\n";
}

sub definition_sql
{
	my ($t) = @_;
	return "SELECT definition FROM public.cbt_info('$t')";
}

sub label_sql
{
	my ($t) = @_;
	return "SELECT coalesce(min(label), '(none)') FROM pg_seclabels "
	  . "WHERE provider = 'streamsketch' AND objoid = '$t'::regclass";
}

# the definition the label (the dump copy) carries, decoded
sub label_definition
{
	my ($t, $db) = @_;
	my $label = clean(label_sql($t), $db);
	return $label =~ /(?:^| )definition=([A-Za-z0-9+\/=]+)$/
	  ? decode_base64($1)
	  : "ERROR: no definition in the label: $label";
}

# roles, schemas, types, the log and what the planted objects call
$node->safe_psql(
	'postgres', qq{
CREATE ROLE tab_owner LOGIN;
CREATE ROLE sel_role LOGIN;
CREATE ROLE ins_role LOGIN;
-- as in a database made before PostgreSQL 15: anyone may create in public
GRANT CREATE ON SCHEMA public TO PUBLIC;
-- (owned by tab_owner, whose cbts use its types: a restore applies the
-- GRANT below only after the cbts' labels)
CREATE SCHEMA ut AUTHORIZATION tab_owner;
GRANT USAGE ON SCHEMA ut TO PUBLIC;
CREATE TYPE ut.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN ut.posint AS int CHECK (VALUE >= 0);
CREATE SCHEMA app;
GRANT USAGE ON SCHEMA app TO PUBLIC;
GRANT CREATE ON SCHEMA app TO tab_owner;

CREATE TABLE public.planted_log (id bigint GENERATED ALWAYS AS IDENTITY,
                                 what text, cur name, sess name);
GRANT SELECT, INSERT ON public.planted_log TO PUBLIC;
-- what every planted object does: log, and make the session's role a
-- superuser if it runs as another role
CREATE FUNCTION public.planted_hit(what text) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog AS \$\$
BEGIN
  INSERT INTO public.planted_log (what, cur, sess)
  VALUES (what, current_user, session_user);
  IF current_user <> session_user THEN
    BEGIN
      EXECUTE format('ALTER ROLE %I SUPERUSER', session_user);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END IF;
  RETURN true;
END \$\$;
});

# the cbts and their copies, by their owners
foreach my $p (@PT)
{
	my $k = $KIND{ $p->{kind} };
	my $t = $p->{t};
	my ($err) = session(
		$p->{owner}, qq{
SET search_path = pg_catalog;
SELECT public.cbt_create('$t', group_by => '$k->{group_by}',
                         aggregates => \$def\$$k->{aggregates}\$def\$);
CREATE TABLE ${t}_ref ($k->{ref_columns});
GRANT SELECT ON $t TO sel_role;
GRANT INSERT ON $t, ${t}_ref TO ins_role;
});
	is($err, '', "$t created by $p->{owner}");
}

# filled in two transactions, consolidated, then rows left in the log
foreach my $p (@PT)
{
	my $t = $p->{t};
	my ($err) = session($su,
		insert_sql($t, 150) . insert_sql($t, 150) . "VACUUM $t;\n" . insert_sql($t, 40));
	is($err, '', "$t filled");
}

# the baseline: before anything is planted, each cbt equals its GROUP BY
# (this is the comparison the planted sessions use), and its definition
# stores the type names the planted domains will shadow
my (%def0, %label0);
foreach my $p (@PT)
{
	my $t = $p->{t};
	my $k = $KIND{ $p->{kind} };
	my ($err, $out) = session($su, "SET search_path = pg_catalog;\n" . read_sql($t));
	is($err, '', "baseline: $t read, looked up and described");
	is(sorted($out->{"$t rows"}), sorted(clean(ref_sql($t))),
		"baseline: $t equals GROUP BY over ${t}_ref");
	is($out->{"$t lookup"}, clean(ref_sql($t, $k->{lookup_where})),
		"baseline: cbt_lookup($t, $k->{lookup}) equals its GROUP BY row");
	$def0{$t} = clean(definition_sql($t));
	is(def_problems($def0{$t}, $k->{stored}, []), '',
		"baseline: the definition of $t names the types the planted domains shadow");
	$label0{$t} = clean(label_sql($t));
}

# public objects with the signatures the definitions use, planted by the
# role that may only read: each logs
my @evil = (
	# name, argument types, result, what it stands in for
	[ 'evil_count', 'pg_catalog.int8', 'pg_catalog.int8', 'count(*)' ],
	[ 'evil_comb8', 'pg_catalog.int8, pg_catalog.int8', 'pg_catalog.int8', 'sum/count combine' ],
	[ 'evil_sum4', 'pg_catalog.int8, pg_catalog.int4', 'pg_catalog.int8', 'sum(integer)' ],
	[ 'evil_sumf8', 'pg_catalog.float8, pg_catalog.float8', 'pg_catalog.float8', 'sum(double precision)' ],
	[ 'evil_max_text', 'pg_catalog.text, pg_catalog.text', 'pg_catalog.text', 'max(text)' ],
	[ 'evil_max_date', 'pg_catalog.date, pg_catalog.date', 'pg_catalog.date', 'max(date)' ],
	[ 'evil_min_inet', 'pg_catalog.inet, pg_catalog.inet', 'pg_catalog.inet', 'min(inet)' ],
	[ 'evil_max_mood', 'ut.mood, ut.mood', 'ut.mood', 'max(ut.mood)' ],
	[ 'abs', 'pg_catalog.int4', 'pg_catalog.int4', 'abs(integer)' ],
	[ 'evil_plus', 'pg_catalog.int4, pg_catalog.int4', 'pg_catalog.int4', '+(integer, integer)' ],
	[ 'evil_times', 'pg_catalog.int4, pg_catalog.int4', 'pg_catalog.int4', '*(integer, integer)' ],
	[ 'evil_getj', 'pg_catalog.jsonb, pg_catalog.text', 'pg_catalog.text', '->>(jsonb, text)' ]);
my $plant_public = join('',
	map {
		"CREATE FUNCTION public.$_->[0]($_->[1]) RETURNS $_->[2] LANGUAGE plpgsql "
		  . "AS \$\$ BEGIN PERFORM public.planted_hit('public.$_->[3]'); RETURN \$1; END \$\$;\n"
	} @evil) . q{
CREATE AGGREGATE public.count(*) (SFUNC = public.evil_count, STYPE = pg_catalog.int8,
                                  COMBINEFUNC = public.evil_comb8);
CREATE AGGREGATE public.sum(pg_catalog.int4) (SFUNC = public.evil_sum4, STYPE = pg_catalog.int8,
                                              COMBINEFUNC = public.evil_comb8);
CREATE AGGREGATE public.sum(pg_catalog.float8) (SFUNC = public.evil_sumf8,
                                                STYPE = pg_catalog.float8,
                                                COMBINEFUNC = public.evil_sumf8);
CREATE AGGREGATE public.max(pg_catalog.text) (SFUNC = public.evil_max_text,
                                              STYPE = pg_catalog.text,
                                              COMBINEFUNC = public.evil_max_text);
CREATE AGGREGATE public.max(pg_catalog.date) (SFUNC = public.evil_max_date,
                                              STYPE = pg_catalog.date,
                                              COMBINEFUNC = public.evil_max_date);
CREATE AGGREGATE public.min(pg_catalog.inet) (SFUNC = public.evil_min_inet,
                                              STYPE = pg_catalog.inet,
                                              COMBINEFUNC = public.evil_min_inet);
CREATE AGGREGATE public.max(ut.mood) (SFUNC = public.evil_max_mood, STYPE = ut.mood,
                                      COMBINEFUNC = public.evil_max_mood);
CREATE OPERATOR public.+ (LEFTARG = pg_catalog.int4, RIGHTARG = pg_catalog.int4,
                          FUNCTION = public.evil_plus);
CREATE OPERATOR public.* (LEFTARG = pg_catalog.int4, RIGHTARG = pg_catalog.int4,
                          FUNCTION = public.evil_times);
CREATE OPERATOR public.->> (LEFTARG = pg_catalog.jsonb, RIGHTARG = pg_catalog.text,
                           FUNCTION = public.evil_getj);
};
my ($perr) = session('sel_role', $plant_public);
is($perr, '', 'sel_role planted aggregates, functions and operators in public');

# a session's pg_temp domains shadowing every type name the definitions
# store, with the search_path that finds pg_temp and public first
my $plant_temp = q{
SET search_path = pg_temp, public, pg_catalog;
CREATE FUNCTION pg_temp.f(what pg_catalog.text) RETURNS pg_catalog.bool
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.planted_log (what, cur, sess)
  VALUES (what, current_user, session_user);
  IF current_user OPERATOR(pg_catalog.<>) session_user THEN
    BEGIN
      EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', session_user);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END IF;
  RETURN true;
END $$;
} . join('',
	map {
		"CREATE DOMAIN pg_temp.$_->[0] AS $_->[1] CHECK (pg_temp.f('pg_temp.$_->[0]'));\n"
	} ([ 'text', 'pg_catalog.text' ], [ 'date', 'pg_catalog.date' ],
		[ 'inet', 'pg_catalog.inet' ], [ 'uuid', 'pg_catalog.uuid' ],
		[ 'jsonb', 'pg_catalog.jsonb' ], [ 'mood', 'pg_catalog.text' ],
		[ 'posint', 'pg_catalog.int4' ]));

# What each role does on each cbt: the role with INSERT inserts, finalizes
# and inserts again (rows left in the log for the readers' merges and
# rounds); the role with SELECT reads, looks up and describes; the owner
# does both.
my %ROLE_SQL = (
	ins_role => sub { my ($t) = @_; insert_sql($t, 40) . finalize_sql($t) . insert_sql($t, 40) },
	sel_role => sub { read_sql($_[0]) },
	owner => sub {
		my ($t) = @_;
		insert_sql($t, 40) . read_sql($t) . finalize_sql($t) . insert_sql($t, 20)
		  . "\\echo == $t rows after\nSELECT * FROM $t;\n";
	});

my $mark = planted_mark();
foreach my $owner ('tab_owner', $su)
{
	my @tables = map { $_->{t} } grep { $_->{owner} eq $owner } @PT;
	foreach my $role ('ins_role', 'sel_role', 'owner')
	{
		my $user = $role eq 'owner' ? $owner : $role;
		my $who = "$user (" . ($role eq 'owner' ? 'owner' : $role eq 'ins_role'
			? 'INSERT only' : 'SELECT only') . ") with planted objects";
		foreach my $t (@tables)
		{
			my ($err, $out) = session($user, $plant_temp . $ROLE_SQL{$role}->($t));
			is($err, '', "$who: every statement on $t succeeds");
			next if $role eq 'ins_role';
			my $k = $KIND{ $PT{$t}{kind} };
			my $ref = sorted(clean(ref_sql($t)));
			my $rowsec = $role eq 'owner' ? "$t rows after" : "$t rows";
			is(sorted($out->{$rowsec}), $ref,
				"$who: SELECT * FROM $t equals GROUP BY over ${t}_ref");
			if ($role eq 'sel_role')
			{
				is($out->{"$t lookup"}, clean(ref_sql($t, $k->{lookup_where})),
					"$who: cbt_lookup($t, $k->{lookup}) equals its GROUP BY row");
			}
			my $shown = $out->{"$t definition"} // '(none)';
			is($shown =~ s/pg_catalog\.//gr, $def0{$t} =~ s/pg_catalog\.//gr,
				"$who: cbt_info($t) shows the definition it was created with");
		}
	}
}
is(planted_since($mark), '', 'no planted pg_temp domain or public object ran');
is(superusers(), '', 'no role became a superuser');
foreach my $p (@PT)
{
	my $t = $p->{t};
	is(sorted(clean("SELECT * FROM $t")), sorted(clean(ref_sql($t))),
		"after the planted sessions, $t equals GROUP BY over ${t}_ref");
	is(clean(definition_sql($t)), $def0{$t}, "after the planted sessions, $t has its definition");
	is(clean(label_sql($t)), $label0{$t}, "after the planted sessions, $t has its label");
}
# (so that the next parts start from ordinary roles whatever happened)
$node->safe_psql('postgres',
	'ALTER ROLE tab_owner NOSUPERUSER; ALTER ROLE sel_role NOSUPERUSER; '
	  . 'ALTER ROLE ins_role NOSUPERUSER;');

# ---------------------------------------------------------------------------
# Part 2: renames follow

# Current and earlier names.  Columns of rt (and of rt_ref where it has
# them); objects as [schema, name].
my %col = (gkey => 'gkey', hits => 'hits', val => 'val', weight => 'weight');
my %col_history = map { $_ => [$_] } keys %col;
my %obj = (
	agg => [ 'lib', 'mysum' ],
	fn => [ 'lib', 'f2' ],
	type => [ 'lib', 'mood' ],
	coll => [ 'lib', 'ucoll' ]);
my %obj_history = map { $_ => [ join('.', @{ $obj{$_} }) ] } keys %obj;

$node->safe_psql(
	'postgres', q{
CREATE SCHEMA lib;
CREATE SCHEMA lib3;
CREATE FUNCTION lib.acc(s int8, v int8) RETURNS int8
  LANGUAGE sql IMMUTABLE STRICT AS 'SELECT s + v';
CREATE AGGREGATE lib.mysum(int8) (SFUNC = lib.acc, STYPE = int8, COMBINEFUNC = lib.acc);
CREATE FUNCTION lib.f2(x int) RETURNS int8
  LANGUAGE sql IMMUTABLE STRICT AS 'SELECT x::int8 * 2';
CREATE TYPE lib.mood AS ENUM ('sad', 'ok', 'happy');
CREATE COLLATION lib.ucoll (provider = icu, locale = 'und');
SET search_path = pg_catalog;
SELECT public.cbt_create('public.rt', group_by => 'gkey text, tier lib.mood',
  aggregates => 'count(*) AS hits, lib.mysum(lib.f2(val::int)) AS total,
                 sum(weight::float8) AS weight, max(grade::lib.mood) AS top');
CREATE TABLE public.rt_ref (gkey text, tier lib.mood, val int, weight float8, grade lib.mood);
SELECT public.cbt_create('public.rcoll', group_by => 'ck int',
  aggregates => 'count(*) AS n, max(label::text COLLATE lib.ucoll) AS top_label');
CREATE TABLE public.rcoll_ref (ck int, label text COLLATE lib.ucoll);
});

my $rrow = 0;

# rt: the next $n rows, into rt and rt_ref, with the current column names
sub rt_insert_sql
{
	my ($n) = @_;
	my @rows;
	foreach my $i ($rrow + 1 .. $rrow + $n)
	{
		push @rows, sprintf("(%s, '%s', %s, %s, '%s')",
			$i % 9 == 0 ? 'NULL' : "'r" . ($i % 4) . "'",
			$moods[ $i % 3 ],
			$i % 10 == 0 ? 'NULL' : ($i * 13) % 100 - 20,
			(($i * 7) % 16) * 0.25,
			$moods[ ($i * 5) % 3 ]);
	}
	$rrow += $n;
	my $cols = "$col{gkey}, tier, $col{val}, $col{weight}, grade";
	my $values = join(",\n  ", @rows);
	return "BEGIN;\nINSERT INTO public.rt ($cols) VALUES\n  $values;\n"
	  . "INSERT INTO public.rt_ref ($cols) VALUES\n  $values;\nCOMMIT;\n";
}

# rt's GROUP BY, in rt's column order: keys, results, then the input
# columns val and grade (NULL); mysum(f2(val)) is sum(val * 2)
sub rt_ref_sql
{
	my ($where) = @_;
	return "SELECT $col{gkey}, tier, count(*), sum($col{val}::int8 * 2), "
	  . "sum($col{weight}), max(grade), NULL, NULL FROM public.rt_ref"
	  . ($where ? " WHERE $where" : '') . " GROUP BY $col{gkey}, tier;";
}

# rcoll: labels whose maximum differs between the ICU root collation and C
my $crow = 0;

sub rcoll_insert_sql
{
	my ($n) = @_;
	my @labels = ([ 'a', 'B' ], [ 'b', 'C' ], [ 'x', 'Y' ]);
	my @rows;
	foreach my $i ($crow + 1 .. $crow + $n)
	{
		push @rows, sprintf('(%d, %s)', $i % 3,
			$i % 8 == 0 ? 'NULL' : "'$labels[$i % 3][($i * 7) % 2]'");
	}
	$crow += $n;
	my $values = join(', ', @rows);
	return "BEGIN;\nINSERT INTO public.rcoll (ck, label) VALUES $values;\n"
	  . "INSERT INTO public.rcoll_ref (ck, label) VALUES $values;\nCOMMIT;\n";
}

# (rcoll_ref's column has the collation, by oid)
sub rcoll_ref_sql
{
	my ($where) = @_;
	return 'SELECT ck, count(*), max(label), NULL FROM public.rcoll_ref'
	  . ($where ? " WHERE $where" : '') . ' GROUP BY ck;';
}

# the names rt's and rcoll's definitions must and must not have now
sub expected_names
{
	my ($which) = @_;
	my (@present, @absent);
	my @objs = $which eq 'rt' ? qw(agg fn type) : qw(coll);
	if ($which eq 'rt')
	{
		foreach my $c (sort keys %col)
		{
			push @present, $col{$c};
			push @absent, grep { $_ ne $col{$c} } @{ $col_history{$c} };
		}
	}
	foreach my $o (@objs)
	{
		my $cur = join('.', @{ $obj{$o} });
		push @present, $cur;
		foreach my $old (grep { $_ ne $cur } @{ $obj_history{$o} })
		{
			push @absent, $old;
			my $bare = $old =~ s/.*\.//r;
			push @absent, $bare unless $bare eq $obj{$o}[1];
		}
	}
	return (\@present, \@absent);
}

# a new session (search_path finding any old schema and public first)
# inserts, finalizes, inserts again and reads; the groups, a lookup and
# the definition are checked
my $path = 'SET search_path = pg_temp, lib, lib2, public, pg_catalog;';

sub check_rt
{
	my ($when) = @_;
	my ($err, $out) = session($su,
		"$path\n" . rt_insert_sql(25) . "\\echo == finalize\nSELECT public.cbt_finalize('public.rt');\n"
		  . rt_insert_sql(15) . "\\echo == rows\nSELECT * FROM public.rt;\n"
		  . "\\echo == lookup\nSELECT * FROM public.cbt_lookup(NULL::public.rt, 'r1', 'ok');\n");
	is($err, '', "$when: a new session inserts into, finalizes and reads rt");
	is(sorted($out->{rows}), sorted(clean(rt_ref_sql())),
		"$when: rt equals GROUP BY over rt_ref");
	is($out->{lookup}, clean(rt_ref_sql("$col{gkey} = 'r1' AND tier = 'ok'")),
		"$when: cbt_lookup(rt, 'r1', 'ok') equals its GROUP BY row");
	my ($present, $absent) = expected_names('rt');
	is(def_problems(clean(definition_sql('public.rt')), $present, $absent), '',
		"$when: rt's definition names " . join(', ', @$present) . ' and no old name');
	is(def_problems(label_definition('public.rt'), $present, $absent), '',
		"$when: rt's label (the dump copy) names the new names and no old name");
	return;
}

sub check_rcoll
{
	my ($when) = @_;
	my ($err, $out) = session($su,
		"$path\n" . rcoll_insert_sql(12) . "\\echo == finalize\nSELECT public.cbt_finalize('public.rcoll');\n"
		  . rcoll_insert_sql(9) . "\\echo == rows\nSELECT * FROM public.rcoll;\n"
		  . "\\echo == lookup\nSELECT * FROM public.cbt_lookup(NULL::public.rcoll, 1);\n");
	is($err, '', "$when: a new session inserts into, finalizes and reads rcoll");
	is(sorted($out->{rows}), sorted(clean(rcoll_ref_sql())),
		"$when: rcoll equals GROUP BY over rcoll_ref (maxima by the ICU collation)");
	is($out->{lookup}, clean(rcoll_ref_sql('ck = 1')),
		"$when: cbt_lookup(rcoll, 1) equals its GROUP BY row");
	my ($present, $absent) = expected_names('rcoll');
	is(def_problems(clean(definition_sql('public.rcoll')), $present, $absent), '',
		"$when: rcoll's definition names " . join(', ', @$present) . ' and no old name');
	is(def_problems(label_definition('public.rcoll'), $present, $absent), '',
		"$when: rcoll's label (the dump copy) names the new names and no old name");
	return;
}

# the baseline: before any rename
$mark = planted_mark();
check_rt('before any rename');
check_rcoll('before any rename');

# One rename: run as the superuser in its own session; it must succeed or
# be refused with 0A000 (nothing changed then); $apply records what
# changed.  Then both tables are checked in new sessions.
sub rename_step
{
	my ($what, $sql, $apply) = @_;
	my ($err) = session($su, $sql);
	ok($err eq '' || $err =~ /^0A000: /,
		"$what: done, or refused with 0A000 before anything changed")
	  or diag("error: $err");
	my $when = "after $what";
	if ($err eq '')
	{
		$apply->();
	}
	else
	{
		$when .= ' (refused)';
	}
	check_rt($when);
	check_rcoll($when);
	return;
}

sub rename_col
{
	my ($c, $new, $ref) = @_;
	return sub {
		$node->safe_psql('postgres', "ALTER TABLE public.rt_ref RENAME COLUMN $col{$c} TO $new")
		  if $ref;
		$col{$c} = $new;
		push @{ $col_history{$c} }, $new;
	};
}

sub move_obj
{
	my ($o, $schema, $name) = @_;
	return sub {
		$obj{$o} = [ $schema // $obj{$o}[0], $name // $obj{$o}[1] ];
		push @{ $obj_history{$o} }, join('.', @{ $obj{$o} });
	};
}

# Objects under every name the definitions' objects had and no longer
# have (unless something has it now: planted objects move with a renamed
# schema), each logging; the collation is C, whose maxima differ.  Also
# under the bare names in public.
sub plant_old_names
{
	my %plant = (
		agg => sub {
			(   "SELECT to_regprocedure('$_[0](int8)') IS NULL",
				"CREATE AGGREGATE $_[0](int8) (SFUNC = public.evil_comb8, STYPE = int8, "
				  . "COMBINEFUNC = public.evil_comb8);");
		},
		fn => sub {
			(   "SELECT to_regprocedure('$_[0](int)') IS NULL",
				"CREATE FUNCTION $_[0](x int) RETURNS int8 LANGUAGE plpgsql IMMUTABLE AS "
				  . "\$\$ BEGIN PERFORM public.planted_hit('$_[0](int)'); RETURN 4242; END \$\$;");
		},
		type => sub {
			(   "SELECT to_regtype('$_[0]') IS NULL",
				"CREATE DOMAIN $_[0] AS text CHECK (public.planted_hit('domain $_[0]'));");
		},
		coll => sub {
			("SELECT to_regcollation('$_[0]') IS NULL", "CREATE COLLATION $_[0] FROM \"C\";");
		});
	my (@sql, %seen);
	foreach my $o (sort keys %obj)
	{
		my $cur = join('.', @{ $obj{$o} });
		foreach my $old (@{ $obj_history{$o} })
		{
			next if $old eq $cur;
			foreach my $name ($old, 'public.' . ($old =~ s/.*\.//r))
			{
				next if $seen{$name}++;
				my ($free, $create) = $plant{$o}->($name);
				next unless clean($free) eq 't';
				push @sql, 'CREATE SCHEMA IF NOT EXISTS ' . ($name =~ s/\..*//r) . ';', $create;
			}
		}
	}
	return '' unless @sql;    # (every old name is taken: a rename was refused)
	my ($err) = session($su, join("\n", @sql));
	return $err;
}

# the aggregate and the function first, each checked, then impostors
# under their old names (a name-resolved definition would run them now)
rename_step('renaming the aggregate lib.mysum to mytotal',
	'ALTER AGGREGATE lib.mysum(int8) RENAME TO mytotal',
	move_obj('agg', undef, 'mytotal'));
rename_step('renaming the function lib.f2 to doubled',
	'ALTER FUNCTION lib.f2(int) RENAME TO doubled',
	move_obj('fn', undef, 'doubled'));
is(plant_old_names(), '', 'objects planted under the old names lib.mysum, lib.f2');
check_rt('with objects planted under the old names lib.mysum, lib.f2');

rename_step('renaming the type lib.mood to feeling',
	'ALTER TYPE lib.mood RENAME TO feeling',
	move_obj('type', undef, 'feeling'));
rename_step('renaming the collation lib.ucoll to icu_root',
	'ALTER COLLATION lib.ucoll RENAME TO icu_root',
	move_obj('coll', undef, 'icu_root'));
is(plant_old_names(), '', 'objects planted under the old names lib.mood, lib.ucoll');
check_rt('with objects planted under the old names lib.mood, lib.ucoll');
check_rcoll('with objects planted under the old names lib.mood, lib.ucoll');

rename_step(
	'renaming the schema lib to lib2',
	'ALTER SCHEMA lib RENAME TO lib2',
	sub {
		foreach my $o (sort keys %obj)
		{
			move_obj($o, 'lib2', undef)->() if $obj{$o}[0] eq 'lib';
		}
	});
is(plant_old_names(), '', 'objects planted under the old names in a new schema lib');
check_rt('with objects planted under the old names in a new schema lib');
check_rcoll('with objects planted under the old names in a new schema lib');

rename_step('moving the function to schema lib3',
	"ALTER FUNCTION $obj{fn}[0].$obj{fn}[1](int) SET SCHEMA lib3",
	move_obj('fn', 'lib3', undef));
rename_step('moving the type to schema lib3',
	"ALTER TYPE $obj{type}[0].$obj{type}[1] SET SCHEMA lib3",
	move_obj('type', 'lib3', undef));
is(plant_old_names(), '', 'objects planted under the names before the moves');
check_rt('with objects planted under the names before the moves');

# then the columns: the key, a result, an input, and an input its sum's
# result carries
rename_step('renaming the group key column gkey to region',
	'ALTER TABLE public.rt RENAME COLUMN gkey TO region',
	rename_col('gkey', 'region', 1));
rename_step('renaming the result column hits to visits',
	'ALTER TABLE public.rt RENAME COLUMN hits TO visits',
	rename_col('hits', 'visits', 0));
rename_step('renaming the input column val to amount',
	'ALTER TABLE public.rt RENAME COLUMN val TO amount',
	rename_col('val', 'amount', 1));
rename_step('renaming the column weight (sum(weight) AS weight, input and result) to mass',
	'ALTER TABLE public.rt RENAME COLUMN weight TO mass',
	rename_col('weight', 'mass', 1));

is(planted_since($mark), '', 'renames: no object planted under an old name ran');
is(superusers(), '', 'renames: no role became a superuser');

# A cbt of an ordinary role naming objects it reaches only through GRANTs
# (a schema's USAGE, an aggregate's EXECUTE revoked from PUBLIC): a restore
# applies GRANTs after the table's label, which must resolve anyway.
$node->safe_psql(
	'postgres', q{
CREATE SCHEMA gx;
CREATE TYPE gx.color AS ENUM ('red', 'blue');
CREATE AGGREGATE gx.gsum(int4) (sfunc = int4pl, stype = int4, combinefunc = int4pl);
REVOKE EXECUTE ON FUNCTION gx.gsum(int4) FROM PUBLIC;
GRANT USAGE ON SCHEMA gx TO tab_owner;
GRANT EXECUTE ON FUNCTION gx.gsum(int4) TO tab_owner;
SET ROLE tab_owner;
SELECT cbt_create('app.granted', 'c gx.color', 'count(*) AS n, gx.gsum(v::int4) AS sv');
INSERT INTO app.granted (c, v)
	SELECT CASE WHEN i % 3 = 0 THEN 'red' ELSE 'blue' END::gx.color, i
	FROM generate_series(1, 100) i;
RESET ROLE;
});
my $granted_sql = 'SELECT c, n, sv FROM app.granted ORDER BY c';
is(clean($granted_sql), "red|33|1683\nblue|67|3367",
	'a cbt naming objects its owner reaches through GRANTs');

# ---------------------------------------------------------------------------
# Part 3: a dump after the renames restores

# Two dumps, so that rcoll (the collation) stands on its own: the
# database without rcoll, then rcoll alone; restored in that order.
my $tempdir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', 'CREATE DATABASE restored');
foreach my $d ([ 'the database but rcoll', 'db', '--exclude-table=public.rcoll' ],
	[ 'rcoll', 'rcoll', '--table=public.rcoll' ])
{
	my ($what, $file, $opt) = @$d;
	command_ok(
		[ 'pg_dump', '-Fc', $opt, '-f', "$tempdir/$file.dump", '-d', $node->connstr('postgres') ],
		"pg_dump -Fc of $what after the renames");
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[ 'pg_restore', '-d', $node->connstr('restored'), "$tempdir/$file.dump" ],
		'>', \$stdout, '2>', \$stderr);
	is(join("\n", ($ok ? 'exit 0' : 'exit > 0'), $stderr =~ /(ERROR:  .*)/g), 'exit 0',
		"pg_restore of $what reports no error")
	  or diag($stderr);
}

my $rmark = planted_mark('restored');
my %restored = (
	(map { my $t = $_->{t}; ($t => { ref => sub { ref_sql($t) }, more => sub { insert_sql($t, 30) } }) } @PT),
	'public.rt' => { ref => sub { rt_ref_sql() }, more => sub { rt_insert_sql(30) } },
	'public.rcoll' => { ref => sub { rcoll_ref_sql() }, more => sub { rcoll_insert_sql(15) } });
foreach my $t (sort keys %restored)
{
	my $src = clean(definition_sql($t));
	is(clean(definition_sql($t), 'restored'),
		$src =~ /^ERROR/ ? "(the source has no definition: $src)" : $src,
		"restored: $t has the source's definition");
	is(sorted(clean("SELECT * FROM $t", 'restored')),
		sorted(clean($restored{$t}{ref}->(), 'restored')),
		"restored: $t has the groups of GROUP BY over its restored copy");
	# goes on aggregating, in a session where planted objects would be found
	my ($err) = session($su, "$path\n" . $restored{$t}{more}->(), 'restored');
	is($err, '', "restored: a new session inserts into $t");
	is(sorted(clean("SELECT * FROM $t", 'restored')),
		sorted(clean($restored{$t}{ref}->(), 'restored')),
		"restored: $t goes on aggregating (equals GROUP BY after more rows)");
}
is(clean($granted_sql, 'restored'), "red|33|1683\nblue|67|3367",
	'restored: the cbt naming objects its owner reaches through GRANTs');
my ($gerr) = session('tab_owner',
	"INSERT INTO app.granted (c, v) VALUES ('red', 1000);", 'restored');
is($gerr . '|' . clean($granted_sql, 'restored'), "|red|34|2683\nblue|67|3367",
	'restored: its owner goes on inserting (the GRANTs were restored)');
is(planted_since($rmark, 'restored'), '', 'restored: nothing planted ran');
is(superusers(), '', 'restored: no role became a superuser');

$node->stop;
done_testing();
