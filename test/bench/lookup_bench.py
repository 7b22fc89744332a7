#!/usr/bin/python3
"""
Plain SQL lookups: a point query (or a time range) asked of a structure by
a SQL predicate, which the planner answers with the structure's lookup
path, against the same question asked through the structure's function,
and against a heap table with a btree index holding the same answer (an
upsert table of the groups, a table of the reports, the sampled rows).

Run as root through test/bench/lookup_bench.sh (which builds and installs
the extension into a private tree first).  One throwaway cluster under
$WORK (default /tmp/ssbench-lookup), shared_buffers SB_MB (everything in
RAM: this measures the lookups' CPU and page touches, not the disk),
background workers on (the default; nothing is pending while measuring).

Per structure: the structure and its btree twin are loaded from one
stream; then, per variant (SQL predicate, function, btree table):
  * latency: pgbench, one client, prepared statements, QUERIES queries
    with a random key (or window start) each, in ROUNDS rounds that
    alternate the variants; p50 and p99 of the per-query latencies
    pgbench logs (client round trip included, the same for every
    variant);
  * page touches per query: EXPLAIN (ANALYZE, BUFFERS) of EXPLAINS random
    queries, the top plan node's shared buffers hit + read (planning
    excluded), averaged;
  * a join with a 100-row outer table (a nested loop probing per row):
    latency p50/p99 over JOINS runs, the plan's shape, and its answer,
    which must equal the btree table's.

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import env_int, log, psql  # noqa: E402

CONFIG = dict(
    STRUCTS=os.environ.get("STRUCTS", "cbt,lert,lert_counts,bfile").split(","),
    KEYS=env_int("KEYS", 500_000),          # cbt groups; lert keys
    ROWS=env_int("ROWS", 2_000_000),        # stream rows per structure
    BATCH=env_int("BATCH", 100_000),        # rows per INSERT transaction
    QUERIES=env_int("QUERIES", 20_000),     # point queries per variant
    EXPLAINS=env_int("EXPLAINS", 200),      # queries measured for page touches
    JOINS=env_int("JOINS", 300),            # 100-row joins per variant
    ROUNDS=env_int("ROUNDS", 5),            # rounds alternating the variants
    WINDOW=env_int("WINDOW", 1000),         # bfile: positions per time range
    SB_MB=env_int("SB_MB", 1024),
    PORT=env_int("PORT", 5483),
    WORK=os.environ.get("WORK", "/tmp/ssbench-lookup"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-lookup.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-lookup.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "lookup_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["SB_MB"])

# Per structure: the stream into the structure and its btree twin, then
# the variants.  A query template takes {k} (a pgbench variable or, for
# EXPLAIN, a literal); the join templates read the 100-row table probe_S.
STRUCTS = {
    "cbt": dict(
        label="cbt: a group by its key",
        setup=[
            "SELECT cbt_create('views', group_by => 'url text', "
            "aggregates => 'count(*) AS n, sum(v::int8) AS s')",
            "CREATE TABLE views_btree (url text PRIMARY KEY, n int8, s int8)",
        ],
        batch="INSERT INTO views (url, v) SELECT 'u' || (hashint8extended(g, 1) & 9223372036854775807) % {keys}, g "
              "FROM generate_series({lo}, {hi}) g",
        finish=[
            "SELECT cbt_finalize('views')",
            "INSERT INTO views_btree SELECT url, n, s FROM views",
            "VACUUM ANALYZE views_btree",
            "ANALYZE views",
            "CREATE TABLE probe_cbt AS SELECT 'u' || (hashint8extended(g, 7) & 9223372036854775807) % {keys} "
            "AS url FROM generate_series(1, 100) g",
            "ANALYZE probe_cbt",
        ],
        key="'u' || {k}",
        key_range="{keys}",
        variants=[
            ("SQL predicate", "SELECT * FROM views WHERE url = 'u' || {k}"),
            ("function", "SELECT * FROM cbt_lookup(NULL::views, 'u' || {k})"),
            ("btree table", "SELECT * FROM views_btree WHERE url = 'u' || {k}"),
        ],
        joins=[
            ("SQL predicate", "SELECT count(*), sum(p.n), sum(p.s) FROM probe_cbt e JOIN views p ON p.url = e.url"),
            ("function", "SELECT count(*), sum(p.n), sum(p.s) FROM probe_cbt e, "
                         "LATERAL cbt_lookup(NULL::views, e.url) p"),
            ("btree table", "SELECT count(*), sum(p.n), sum(p.s) FROM probe_cbt e "
                            "JOIN views_btree p ON p.url = e.url"),
        ],
        path="cbt lookup"),
    "lert": dict(
        label="lert: a key's report",
        setup=[
            "SELECT lert_create('hh', 'int8', threshold => 24)",
            "CREATE TABLE hh_btree (key int8 PRIMARY KEY)",
        ],
        # Zipf-like: a log-uniform rank, so that a share of the keys reach T
        batch="INSERT INTO hh SELECT floor(exp(((hashint8extended(g, 3) & 4294967295)::float8 "
              "/ 4294967296.0) * ln({keys}::float8)))::int8 FROM generate_series({lo}, {hi}) g",
        finish=[
            "SELECT lert_flush('hh')",
            "INSERT INTO hh_btree SELECT key FROM hh",
            "VACUUM ANALYZE hh_btree",
            "ANALYZE hh",
            "CREATE TABLE probe_lert AS SELECT (hashint8extended(g, 7) & 9223372036854775807) % 2000 "
            "AS key FROM generate_series(1, 100) g",
            "ANALYZE probe_lert",
        ],
        key_range="2000",
        variants=[
            ("SQL predicate", "SELECT * FROM hh WHERE key = {k}::int8"),
            ("function", "SELECT lert_reported('hh', {k}::int8)"),
            ("btree table", "SELECT * FROM hh_btree WHERE key = {k}::int8"),
        ],
        joins=[
            ("SQL predicate", "SELECT count(*) FROM probe_lert e JOIN hh p ON p.key = e.key"),
            ("function", "SELECT count(*) FROM probe_lert e WHERE lert_reported('hh', e.key)"),
            ("btree table", "SELECT count(*) FROM probe_lert e JOIN hh_btree p ON p.key = e.key"),
        ],
        path="lert lookup"),
    "lert_counts": dict(
        label="lert: a key's exact count",
        # the lert of "lert" above (run it first), its counts as a view
        setup=[
            "CREATE VIEW hh_counts AS SELECT * FROM lert_counts('hh', NULL::int8)",
            "CREATE TABLE hh_counts_btree AS SELECT k AS key, count(*) AS count FROM "
            "(SELECT floor(exp(((hashint8extended(g, 3) & 4294967295)::float8 / 4294967296.0) "
            "* ln({keys}::float8)))::int8 AS k FROM generate_series(1, {rows}) g) s GROUP BY k",
            "ALTER TABLE hh_counts_btree ADD PRIMARY KEY (key)",
            "VACUUM ANALYZE hh_counts_btree",
        ],
        batch=None,
        finish=[],
        key_range="{keys}",
        variants=[
            ("SQL predicate", "SELECT count FROM hh_counts WHERE key = {k}::int8"),
            ("function", "SELECT lert_count('hh', {k}::int8)"),
            ("btree table", "SELECT count FROM hh_counts_btree WHERE key = {k}::int8"),
        ],
        joins=[
            ("SQL predicate", "SELECT count(*), sum(p.count) FROM probe_lert e "
                              "JOIN hh_counts p ON p.key = e.key"),
            ("function", "SELECT count(*), sum(c) FROM probe_lert e, "
                         "LATERAL lert_count('hh', e.key) c WHERE c > 0"),
            ("btree table", "SELECT count(*), sum(p.count) FROM probe_lert e "
                            "JOIN hh_counts_btree p ON p.key = e.key"),
        ],
        path="lert counts"),
    "bfile": dict(
        label="bfile: a time range of the sample",
        setup=[
            "SELECT bfile_create('readings', 'id int8, ts int8 NOT NULL, v float8', "
            "sample_size => {rows}, time_column => 'ts')",
            "CREATE TABLE readings_btree (id int8, ts int8 NOT NULL, v float8)",
        ],
        batch="INSERT INTO readings SELECT g, g, g * 0.5 FROM generate_series({lo}, {hi}) g",
        finish=[
            "VACUUM readings",
            "INSERT INTO readings_btree SELECT * FROM readings",
            "CREATE INDEX ON readings_btree (ts)",
            "VACUUM ANALYZE readings_btree",
            "ANALYZE readings",
            "CREATE TABLE probe_bfile AS SELECT (hashint8extended(g, 7) & 9223372036854775807) % {rows} "
            "AS ts FROM generate_series(1, 100) g",
            "ANALYZE probe_bfile",
        ],
        key_range="{rows}",
        variants=[
            ("SQL predicate", "SELECT count(*), sum(v) FROM readings "
                              "WHERE ts >= {k}::int8 AND ts < {k}::int8 + {window}"),
            ("function", "SELECT count(*), sum(v) FROM bfile_window(NULL::readings, {k}::int8, "
                         "{k}::int8 + {window} - 1)"),
            ("btree table", "SELECT count(*), sum(v) FROM readings_btree "
                            "WHERE ts >= {k}::int8 AND ts < {k}::int8 + {window}"),
        ],
        joins=[
            ("SQL predicate", "SELECT count(*), sum(p.v) FROM probe_bfile e JOIN readings p "
                              "ON p.ts >= e.ts AND p.ts < e.ts + 10"),
            ("function", "SELECT count(*), sum(p.v) FROM probe_bfile e, "
                         "LATERAL bfile_window(NULL::readings, e.ts, e.ts + 9) p"),
            ("btree table", "SELECT count(*), sum(p.v) FROM probe_bfile e JOIN readings_btree p "
                            "ON p.ts >= e.ts AND p.ts < e.ts + 10"),
        ],
        path="bfile window"),
}


def fill(text):
    return text.format(keys=C["KEYS"], rows=C["ROWS"], window=C["WINDOW"], k="{k}",
                       lo="{lo}", hi="{hi}")


def load(name, s):
    for q in s["setup"]:
        psql(fill(q))
    for lo in range(1, C["ROWS"] + 1, C["BATCH"]) if s["batch"] else ():
        hi = min(lo + C["BATCH"] - 1, C["ROWS"])
        psql(fill(s["batch"]).format(lo=lo, hi=hi))
    for q in s["finish"]:
        psql(fill(q))
    log(f"{name}: loaded")


def pgbench_latencies(name, sql, count, key_range):
    """Latencies (us) of count runs of sql, one client, prepared."""
    script = L.write_sql(f"{name}.pgb", f"\\set k random(0, {key_range} - 1)\n{sql.format(k=':k')};\n")
    return L.pgbench_latencies(script, C["PORT"], count)


def interleaved(name, queries, count, key_range):
    """Per variant (label, sql): the latency percentiles of count runs,
    run in ROUNDS rounds that alternate the variants (so that a busy
    moment of the machine hits them alike)."""
    lats = {label: [] for label, _ in queries}
    for r in range(C["ROUNDS"]):
        for label, q in queries:
            lats[label] += pgbench_latencies(f"{name}_{label.split()[0]}", q,
                                             max(count // C["ROUNDS"], 1), key_range)
    out = {}
    for label, lat in lats.items():
        lat.sort()
        out[label] = dict(p50_us=lat[len(lat) // 2], p99_us=lat[int(len(lat) * 0.99)],
                          mean_us=statistics.mean(lat), n=len(lat))
    return out


def node_types(plan):
    kids = plan.get("Plans", [])
    name = plan["Node Type"] + (f" ({plan['Custom Plan Provider']})" if "Custom Plan Provider" in plan else "")
    return [name] + [n for k in kids for n in node_types(k)]


def explain_all(name, queries):
    """The top plan nodes of EXPLAIN (ANALYZE, BUFFERS) of the queries, run
    in one session after a first run of each (so that the session's
    caches are warm, as an application's are)."""
    lines = [q + ";" for q in queries[:1]]
    lines += [f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {q};" for q in queries]
    out = L.psql_file(L.write_sql(f"{name}.explain.sql", "\n".join(lines) + "\n"))
    dec, plans, i = json.JSONDecoder(), [], 0
    while True:
        i = out.find("[", i)
        if i < 0:
            break
        try:
            obj, i = dec.raw_decode(out, i)
        except ValueError:      # a bracket in the first run's output
            i += 1
            continue
        if isinstance(obj, list) and obj and isinstance(obj[0], dict) and "Plan" in obj[0]:
            plans.append(obj[0]["Plan"])
    return plans[-len(queries):]


def page_touches(name, sql, key_range):
    """Mean shared buffers hit + read per query over EXPLAINS random keys,
    and the plan's node types."""
    import random
    rnd = random.Random(42)
    plans = explain_all(name, [sql.format(k=rnd.randrange(int(key_range)))
                               for _ in range(C["EXPLAINS"])])
    total = sum(p["Shared Hit Blocks"] + p["Shared Read Blocks"] for p in plans)
    return total / len(plans), node_types(plans[0])


def run_struct(name):
    s = STRUCTS[name]
    load(name, s)
    key_range = fill(s["key_range"])
    res = dict(label=s["label"], points={}, joins={})
    points = [(label, fill(q)) for label, q in s["variants"]]
    joins = [(label, fill(q)) for label, q in s["joins"]]
    res["points"] = interleaved(f"{name}_point", points, C["QUERIES"], key_range)
    for label, q in points:
        lat = res["points"][label]
        lat["pages"], lat["plan"] = page_touches(f"{name}_{label.split()[0]}", q, key_range)
        log(f"{name} point, {label}: p50 {lat['p50_us']} us, p99 {lat['p99_us']} us, "
            f"{lat['pages']:.1f} pages, plan {' > '.join(lat['plan'])}")
    res["joins"] = interleaved(f"{name}_join", joins, C["JOINS"], 1)
    answers = {}
    for label, q in joins:
        lat = res["joins"][label]
        p = explain_all(f"{name}_join_{label.split()[0]}", [q])[0]
        lat.update(pages=p["Shared Hit Blocks"] + p["Shared Read Blocks"], plan=node_types(p))
        answers[label] = psql(q)
        lat["answer"] = answers[label]
        log(f"{name} join, {label}: p50 {lat['p50_us']} us, p99 {lat['p99_us']} us, "
            f"answer {answers[label]}, plan {' > '.join(lat['plan'])}")
    res["joins_agree"] = len(set(answers.values())) == 1
    if not res["joins_agree"]:
        raise RuntimeError(f"{name}: the joins' answers differ: {answers}")
    res["path_used"] = any(s["path"] in n for n in res["points"]["SQL predicate"]["plan"])
    return res


def main():
    results = dict(config={k: v for k, v in C.items() if not k.startswith("OUT_")},
                   started=datetime.datetime.now().isoformat())
    os.makedirs(L.SQLDIR, exist_ok=True)
    L.shutil.chown(L.WORK, "postgres")
    L.shutil.chown(L.SQLDIR, "postgres")
    results["machine"] = L.machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    L.sh(L.as_pg(f"{L.PGBIN}/initdb -D {L.PGDATA} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
    L.restart_measuring(C["SB_MB"], True, "lookup")
    psql("CREATE DATABASE bench", db="postgres")
    psql("CREATE EXTENSION streamsketch")
    results["load_before"] = os.getloadavg()
    results["structs"] = {name: run_struct(name) for name in C["STRUCTS"]}
    L.server_stop()
    results["load_after"] = os.getloadavg()
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import lookup_bench_report
    lookup_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "lookup_bench_report", CONFIG)
