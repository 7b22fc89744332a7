#!/usr/bin/python3
"""
LERT benchmark: the evaluation of Pandey et al., "Timely Reporting of Heavy
Hitters using External Memory" (SIGMOD 2020) reproduced inside PostgreSQL 15.

Run as root through test/bench/lert_bench.sh (which builds and installs the
extension into a private tree first).  Everything happens in a throwaway
cluster under $WORK (default /tmp/ssbench-lert).

The stream: N observations of the Firehose-like active-set generator
(test/bench/firehose.c: 2^20 active keys over an unbounded key space,
lifetime counts power law with exponent -1.5 capped at 65,536, arrivals
spread over each key's lifetime), T = 24.  It is loaded once into a heap
table stream(pos, k); the offline truth (each key's count, first and T-th
position) is computed from it by SQL.

Measured on a server inside a memory cgroup of shared_buffers + a small
overhead, page cache dropped before each phase, for each variant
(count_stretch, time_stretch a = 1..4, immediate, cascade): the whole
stream fed in BATCH-row transactions in stream order (the writers
consolidate the change log as it grows; the last reader finishes it),
with throughput, page reads, buffer writes and WAL bytes per observation;
then, on the unconstrained server, every report checked against the truth
(false positives, keys the variant must have reported, exactness of the
count and first position, the bound) and the distribution of count
stretch (count at report / T) and time stretch ((reported - first) /
(T-th - first)), as the paper's Figure 1.  Then count_stretch with 1, 2
and 4 inserting sessions; the upsert-and-report heap table a PostgreSQL
user would write (logged and unlogged), preloaded with the counts of all
but the last WINDOW observations, on those last ones; and the in-RAM
references: the same count_stretch LERT on a server with shared_buffers
LOADER_SB_MB and no cgroup (everything in RAM), and the unit test's
simulated LERT (all levels in memory, no PostgreSQL) on the same
generator.

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import env_int, env_list, log, psql, psql_bg, psql_file, measure, wait_bg  # noqa: E402

CONFIG = dict(
    N=env_int("N", 64_000_000),              # observations
    ACTIVE=env_int("ACTIVE", 1 << 20),       # active set of the generator
    SEED=env_int("SEED", 1),
    T=24,
    SB_MB=env_int("SB_MB", 16),              # shared_buffers
    CG_EXTRA_MB=env_int("CG_EXTRA_MB", 64),  # cgroup limit = SB + this
    BUF_MB=env_int("BUF_MB", 4),             # level 0 (buffer_size)
    WORK_MEM_MB=env_int("WORK_MEM_MB", 4),   # work_mem: a round's level-0 copies
    LEVELS=env_int("LEVELS", 3),
    GROWTH=env_int("GROWTH", 4),
    BATCH=env_int("BATCH", 100_000),         # rows per INSERT transaction
    VARIANTS=os.environ.get("VARIANTS", "csl,tsl1,tsl2,tsl3,tsl4,irl,cf").split(","),
    SESSIONS=env_list("SESSIONS", "1,2,4"),
    # cones of the scaling runs (sessions consolidate different cones at
    # once); 1 reuses count_stretch's row for one session
    CONES=env_int("CONES", 1),
    PENDING_KB=env_int("PENDING_KB", 0),     # streamsketch.pending_memory (0: default)
    # phases to run: a rerun of some variants can leave out the baselines
    PHASES=os.environ.get("PHASES", "variants,scaling,upsert,inram").split(","),
    WINDOW=env_int("WINDOW", 1_000_000),     # upsert baselines: observations measured
    LOADER_SB_MB=env_int("LOADER_SB_MB", 2048),
    PORT=env_int("PORT", 5468),
    WORK=os.environ.get("WORK", "/tmp/ssbench-lert"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-lert.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-lert.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "lert_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["LOADER_SB_MB"],
            measure_extra=dict({"work_mem": f"{C['WORK_MEM_MB']}MB"},
                               **({"streamsketch.pending_memory": f"{C['PENDING_KB']}kB"}
                                  if C["PENDING_KB"] > 0 else {})))

VARIANT_ARGS = {
    "csl": "variant => 'count_stretch'",
    "tsl1": "variant => 'time_stretch', age_bits => 1",
    "tsl2": "variant => 'time_stretch', age_bits => 2",
    "tsl3": "variant => 'time_stretch', age_bits => 3",
    "tsl4": "variant => 'time_stretch', age_bits => 4",
    "irl": "variant => 'immediate'",
    "cf": "variant => 'cascade'",
}


def f3(x):
    return "-" if x is None else f"{x:.3f}"


def ram_mb():
    return C["SB_MB"] + C["CG_EXTRA_MB"]


# ---------------------------------------------------------------- the stream

def load_stream():
    """Generate the stream, load it, compute the truth (loader server)."""
    exe = os.path.join(C["WORK"], "firehose")
    L.sh(["cc", "-O2", "-o", exe, os.path.join(HERE, "firehose.c")])
    path = os.path.join(C["WORK"], "stream.txt")
    t = time.time()
    with open(path, "w") as f:
        subprocess.run([exe, str(C["N"]), str(C["ACTIVE"]), str(C["SEED"])], stdout=f, check=True)
    os.chmod(path, 0o644)
    log(f"generated {C['N']:,} observations in {time.time() - t:.0f}s")
    L.ensure("loader")
    t = time.time()
    psql("CREATE TABLE stream (pos bigint GENERATED ALWAYS AS IDENTITY (MINVALUE 0 START 0), k bigint NOT NULL)")
    psql(f"COPY stream (k) FROM '{path}'")
    psql("CREATE INDEX stream_pos ON stream USING brin (pos)")
    psql(f"""CREATE TABLE truth AS
             SELECT k, count(*) AS total, min(pos) AS first_pos,
                    (array_agg(pos ORDER BY pos))[{C['T']}] AS t_pos
             FROM stream GROUP BY k""")
    psql("CREATE UNIQUE INDEX ON truth (k)")
    psql("CREATE INDEX stream_k_pos ON stream (k, pos)")
    psql("VACUUM ANALYZE stream, truth")
    os.unlink(path)
    s = psql(f"SELECT count(*), count(*) FILTER (WHERE total >= {C['T']}), max(total),"
             f" pg_relation_size('stream') FROM truth").split("|")
    info = dict(keys=int(s[0]), heavy=int(s[1]), max_count=int(s[2]), stream_mb=int(s[3]) / 2**20,
                load_s=time.time() - t)
    log(f"loaded in {info['load_s']:.0f}s: {info['keys']:,} keys, {info['heavy']:,} reach T, "
        f"largest count {info['max_count']:,}")
    return info


def batches_sql(table, sessions=1, part=0):
    """INSERT statements feeding the stream in BATCH-row transactions, in
    stream order; with several sessions, session `part` takes every
    sessions-th batch."""
    out = []
    n, b = C["N"], C["BATCH"]
    for i, lo in enumerate(range(0, n, b)):
        if i % sessions != part:
            continue
        out.append(f"INSERT INTO {table} SELECT k FROM stream WHERE pos >= {lo} AND pos < {min(lo + b, n)} ORDER BY pos;")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- checks

def check(table, flushed):
    T = C["T"]
    q = f"""
