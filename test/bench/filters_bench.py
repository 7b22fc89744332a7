#!/usr/bin/python3
"""
Filter benchmark: Table 1 of Bender et al., "Don't Thrash: How to Cache Your
Hash on Flash" (VLDB 2012, section 5) reproduced inside PostgreSQL 15.

  * In RAM (section 5.1): quotient filter (`quotient_filter`) vs Bloom filter
    (`bloom_filter`, mode plain) at false-positive rates 1/64, 1/512, 1/4096:
    inserts, uniform random lookups, successful lookups; unlogged tables on a
    server whose shared_buffers hold everything.
  * On disk (section 5.2, 5.3): cascade filter (fanouts 2, 4, 16) and
    buffered quotient filter vs elevator Bloom filter (EBF) and buffered
    Bloom filter (BBF, hash-localized) at RAM:filter 1:4 and 1:24, fp rate
    1/4096, RAM enforced by small shared_buffers inside a memory cgroup.
  * What a PostgreSQL user would use instead for exact membership: a table
    with a btree or a hash index on the key.

Run as root through test/bench/filters_bench.sh, which builds and installs
the extension into a private tree first (see benchlib.sh).  The Bloom filter
rows run when the built extension has bloom_create(); otherwise they are
reported as "not available in this build".

Configuration: environment variables (see CONFIG below).  A partial run
(STRUCTURES=bqf,cf4 to measure only those, INRAM=0 to skip the in-RAM
phase), e.g. to profile one window of two builds side by side, should
write its results elsewhere (OUT_JSON, OUT_MD, OUT_PNG).
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
from benchlib import (env_float, env_int, env_list, log, psql, psql_bg, psql_file,  # noqa: E402
                      restart, measure, snapshot, delta, wait_bg, write_batches, write_sql, key)

CONFIG = dict(
    SB_MB=env_int("SB_MB", 32),                 # shared_buffers = the RAM M
    CG_EXTRA_MB=env_int("CG_EXTRA_MB", 40),     # cgroup limit = SB + this
    BUF_MB=env_int("BUF_MB", 0),                # level 0 / Bloom buffer (0: SB/2)
    RATIOS=env_list("RATIOS", "4,24"),          # filter size / RAM
    STRUCTURES=[x for x in os.environ.get("STRUCTURES", "").split(",") if x],  # only these (bqf,cf4,...)
    INRAM=env_int("INRAM", 1),                  # 0: skip the in-RAM phase
    LOAD=env_float("LOAD", 0.75),               # in RAM: keys = LOAD x 2^INRAM_LOG2_SLOTS
    FP_INV=env_int("FP_INV", 4096),             # on-disk fp rate = 1/FP_INV
    FULL_RATIOS=env_list("FULL_RATIOS", "4"),   # QF family inserted from empty, timed
    FULL_CHUNKS=env_int("FULL_CHUNKS", 10),     # ... measured in this many chunks
    FANOUTS=env_list("FANOUTS", "2,4,16"),      # CF fanouts at FANOUT_RATIOS
    FANOUT_RATIOS=env_list("FANOUT_RATIOS", "4"),  # elsewhere fanout 4 only
    QF_WINDOW=env_float("QF_WINDOW", 2),        # windowed QF family: level-0 capacities
    BLOOM_WINDOW=env_float("BLOOM_WINDOW", 2),  # Bloom: EBF buffer capacities
    BATCH=env_int("BATCH", 10000),              # rows per INSERT transaction
    W_WARM=env_int("W_WARM", 20000),            # untimed warm-up on the limited server
    BASE_RATIOS=env_list("BASE_RATIOS", "4"),   # btree / hash baselines
    U_BASE=env_int("U_BASE", 100000),           # measured btree/hash inserts
    Q_LOOKUP=env_int("Q_LOOKUP", 10000),        # on-disk lookups of each kind
    INRAM_FPS=env_list("INRAM_FPS", "64,512,4096"),
    INRAM_LOG2_SLOTS=env_int("INRAM_LOG2_SLOTS", 22),  # QF home slots in RAM
    INRAM_BATCH=env_int("INRAM_BATCH", 100000),
    Q_INRAM=env_int("Q_INRAM", 500000),
    INRAM_REPEAT=env_int("INRAM_REPEAT", 3),    # median of this many runs
    SPACE=env_int("SPACE", 1),                  # 0: skip the space-at-capacity phase
    SPACE_N=env_int("SPACE_N", 1000000),        # ... capacity = keys inserted
    SPACE_Q=env_int("SPACE_Q", 1000000),        # ... absent keys probed for the fp rate
    SPACE_BUF_KB=env_int("SPACE_BUF_KB", 256),  # ... level 0 of the BQF and CF
    SPACE_PART=[float(x) for x in os.environ.get("SPACE_PART", "0.5").split(",") if x],  # ... also filled
    # to these fractions of the capacity (quotient_filter, qfilter, Bloom)
    LOADER_SB_MB=env_int("LOADER_SB_MB", 4096),
    BLOOM_BULK_TXN=env_int("BLOOM_BULK_TXN", 20000000),  # Bloom bulk loads: keys per transaction (one
    # transaction's pending changes and change log would take the disk at 1:24)
    MEASURE_MAINT_MB=env_int("MEASURE_MAINT_MB", 8),  # maintenance_work_mem of the measuring server
    PORT=env_int("PORT", 5467),
    WORK=os.environ.get("WORK", "/tmp/ssbench-filters"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-filters.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-filters.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "filters_bench_results.json")),
)
C = CONFIG
if C["BUF_MB"] == 0:
    C["BUF_MB"] = C["SB_MB"] // 2
FP = 1.0 / C["FP_INV"]

# The measuring server's consolidation (background workers, flushes and
# VACUUM work in maintenance_work_mem) within the memory cgroup's room for
# processes, as the inserting statements' rounds are within work_mem.
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["LOADER_SB_MB"],
            measure_extra={"maintenance_work_mem": f"{C['MEASURE_MAINT_MB']}MB"})

HAVE_BLOOM = False
HAVE_QFILTER = False

# keys: stream item i is hashint8extended(i, 0), i = 1..n; uniform random
# lookups use seed 1 (absent keys); successful lookups pick i uniformly in
# 1..n with another hash
ABSENT = key("g", 1)


def present(n):
    return key(f"1 + ((hashint8extended(g, 2) & 9223372036854775807) % {n})", 0)


# ---------------------------------------------------------------- structures

QF_KINDS = ("cf", "bqf")
BLOOM_KINDS = ("ebf", "bbf")
BASE_KINDS = ("btree", "hash")
LABEL = {"cf2": "CF fanout 2", "cf4": "CF fanout 4", "cf16": "CF fanout 16", "bqf": "BQF",
         "ebf": "EBF", "bbf": "BBF", "btree": "btree index", "hash": "hash index",
         "qf": "QF", "bf": "BF"}


def create_sql(kind, t, n, fanout=None, unlogged=False, fp=None, buffer=None):
    fp = fp or FP
    if kind in ("cf", "bqf"):
        am = (f"'cascade_filter', fanout => {fanout}" if kind == "cf" else "'buffered_quotient_filter'")
        return (f"SELECT qf_create('{t}', 'int8', capacity => {n}, fp_rate => {fp!r}, "
                f"access_method => {am}, buffer_size => '{buffer or str(C['BUF_MB']) + 'MB'}', "
                f"unlogged => {str(unlogged).lower()});")
    if kind == "qf":
        return (f"SELECT qf_create('{t}', 'int8', capacity => {n}, fp_rate => {fp!r}, "
                f"unlogged => {str(unlogged).lower()});")
    if kind == "ebf":
        return (f"SELECT bloom_create('{t}', 'int8', capacity => {n}, fp_rate => {fp!r}, "
                f"mode => 'elevator', buffer_size => '{C['BUF_MB']}MB');")
    if kind == "bbf":
        return (f"SELECT bloom_create('{t}', 'int8', capacity => {n}, fp_rate => {fp!r}, "
                f"mode => 'localized', buffer_size => '{C['BUF_MB']}MB');")
    if kind == "bf":
        return (f"SELECT bloom_create('{t}', 'int8', capacity => {n}, fp_rate => {fp!r}, "
                f"mode => 'plain', unlogged => {str(unlogged).lower()});")
    if kind in BASE_KINDS:
        return f"CREATE TABLE {t} (key int8 NOT NULL) WITH (autovacuum_enabled = off);"
    raise ValueError(kind)


def index_sql(kind, t):
    return f"CREATE INDEX {t}_key ON {t} USING {kind} (key);"


def contains_sql(kind, t, expr):
    if kind in ("cf", "bqf", "qf"):
        return f"qf_contains('{t}', {expr})"
    if kind in ("ebf", "bbf", "bf"):
        return f"bloom_contains('{t}', {expr})"
    return f"EXISTS (SELECT 1 FROM {t} x WHERE x.key = {expr})"


def lookup_sql(kind, t, expr, q):
    return (f"SELECT count(*) FILTER (WHERE {contains_sql(kind, t, expr)}) "
            f"FROM generate_series(1, {q}) g")


def qf_info(t):
    cols = ["access_method", "capacity", "fp_rate", "fingerprint_bits", "remainder_bits", "slot_bits",
            "levels", "pages", "items", "total_count", "load_factor", "false_positive_rate",
            "relation_pages", "resizes"]
    out = psql(f"SELECT {', '.join(cols)} FROM qf_info('{t}')").split("|")
    d = dict(zip(cols, out))
    for k in cols[1:]:
        d[k] = float(d[k]) if "." in d[k] or "e" in d[k] else int(d[k])
    return d


def bloom_info(t):
    cols = ["mode", "capacity", "fp_rate", "bits", "hashes", "pages", "buffer_pages", "subbuffer_capacity",
            "buffered_entries", "items", "bits_set", "fill_ratio", "false_positive_rate", "flushes",
            "relation_pages"]
    out = psql(f"SELECT {', '.join(cols)} FROM bloom_info('{t}')").split("|")
    d = dict(zip(cols, out))
    for k in cols[1:]:
        d[k] = float(d[k]) if "." in d[k] or "e" in d[k] else int(d[k])
    return d


def info(kind, t):
    if kind in ("cf", "bqf", "qf"):
        return qf_info(t)
    if kind in ("ebf", "bbf", "bf"):
        return bloom_info(t)
    return {}


def sizes(kind, t):
    """Relation size (the filter table; heap for the baselines) and total
    size with indexes, in bytes."""
    rel, tot = psql(f"SELECT pg_relation_size('{t}'), pg_total_relation_size('{t}')").split("|")
    out = dict(rel_bytes=int(rel), total_bytes=int(tot))
    if kind in BASE_KINDS:
        out["index_bytes"] = int(psql(f"SELECT pg_relation_size('{t}_key')"))
    if kind in ("cf", "bqf", "qf"):
        # what VACUUM FULL leaves: the metapage and the live levels, without
        # the spare runs of out-of-place merges and the runs left by growth
        out["live_bytes"] = 8192 * (1 + int(psql(f"SELECT pages FROM qf_info('{t}')")))
    return out


def prewarm(kind, t):
    """The structure's RAM part into shared_buffers after a restart: level 0
    of a BQF/CF (blocks 1 .. buffer pages, never moved), the buffer pages of
    a buffered Bloom filter.  The paper keeps these in RAM."""
    if kind in ("cf", "bqf"):
        nb = C["BUF_MB"] * 128
        return int(psql(f"SELECT pg_prewarm('{t}', 'buffer', 'main', 1, "
                        f"least({nb}, pg_relation_size('{t}') / 8192 - 1))"))
    if kind in BLOOM_KINDS:
        i = bloom_info(t)
        if i["buffer_pages"] > 0:
            return int(psql(f"SELECT pg_prewarm('{t}', 'buffer', 'main', {1 + i['pages']}, "
                            f"{i['pages'] + i['buffer_pages']})"))
    return 0


def check_plan(kind, t):
    return psql(f"EXPLAIN (COSTS OFF) SELECT EXISTS (SELECT 1 FROM {t} x WHERE x.key = 42)").replace("\n", " / ")


# ---------------------------------------------------------------- in RAM

def inram(results):
    """QF vs BF in RAM (paper 5.1): unlogged tables on the loader server
    (shared_buffers far larger than the filters), n = LOAD x 2^s items into
    a QF of 2^s home slots and into a BF of capacity n, same fp rate."""
    L.ensure("loader")
    out = []
    s = C["INRAM_LOG2_SLOTS"]
    n = int(C["LOAD"] * 2**s)
    cap_qf = int(0.95 * 2**s)       # t_max = s exactly
    Q = C["Q_INRAM"]
    # the SQL loop alone (generate_series, hash, count): subtracted nowhere,
    # reported so that the structures' own cost can be read off
    q0 = f"SELECT count(*) FILTER (WHERE {ABSENT} <> 0) FROM generate_series(1, {Q}) g"
    psql(q0)
    runs = []
    for rep in range(C["INRAM_REPEAT"]):
        t = time.time()
        psql(q0)
        runs.append(time.time() - t)
    loop_us = sorted(runs)[len(runs) // 2] / Q * 1e6
    results["inram_loop_us"] = loop_us
    kinds = [("qf", "quotient_filter")]
    if HAVE_BLOOM:
        kinds.append(("bf", "bloom_filter plain"))
    for fpinv in C["INRAM_FPS"]:
        fp = 1.0 / fpinv
        for kind, label in kinds:
            tname = f"ram_{kind}_{fpinv}"
            path = write_batches(os.path.join(L.SQLDIR, f"{tname}.sql"), tname, 1, n, C["INRAM_BATCH"], "insert")
            # the median of INRAM_REPEAT runs (the 2 cores are shared)
            ins = []
            for rep in range(C["INRAM_REPEAT"]):
                if rep:
                    psql(f"DROP TABLE {tname}")
                psql(create_sql(kind, tname, cap_qf if kind == "qf" else n, unlogged=True, fp=fp))
                t = time.time()
                psql_file(path)
                ins.append(time.time() - t)
            ins_s = sorted(ins)[len(ins) // 2]
            res = dict(kind=kind, fp_inv=fpinv, n=n, insert_s=ins_s, insert_per_s=n / ins_s, insert_runs_s=ins)
            for what, expr in (("uniform", ABSENT), ("successful", present(n))):
                q = lookup_sql(kind, tname, expr, Q)
                psql(q)                      # first run: warm
                runs = []
                for rep in range(C["INRAM_REPEAT"]):
                    t = time.time()
                    pos = int(psql(q))
                    runs.append(time.time() - t)
                dt = sorted(runs)[len(runs) // 2]
                res[what] = dict(per_s=Q / dt, us=dt / Q * 1e6, positives=pos, q=Q, runs_s=runs)
            res["info"] = info(kind, tname)
            res.update(sizes(kind, tname))
            res["bits_per_item"] = res["rel_bytes"] * 8 / n
            res["measured_fp"] = res["uniform"]["positives"] / Q
            out.append(res)
            log(f"  in RAM 1/{fpinv} {label}: {res['insert_per_s']:,.0f} inserts/s, "
                f"{res['uniform']['per_s']:,.0f} uniform lookups/s (fp {res['measured_fp']:.5f}), "
                f"{res['successful']['per_s']:,.0f} successful/s, {res['bits_per_item']:.1f} bits/item")
            psql(f"DROP TABLE {tname}")
    if HAVE_QFILTER:
        out += inram_qfilter(n, cap_qf, Q)
    results["inram"] = out


def inram_qfilter(n, cap, Q):
    """The in-memory qfilter type (when it is in this build)."""
    out = []
    for fpinv in C["INRAM_FPS"]:
        fp = 1.0 / fpinv
        psql("DROP TABLE IF EXISTS ram_qfv")
        t = time.time()
        psql(f"CREATE TABLE ram_qfv AS SELECT qfilter_agg({key()}, {cap}::bigint, {fp!r}::float8) f "
             f"FROM generate_series(1, {n}) g")
        ins_s = time.time() - t
        res = dict(kind="qfilter", fp_inv=fpinv, n=n, insert_s=ins_s, insert_per_s=n / ins_s)
        for what, expr in (("uniform", ABSENT), ("successful", present(n))):
            q = (f"SELECT count(*) FILTER (WHERE qfilter_contains(v.f, {expr})) "
                 f"FROM (SELECT f FROM ram_qfv OFFSET 0) v, generate_series(1, {Q}) g")
            psql(q)
            runs = []
            for rep in range(C["INRAM_REPEAT"]):
                t = time.time()
                pos = int(psql(q))
                runs.append(time.time() - t)
            dt = sorted(runs)[len(runs) // 2]
            res[what] = dict(per_s=Q / dt, us=dt / Q * 1e6, positives=pos, q=Q, runs_s=runs)
        res["rel_bytes"] = int(psql("SELECT pg_column_size(f) FROM ram_qfv"))
        res["bits_per_item"] = res["rel_bytes"] * 8 / n
        res["measured_fp"] = res["uniform"]["positives"] / Q
        out.append(res)
        log(f"  in RAM 1/{fpinv} qfilter: {res['insert_per_s']:,.0f} inserts/s, "
            f"{res['uniform']['per_s']:,.0f} uniform lookups/s, {res['successful']['per_s']:,.0f} successful/s")
    psql("DROP TABLE IF EXISTS ram_qfv")
    return out


# ---------------------------------------------------------------- space

SPACE_KINDS = (("qf", "quotient_filter"), ("bqf", "buffered_quotient_filter"),
               ("cf", "cascade_filter fanout 4"), ("qfilter", "qfilter value"),
               ("bf", "bloom_filter plain"))


def space(results):
    """Bits per key at the requested capacity: every quotient filter kind
    and the qfilter value filled with their capacity of keys (the end of
    the stream: consolidated; the whole relation, its live pages, and the
    relation after VACUUM FULL), a plain Bloom filter of the same capacity
    and rate, and the measured fp rate of each over SPACE_Q absent keys;
    then the quotient_filter, the qfilter and the Bloom filter of that
    capacity filled only to the SPACE_PART fractions of it.  A Bloom
    filter's bits per key at another kind's measured rate scale with
    ln(1/fp)."""
    L.ensure("loader")
    cap, Q = C["SPACE_N"], C["SPACE_Q"]
    out = []
    parts = [(1.0, SPACE_KINDS)] + [(float(f), [k for k in SPACE_KINDS if k[0] in ("qf", "qfilter", "bf")])
                                    for f in C["SPACE_PART"]]
    for fpinv, (part, kinds) in [(f, p) for f in C["INRAM_FPS"] for p in parts]:
        fp = 1.0 / fpinv
        n = int(part * cap)
        for kind, label in kinds:
            if (kind == "bf" and not HAVE_BLOOM) or (kind == "qfilter" and not HAVE_QFILTER):
                continue
            t = f"space_{kind}_{fpinv}"
            res = dict(kind=kind, label=label, fp_inv=fpinv, n=n, capacity=cap, part=part)
            if kind == "qfilter":
                psql(f"CREATE TABLE {t} AS SELECT qfilter_agg({key()}, {cap}::bigint, {fp!r}::float8) f "
                     f"FROM generate_series(1, {n}) g")
                res["bytes"] = res["live_bytes"] = res["vacuum_full_bytes"] = \
                    int(psql(f"SELECT pg_column_size(f) FROM {t}"))
                q = (f"SELECT count(*) FILTER (WHERE qfilter_contains(v.f, {ABSENT})) "
                     f"FROM (SELECT f FROM {t} OFFSET 0) v, generate_series(1, {Q}) g")
            else:
                psql(create_sql(kind, t, cap, fanout=4, unlogged=True, fp=fp,
                                buffer=f"{C['SPACE_BUF_KB']}kB"))
                path = write_batches(os.path.join(L.SQLDIR, f"{t}.sql"), t, 1, n, C["INRAM_BATCH"], "insert")
                psql_file(path)
                psql(f"SELECT {'bloom' if kind == 'bf' else 'qf'}_flush('{t}')")
                psql(f"VACUUM {t}")
                res["info"] = info(kind, t)
                res["bytes"] = int(psql(f"SELECT pg_relation_size('{t}')"))
                if kind == "bf":
                    # the metapage, the bit pages and the buffer pages
                    res["live_bytes"] = 8192 * (1 + res["info"]["pages"] + res["info"]["buffer_pages"])
                else:
                    res["live_bytes"] = sizes(kind, t)["live_bytes"]
                psql(f"VACUUM FULL {t}")
                res["vacuum_full_bytes"] = int(psql(f"SELECT pg_relation_size('{t}')"))
                q = lookup_sql(kind, t, ABSENT, Q)
            res["positives"] = int(psql(q))
            res["measured_fp"] = res["positives"] / Q
            res["bits_per_key"] = res["bytes"] * 8 / n
            res["live_bits_per_key"] = res["live_bytes"] * 8 / n
            res["vacuum_full_bits_per_key"] = res["vacuum_full_bytes"] * 8 / n
            out.append(res)
            log(f"  space 1/{fpinv} {label}, {n:,} keys: {res['vacuum_full_bits_per_key']:.2f} bits/key after VACUUM FULL, "
                f"{res['live_bits_per_key']:.2f} live levels before it, {res['bits_per_key']:.2f} whole relation, "
                f"fp {res['measured_fp']:.6f}")
            psql(f"DROP TABLE {t}")
    results["space"] = out


# ---------------------------------------------------------------- on disk

def geometry(r, cap_per_page):
    """n = the capacity of a quotient filter whose pages are ratio x M at
    the on-disk fp rate (cap_per_page keys per 8 kB page at that rate): the
    stream fills the filter it was created for, as the Bloom filters."""
    m_pages = C["SB_MB"] * 128
    n = int(r * m_pages * cap_per_page)
    return dict(ratio=r, m_pages=m_pages, capacity_per_page=cap_per_page, n=n,
                target_mb=r * C["SB_MB"])


def capacity_per_page():
    """Keys per page of a quotient filter at the on-disk fp rate: a probe of
    capacity 0.95 x 2^24 (a whole number of power-of-two pages in builds
    that round capacities up to powers of two, so that n below never
    crosses into the next size there)."""
    X = int(0.95 * 2**24)
    psql(create_sql("qf", "probe_cpp", X))
    pages = qf_info("probe_cpp")["pages"]
    psql("DROP TABLE probe_cpp")
    return X / pages


def bloom_keys(g):
    """Keys that fill a Bloom filter whose bit pages are ratio x M (the
    Bloom filters get their own n: equal RAM:filter ratios, as the paper's
    "grown to about four times the size of RAM")."""
    X = 10000000
    psql(create_sql("bf", "probe_bf", X))
    pages = bloom_info("probe_bf")["pages"]
    psql("DROP TABLE probe_bf")
    return int(X * g["ratio"] * g["m_pages"] / pages)


def nkeys(g, kind):
    return g["n_bf"] if kind in BLOOM_KINDS else g["n"]


def structures(r):
    out = []
    fans = C["FANOUTS"] if r in C["FANOUT_RATIOS"] else [4]
    for f in fans:
        out.append((f"cf{f}", "cf", f))
    out.append(("bqf", "bqf", None))
    if HAVE_BLOOM:
        out += [("ebf", "ebf", None), ("bbf", "bbf", None)]
    if r in C["BASE_RATIOS"]:
        out += [("btree", "btree", None), ("hash", "hash", None)]
    if C["STRUCTURES"]:
        out = [s for s in out if s[0] in C["STRUCTURES"]]
    return out


def level0_capacity(g):
    """About the items that fill level 0 of a BQF/CF: 0.9 of its slots
    (level 0 may have more remainder bits than the capacity's level, so
    its slots per page follow its own remainder width)."""
    psql(create_sql("cf", "probe_l0", g["n"], fanout=4))
    i = qf_info("probe_l0")
    psql("DROP TABLE probe_l0")
    slots_per_page = (8136 - 32) * 8 // (i["remainder_bits"] + 4)
    return int(0.9 * i["pages"] * slots_per_page), i


def ebf_capacity(g):
    """Entries of the EBF buffer (all sub-buffers)."""
    psql(create_sql("ebf", "probe_ebf", g["n_bf"]))
    i = bloom_info("probe_ebf")
    psql("DROP TABLE probe_ebf")
    return i["buffer_pages"] * i["subbuffer_capacity"], i


def run_chunks(name, kind, t, first, count, chunks):
    """Insert items first .. first+count-1 in BATCH-row transactions on the
    measuring server, in `chunks` timed chunks with statistics per chunk."""
    rows = []
    per = -(-count // chunks)
    done = 0
    tot_s = 0.0
    while done < count:
        c = min(per, count - done)
        path = write_batches(os.path.join(L.SQLDIR, f"full_{name}.sql"), t, first + done, c, C["BATCH"], "insert")
        time.sleep(0.3)
        s0 = snapshot([t])
        tt = time.time()
        psql_file(path)
        dt = time.time() - tt
        time.sleep(0.3)
        d = delta(s0, snapshot([t]))
        done += c
        tot_s += dt
        i = info(kind, t)
        row = dict(items=done, ops=c, seconds=dt, ops_per_s=c / dt, cum_per_s=done / tot_s,
                   reads_per_op=(d["heap_read"] + d["idx_read"]) / c, wal_bytes_per_op=d["wal"] / c,
                   buf_writes_per_op=d["bw"] / c, dev_reads_per_op=d["dev_rd"] / c,
                   dev_write_kb_per_op=d["dev_wr_sect"] / 2 / c,
                   levels=i.get("levels"), merges=i.get("resizes"), pages=i.get("pages"),
                   relation_pages=i.get("relation_pages"))
        rows.append(row)
        log(f"    {name}: {done:,} items ({100 * done / count:.0f}%): chunk {row['ops_per_s']:,.0f}/s, "
            f"cumulative {row['cum_per_s']:,.0f}/s, reads/op {row['reads_per_op']:.3f}, "
            f"levels {row['levels']}, merges {row['merges']}")
    return rows, tot_s


def full_run(name, kind, fanout, g):
    """QF family from empty on the RAM-limited server (the paper's
    cumulative insert throughput)."""
    restart("measure")
    t = f"{name}_{g['ratio']}"
    n = nkeys(g, kind)
    psql(create_sql(kind, t, n, fanout=fanout))
    rows, tot = run_chunks(name, kind, t, 1, n, C["FULL_CHUNKS"])
    psql("CHECKPOINT")
    res = dict(mode="full", table=t, n=n, seconds=tot, ops_per_s=n / tot, chunks=rows,
               last_chunk_per_s=rows[-1]["ops_per_s"])
    return res


def bulk_sql(kind, t, g, fanout, count, txn=None):
    """Loader script: create and bulk-load stream items 1..count (untimed),
    in one transaction, or in transactions of `txn` items (the Bloom
    filters: BLOOM_BULK_TXN, so that the consolidation keeps the change log
    short; the QF family:
    before 977f942 a transaction of more keys than a level-0 page holds
    made the commit merge once per level-0 page overflow, see the
    analysis; kept so that runs stay comparable)."""
    txn = txn or count
    s = "BEGIN;\n" + create_sql(kind, t, nkeys(g, kind), fanout=fanout) + "\n"
    i = 1
    while i <= count:
        j = min(i + txn - 1, count)
        s += f"INSERT INTO {t} SELECT {key()} FROM generate_series({i}, {j}) g;\n"
        if i == 1:
            if kind in BASE_KINDS:
                s += index_sql(kind, t) + "\n"
            s += "COMMIT;\n"
        i = j + 1
    if count < 1:
        if kind in BASE_KINDS:
            s += index_sql(kind, t) + "\n"
        s += "COMMIT;\n"
    return s


def window_run(name, kind, t, g, first, count):
    """Warm-up, then `count` items in BATCH-row transactions (timed) on the
    RAM-limited server; the stream ends at item n."""
    restart("measure")
    warm = prewarm(kind, t)
    path = write_batches(os.path.join(L.SQLDIR, f"warm_{name}.sql"), t, first, C["W_WARM"], C["BATCH"], "insert")
    psql_file(path)
    first += C["W_WARM"]
    i0 = info(kind, t)
    path = write_batches(os.path.join(L.SQLDIR, f"win_{name}.sql"), t, first, count, C["BATCH"], "insert")
    res = measure([t], lambda: psql_file(path), count, checkpoint=True)
    i1 = info(kind, t)
    res.update(mode="window", table=t, n=first + count - 1, prewarmed_pages=warm, info_before=i0, info_after=i1)
    if kind in ("cf", "bqf"):
        res["merges_in_window"] = i1["resizes"] - i0["resizes"]
    elif kind in BLOOM_KINDS:
        res["flushes_in_window"] = i1["flushes"] - i0["flushes"]
    return res


def lookups(name, kind, t, g):
    out = {}
    for what, expr in (("uniform", ABSENT), ("successful", present(nkeys(g, kind)))):
        restart("measure")
        warm = prewarm(kind, t)
        q = lookup_sql(kind, t, expr, C["Q_LOOKUP"])
        m = measure([t], lambda: {"positives": int(psql(q))}, C["Q_LOOKUP"])
        m["prewarmed_pages"] = warm
        out[what] = m
    return out


def ratio_run(r, g):
    R = dict(geometry=g, structures={})
    S = structures(r)
    L.ensure("loader")
    l0cap, l0info = level0_capacity(g)
    R["level0_capacity"] = l0cap
    R["level0_pages"] = l0info["pages"]
    full = r in C["FULL_RATIOS"]
    if HAVE_BLOOM:
        g["n_bf"] = bloom_keys(g)
        log(f"  Bloom filters: n = {g['n_bf']:,} keys fill {r} x M of bit pages")
    W = {}
    # window lengths (items); the stream always ends at item n
    for name, kind, fan in S:
        if kind in QF_KINDS and not full:
            W[name] = int(C["QF_WINDOW"] * l0cap) // C["BATCH"] * C["BATCH"]
        elif kind in BLOOM_KINDS:
            if "ebf_cap" not in R:
                R["ebf_cap"], R["ebf_probe"] = ebf_capacity(g)
            W[name] = int(C["BLOOM_WINDOW"] * R["ebf_cap"]) // C["BATCH"] * C["BATCH"]
        elif kind in BASE_KINDS:
            W[name] = C["U_BASE"]
    R["windows"] = W
    # bulk loads on the loader, two at a time (2 cores)
    todo = [(name, kind, fan) for name, kind, fan in S if name in W]
    for i in range(0, len(todo), 2):
        procs = []
        tt = time.time()
        for name, kind, fan in todo[i:i + 2]:
            t = f"{name}_{r}"
            cnt = nkeys(g, kind) - W[name] - C["W_WARM"]
            txn = (max(C["BATCH"], l0cap // 8) if kind in QF_KINDS else
                   C["BLOOM_BULK_TXN"] if kind in BLOOM_KINDS else None)
            path = write_sql(f"bulk_{t}.sql", bulk_sql(kind, t, g, fan, cnt, txn))
            procs.append((psql_bg(path), f"bulk load {t}"))
        wait_bg(procs)
        # VACUUM once no other loading transaction is open: the visibility
        # map of the indexed tables is set (index-only scans, as after
        # autovacuum), the filters' change logs are consolidated here, not
        # by the measuring server's background workers after the restart
        for name, kind, fan in todo[i:i + 2]:
            psql(f"VACUUM {'ANALYZE ' if kind in BASE_KINDS else ''}{name}_{r}")
        log(f"  bulk-loaded {', '.join(x[0] for x in todo[i:i + 2])} "
            f"({nkeys(g, todo[i][1]) - W[todo[i][0]] - C['W_WARM']:,} items) in {time.time() - tt:.0f}s")
    psql("CHECKPOINT")
    for name, kind, fan in S:
        t = f"{name}_{r}"
        if name in W:
            res = window_run(name, kind, t, g, nkeys(g, kind) - W[name] - C["W_WARM"] + 1, W[name])
            extra = (f", merges {res.get('merges_in_window')}" if kind in QF_KINDS else
                     f", flushes {res.get('flushes_in_window')}" if kind in BLOOM_KINDS else "")
            log(f"  {name}: window of {W[name]:,} inserts: {res['ops_per_s']:,.0f}/s, reads/op "
                f"{res['reads_per_op']:.3f}, WAL B/op {res['wal_bytes_per_op']:.0f}{extra}")
        else:
            log(f"  {name}: {nkeys(g, kind):,} inserts from empty")
            res = full_run(name, kind, fan, g)
            log(f"  {name}: cumulative {res['ops_per_s']:,.0f}/s in {res['seconds']:.0f}s, "
                f"last chunk {res['last_chunk_per_s']:,.0f}/s")
        R["structures"][name] = dict(kind=kind, fanout=fan, table=t, insert=res)
    # sizes and final state (on the measuring server: no restart needed)
    for name, kind, fan in S:
        t = f"{name}_{r}"
        st = R["structures"][name]
        st["info"] = info(kind, t)
        st.update(sizes(kind, t))
        if kind in BASE_KINDS:
            st["plan"] = check_plan(kind, t)
    for name, kind, fan in S:
        t = f"{name}_{r}"
        st = R["structures"][name]
        st["lookups"] = lookups(name, kind, t, g)
        u, s = st["lookups"]["uniform"], st["lookups"]["successful"]
        log(f"  {name}: lookups/s uniform {u['ops_per_s']:,.0f} (reads {u['reads_per_op']:.2f}, "
            f"positives {u['positives']}), successful {s['ops_per_s']:,.0f} (reads {s['reads_per_op']:.2f}, "
            f"positives {s['positives']}/{C['Q_LOOKUP']})")
    # the end of the stream: every change consolidated, then what VACUUM
    # FULL leaves (the fingerprints of a BQF/CF in its largest level)
    L.ensure("loader")
    for name, kind, fan in S:
        if kind in QF_KINDS:
            t = f"{name}_{r}"
            psql(f"SELECT qf_flush('{t}')")
            psql(f"VACUUM FULL {t}")
            st = R["structures"][name]
            st["vacuum_full_bytes"] = int(psql(f"SELECT pg_relation_size('{t}')"))
            log(f"  {name}: {st['vacuum_full_bytes'] / 2**20:,.1f} MB after VACUUM FULL "
                f"({st['vacuum_full_bytes'] * 8 / nkeys(g, kind):.2f} bits per key)")
    return R


def main():
    global HAVE_BLOOM, HAVE_QFILTER
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat(),
                   ratios=[])
    L.start_run(results, C["SB_MB"], C["CG_EXTRA_MB"])
    HAVE_BLOOM = psql("SELECT count(*) FROM pg_proc WHERE proname = 'bloom_create'") != "0"
    HAVE_QFILTER = psql("SELECT count(*) FROM pg_proc WHERE proname = 'qfilter_agg'") != "0"
    results["have_bloom"] = HAVE_BLOOM
    results["have_qfilter"] = HAVE_QFILTER
    log(f"bloom_filter in this build: {HAVE_BLOOM}; qfilter type: {HAVE_QFILTER}")
    # CAPACITY_PER_PAGE fixes the stream sizes, e.g. to compare two builds
    # on the same keys
    cpp = float(os.environ.get("CAPACITY_PER_PAGE", 0)) or capacity_per_page()
    results["capacity_per_page"] = cpp
    log(f"quotient filter at fp 1/{C['FP_INV']}: {cpp:,.0f} keys of capacity per 8 kB page")

    if C["INRAM"]:
        log("in RAM: QF vs BF")
        inram(results)
    if C["SPACE"]:
        log(f"space at capacity {C['SPACE_N']:,}")
        space(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)

    for r in C["RATIOS"]:
        g = geometry(r, cpp)
        log(f"ratio 1:{r}: n = {g['n']:,} items (the capacity of a QF of {r} x {C['SB_MB']} MB), "
            f"fp 1/{C['FP_INV']}")
        R = ratio_run(r, g)
        results["ratios"].append(R)
        with open(C["OUT_JSON"], "w") as f:
            json.dump(results, f, indent=1)
        # free the disk
        L.ensure("loader")
        for name in R["structures"]:
            psql(f"DROP TABLE {R['structures'][name]['table']}")
        psql("CHECKPOINT")

    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    if C["STRUCTURES"] or not C["INRAM"]:
        log(f"partial run: results in {C['OUT_JSON']}, no report")
        return
    import filters_bench_report
    filters_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "filters_bench_report", C)
