#!/usr/bin/env python3
"""
cbt benchmark: the compressed buffer tree paper's wordcount evaluation
(sections 5.2 and 5.3) inside PostgreSQL, with RAM enforced for real (small
shared_buffers inside a memory cgroup; the page cache is dropped before
each phase).

For each dataset (a stream of N words: uniform over K distinct keys of a
given length, or Zipf-distributed n-gram-like words) it measures, side by
side on the same stream fed in BATCH-row transactions:

  * the cbt `count(*) GROUP BY word` (compression on, and off: the paper's
    factor analysis), ingestion throughput including the consolidation
    rounds (a VACUUM at the end runs the last one), page reads/writes and
    WAL per row, the relation's size, then a cold finalizing scan
    (`SELECT count(*) FROM t`), cbt_finalize and a scan again, and that
    every group equals GROUP BY's;
  * an upsert table (`INSERT ... SELECT w, count(*) ... GROUP BY w ON
    CONFLICT DO UPDATE`, logged and unlogged), preloaded with the counts
    of all but the last WINDOW rows and fed those (its steady state);
  * the raw rows in a heap: ingestion, size, and the GROUP BY at query
    time (HashAgg) with the default work_mem and with the work_mem it
    needs not to spill;
  * optionally (FACTORS=1) the cbt with other fan-outs and node buffers;
  * optionally (SB_SWEEP=2,4,...,128) the shared_buffers each needs to stay
    fast: on SWEEP_DATASET, the cbt's and the upsert table's ingestion with
    each shared_buffers (in a cgroup of that plus CG_EXTRA_MB); SWEEP_ONLY=1
    runs only that, and `cbt_bench.py --merge-sweep FILE` takes such a
    run's sweep into the results file;
  * `cbt_bench.py --merge-datasets FILE` takes the datasets of another run
    (e.g. a larger N for one dataset, or a rerun of some) into the results
    file, each with its rows and build.

Writes docs/bench-cbt.md, docs/bench-cbt.png and
test/bench/cbt_bench_results.json.  Configuration: environment variables
(see CONFIG).
"""
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import env_int, env_list, log, psql, psql_file, measure  # noqa: E402

