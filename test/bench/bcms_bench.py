#!/usr/bin/python3
"""
BCMS benchmark: the evaluation of Goswami et al., "Buffered Count-Min Sketch
on SSD" (ESA 2018, sections 5.1-5.5) reproduced inside PostgreSQL 15.

Run as root through test/bench/bcms_bench.sh (which builds and installs the
extension first).  Everything happens in a throwaway cluster under $WORK
(default /tmp/ssbench) with a private copy of the PostgreSQL binaries and of
the extension, so concurrent `make install`s of other work trees cannot
change the code under test mid-run.

RAM is enforced for real: the measuring server runs inside a memory cgroup
(v1 memory.limit_in_bytes or v2 memory.max) of shared_buffers + a small
overhead, so the OS page cache cannot hold the sketch, and the page cache is
dropped before every measured phase.

Sizing follows the paper (section 5.2): delta = 0.01 (depth 5), maximum
overestimate O = 8, sketch size S = ratio x RAM, cells C = S / 8 bytes,
width = C / depth, and the stream has n = C*O/(D*e) items.  The n items are
uniformly random 64-bit keys, key(i) = hashint8extended(i, 0), the same stream
for every structure.  All but the last items are bulk-loaded (untimed) by an
unconstrained loader server; the timed phases then run the stream's last
items in transactions of BATCH rows on the RAM-limited server.

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import (env_int, env_list, log, psql, psql_bg, psql_file,  # noqa: E402
                      restart, run_batches, measure, wait_bg, write_batches)


CONFIG = dict(
    SB_MB=env_int("SB_MB", 64),                 # shared_buffers = the RAM M
    CG_EXTRA_MB=env_int("CG_EXTRA_MB", 40),     # cgroup limit = SB + this
    BUF_MB=env_int("BUF_MB", 0),                # BCMS buffer_size (0: SB/2)
    RATIOS=env_list("RATIOS", "2,4,8,16"),      # sketch size / RAM
    BATCH=env_int("BATCH", 10000),              # rows per INSERT transaction
    U_BCMS=env_int("U_BCMS", 0),                # measured BCMS updates (0: one buffer capacity)
    U_PLAIN=env_int("U_PLAIN", 400000),         # measured plain updates
    U_BASE=env_int("U_BASE", 200000),           # measured baseline updates
    W_CONS=env_int("W_CONS", 20000),            # untimed warm-up on the limited server
    Q_EST=env_int("Q_EST", 50000),              # estimates / point queries
    BASE_RATIOS=env_list("BASE_RATIOS", "2,16"),
    SMALL_BATCH=env_int("SMALL_BATCH", 100),
    SMALL_RATIOS=env_list("SMALL_RATIOS", "2,16"),
    U_SMALL=env_int("U_SMALL", 20000),
    LOADER_SB_MB=env_int("LOADER_SB_MB", 1536),
    PORT=env_int("PORT", 5466),
    WORK=os.environ.get("WORK", "/tmp/ssbench"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-bcms.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-bcms.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "bcms_bench_results.json")),
    DEPTH=5, OVERESTIMATE=8, DELTA=0.01,
)
C = CONFIG
if C["BUF_MB"] == 0:
    C["BUF_MB"] = C["SB_MB"] // 2

L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["LOADER_SB_MB"])
key = L.key


# ---------------------------------------------------------------- the run

def geometry(ratio):
    S = ratio * C["SB_MB"] * 2**20          # sketch bytes
    cells = S // 8
    width = cells // C["DEPTH"]
    n = int(cells * C["OVERESTIMATE"] / (C["DEPTH"] * math.e))
    return dict(ratio=ratio, sketch_mb=S / 2**20, width=width, cells=cells, n=n)


def bcms_info(t):
    cols = ["mode", "width", "depth", "sketch_pages", "buffer_pages",
            "subbuffer_capacity", "items", "buffered_entries", "relation_pages", "error_bound"]
    out = psql(f"SELECT {', '.join(cols)} FROM bcms_info('{t}')").split("|")
    return dict(zip(cols, out))


def prewarm_buffer_pages(t):
    """Load the BCMS sub-buffer pages into shared_buffers: they are the
    structure's RAM part (the paper keeps its buffer in RAM)."""
    i = bcms_info(t)
    sp, bp = int(i["sketch_pages"]), int(i["buffer_pages"])
    if bp > 0:
        psql(f"SELECT pg_prewarm('{t}', 'buffer', 'main', {1 + sp}, {sp + bp})")
    return bp


def rel_mb(t):
    return float(psql(f"SELECT pg_total_relation_size('{t}') / 1048576.0"))