WITH r AS (SELECT report_id, key::int8 AS k, count, first_position, reported_position
           FROM lert_reports('{table}')),
     i AS (SELECT * FROM lert_info('{table}')),
     must AS (SELECT k FROM truth, i WHERE {str(flushed).lower()} AND total >= {T}
                 OR i.variant = 'immediate' AND total >= {T}
                 OR i.variant = 'count_stretch' AND total >= i.count_stretch_bound),
     s AS (SELECT r.count::float8 / {T} AS cs,
                  (r.reported_position - t.first_pos)::float8 / nullif(t.t_pos - t.first_pos, 0) AS ts
           FROM r JOIN truth t USING (k))
SELECT (SELECT count(*) FROM r),
       (SELECT count(*) FROM r LEFT JOIN truth USING (k) WHERE truth.total IS NULL OR truth.total < {T}),
       (SELECT count(*) FROM must WHERE k NOT IN (SELECT k FROM r)),
       (SELECT count(*) - count(DISTINCT k) FROM r),
       (SELECT count(*) FROM r WHERE r.count <> (SELECT count(*) FROM stream s
                                                 WHERE s.k = r.k AND s.pos <= r.reported_position)),
       (SELECT count(*) FROM r JOIN truth USING (k) WHERE r.first_position <> truth.first_pos
           OR r.reported_position < truth.t_pos),
       (SELECT count(*) FROM r, i WHERE r.count > i.count_stretch_bound),
       (SELECT count(*) FROM s, i WHERE s.ts > i.time_stretch_bound),
       (SELECT max(cs) FROM s), (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY cs) FROM s),
       (SELECT avg(cs) FROM s),
       (SELECT max(ts) FROM s), (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY ts) FROM s),
       (SELECT avg(ts) FROM s)
