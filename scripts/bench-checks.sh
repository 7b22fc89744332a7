#!/usr/bin/env bash
# scripts/bench-checks.sh -- lookup throughput of two private installations
# side by side (issue 9: the cost of the data-page checks).
#
#   bash scripts/bench-checks.sh BEFORE_TREE AFTER_TREE [ROUNDS]
#
# Each tree is a private installation (scripts/setup.sh, ss_private_tree +
# make install DESTDIR=...).  One cluster per tree (ports 5662 and 5663,
# shared_buffers 256MB, everything cached), the same structures in both
# (100,000 keys, flushed or vacuumed), then ROUNDS (default 7) alternating
# rounds of one statement of 600,000 lookups per structure, timed by the
# server (EXPLAIN ANALYZE execution time, ms).  Prints one line per round
# and structure; run as root (the clusters run as postgres).
set -euo pipefail
BEFORE=$1
AFTER=$2
ROUNDS=${3:-7}
BIN=/usr/lib/postgresql/15/bin
W=/tmp/ss-bench-checks
rm -rf $W
mkdir -p $W
chown postgres $W
PORTS=(5662 5663)
TREES=("$BEFORE" "$AFTER")
NAMES=(before after)
run() { su postgres -c "$*"; }
for i in 0 1; do
	run "${TREES[$i]}$BIN/initdb -D $W/${NAMES[$i]} >/dev/null"
	cat >>$W/${NAMES[$i]}/postgresql.conf <<CONF
port = ${PORTS[$i]}
shared_buffers = 256MB
autovacuum = off
fsync = off
unix_socket_directories = '$W'
CONF
	run "${TREES[$i]}$BIN/pg_ctl -D $W/${NAMES[$i]} -l $W/${NAMES[$i]}.log -w start >/dev/null"
	run "${TREES[$i]}$BIN/psql -X -q -h $W -p ${PORTS[$i]} -d postgres" <<'SQL'
CREATE EXTENSION streamsketch;
SELECT bcms_create('b', 'int8', epsilon => 0.0001, delta => 0.01);
SELECT bloom_create('f', 'int8', capacity => 1000000, fp_rate => 0.001, mode => 'localized');
SELECT qf_create('q', 'int8', capacity => 1000000, fp_rate => 0.001);
SELECT qf_create('c', 'int8', capacity => 1000000, fp_rate => 0.001, access_method => 'cascade_filter');
INSERT INTO b SELECT g FROM generate_series(1, 100000) g;
INSERT INTO f SELECT g FROM generate_series(1, 100000) g;
INSERT INTO q SELECT g FROM generate_series(1, 100000) g;
INSERT INTO c SELECT g FROM generate_series(1, 100000) g;
SELECT bcms_flush('b'), bloom_flush('f');
VACUUM q;
VACUUM c;
SQL
done
declare -A Q=(
	[bcms_estimate]="SELECT sum(bcms_estimate('b', g::int8)) FROM generate_series(1, 600000) g"
	[bloom_contains]="SELECT count(*) FILTER (WHERE bloom_contains('f', g::int8)) FROM generate_series(1, 600000) g"
	[qf_contains]="SELECT count(*) FILTER (WHERE qf_contains('q', g::int8)) FROM generate_series(1, 600000) g"
	[cf_qf_contains]="SELECT count(*) FILTER (WHERE qf_contains('c', g::int8)) FROM generate_series(1, 600000) g")
for r in $(seq 1 "$ROUNDS"); do
	for q in bcms_estimate bloom_contains qf_contains cf_qf_contains; do
		# alternate which installation goes first
		order=(0 1)
		[ $((r % 2)) -eq 0 ] && order=(1 0)
		for i in "${order[@]}"; do
			ms=$(run "${TREES[$i]}$BIN/psql -X -A -t -h $W -p ${PORTS[$i]} -d postgres -c \"EXPLAIN (ANALYZE, FORMAT JSON) ${Q[$q]}\"" |
				grep -o '"Execution Time": [0-9.]*' | grep -o '[0-9.]*$')
			echo "round $r $q ${NAMES[$i]} $ms"
		done
	done
done
for i in 0 1; do run "${TREES[$i]}$BIN/pg_ctl -D $W/${NAMES[$i]} -m fast stop >/dev/null"; done
