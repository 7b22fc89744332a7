#!/usr/bin/env python3
"""
bfile benchmark: section 7 of Nath and Gibbons, "Online Maintenance of Very
Large Random Samples on Flash Storage" (VLDB 2008) inside PostgreSQL, with
RAM enforced for real (small shared_buffers inside a memory cgroup; the
page cache is dropped before each phase).

A stream of N items (rows of an id and a PAYLOAD-byte text) feeds, side by
side:

  * a bfile of at most S rows (uniform): all but the last WINDOW items are
    loaded untimed by an unconstrained loader server, the last WINDOW are
    timed in the cgroup: items/s, page reads and writes and WAL per item,
    and the pages written per item put in the sample against the ideal
    (items added x item size / page size);
  * a heap-table reservoir of S slots (what a PostgreSQL user writes:
    Algorithm R, each selected item UPDATEs a random slot), preloaded the
    same way, timed on the same last items;
  * the whole stream in a heap (its ingestion), sampled at query time with
    TABLESAMPLE BERNOULLI and SYSTEM;
  * queries: bfile_subsample of n rows and a window of the last W_Q items
    (bfile_window) against a scan of the whole sample and of the stream;
  * producing the timed items alone (counted, not stored), which every
    structure's time includes: the maintenance cost is the rest.

Configuration: environment variables (see CONFIG).
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
from benchlib import env_int, log, psql, psql_file, measure  # noqa: E402

CONFIG = dict(
    N=env_int("N", 60_000_000),              # stream items
    S=env_int("S", 10_000_000),              # sample size (s_max, rows)
    PAYLOAD=env_int("PAYLOAD", 64),          # bytes of text per item
    WINDOW=env_int("WINDOW", 2_000_000),     # items timed at the stream's end
    BATCH=env_int("BATCH", 100_000),         # items per INSERT transaction
    SUBSAMPLE=env_int("SUBSAMPLE", 100_000),  # rows of the subsample query
    WINDOW_Q=env_int("WINDOW_Q", 1_000_000),  # items of the window query
    SB_MB=env_int("SB_MB", 16),
    CG_EXTRA_MB=env_int("CG_EXTRA_MB", 64),
    WORK_MEM_MB=env_int("WORK_MEM_MB", 4),
    LOADER_SB_MB=env_int("LOADER_SB_MB", 2048),
    PORT=env_int("PORT", 5470),
    WORK=os.environ.get("WORK", "/tmp/ssbench-bfile"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-bfile.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-bfile.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "bfile_bench_results.json")),
    # phases to run; with fewer than all, the others are kept from OUT_JSON
    PHASES=os.environ.get("PHASES", "bfile,reservoir,stream_heap,generate").split(","),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["LOADER_SB_MB"],
            measure_extra={"work_mem": f"{C['WORK_MEM_MB']}MB"})


def ram_mb():
    return C["SB_MB"] + C["CG_EXTRA_MB"]


def item_sql(lo, hi):
    """Items lo..hi-1: an id and a payload derived from it."""
    reps = (C["PAYLOAD"] + 31) // 32
    return (f"SELECT g, left(repeat(md5(g::text), {reps}), {C['PAYLOAD']}) "
            f"FROM generate_series({lo}, {hi - 1}) g")


def batches(table, lo, hi):
    out = []
    for b in range(lo, hi, C["BATCH"]):
        out.append(f"INSERT INTO {table} {item_sql(b, min(b + C['BATCH'], hi))};")
    return "\n".join(out) + "\n"


def info(t):
    cols = ["size", "seen", "level", "added", "discards", "unrolls", "relation_pages",
            "free_pages", "data_bytes", "pages_written"]
    v = psql(f"SELECT {', '.join(cols)} FROM bfile_info('{t}')").split("|")
    return dict(zip(cols, map(int, v)))


def timed(sql):
    t = time.time()
    out = psql(sql)
    return time.time() - t, out


def buffers(sql):
    """Shared blocks (hit + read) and seconds of a query, cold."""
    L.restart("measure")
    plan = json.loads(psql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"))[0]
    p = plan["Plan"]
    return dict(blocks=p.get("Shared Hit Blocks", 0) + p.get("Shared Read Blocks", 0),
                reads=p.get("Shared Read Blocks", 0), ms=plan["Execution Time"])


def run_bfile():
    N, W = C["N"], C["WINDOW"]
    L.ensure("loader")
    psql(f"SELECT bfile_create('bf', 'id bigint, payload text', sample_size => {C['S']}, "
         f"min_fraction => 0.8)")
    t = time.time()
    psql_file(L.write_sql("load_bf.sql", batches("bf", 0, N - W) + "SELECT bfile_flush('bf');\n"))
    load_s = time.time() - t
    before = info("bf")
    f = L.write_sql("feed_bf.sql", batches("bf", N - W, N) + "SELECT bfile_flush('bf');\n")
    L.restart("measure")
    m = measure(["bf"], lambda: psql_file(f), W, checkpoint=True)
    after = info("bf")
    added = after["added"] - before["added"]
    item_bytes = after["data_bytes"] / max(after["size"], 1)
    ideal_pages = added * item_bytes / 8192
    # the sample's own page writes (the change log writes every item once
    # more: the transactional layer's cost, in buffer writes and WAL)
    written = after["pages_written"] - before["pages_written"]
    res = dict(insert=m, before=before, after=after, load_s=load_s, added=added,
               item_bytes=item_bytes, ideal_pages=ideal_pages, written_pages=written,
               sample_mb=after["relation_pages"] * 8192 / 2**20)
    res["ratio"] = res["sample_mb"] / ram_mb()
    log(f"  bfile: {m['ops_per_s']:,.0f} items/s over the last {W:,}, reads/item {m['reads_per_op']:.4f}, "
        f"writes/item {m['buf_writes_per_op']:.4f}, WAL B/item {m['wal_bytes_per_op']:.1f}; "
        f"{added:,} added, pages written {written:,.0f} vs ideal {ideal_pages:,.0f}; "
        f"sample {after['size']:,} rows, {res['sample_mb']:.0f} MB = {res['ratio']:.1f}x RAM")
    # queries on the sample, cold
    n = C["SUBSAMPLE"]
    res["subsample"] = buffers(f"SELECT count(*) FROM bfile_subsample(NULL::bf, {n})")
    res["scan"] = buffers("SELECT count(*) FROM bf")
    lo = N - C["WINDOW_Q"]
    res["window"] = buffers(f"SELECT count(*) FROM bfile_window(NULL::bf, {lo}, {N - 1})")
    res["window_filter"] = buffers(f"SELECT count(*) FROM bf WHERE id >= {lo}")
    res["window_rows"] = int(psql(f"SELECT count(*) FROM bfile_window(NULL::bf, {lo}, {N - 1})"))
    log(f"  queries: subsample of {n:,} {res['subsample']['ms']:.0f} ms / {res['subsample']['blocks']:,} blocks; "
        f"scan {res['scan']['ms']:.0f} ms / {res['scan']['blocks']:,}; window {res['window']['ms']:.0f} ms / "
        f"{res['window']['blocks']:,}; filter {res['window_filter']['ms']:.0f} ms / {res['window_filter']['blocks']:,}")
    L.ensure("loader")
    psql("DROP TABLE bf")
    psql("CHECKPOINT")
    return res


def run_reservoir():
    """Algorithm R in a heap: item i (0-based) >= S is selected with
    probability S/(i+1) and replaces a random slot (an UPDATE)."""
    N, W, S = C["N"], C["WINDOW"], C["S"]
    L.ensure("loader")
    psql("CREATE TABLE res (slot int PRIMARY KEY, id bigint, payload text)")
    psql(f"INSERT INTO res SELECT g, g, p FROM ({item_sql(0, S)}) s(g, p)")
    psql("VACUUM ANALYZE res")
    stmts = []
    for b in range(N - W, N, C["BATCH"]):
        e = min(b + C["BATCH"], N)
        stmts.append(
            f"UPDATE res SET id = s.g, payload = s.p FROM "
            f"(SELECT DISTINCT ON (slot) * FROM (SELECT g, p, (hashint8extended(g, 7) & 2147483647) % {S} AS slot "
            f"FROM ({item_sql(b, e)}) i(g, p) "
            f"WHERE random() < {S}::float8 / (g + 1)) x ORDER BY slot, g DESC) s "
            f"WHERE res.slot = s.slot;")
    f = L.write_sql("feed_res.sql", "\n".join(stmts) + "\n")
    L.restart("measure")
    m = measure(["res"], lambda: psql_file(f), W, checkpoint=True)
    L.ensure("loader")
    size = int(psql("SELECT pg_total_relation_size('res')")) / 2**20
    log(f"  heap reservoir: {m['ops_per_s']:,.0f} items/s over the last {W:,}, reads/item {m['reads_per_op']:.4f}, "
        f"WAL B/item {m['wal_bytes_per_op']:.1f}, {size:.0f} MB")
    psql("DROP TABLE res")
    psql("CHECKPOINT")
    return dict(insert=m, size_mb=size)


def run_stream_heap():
    """The whole stream in a heap: its ingestion (the last items, timed)
    and TABLESAMPLE at query time."""
    N, W = C["N"], C["WINDOW"]
    L.ensure("loader")
    psql("CREATE TABLE stream_heap (id bigint, payload text)")
    psql_file(L.write_sql("load_heap.sql", batches("stream_heap", 0, N - W)))
    f = L.write_sql("feed_heap.sql", batches("stream_heap", N - W, N))
    L.restart("measure")
    m = measure(["stream_heap"], lambda: psql_file(f), W, checkpoint=True)
    L.ensure("loader")
    psql("VACUUM ANALYZE stream_heap")
    size = int(psql("SELECT pg_relation_size('stream_heap')")) / 2**20
    pct = 100.0 * C["SUBSAMPLE"] / N
    res = dict(insert=m, size_mb=size)
    res["bernoulli"] = buffers(f"SELECT count(*) FROM stream_heap TABLESAMPLE BERNOULLI ({pct})")
    res["system"] = buffers(f"SELECT count(*) FROM stream_heap TABLESAMPLE SYSTEM ({pct})")
    log(f"  stream heap: {m['ops_per_s']:,.0f} items/s, {size:.0f} MB; BERNOULLI {res['bernoulli']['ms']:.0f} ms, "
        f"SYSTEM {res['system']['ms']:.0f} ms")
    psql("DROP TABLE stream_heap")
    psql("CHECKPOINT")
    return res


def run_generate():
    """Producing the timed items alone (the same batches, counted rather
    than stored): a cost every structure's time above includes."""
    N, W = C["N"], C["WINDOW"]
    stmts = [f"SELECT count(*) FROM ({item_sql(b, min(b + C['BATCH'], N))}) i(g, p) "
             f"WHERE g IS NOT NULL AND p IS NOT NULL;"
             for b in range(N - W, N, C["BATCH"])]
    f = L.write_sql("feed_gen.sql", "\n".join(stmts) + "\n")
    L.restart("measure")
    m = measure([], lambda: psql_file(f), W)
    log(f"  producing the items alone: {m['ops_per_s']:,.0f} items/s")
    return dict(insert=m)


def main():
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat())
    if len(C["PHASES"]) < 4 and os.path.exists(C["OUT_JSON"]):
        with open(C["OUT_JSON"]) as f:
            kept = json.load(f)
        results.update({k: v for k, v in kept.items() if k in ("bfile", "reservoir", "stream_heap", "generate")})
        results["started"] = kept.get("started", results["started"])
    L.start_run(results, C["SB_MB"], C["CG_EXTRA_MB"])
    for name, fn in (("bfile", run_bfile), ("reservoir", run_reservoir), ("stream_heap", run_stream_heap),
                     ("generate", run_generate)):
        if name not in C["PHASES"]:
            continue
        log(name)
        results[name] = fn()
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import bfile_bench_report
    bfile_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "bfile_bench_report", C)