"""
    v = psql(q).split("|")
    f = lambda x: float(x) if x != "" else None
    keys = ["reports", "false_positives", "missed", "duplicates", "wrong_count",
            "wrong_positions", "over_count_bound", "over_time_bound"]
    res = {k: int(v[i]) for i, k in enumerate(keys)}
    res.update(cs_max=f(v[8]), cs_p99=f(v[9]), cs_mean=f(v[10]),
               ts_max=f(v[11]), ts_p99=f(v[12]), ts_mean=f(v[13]))
    return res


def info(table):
    cols = ["variant", "level_thresholds", "count_stretch_bound", "time_stretch_bound",
            "observations", "reports", "flushes", "level0_entries", "max_level0_entries",
            "level_entries", "level_kept", "relation_pages", "free_pages",
            "level0_pages", "level_pages"]
    v = psql(f"SELECT {', '.join(cols)} FROM lert_info('{table}')").split("|")
    res = dict(zip(cols, v))
    # where the rest of the file is: the change log's pages (kept for reuse)
    log = psql(f"SELECT log_pages, free_log_pages FROM streamsketch_log_info('{table}')").split("|")
    res["log_pages"], res["free_log_pages"] = log
    return res


# ---------------------------------------------------------------- phases

def run_variant(name, sessions=1, in_ram=False, cones=1):
    """name's variant fed the stream by sessions sessions, measured in the
    memory cgroup, or with everything in RAM (in_ram: the same server
    settings but shared_buffers LOADER_SB_MB and no cgroup)."""
    t = f"l_{name}_{sessions}" + ("_ram" if in_ram else "") + (f"_c{cones}" if cones > 1 else "")
    L.ensure("loader")
    psql(f"SELECT lert_create('{t}', 'int8', threshold => {C['T']}, growth => {C['GROWTH']}, "
         f"buffer_size => '{C['BUF_MB']}MB', cones => {cones}, {VARIANT_ARGS[name]})")
    files = []
    for part in range(sessions):
        files.append(L.write_sql(f"feed_{t}_{part}.sql", batches_sql(t, sessions, part)))
    L.restart("inram" if in_ram else "measure")

    def feed():
        procs = [(psql_bg(f), f) for f in files]
        wait_bg(procs)
        psql(f"SELECT count(*) FROM {t}")      # the last round
        return None

    m = measure([t], feed, C["N"], checkpoint=True)
    L.ensure("loader")
    res = dict(table=t, sessions=sessions, cones=cones, insert=m, info=info(t))
    pages = int(res["info"]["relation_pages"])
    res["relation_mb"] = pages * 8192 / 2**20
    res["ratio"] = res["relation_mb"] / ram_mb()
    log(f"  {name} x{sessions}{' in RAM' if in_ram else ''}: {m['ops_per_s']:,.0f} obs/s, reads/obs {m['reads_per_op']:.3f}, "
        f"writes/obs {m['buf_writes_per_op']:.3f}, WAL B/obs {m['wal_bytes_per_op']:.0f}, "
        f"{res['relation_mb']:.0f} MB = {res['ratio']:.1f} x RAM, mem peak {m['mem_peak_mb']:.0f} MB")
    if sessions == 1 and not in_ram:
        res["check"] = check(t, False)
        c = res["check"]
        log(f"    {c['reports']:,} reports: fp {c['false_positives']} missed {c['missed']} dup {c['duplicates']}"
            f" count {c['wrong_count']} positions {c['wrong_positions']} over bounds {c['over_count_bound']}/{c['over_time_bound']};"
            f" count stretch max {f3(c['cs_max'])} p99 {f3(c['cs_p99'])} mean {f3(c['cs_mean'])};"
            f" time stretch max {f3(c['ts_max'])} p99 {f3(c['ts_p99'])} mean {f3(c['ts_mean'])}")
        t0 = time.time()
        psql(f"SELECT lert_flush('{t}')")
        res["flush_s"] = time.time() - t0
        res["check_flushed"] = check(t, True)
        log(f"    after lert_flush ({res['flush_s']:.0f}s): {res['check_flushed']['reports']:,} reports,"
            f" missed {res['check_flushed']['missed']}, fp {res['check_flushed']['false_positives']}")
    psql(f"DROP TABLE {t}")
    psql("CHECKPOINT")
    return res


def run_upsert(logged):
    """The upsert-and-report table, preloaded with the counts of all but
    the last WINDOW observations, fed those in BATCH-row transactions: each
    batch is aggregated per key, upserted, and the keys whose count crosses
    T are recorded as reports."""
    T, W = C["T"], min(C["WINDOW"], C["N"])
    first = C["N"] - W
    u = "upsert_logged" if logged else "upsert_unlogged"
    rep = u + "_reports"
    L.ensure("loader")
    kind = "" if logged else "UNLOGGED "
    psql(f"CREATE {kind}TABLE {u} (k bigint PRIMARY KEY, c bigint NOT NULL)")
    psql(f"CREATE {kind}TABLE {rep} (k bigint NOT NULL, pos bigint NOT NULL)")
    psql(f"INSERT INTO {u} SELECT k, count(*) FROM stream WHERE pos < {first} GROUP BY k")
    psql(f"VACUUM ANALYZE {u}, {rep}")
    stmts = []
    for lo in range(first, C["N"], C["BATCH"]):
        hi = min(lo + C["BATCH"], C["N"])
        stmts.append(f"""WITH b AS (SELECT k, count(*) AS n, max(pos) AS last FROM stream
                         WHERE pos >= {lo} AND pos < {hi} GROUP BY k),
     up AS (INSERT INTO {u} AS t SELECT k, n FROM b ON CONFLICT (k) DO UPDATE SET c = t.c + EXCLUDED.c
            RETURNING t.k, t.c)
