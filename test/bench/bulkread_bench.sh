#!/usr/bin/env bash
# bulkread_bench.sh -- do whole-structure reads and merges keep the rest of
# shared_buffers?  A cached OLTP table (heap and primary key, loaded with
# pg_prewarm) beside structures several times shared_buffers, with an OLTP
# workload (pgbench, one client, random primary-key lookups) running
# before, during and after each operation:
#   cbt    SELECT count(*) over a cbt (a whole-relation scan)
#   qf     qf_resize of a cascade_filter: every level merged into one twice
#          the largest (a merge that reads the levels and writes the result)
#   lert   lert_flush of a count_stretch lert: every run merged
# For each, the OLTP table's pages in shared_buffers (pg_buffercache)
# before and after, and its hit ratio (pg_statio_user_tables: heap and
# index blocks hit / (hit + read)) over the workload before, during and
# after the operation.  Structures read whole relations and merge sources
# through a small ring of buffers (BAS_BULKREAD) and write merge output
# through a bulk-write ring (BAS_BULKWRITE), as heap scans and COPY do;
# with the default strategy an operation evicts the table.
#
# Usage (as root, from the repository root):
#   bash test/bench/bulkread_bench.sh
# Environment: PARTS (cbt,qf,lert), SB (shared_buffers, 64MB), OLTP_ROWS
# (100000, about 27 MB), NGROUPS (cbt groups, 3000000), QF_KEYS
# (12000000), LERT_KEYS (4000000), OLTP_SECS (seconds of workload before
# and after, 5), LABEL (the build's name in the table, default the git
# head), RESULTS (tab-separated results, one row per label and part,
# test/bench/bulkread_bench_results.tsv), OUT_MD (docs/bench-bulkread.md,
# written from every label in RESULTS, so two builds sit side by side).
# Prints each part's numbers.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
WORK=${WORK:-/var/tmp/streamsketch-bulkread}
PARTS=${PARTS:-cbt,qf,lert}
SB=${SB:-64MB}
OLTP_ROWS=${OLTP_ROWS:-100000}
NGROUPS=${NGROUPS:-3000000}
QF_KEYS=${QF_KEYS:-12000000}
LERT_KEYS=${LERT_KEYS:-4000000}
OLTP_SECS=${OLTP_SECS:-5}
PORT=${PORT:-5690}
LABEL=${LABEL:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}
RESULTS=${RESULTS:-$REPO/test/bench/bulkread_bench_results.tsv}
OUT_MD=${OUT_MD:-$REPO/docs/bench-bulkread.md}
# shellcheck source=test/bench/benchlib.sh
source test/bench/benchlib.sh
bench_prepare bulkread_bench
BIN="$WORK/pg$(pg_config --bindir)"
as_pg() { su postgres -s /bin/sh -c "$*"; }
as_pg "$BIN/initdb -D $WORK/data -A trust >/dev/null"
cat >>"$WORK/data/postgresql.conf" <<EOF
port = $PORT
unix_socket_directories = '$WORK'
shared_buffers = $SB
autovacuum = off
max_wal_size = 4GB
EOF
as_pg "$BIN/pg_ctl -D $WORK/data -l $WORK/log -w start >/dev/null"
# the cluster and its files go at exit, unless STREAMSKETCH_KEEP=1
cleanup() {
	touch "$WORK/stop" 2>/dev/null || true
	as_pg "$BIN/pg_ctl -D $WORK/data -m fast stop" >/dev/null 2>&1 || true
	[ "${STREAMSKETCH_KEEP:-}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
# run SQL (stdin) as postgres; prints the unaligned result
psql_() { as_pg "$BIN/psql -h $WORK -p $PORT -d postgres -X -q -At -v ON_ERROR_STOP=1 -f -"; }
psql_ <<SQL
CREATE EXTENSION streamsketch;
CREATE EXTENSION pg_buffercache;
CREATE EXTENSION pg_prewarm;
CREATE TABLE oltp (id int PRIMARY KEY, pad text);
INSERT INTO oltp SELECT g, repeat('x', 200) FROM generate_series(1, $OLTP_ROWS) g;
VACUUM ANALYZE oltp;
SQL
cat >"$WORK/oltp.sql" <<EOF
\\set id random(1, $OLTP_ROWS)
SELECT pad FROM oltp WHERE id = :id;
EOF
chown postgres "$WORK/oltp.sql"
cached="SELECT count(*) FROM pg_buffercache b JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid) WHERE c.relname IN ('oltp', 'oltp_pkey');"
# hit and read blocks of the table and its index so far
statio="SELECT heap_blks_hit + coalesce(idx_blks_hit, 0), heap_blks_read + coalesce(idx_blks_read, 0) FROM pg_statio_user_tables WHERE relname = 'oltp';"
pgbench_() { as_pg "$BIN/pgbench -h $WORK -p $PORT -n -M prepared -c 1 -f $WORK/oltp.sql $* postgres" >/dev/null 2>&1; }
# the hit ratio between two statio samples "hit|read"
ratio() {
	python3 -c "
h0, r0 = map(int, '$1'.split('|')); h1, r1 = map(int, '$2'.split('|'))
h, r = h1 - h0, r1 - r0
print('%.4f' % (h / (h + r)) if h + r else 'n/a')"
}

# measure PART DESCRIPTION SQL: restart (empty shared_buffers), prewarm the
# table, then the workload alone, the workload during SQL, and alone again
measure() {
	local part=$1 desc=$2 sql=$3 size before after s0 s1 s2 s3 start secs loop
	size=$(echo "SELECT pg_size_pretty(pg_total_relation_size('$part'));" | psql_)
	as_pg "$BIN/pg_ctl -D $WORK/data -l $WORK/log -w restart >/dev/null"
	echo "SELECT pg_prewarm('oltp') + pg_prewarm('oltp_pkey');" | psql_ >/dev/null
	before=$(echo "$cached" | psql_)
	s0=$(echo "$statio" | psql_)
	pgbench_ -T "$OLTP_SECS"
	s1=$(echo "$statio" | psql_)
	rm -f "$WORK/stop"
	(while [ ! -f "$WORK/stop" ]; do pgbench_ -T 1; done) &
	loop=$!
	start=$(date +%s.%N)
	echo "$sql" | psql_ >/dev/null
	secs=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
	touch "$WORK/stop"
	wait "$loop"
	after=$(echo "$cached" | psql_)
	s2=$(echo "$statio" | psql_)
	pgbench_ -T "$OLTP_SECS"
	s3=$(echo "$statio" | psql_)
	local r1 r2 r3
	r1=$(ratio "$s0" "$s1")
	r2=$(ratio "$s1" "$s2")
	r3=$(ratio "$s2" "$s3")
	echo "$desc ($size, shared_buffers $SB): $secs s; oltp pages cached $before -> $after; oltp hit ratio before $r1, during $r2, after $r3"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$LABEL" "$part" "$desc" "$size" "$secs" \
		"$before" "$after" "$r1" "$r2" "$r3" >>"$WORK/results.tsv"
}

: >"$WORK/results.tsv"
case ",$PARTS," in *,cbt,*)
	echo "SELECT cbt_create('big', 'k int8', 'count(*) AS n, sum(v::int) AS s', compression => false);" | psql_ >/dev/null
	echo "INSERT INTO big (k, v) SELECT g, g FROM generate_series(1, $NGROUPS) g; SELECT cbt_finalize('big');" | psql_ >/dev/null
	measure big "cbt: SELECT count(*)" "SELECT count(*) FROM big;"
	echo "DROP TABLE big;" | psql_ >/dev/null
esac
case ",$PARTS," in *,qf,*)
	# large fingerprints (30 remainder bits): a few bytes a key
	echo "SELECT qf_create('cf', 'int8', capacity => 100000000, fp_rate => 1e-9, access_method => 'cascade_filter', fanout => 4, buffer_size => '1MB');" | psql_ >/dev/null
	for ((i = 0; i < QF_KEYS; i += 2000000)); do
		echo "INSERT INTO cf SELECT g FROM generate_series($i + 1, $((i + 2000000 < QF_KEYS ? i + 2000000 : QF_KEYS))) g;" | psql_ >/dev/null
	done
	echo "SELECT qf_info('cf');" | psql_ >"$WORK/qf_info.txt"
	measure cf "cascade_filter: qf_resize (merge of every level)" "SELECT qf_resize('cf');"
	echo "DROP TABLE cf;" | psql_ >/dev/null