CONFIG = dict(
    N=env_int("N", 16_000_000),              # rows per dataset
    # name:distribution:distinct keys:key length
    DATASETS=os.environ.get(
        "DATASETS",
        "u1e5:uniform:100000:12,u1e6:uniform:1000000:12,u1e7:uniform:10000000:12,"
        "u1e6l:uniform:1000000:64,zipf:zipf:100000000:12").split(","),
    SB_MB=env_int("SB_MB", 16),              # shared_buffers
    CG_EXTRA_MB=env_int("CG_EXTRA_MB", 64),  # cgroup limit = SB + this
    WORK_MEM_MB=env_int("WORK_MEM_MB", 4),   # work_mem: a round's pass, HashAgg
    BATCH=env_int("BATCH", 100_000),         # rows per INSERT transaction
    WINDOW=env_int("WINDOW", 1_000_000),     # upsert: rows measured
    FACTORS=env_int("FACTORS", 0),           # fan-out / node buffer variants
    SB_SWEEP=env_list("SB_SWEEP", ""),       # shared_buffers MB to sweep
    SWEEP_DATASET=os.environ.get("SWEEP_DATASET", "u1e6"),
    SWEEP_ONLY=env_int("SWEEP_ONLY", 0),     # only the sweep
    LOADER_SB_MB=env_int("LOADER_SB_MB", 2048),
    PORT=env_int("PORT", 5469),
    WORK=os.environ.get("WORK", "/tmp/ssbench-cbt"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-cbt.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-cbt.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "cbt_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["LOADER_SB_MB"],
            measure_extra={"work_mem": f"{C['WORK_MEM_MB']}MB"})


def ram_mb():
    return C["SB_MB"] + C["CG_EXTRA_MB"]


def parse_dataset(spec):
    name, dist, k, klen = spec.split(":")
    return dict(name=name, dist=dist, keys=int(k), keylen=int(klen))


# ---------------------------------------------------------------- stream

def load_stream(ds):
    """The dataset's stream (pos, w) and its GROUP BY (loader server)."""
    L.ensure("loader")
    t = time.time()
    n, k, klen = C["N"], ds["keys"], ds["keylen"]
    if ds["dist"] == "uniform":
        rank = f"(hashint8extended(g, 11) & 9223372036854775807) % {k}"
    else:
        # Zipf with exponent 1 (n-grams of a large vocabulary): a
        # log-uniform rank, P(r) ~ 1/r over 1..k
        u = "((hashint8extended(g, 13) & 4294967295)::float8 / 4294967296.0)"
        rank = f"floor(exp({u} * ln({k}::float8)))::int8"
    # a word of klen characters: its rank's digits, padded with the md5 of
    # the rank (so that words of one length differ in their first bytes)
    word = (f"left(r::text || repeat(md5(r::text), {(klen + 31) // 32}), {klen})")
    psql("DROP TABLE IF EXISTS stream, truth")
    psql(f"""CREATE TABLE stream AS
             SELECT g AS pos, {word} AS w
             FROM (SELECT g, {rank} AS r FROM generate_series(0, {n - 1}) g) s""")
    psql("CREATE INDEX stream_pos ON stream USING brin (pos)")
    psql("CREATE TABLE truth AS SELECT w, count(*) AS n FROM stream GROUP BY w")
    psql("VACUUM ANALYZE stream, truth")
    v = psql("SELECT (SELECT count(*) FROM truth), (SELECT max(n) FROM truth),"
             " pg_relation_size('stream')").split("|")
    info = dict(groups=int(v[0]), max_count=int(v[1]), stream_mb=int(v[2]) / 2**20,
                load_s=time.time() - t)
    log(f"  stream {ds['name']}: {n:,} rows, {info['groups']:,} groups, largest {info['max_count']:,},"
        f" loaded in {info['load_s']:.0f}s")
    return info


def batches_sql(table, first=0, cols="(w)", select="w"):
    out = []
    for lo in range(first, C["N"], C["BATCH"]):
        hi = min(lo + C["BATCH"], C["N"])
        out.append(f"INSERT INTO {table} {cols} SELECT {select} FROM stream "
                   f"WHERE pos >= {lo} AND pos < {hi};")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- phases

def timed(sql):
    t = time.time()
    out = psql(sql)
    return time.time() - t, out


def run_cbt(tag, args, ingest_only=False):
    """A cbt `count(*) GROUP BY w` fed the stream; then its scans (unless
    ingest_only)."""
    t = f"c_{tag}"
    L.ensure("loader")
    psql(f"SELECT cbt_create('{t}', 'w text', 'count(*) AS n'{args})")
    f = L.write_sql(f"feed_{t}.sql", batches_sql(t) + f"VACUUM {t};\n")
    L.restart("measure")
    m = measure([t], lambda: psql_file(f), C["N"], checkpoint=True)
    cols = ["height", "nodes", "fragments", "raw_bytes", "stored_bytes", "rounds",
            "spills", "splits", "relation_pages", "leaked_pages"]
    info = dict(zip(cols, map(int, psql(f"SELECT {', '.join(cols)} FROM cbt_info('{t}')").split("|"))))
    res = dict(table=t, insert=m, info=info, relation_mb=info["relation_pages"] * 8192 / 2**20)
    # the change log's pages (in use and kept for reuse) within the relation
    lp = psql(f"SELECT log_pages + free_log_pages FROM streamsketch_log_info('{t}')")
    res["log_mb"] = int(lp) * 8192 / 2**20
    if not ingest_only:
        # a finalizing scan, cold
        L.restart("measure")
        res["scan_s"], groups = timed(f"SELECT count(*) FROM {t}")
        res["scan_groups"] = int(groups)
        L.restart("measure")
        res["finalize_s"], _ = timed(f"SELECT cbt_finalize('{t}')")
        res["finalized_mb"] = int(psql(f"SELECT relation_pages FROM cbt_info('{t}')")) * 8192 / 2**20
        res["finalized_stored_mb"] = int(psql(f"SELECT stored_bytes FROM cbt_info('{t}')")) / 2**20
        L.restart("measure")
        res["scan_final_s"], _ = timed(f"SELECT count(*) FROM {t}")
    L.ensure("loader")
    res["wrong"] = int(psql(f"SELECT count(*) FROM ((TABLE truth EXCEPT SELECT w, n FROM {t}) UNION ALL"
                            f" (SELECT w, n FROM {t} EXCEPT TABLE truth)) d"))
    if ingest_only:
        log(f"    cbt {tag}: {m['ops_per_s']:,.0f} rows/s, reads/row {m['reads_per_op']:.3f},"
            f" {res['relation_mb']:.0f} MB, {res['wrong']} wrong, mem peak {m['mem_peak_mb']:.0f} MB")
        psql(f"DROP TABLE {t}")
        psql("CHECKPOINT")
        return res
    log(f"    cbt {tag}: {m['ops_per_s']:,.0f} rows/s, reads/row {m['reads_per_op']:.3f},"
        f" writes/row {m['buf_writes_per_op']:.4f}, WAL B/row {m['wal_bytes_per_op']:.1f},"
        f" {res['relation_mb']:.0f} MB (tree {info['stored_bytes'] / 2**20:.0f} MB), height {info['height']},"
        f" scan {res['scan_s']:.1f}s, finalize {res['finalize_s']:.1f}s, scan after {res['scan_final_s']:.1f}s,"
        f" {res['scan_groups']:,} groups, {res['wrong']} wrong, mem peak {m['mem_peak_mb']:.0f} MB")
    psql(f"DROP TABLE {t}")
    psql("CHECKPOINT")
    return res


def run_upsert(logged):
    """The upsert table's steady state: preloaded with all but the last
    WINDOW rows, fed those, each batch aggregated before its upsert."""
    W = min(C["WINDOW"], C["N"])
    first = C["N"] - W
    u = "upsert_logged" if logged else "upsert_unlogged"
    L.ensure("loader")
    kind = "" if logged else "UNLOGGED "
    psql(f"CREATE {kind}TABLE {u} (w text PRIMARY KEY, n bigint NOT NULL)")
    psql(f"INSERT INTO {u} SELECT w, count(*) FROM stream WHERE pos < {first} GROUP BY w")
    psql(f"VACUUM ANALYZE {u}")
    stmts = []
    for lo in range(first, C["N"], C["BATCH"]):
        hi = min(lo + C["BATCH"], C["N"])
        stmts.append(f"INSERT INTO {u} AS t SELECT w, count(*) FROM stream WHERE pos >= {lo} AND pos < {hi}"
                     f" GROUP BY w ON CONFLICT (w) DO UPDATE SET n = t.n + EXCLUDED.n;")
    f = L.write_sql(f"feed_{u}.sql", "\n".join(stmts) + "\n")
    L.restart("measure")
    m = measure([u], lambda: psql_file(f), W, checkpoint=True)
    L.ensure("loader")
    size = int(psql(f"SELECT pg_total_relation_size('{u}')")) / 2**20
    wrong = int(psql(f"SELECT count(*) FROM ((TABLE truth EXCEPT TABLE {u}) UNION ALL"
                     f" (TABLE {u} EXCEPT TABLE truth)) d"))
    log(f"    upsert ({'logged' if logged else 'unlogged'}): {m['ops_per_s']:,.0f} rows/s over the last {W:,},"
        f" reads/row {m['reads_per_op']:.3f}, WAL B/row {m['wal_bytes_per_op']:.1f}, {size:.0f} MB, {wrong} wrong")
    psql(f"DROP TABLE {u}")
    psql("CHECKPOINT")
    return dict(insert=m, size_mb=size, window=W, wrong=wrong)


def hashagg_explain():
    """EXPLAIN ANALYZE of the GROUP BY over the raw rows: time, batches,
    peak memory."""
    out = psql("EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM "
               "(SELECT w, count(*) FROM raw GROUP BY w) s")
    plan = json.loads(out)[0]

    def find(p):
        if p.get("Node Type") == "Aggregate" and p.get("Strategy") == "Hashed":
            return p
        for c in p.get("Plans", []):
            r = find(c)
            if r:
                return r
        return None
    agg = find(plan["Plan"]) or {}
    return dict(ms=plan["Execution Time"], batches=agg.get("HashAgg Batches"),
                peak_kb=agg.get("Peak Memory Usage"), disk_kb=agg.get("Disk Usage", 0),
                strategy=agg.get("Strategy", "-"))


def run_raw():
    """The raw rows in a heap, and the GROUP BY at query time."""
    L.ensure("loader")
    psql("CREATE TABLE raw (w text)")
    f = L.write_sql("feed_raw.sql", batches_sql("raw"))
    L.restart("measure")
    m = measure(["raw"], lambda: psql_file(f), C["N"], checkpoint=True)
    size = int(psql("SELECT pg_relation_size('raw')")) / 2**20
    psql("VACUUM ANALYZE raw")
    L.restart("measure")
    small = hashagg_explain()
    # the work_mem it needs not to spill: the peak it reported when it did
    # not, else grown until it does not
    need_mb = max(C["WORK_MEM_MB"], int((small["peak_kb"] or 0) / 1024 * 1.3) + 1)
    # a work_mem that large does not fit in the cgroup: measured with
    # everything in RAM (the loader's shared_buffers, no cgroup)
    big = small
    for _ in range(6):
        if big["batches"] in (None, 1):
            break
        L.restart("inram")
        psql(f"ALTER SYSTEM SET work_mem = '{need_mb}MB'")
        psql("SELECT pg_reload_conf()")
        big = hashagg_explain()
        if big["batches"] not in (None, 1):
            need_mb = int(need_mb * 2)
    psql("ALTER SYSTEM RESET work_mem")
    psql("SELECT pg_reload_conf()")
    L.ensure("loader")
    log(f"    raw heap: {m['ops_per_s']:,.0f} rows/s, {size:.0f} MB; GROUP BY with work_mem"
        f" {C['WORK_MEM_MB']} MB: {small['ms'] / 1000:.1f}s ({small['batches']} batches, peak {small['peak_kb']} kB);"
        f" with {need_mb} MB: {big['ms'] / 1000:.1f}s ({big['batches']} batches)")
    psql("DROP TABLE raw")
    psql("CHECKPOINT")
    return dict(insert=m, size_mb=size, hashagg=small, hashagg_nospill=big, nospill_work_mem_mb=need_mb)


FACTOR_VARIANTS = {
    "fanout4": ", fanout => 4",
    "fanout32": ", fanout => 32",
    "node256k": ", node_buffer => '256kB'",
    "node4m": ", node_buffer => '4MB'",
}


def run_sb_sweep(ds):
    """Ingestion of the cbt and of the upsert table with each shared_buffers
    of SB_SWEEP (a cgroup of it plus CG_EXTRA_MB): the shared_buffers each
    needs to stay fast."""
    out = []
    try:
        for sb in C["SB_SWEEP"]:
            L.ensure("loader")
            L.set_measure_memory(sb, sb + C["CG_EXTRA_MB"])
            log(f"  shared_buffers {sb} MB (cgroup {sb + C['CG_EXTRA_MB']} MB)")
            out.append(dict(sb_mb=sb, ram_mb=sb + C["CG_EXTRA_MB"],
                            cbt=run_cbt(f"{ds['name']}_sb{sb}", "", ingest_only=True),
                            upsert=run_upsert(True)))
    finally:
        L.ensure("loader")
        L.set_measure_memory(C["SB_MB"], ram_mb())
    return out


def run_dataset(spec):
    ds = parse_dataset(spec)
    log(f"dataset {ds['name']}: {ds['dist']}, {ds['keys']:,} distinct keys, {ds['keylen']}-byte words")
    res = dict(dataset=ds, rows=C["N"], stream=load_stream(ds))
    if C["SWEEP_ONLY"]:
        res["sb_sweep"] = run_sb_sweep(ds)
        L.ensure("loader")
        psql("DROP TABLE stream, truth")
        psql("CHECKPOINT")
        return res
    res["cbt"] = run_cbt(ds["name"], "")
    res["cbt_nocomp"] = run_cbt(ds["name"] + "_nocomp", ", compression => false")
    if C["FACTORS"] and ds["name"] == "u1e6":
        res["factors"] = {v: run_cbt(f"{ds['name']}_{v}", a) for v, a in FACTOR_VARIANTS.items()}
    if C["SB_SWEEP"] and ds["name"] == C["SWEEP_DATASET"]:
        res["sb_sweep"] = run_sb_sweep(ds)
    res["raw"] = run_raw()
    res["upsert_logged"] = run_upsert(True)
    res["upsert_unlogged"] = run_upsert(False)
    up = res["upsert_logged"]
    log(f"  {ds['name']}: cbt/upsert {res['cbt']['insert']['ops_per_s'] / up['insert']['ops_per_s']:.1f}x,"
        f" size cbt/upsert {res['cbt']['relation_mb'] / up['size_mb']:.2f},"
        f" cbt/raw {res['cbt']['relation_mb'] / res['raw']['size_mb']:.2f},"
        f" scan/HashAgg {res['cbt']['scan_s'] / (res['raw']['hashagg']['ms'] / 1000):.2f}")
    L.ensure("loader")
    psql("DROP TABLE stream, truth")
    psql("CHECKPOINT")
    return res


def main():
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat())
    L.start_run(results, C["SB_MB"], C["CG_EXTRA_MB"])
    results["datasets"] = {}
    for spec in C["DATASETS"]:
        r = run_dataset(spec)
        results["datasets"][r["dataset"]["name"]] = r
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import cbt_bench_report
    cbt_bench_report.report(results, C)