INSERT INTO {rep} SELECT up.k, b.last FROM up JOIN b USING (k) WHERE up.c >= {T} AND up.c - b.n < {T};""")
    f = L.write_sql(f"feed_{u}.sql", "\n".join(stmts) + "\n")
    L.restart("measure")
    m = measure([u], lambda: psql_file(f), W, checkpoint=True)
    L.ensure("loader")
    size = int(psql(f"SELECT pg_total_relation_size('{u}')")) / 2**20
    ok = psql(f"SELECT count(*) FROM {rep} r JOIN truth t USING (k) WHERE t.total < {T}")
    n_rep = int(psql(f"SELECT count(*) FROM {rep}"))
    # keys that crossed T inside the window: what the window had to report
    heavy = int(psql(f"SELECT count(*) FROM (SELECT k, count(*) FILTER (WHERE pos < {first}) AS before, count(*) AS total "
                     f"FROM stream GROUP BY k) s WHERE before < {T} AND total >= {T}"))
    log(f"  upsert ({'logged' if logged else 'unlogged'}): {m['ops_per_s']:,.0f} obs/s over the last {W:,},"
        f" reads/obs {m['reads_per_op']:.3f}, WAL B/obs {m['wal_bytes_per_op']:.0f}, {size:.0f} MB,"
        f" {n_rep:,} reports of the {heavy:,} keys crossing T in the window, false positives {ok}")
    psql(f"DROP TABLE {u}, {rep}")
    return dict(insert=m, size_mb=size, window=W, reports=n_rep, heavy=heavy, false_positives=int(ok))


def run_inram():
    """The in-RAM reference: the unit test's simulated count_stretch LERT."""
    unit = os.path.join(REPO, "test", "unit")
    L.sh(["make", "-s", "-C", unit, "lert_test"])
    c0 = C["BUF_MB"] * 2**20 // 64
    out = L.sh([os.path.join(unit, "lert_test"), "--bench", str(C["N"]), str(C["ACTIVE"]), str(c0)],
               capture=True)
    res = json.loads(out.strip().splitlines()[-1])
    log(f"  in-RAM reference (simulated LERT): {res['obs_per_s']:,.0f} obs/s")
    return res