esac
case ",$PARTS," in *,lert,*)
	echo "SELECT lert_create('lt', 'int8', threshold => 24, variant => 'count_stretch', buffer_size => '1MB');" | psql_ >/dev/null
	for ((i = 0; i < LERT_KEYS; i += 1000000)); do
		echo "INSERT INTO lt SELECT g FROM generate_series($i + 1, $((i + 1000000 < LERT_KEYS ? i + 1000000 : LERT_KEYS))) g;" | psql_ >/dev/null
	done
	measure lt "lert count_stretch: lert_flush (merge of every run)" "SELECT lert_flush('lt');"
	echo "DROP TABLE lt;" | psql_ >/dev/null
esac

# results: this label's rows replace its earlier ones; the table lists every label
touch "$RESULTS"
python3 - "$RESULTS" "$WORK/results.tsv" "$LABEL" "$OUT_MD" "$OLTP_ROWS" "$OLTP_SECS" <<'PY'
import sys
results, new, label, out_md, rows, secs = sys.argv[1:]
old = [l for l in open(results).read().splitlines() if l and l.split("\t")[0] != label]
fresh = [l for l in open(new).read().splitlines() if l]
kept = [l for l in old if (l.split("\t")[0], l.split("\t")[1]) not in
        {(f.split("\t")[0], f.split("\t")[1]) for f in fresh}]
lines = kept + fresh
open(results, "w").write("".join(l + "\n" for l in lines))
md = ["# Whole-structure reads and merges beside an OLTP table",
      "",
      "Written by `test/bench/bulkread_bench.sh`. A cached OLTP table (%s rows,"
      " heap and primary key, prewarmed) beside each structure; one pgbench"
      " client does random primary-key lookups for %s s before the operation,"
      " during it, and %s s after it. *Cached*: the table's pages in"
      " shared_buffers (pg_buffercache) before and after the operation. *Hit"
      " ratio*: the table's heap and index blocks hit / (hit + read)"
      " (pg_statio_user_tables) over each window. Each build is labelled by"
      " its commit." % (rows, secs, secs),
      "",
      "| build | operation | structure | time (s) | cached before → after | hit ratio before | during | after |",
      "|---|---|---|---:|---|---:|---:|---:|"]
for l in lines:
    b, part, desc, size, t, cb, ca, r1, r2, r3 = l.split("\t")
    md.append("| %s | %s | %s | %s | %s → %s | %s | %s | %s |" % (b, desc, size, t, cb, ca, r1, r2, r3))
open(out_md, "w").write("\n".join(md) + "\n")
PY
echo "results: $RESULTS, table: $OUT_MD"