def merge_datasets(path):
    """Take every dataset of another run (its own N and build, noted with
    it) into the results file in place of the one of that name, and
    re-render."""
    results = json.load(open(C["OUT_JSON"]))
    other = json.load(open(path))
    for name, r in other["datasets"].items():
        r["rows"] = r.get("rows", other["config"]["N"])
        r["build"] = other["ext"].get("head", "?")
        r["started"] = other["started"]
        results["datasets"][name] = r
        log(f"merged dataset {name} (build {r['build']}, {r['rows']:,} rows)")
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import cbt_bench_report
    cbt_bench_report.report(results, C)


def merge_sweep(path):
    """Take the shared_buffers sweep of another run (SWEEP_ONLY=1, the same
    N and datasets) into the results file, noting its build, and
    re-render."""
    results = json.load(open(C["OUT_JSON"]))
    other = json.load(open(path))
    for name, r in other["datasets"].items():
        if "sb_sweep" in r and name in results["datasets"]:
            results["datasets"][name]["sb_sweep"] = r["sb_sweep"]
            results["datasets"][name]["sb_sweep_build"] = other["ext"].get("head", "?")
            log(f"merged the sweep of {name} (build {other['ext'].get('head', '?')})")
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import cbt_bench_report
    cbt_bench_report.report(results, C)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--merge-sweep":
        merge_sweep(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--merge-datasets":
        merge_datasets(sys.argv[2])
    else:
        L.run(main, "cbt_bench_report", C)