def buffer_capacity(g):
    """Total sub-buffer capacity (entries) of the BCMS of geometry g."""
    psql(f"SELECT bcms_create('cap_probe', 'int8', delta => {C['DELTA']}, width => {g['width']}, "
         f"mode => 'buffered', buffer_size => '{C['BUF_MB']}MB')")
    cap = int(psql("SELECT subbuffer_capacity::bigint * sketch_pages FROM bcms_info('cap_probe')"))
    psql("DROP TABLE cap_probe")
    return cap


def load_ratio(g, names, do_base, small):
    """Loader server (no RAM limit): create the tables and bulk-load the
    stream except the items the timed phases insert."""
    r = g["ratio"]
    n = g["n"]
    b, p, up, h = names
    B = C["BATCH"]
    Wc = C["W_CONS"]
    # BCMS: a bulk load leaves the sub-buffers empty (a big transaction
    # writes each sketch page directly).  All sub-buffers fill at the same
    # rate under uniform keys, so they flush in waves; a warm-up of 1.5
    # buffer capacities leaves them about half full, and a measured window
    # of one buffer capacity (U_BCMS=0) then makes each sub-buffer flush
    # once: the steady-state rate of one page write per subbuffer_capacity
    # updates, independent of the wave phase.
    cap = buffer_capacity(g)
    U_b = C["U_BCMS"] or -(-cap // B) * B
    Wb = min(-(-int(1.5 * cap) // B) * B, n // 2)
    plan = {
        b: dict(A=n - U_b - Wc - Wb, Wl=Wb, U=U_b),
        p: dict(A=n - C["U_PLAIN"] - Wc, Wl=0, U=C["U_PLAIN"]),
    }
    if do_base:
        plan[up] = dict(A=n - C["U_BASE"] - Wc, Wl=0, U=C["U_BASE"])
        plan[h] = dict(A=n - C["U_BASE"] - Wc, Wl=0, U=C["U_BASE"])
    for t, pl in plan.items():
        if pl["A"] < 1:
            raise RuntimeError(f"ratio {r}: n={n} is too small for the measured updates of {t}")
    files = {}
    files[b] = os.path.join(L.SQLDIR, f"load_{b}.sql")
    with open(files[b], "w") as f:
        f.write("BEGIN;\n")
        f.write(f"SELECT bcms_create('{b}', 'int8', delta => {C['DELTA']}, width => {g['width']}, "
                f"mode => 'buffered', buffer_size => '{C['BUF_MB']}MB');\n")
        f.write(f"INSERT INTO {b} SELECT {key()} FROM generate_series(1, {plan[b]['A']}) g;\n")
        f.write("COMMIT;\n")
    files[p] = os.path.join(L.SQLDIR, f"load_{p}.sql")
    with open(files[p], "w") as f:
        f.write("BEGIN;\n")
        f.write(f"SELECT bcms_create('{p}', 'int8', delta => {C['DELTA']}, width => {g['width']}, "
                f"mode => 'plain');\n")
        f.write(f"INSERT INTO {p} SELECT {key()} FROM generate_series(1, {plan[p]['A']}) g;\n")
        f.write("COMMIT;\n")
    if do_base:
        files[up] = os.path.join(L.SQLDIR, f"load_{up}.sql")
        with open(files[up], "w") as f:
            f.write("BEGIN;\n")
            f.write(f"CREATE TABLE {up} (key int8, n bigint NOT NULL) WITH (autovacuum_enabled = off);\n")
            # the keys of the stream are distinct (64-bit random), so each
            # bulk-loaded item is one row with n = 1, as the upserts would make
            f.write(f"INSERT INTO {up} SELECT {key()}, 1 FROM generate_series(1, {plan[up]['A']}) g;\n")
            f.write(f"ALTER TABLE {up} ADD PRIMARY KEY (key);\n")
            f.write("COMMIT;\n")
            f.write(f"VACUUM ANALYZE {up};\n")
        files[h] = os.path.join(L.SQLDIR, f"load_{h}.sql")
        with open(files[h], "w") as f:
            f.write("BEGIN;\n")
            f.write(f"CREATE TABLE {h} (key int8 NOT NULL) WITH (autovacuum_enabled = off);\n")
            f.write(f"INSERT INTO {h} SELECT {key()} FROM generate_series(1, {plan[h]['A']}) g;\n")
            f.write(f"CREATE INDEX {h}_key ON {h} (key);\n")
            f.write("COMMIT;\n")
            f.write(f"VACUUM ANALYZE {h};\n")
    for fn in files.values():
        os.chmod(fn, 0o644)
    # two sessions at a time (2 cores): BCMS with plain, upsert with heap
    t = time.time()
    wait_bg([(psql_bg(files[b]), f"load {b}"), (psql_bg(files[p]), f"load {p}")])
    log(f"  bulk-loaded {b} ({plan[b]['A']} items) and {p} ({plan[p]['A']} items) in {time.time() - t:.0f}s")
    if do_base:
        t = time.time()
        wait_bg([(psql_bg(files[up]), f"load {up}"), (psql_bg(files[h]), f"load {h}")])
        log(f"  bulk-loaded {up} and {h} ({plan[up]['A']} rows each) in {time.time() - t:.0f}s")
    t = time.time()
    run_batches(b, plan[b]["A"] + 1, plan[b]["Wl"], B, "insert", f"warm_{b}")
    log(f"  BCMS sub-buffer warm-up: {plan[b]['Wl']} items in {B}-row transactions, {time.time() - t:.0f}s; "
        f"buffered entries now {bcms_info(b)['buffered_entries']}")
    psql("CHECKPOINT")
    # next stream item and measured window of each table
    return {t: (pl["A"] + pl["Wl"] + 1, pl["U"]) for t, pl in plan.items()}, cap


def bench_updates(t, kind, first, count, batch, tag, flush=False, small=0):
    """Warm-up of W_CONS items, then `count` items in `batch`-row transactions
    (timed), then for BCMS the final bcms_flush (timed separately)."""
    restart("measure")
    if kind == "bcms":
        prewarm_buffer_pages(t)
    kindsql = "upsert" if kind == "upsert" else "insert"
    run_batches(t, first, C["W_CONS"], C["BATCH"], kindsql, f"wc_{tag}")
    first += C["W_CONS"]
    res = measure([t], lambda: run_batches(t, first, count, batch, kindsql, f"m_{tag}"),
                  count, checkpoint=True)
    first += count
    out = dict(updates=res)
    if small:
        fp = write_batches(os.path.join(L.SQLDIR, f"s_{tag}.sql"), t, first, small,
                           C["SMALL_BATCH"], kindsql)
        out["small"] = measure([t], lambda: psql_file(fp), small, checkpoint=True)
        first += small
    if flush:
        info = bcms_info(t)
        buffered = int(info["buffered_entries"])
        out["flush"] = measure([t], lambda: {"flushed": int(psql(f"SELECT bcms_flush('{t}')"))},
                               buffered, checkpoint=True)
        out["buffered_before_flush"] = buffered
    return out, first


def resident_subbuffer_pages(t, sp, bp):
    """Sub-buffer pages of BCMS t that are in shared_buffers now (no
    bcms_info() here: it reads every sub-buffer page)."""
    return int(psql(f"SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('{t}') "
                    f"AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    f"AND relforknumber = 0 AND relblocknumber BETWEEN {1 + sp} AND {sp + bp}")), bp


def bench_estimates(t, kind):
    restart("measure")
    if kind == "bcms":
        prewarm_buffer_pages(t)
        i = bcms_info(t)
        sp, bp = int(i["sketch_pages"]), int(i["buffer_pages"])
        res0, _ = resident_subbuffer_pages(t, sp, bp)
    Q = C["Q_EST"]
    q = estimate_sql(t, kind, Q)
    m = measure([t], lambda: {"result": psql(q)}, Q)
    if kind == "bcms":
        m["subbuf_pages"] = bp
        m["subbuf_resident_start"] = res0
        m["subbuf_resident_end"] = resident_subbuffer_pages(t, sp, bp)[0]
    return m


def estimate_sql(t, kind, Q):
    k = key("g", 1)       # other seed: keys (almost) never inserted
    if kind in ("bcms", "plain"):
        q = f"SELECT sum(bcms_estimate('{t}', {k})) FROM generate_series(1, {Q}) g"
    elif kind == "upsert":
        q = (f"SELECT sum(coalesce((SELECT u.n FROM {t} u WHERE u.key = {k}), 0)) "
             f"FROM generate_series(1, {Q}) g")
    else:
        q = (f"SELECT sum((SELECT count(*) FROM {t} x WHERE x.key = {k})) "
             f"FROM generate_series(1, {Q}) g")
    return q


def inram_estimates(names, do_base):
    """CPU cost of one estimate / point query: on the loader server, where
    the tables are cached, the second of two identical runs."""
    out = {}
    kinds = [("bcms", names[0]), ("plain", names[1])]
    if do_base:
        kinds += [("upsert", names[2]), ("heap", names[3])]
    Q = C["Q_EST"]
    for kind, t in kinds:
        q = estimate_sql(t, kind, Q)
        psql(q)
        tt = time.time()
        psql(q)
        dt = time.time() - tt
        out[kind] = dict(ops_per_s=Q / dt, us_per_op=dt / Q * 1e6)
    return out


def check_plans(up, h):
    """Point queries must be index lookups, not scans."""
    out = {}
    for t, q in ((up, f"SELECT u.n FROM {up} u WHERE u.key = 42"),
                 (h, f"SELECT count(*) FROM {h} x WHERE x.key = 42")):
        out[t] = psql("EXPLAIN (COSTS OFF) " + q).replace("\n", " / ")
    return out


def main():
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat(),
                   ratios=[])
    L.start_run(results, C["SB_MB"], C["CG_EXTRA_MB"])

    for r in C["RATIOS"]:
        g = geometry(r)
        do_base = r in C["BASE_RATIOS"]
        small = C["U_SMALL"] if r in C["SMALL_RATIOS"] else 0
        names = (f"bcms_{r}", f"plain_{r}", f"upsert_{r}", f"heap_{r}")
        b, p, up, h = names
        log(f"ratio 1:{r}: sketch {g['sketch_mb']:.0f} MB, width {g['width']}, n = {g['n']} items")
        L.ensure("loader")
        nxt, cap = load_ratio(g, names, do_base, small)
        R = dict(geometry=g, baseline=do_base, buffer_capacity=cap)
        R["bcms_info_loaded"] = bcms_info(b)
        R["plain_info_loaded"] = bcms_info(p)
        R["size_mb"] = {t: rel_mb(t) for t in ([b, p, up, h] if do_base else [b, p])}
        if r == C["RATIOS"][0]:
            R["inram_estimates"] = inram_estimates(names, do_base)
            log("  in-RAM (loader) estimates, us/op: " +
                ", ".join(f"{k} {v['us_per_op']:.1f}" for k, v in R["inram_estimates"].items()))
        log(f"  sizes (MB): {R['size_mb']}; BCMS sub-buffer capacity {R['bcms_info_loaded']['subbuffer_capacity']}")

        # ---- updates, RAM-limited server, caches dropped
        R["bcms"], _ = bench_updates(b, "bcms", nxt[b][0], nxt[b][1], C["BATCH"], b, flush=True, small=small)
        log(f"  BCMS  updates: {R['bcms']['updates']['ops_per_s']:9.0f}/s  reads/op {R['bcms']['updates']['reads_per_op']:.3f}"
            f"  flush {R['bcms']['flush']['seconds']:.1f}s  mem peak {R['bcms']['updates']['mem_peak_mb']:.0f} MB")
        R["plain"], _ = bench_updates(p, "plain", nxt[p][0], nxt[p][1], C["BATCH"], p, small=small)
        log(f"  plain updates: {R['plain']['updates']['ops_per_s']:9.0f}/s  reads/op {R['plain']['updates']['reads_per_op']:.3f}"
            f"  mem peak {R['plain']['updates']['mem_peak_mb']:.0f} MB")
        if do_base:
            R["upsert"], _ = bench_updates(up, "upsert", nxt[up][0], nxt[up][1], C["BATCH"], up, small=small)
            log(f"  upsert updates: {R['upsert']['updates']['ops_per_s']:8.0f}/s  reads/op {R['upsert']['updates']['reads_per_op']:.3f}")
            R["heap"], _ = bench_updates(h, "heap", nxt[h][0], nxt[h][1], C["BATCH"], h, small=small)
            log(f"  heap  inserts: {R['heap']['updates']['ops_per_s']:9.0f}/s  reads/op {R['heap']['updates']['reads_per_op']:.3f}")
        R["bcms_info_final"] = bcms_info(b)
        R["plain_info_final"] = bcms_info(p)

        # ---- estimates, caches dropped
        R["bcms"]["estimates"] = bench_estimates(b, "bcms")
        R["plain"]["estimates"] = bench_estimates(p, "plain")
        log(f"  estimates/s BCMS {R['bcms']['estimates']['ops_per_s']:.0f} (reads/est {R['bcms']['estimates']['reads_per_op']:.3f},"
            f" sub-buffer pages resident {R['bcms']['estimates']['subbuf_resident_start']} -> "
            f"{R['bcms']['estimates']['subbuf_resident_end']} of {R['bcms']['estimates']['subbuf_pages']}),"
            f" plain {R['plain']['estimates']['ops_per_s']:.0f} (reads/est {R['plain']['estimates']['reads_per_op']:.3f})")
        if do_base:
            R["plans"] = check_plans(up, h)
            R["upsert"]["estimates"] = bench_estimates(up, "upsert")
            R["heap"]["estimates"] = bench_estimates(h, "heap")
            R["size_mb_final"] = {t: rel_mb(t) for t in [b, p, up, h]}
            log(f"  point queries/s upsert {R['upsert']['estimates']['ops_per_s']:.0f}, heap {R['heap']['estimates']['ops_per_s']:.0f}")
        results["ratios"].append(R)
        # free the disk
        restart("loader", drop=False)
        psql(f"DROP TABLE {b}, {p}" + (f", {up}, {h}" if do_base else ""))
        psql("CHECKPOINT")
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)

    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import bcms_bench_report
    bcms_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "bcms_bench_report", C)