def main():
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat())
    L.start_run(results, C["SB_MB"], C["CG_EXTRA_MB"])
    results["stream"] = load_stream()
    results["variants"] = {}
    for v in (C["VARIANTS"] if "variants" in C["PHASES"] else []):
        log(f"variant {v}")
        results["variants"][v] = run_variant(v)
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)
    results["scaling"] = {}
    for s in (C["SESSIONS"] if "scaling" in C["PHASES"] else []):
        if s == 1 and "csl" in results["variants"] and C["CONES"] == 1:
            results["scaling"]["1"] = results["variants"]["csl"]
            continue
        log(f"count_stretch with {s} sessions, {C['CONES']} cones")
        key = str(s) + (f"c{C['CONES']}" if C["CONES"] > 1 else "")
        results["scaling"][key] = run_variant("csl", s, cones=C["CONES"])
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)
    if "upsert" in C["PHASES"]:
        results["upsert_logged"] = run_upsert(True)
        results["upsert_unlogged"] = run_upsert(False)
    if "inram" in C["PHASES"]:
        results["inram"] = run_inram()
    if "inram" in C["PHASES"] and "csl" in C["VARIANTS"]:
        log("count_stretch with everything in RAM")
        results["inram_pg"] = run_variant("csl", 1, in_ram=True)
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import lert_bench_report
    lert_bench_report.report(results, C)


def merge(path):
    """Take the variants and the scaling rows (sessions > 1) of another run
    of the same stream (results file `path`: e.g. time_stretch rerun in a
    smaller cgroup to keep the ratio) into the results file, each noting
    its RAM and build, and re-render."""
    with open(C["OUT_JSON"]) as f:
        results = json.load(f)
    with open(path) as f:
        other = json.load(f)
    oc, mc = other["config"], results["config"]
    for k in ("N", "ACTIVE", "SEED", "T", "BUF_MB", "LEVELS", "GROWTH", "BATCH"):
        if oc.get(k) != mc.get(k):
            sys.exit(f"{path}: {k} is {oc.get(k)}, not {mc.get(k)}: another stream or structure")
    def note(r):
        r["ram_mb"] = oc["SB_MB"] + oc["CG_EXTRA_MB"]
        r["sb_mb"] = oc["SB_MB"]
        r["build"] = other["ext"].get("head", "?")
        r["started"] = other["started"]
        return r
    for v, r in other["variants"].items():
        results["variants"][v] = note(r)
        log(f"merged {v} ({r['ram_mb']} MB, build {r['build']})")
    # sessions > 1 (one session's row is count_stretch's variant row)
    for s, r in other.get("scaling", {}).items():
        if s != "1":
            results.setdefault("scaling", {})[s] = note(r)
            log(f"merged count_stretch with {r['sessions']} sessions, {r.get('cones', 1)} cones"
                f" ({r['ram_mb']} MB, build {r['build']})")
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import lert_bench_report
    lert_bench_report.report(results, C)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--merge":
        merge(sys.argv[2])
    else:
        L.run(main, "lert_bench_report", C)
