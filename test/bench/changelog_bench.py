#!/usr/bin/python3
"""
Change-log benchmark: BEFORE (pre-change-log commit, updates
applied at pre-commit) against AFTER (this tree, updates appended to the
xid-stamped change log and consolidated later) for bcms (buffered, plain)
and bloom_filter (plain, elevator, localized).

Run as root through test/bench/changelog_bench.sh, which builds and installs
each version into its own private PostgreSQL tree.  Two clusters run side by
side, one per tree (ports 5691 BEFORE and 5692 AFTER), with the same
settings; the measurements are interleaved (before, after, before, after,
...) so that drift and the noise of other work on the machine hit both
versions alike, and the report gives medians over REPEATS.

Per structure, mode and size, each repeat runs (on both clusters):
  A  U10 rows in transactions of 10,000 rows, then the flush function
     (bcms_flush / bloom_flush): rows/s without and with the flush, WAL
     bytes, WAL records and full-page images per row;
  B  U100 rows in transactions of 100 rows (same measurements), with the
     lookups between the inserts and the flush:
       L1 Q point lookups of present keys and Q of absent keys right after
          the inserts (the change log is not consolidated yet: the reader
          scans it),
       flush (timed, part of B "with flush"),
       L2 the same lookups after the flush;
  C  consolidation cost: one transaction of NCONS rows, then the flush
     function (time and WAL); another NCONS-row transaction, then VACUUM.
Before the repeats, an untimed warm-up (one BULK-row transaction, WARM rows
after a CHECKPOINT in 10,000-row transactions, flush) touches every page;
no checkpoint happens during the measurements, so the WAL measured is the
steady state between checkpoints (full-page images counted separately).

The quotient filter family (STRUCTS entries qf:quotient_filter,
qf:buffered_quotient_filter, qf:cascade_filter; sizes QF_SIZES_MB) has no
flush function: VACUUM takes its place (AFTER: it consolidates the change
log; BEFORE: it only resolves deletes). Its phases per repeat:
  A, B as above with VACUUM for the flush, and in B also Q qf_count calls of
     present keys after the VACUUM (L2c);
  D  QF_DEL qf_delete calls in 100-row transactions on keys inserted by this
     repeat's A (level 0 of the buffered/cascade filters), then VACUUM;
  E  QF_DEL qf_delete calls in 100-row transactions on keys of the initial
     fill (the older levels), then VACUUM;
  C  one NCONS-row transaction, then VACUUM.
The two versions take turns phase by phase (AFTER first in odd repeats),
and before the repeats the filters' files get the same OS page-cache state
(equalize_page_cache). Each filter is first filled (untimed, both clusters
in parallel) with
QF_FILL keys in large transactions, sized so that its live levels are about
QF_SIZES_MB (see qf_plan), then CHECKPOINT and WARM rows as above.

MERGE=1 keeps the runs of the other structures found in OUT_JSON (e.g.
STRUCTS=qf:... MERGE=1 adds the quotient filter family to an earlier run of
bcms and bloom_filter) and records that run's metadata under "earlier".

Configuration: environment variables, see C.
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import benchlib as L  # noqa: E402
from benchlib import env_int, env_list, log  # noqa: E402

C = dict(
    REPEATS=env_int("REPEATS", 3),
    SB_MB=env_int("SB_MB", 64),
    SIZES_MB=env_list("SIZES_MB", "24,256"),     # structure sizes (sketch / bit array)
    BUF_MB=env_int("BUF_MB", 16),                # buffer_size of buffered/elevator/localized
    U10=env_int("U10", 200000),
    U100=env_int("U100", 20000),
    Q=env_int("Q", 20000),
    NCONS=env_int("NCONS", 50000),
    BULK=env_int("BULK", 500000),
    WARM=env_int("WARM", 100000),
    FP=float(os.environ.get("FP", "0.01")),
    STRUCTS=os.environ.get("STRUCTS", "bcms:buffered,bcms:plain,bloom:plain,bloom:elevator,bloom:localized,"
                           "qf:quotient_filter,qf:buffered_quotient_filter,qf:cascade_filter").split(","),
    # quotient filter family
    QF_SIZES_MB=env_list("QF_SIZES_MB", "32,256"),  # live levels (qf_info.pages), see qf_plan
    QF_FP=float(os.environ.get("QF_FP", "0.001")),
    QF_BUF_MB=env_int("QF_BUF_MB", 8),           # level 0 of BQF/CF (the GUC's default)
    QF_FANOUT=env_int("QF_FANOUT", 4),           # cascade filter (the GUC's default)
    QF_FILL=os.environ.get("QF_FILL", "32:4000000,256:40000000"),  # size:keys before the repeats
    QF_BQF_FILL=env_int("QF_BQF_FILL", 4000000),  # BQF: two level-0 fills (level 1 and its spare run)
    QF_DEL=env_int("QF_DEL", 10000),
    MERGE=env_int("MERGE", 0),
    EQUALIZE_CACHE=env_int("EQUALIZE_CACHE", 1),   # see equalize_page_cache
    BASE=os.environ.get("WORK", "/tmp/ssbench-cl"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-changelog.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-changelog.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "changelog_bench_results.json")),
)
BINSUB = "usr/lib/postgresql/15/bin"
VERSIONS = [("before", os.environ.get("TREE_BEFORE", "/tmp/pgtree-before"), 5691),
            ("after", os.environ.get("TREE_AFTER", "/tmp/pgtree-after"), 5692)]


class Cluster:
    def __init__(self, name, tree, port):
        self.name, self.tree, self.port = name, tree, port
        self.bin = os.path.join(tree, BINSUB)
        self.work = os.path.join(C["BASE"], name)
        self.data = os.path.join(self.work, "data")
        self.logf = os.path.join(self.work, "server.log")
        self.psql_cmd = [os.path.join(self.bin, "psql"), "-X", "-q", "-h", self.work, "-p", str(port),
                         "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-At", "-d", "bench"]

    def pgctl(self, args, check=True):
        return L.sh(L.as_pg(f"{self.bin}/pg_ctl -D {self.data} {args}"), check=check)

    def init(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self.pgctl("-m immediate stop >/dev/null 2>&1", check=False)
        L.sh(["rm", "-rf", self.work])
        os.makedirs(self.work)
        L.sh(["chown", "postgres", self.work])
        L.sh(L.as_pg(f"{self.bin}/initdb -D {self.data} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
        gucs = {
            "listen_addresses": "''", "unix_socket_directories": f"'{self.work}'", "port": str(self.port),
            "max_connections": "20", "autovacuum": "off", "jit": "off", "fsync": "on",
            "synchronous_commit": "on", "full_page_writes": "on", "shared_buffers": f"{C['SB_MB']}MB",
            "wal_level": "replica", "max_wal_size": "20GB", "checkpoint_timeout": "60min",
            "track_io_timing": "on", "log_checkpoints": "on",
        }
        with open(os.path.join(self.data, "postgresql.auto.conf"), "w") as f:
            for k, v in gucs.items():
                f.write(f"{k} = {v}\n")
        self.pgctl(f"-l {self.logf} -w -t 600 start >/dev/null")
        L.sh(self.psql_cmd[:-1] + ["postgres", "-c", "CREATE DATABASE bench"])
        self.psql("CREATE EXTENSION streamsketch")

    def stop(self):
        self.pgctl("-w -t 600 -m fast stop >/dev/null", check=False)

    def psql(self, sql):
        r = subprocess.run(self.psql_cmd + ["-c", sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"[{self.name}] psql failed: {sql[:300]}\n{r.stderr}")
        return r.stdout.strip()

    def script(self, items):
        """Run [(label, sql)] in one session with \\timing; return
        {label: summed server round-trip ms} and the LSN marks
        (statements `SELECT 'LSN:name', ...`)."""
        path = os.path.join(self.work, "run.sql")
        with open(path, "w") as f:
            f.write("\\timing on\n")
            for label, sql in items:
                f.write(f"\\echo @@{label}\n{sql}\n")
        os.chmod(path, 0o644)
        r = subprocess.run(self.psql_cmd + ["-f", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"[{self.name}] script failed:\n{r.stderr[-2000:]}\n{tail(self.logf)}")
        times, marks, vals, cur = {}, {}, {}, None
        for line in r.stdout.splitlines():
            if line.startswith("@@"):
                cur = line[2:]
                times.setdefault(cur, 0.0)
            elif line.startswith("Time: "):
                times[cur] += float(line.split()[1])
            elif line.startswith("LSN:"):
                k, v = line[4:].split("|")
                marks[k] = int(float(v))
            elif cur is not None:
                vals[cur] = line
        return times, marks, vals

    def walstat(self):
        out = self.psql("SELECT pg_stat_clear_snapshot(); SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
        return [float(x) for x in out.splitlines()[-1].split("|")]


def tail(path, n=20):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def key(expr="g"):
    return f"hashint8extended({expr}, 0)"


LSN = "SELECT 'LSN:{}', pg_current_wal_insert_lsn() - '0/0'::pg_lsn;"


def create_sql(kind, mode, size_mb, t):
    if kind == "bcms":
        width = size_mb * 2**20 // (5 * 8)
        extra = f", buffer_size => '{C['BUF_MB']}MB'" if mode == "buffered" else ""
        return f"SELECT bcms_create('{t}', 'int8', depth => 5, width => {width}, mode => '{mode}'{extra})"
    bits = size_mb * 2**20 * 8
    import math
    cap = int(bits * math.log(2) ** 2 / -math.log(C["FP"]))
    extra = f", buffer_size => '{C['BUF_MB']}MB'" if mode != "plain" else ""
    return f"SELECT bloom_create('{t}', 'int8', capacity => {cap}, fp_rate => {C['FP']}, mode => '{mode}'{extra})"


QF_SHORT = {"quotient_filter": "qf", "buffered_quotient_filter": "bqf", "cascade_filter": "cf"}


def qf_slot_bits(fp):
    """Home slots per page (log2) of a level at the filter's own remainder
    size (qf_geom_init for 8136-byte areas, docs/qfilter.md)."""
    import math
    r = max(1, math.ceil(math.log2(0.95 / fp)))
    return 13 if r <= 3 else 12 if r <= 11 else 11 if r <= 25 else 10


def qf_plan(am, size_mb):
    """Capacity and initial fill of a quotient filter family table whose
    live levels are about size_mb (checked against qf_info after the fill):
      quotient_filter: one level of size_mb (capacity 0.95 * 2^t, t from the
        pages), filled with QF_FILL keys;
      buffered_quotient_filter: level 0 of QF_BUF_MB and level 1 (created at
        the capacity's size by the first merge) the largest power of two
        with level 0 + level 1 <= 1.05 * size_mb; QF_BQF_FILL keys (two
        level-0 fills: level 1 and the spare run of its merges exist);
      cascade_filter: its size follows the keys (levels of fanout^i times
        level 0), so QF_FILL keys and capacity 0.95 * 2^t >= 1.25 * fill."""
    import math
    fills = dict((int(a), int(b)) for a, b in (x.split(":") for x in C["QF_FILL"].split(",")))
    fill = fills[size_mb]
    sb = qf_slot_bits(C["QF_FP"])
    if am == "quotient_filter":
        t = int(round(math.log2(size_mb * 128))) + sb
    elif am == "buffered_quotient_filter":
        t = sb
        while ((2 ** (t + 1 - sb)) / 128 + C["QF_BUF_MB"]) <= 1.05 * size_mb:
            t += 1
        fill = C["QF_BQF_FILL"]
    else:
        t = math.ceil(math.log2(fill * 1.25 / 0.95))
    cap = int(math.floor(0.95 * 2 ** t))
    return dict(capacity=cap, fill=fill, fill_txn=max(200000, fill // 40))


def qf_create_sql(am, size_mb, t):
    cap = qf_plan(am, size_mb)["capacity"]
    extra = ""
    if am != "quotient_filter":
        extra += f", buffer_size => '{C['QF_BUF_MB']}MB'"
    if am == "cascade_filter":
        extra += f", fanout => {C['QF_FANOUT']}"
    return (f"SELECT qf_create('{t}', 'int8', capacity => {cap}, fp_rate => {C['QF_FP']}, "
            f"access_method => '{am}'{extra})")


def qf_lookup_sql(t, lo, hi, absent, fn="qf_contains"):
    expr = key("-g" if absent else "g")
    if fn == "qf_count":
        return f"SELECT sum(qf_count('{t}', {expr})) FROM generate_series({lo}, {hi}) g;"
    return f"SELECT count(*) FILTER (WHERE qf_contains('{t}', {expr})) FROM generate_series({lo}, {hi}) g;"


def qf_deletes(t, first, count, batch):
    out, i = [], first
    while i < first + count:
        j = min(i + batch, first + count)
        out.append(f"SELECT count(qf_delete('{t}', {key()})) FROM generate_series({i}, {j - 1}) g;")
        i = j
    return "\n".join(out)


def qf_info(cl, t):
    cols = ["levels", "pages", "items", "relation_pages", "resizes"]
    v = cl.psql(f"SELECT {', '.join(cols)} FROM qf_info('{t}')").split("|")
    return dict(zip(cols, (int(x) for x in v)))


def flush_fn(kind):
    return "bcms_flush" if kind == "bcms" else "bloom_flush"


def lookup_sql(kind, t, lo, hi, absent):
    expr = key(f"-g" if absent else "g")
    if kind == "bcms":
        return f"SELECT sum(bcms_estimate('{t}', {expr})) FROM generate_series({lo}, {hi}) g;"
    return f"SELECT count(*) FILTER (WHERE bloom_contains('{t}', {expr})) FROM generate_series({lo}, {hi}) g;"


def inserts(t, first, count, batch):
    out, i = [], first
    while i < first + count:
        j = min(i + batch, first + count)
        out.append(f"INSERT INTO {t} SELECT {key()} FROM generate_series({i}, {j - 1}) g;")
        i = j
    return "\n".join(out)


def one_repeat(cl, kind, mode, t, nxt):
    """Phases A, B, C on one cluster; returns metrics and the next stream item."""
    m = {}
    fl = f"SELECT {flush_fn(kind)}('{t}');"
    # --- A: 10,000-row transactions
    cl.psql(f"SELECT {flush_fn(kind)}('{t}')")
    time.sleep(0.3)
    w0 = cl.walstat()
    U = C["U10"]
    times, mk, _ = cl.script([("lsn0", LSN.format("a0")), ("ins", inserts(t, nxt, U, 10000)),
                              ("lsn1", LSN.format("a1")), ("flush", fl), ("lsn2", LSN.format("a2"))])
    time.sleep(0.3)
    w1 = cl.walstat()
    nxt += U
    m["A_rows_s"] = U / (times["ins"] / 1000)
    m["A_rows_s_flush"] = U / ((times["ins"] + times["flush"]) / 1000)
    m["A_flush_ms"] = times["flush"]
    m["A_wal_row"] = (mk["a1"] - mk["a0"]) / U
    m["A_wal_row_flush"] = (mk["a2"] - mk["a0"]) / U
    m["A_walrec_row"] = (w1[0] - w0[0]) / U
    m["A_fpi_row"] = (w1[1] - w0[1]) / U
    # --- B: 100-row transactions, lookups before and after the flush
    w0 = cl.walstat()
    U = C["U100"]
    Q = C["Q"]
    lo = nxt + U - Q if U >= Q else nxt
    hi = nxt + U - 1
    items = [("lsn0", LSN.format("b0")), ("ins", inserts(t, nxt, U, 100)), ("lsn1", LSN.format("b1")),
             ("L1p", lookup_sql(kind, t, lo, hi, False)), ("L1a", lookup_sql(kind, t, lo, hi, True)),
             ("lsn2", LSN.format("b2")), ("flush", fl), ("lsn3", LSN.format("b3")),
             ("L2p", lookup_sql(kind, t, lo, hi, False)), ("L2a", lookup_sql(kind, t, lo, hi, True)),
             ("lsn4", LSN.format("b4"))]
    times, mk, vals = cl.script(items)
    time.sleep(0.3)
    w1 = cl.walstat()
    nq = hi - lo + 1
    nxt += U
    m["B_rows_s"] = U / (times["ins"] / 1000)
    m["B_rows_s_flush"] = U / ((times["ins"] + times["flush"]) / 1000)
    m["B_flush_ms"] = times["flush"]
    m["B_wal_row"] = (mk["b1"] - mk["b0"]) / U
    m["B_wal_row_flush"] = (mk["b1"] - mk["b0"] + mk["b3"] - mk["b2"]) / U
    m["B_walrec_row"] = (w1[0] - w0[0]) / U
    m["B_fpi_row"] = (w1[1] - w0[1]) / U
    m["L1_wal"] = mk["b2"] - mk["b1"]        # a reader consolidating a long log writes WAL
    for k in ("L1p", "L1a", "L2p", "L2a"):
        m[f"{k}_ops_s"] = nq / (times[k] / 1000)
    m["L1p_result"], m["L2p_result"] = vals.get("L1p"), vals.get("L2p")
    m["L1a_result"], m["L2a_result"] = vals.get("L1a"), vals.get("L2a")
    # --- C: consolidation cost of a log of NCONS committed rows
    N = C["NCONS"]
    times, mk, _ = cl.script([("lsn0", LSN.format("c0")), ("ins", inserts(t, nxt, N, N)), ("lsn1", LSN.format("c1")),
                              ("flush", fl), ("lsn2", LSN.format("c2")),
                              ("ins2", inserts(t, nxt + N, N, N)), ("lsn3", LSN.format("c3")),
                              ("vac", f"VACUUM {t};"), ("lsn4", LSN.format("c4"))])
    nxt += 2 * N
    m["C_ins_ms"] = times["ins"]
    m["C_ins_wal"] = mk["c1"] - mk["c0"]
    m["C_flush_ms"] = times["flush"]
    m["C_flush_wal"] = mk["c2"] - mk["c1"]
    m["C_vac_ms"] = times["vac"]
    m["C_vac_wal"] = mk["c4"] - mk["c3"]
    m["C_ins_flush_ms"] = times["ins"] + times["flush"]
    m["C_ins_vac_ms"] = times["ins2"] + times["vac"]
    return m, nxt


def one_repeat_qf(cl, am, t, nxt, old):
    """Phases A, B, D, E, C of a quotient filter family table on one
    cluster; VACUUM stands for the flush.  old: first key of the initial
    fill not deleted yet (phase E).  A generator: it yields between the
    phases, so that the two clusters can take turns phase by phase
    (run_interleaved); returns metrics, the next stream item and the next
    old key."""
    m = {}
    vac = f"VACUUM {t};"
    cl.psql(vac)
    m["info0"] = qf_info(cl, t)
    time.sleep(0.3)
    yield
    # --- A: 10,000-row transactions, then VACUUM
    w0 = cl.walstat()
    U = C["U10"]
    a_first = nxt
    times, mk, _ = cl.script([("lsn0", LSN.format("a0")), ("ins", inserts(t, nxt, U, 10000)),
                              ("lsn1", LSN.format("a1")), ("flush", vac), ("lsn2", LSN.format("a2"))])
    time.sleep(0.3)
    w1 = cl.walstat()
    nxt += U
    m["A_rows_s"] = U / (times["ins"] / 1000)
    m["A_rows_s_flush"] = U / ((times["ins"] + times["flush"]) / 1000)
    m["A_flush_ms"] = times["flush"]
    m["A_wal_row"] = (mk["a1"] - mk["a0"]) / U
    m["A_wal_row_flush"] = (mk["a2"] - mk["a0"]) / U
    m["A_walrec_row"] = (w1[0] - w0[0]) / U
    m["A_fpi_row"] = (w1[1] - w0[1]) / U
    yield
    # --- B: 100-row transactions; lookups right after them, VACUUM, lookups
    w0 = cl.walstat()
    U = C["U100"]
    Q = C["Q"]
    lo = nxt + U - Q if U >= Q else nxt
    hi = nxt + U - 1
    items = [("lsn0", LSN.format("b0")), ("ins", inserts(t, nxt, U, 100)), ("lsn1", LSN.format("b1")),
             ("L1p", qf_lookup_sql(t, lo, hi, False)), ("L1a", qf_lookup_sql(t, lo, hi, True)),
             ("lsn2", LSN.format("b2")), ("flush", vac), ("lsn3", LSN.format("b3")),
             ("L2p", qf_lookup_sql(t, lo, hi, False)), ("L2a", qf_lookup_sql(t, lo, hi, True)),
             ("L2c", qf_lookup_sql(t, lo, hi, False, "qf_count")), ("lsn4", LSN.format("b4"))]
    times, mk, vals = cl.script(items)
    time.sleep(0.3)
    w1 = cl.walstat()
    nq = hi - lo + 1
    nxt += U
    m["B_rows_s"] = U / (times["ins"] / 1000)
    m["B_rows_s_flush"] = U / ((times["ins"] + times["flush"]) / 1000)
    m["B_flush_ms"] = times["flush"]
    m["B_wal_row"] = (mk["b1"] - mk["b0"]) / U
    m["B_wal_row_flush"] = (mk["b1"] - mk["b0"] + mk["b3"] - mk["b2"]) / U
    m["B_walrec_row"] = (w1[0] - w0[0]) / U
    m["B_fpi_row"] = (w1[1] - w0[1]) / U
    m["L1_wal"] = mk["b2"] - mk["b1"]        # the first lookup consolidates the log (AFTER)
    for k in ("L1p", "L1a", "L2p", "L2a", "L2c"):
        m[f"{k}_ops_s"] = nq / (times[k] / 1000)
        m[f"{k}_result"] = vals.get(k)
    yield
    # --- D: deletes of this repeat's A keys (recent: level 0), then VACUUM;
    # E: deletes of keys of the initial fill (older levels), then VACUUM
    N = C["QF_DEL"]
    for ph, first in (("D", a_first), ("E", old)):
        w0 = cl.walstat()
        p = ph.lower()
        times, mk, vals = cl.script([("lsn0", LSN.format(f"{p}0")), ("del", qf_deletes(t, first, N, 100)),
                                  ("lsn1", LSN.format(f"{p}1")), ("flush", vac), ("lsn2", LSN.format(f"{p}2")),
                                  ("chk", f"SELECT count(*) FILTER (WHERE qf_contains('{t}', {key()})) "
                                          f"FROM generate_series({first}, {first + min(N, 1000) - 1}) g;")])
        time.sleep(0.3)
        w1 = cl.walstat()
        m[f"{ph}_rows_s"] = N / (times["del"] / 1000)
        m[f"{ph}_rows_s_flush"] = N / ((times["del"] + times["flush"]) / 1000)
        m[f"{ph}_flush_ms"] = times["flush"]
        m[f"{ph}_wal_row"] = (mk[f"{p}1"] - mk[f"{p}0"]) / N
        m[f"{ph}_wal_row_flush"] = (mk[f"{p}2"] - mk[f"{p}0"]) / N
        m[f"{ph}_walrec_row"] = (w1[0] - w0[0]) / N
        # of the first 1,000 deleted keys, those still reported present
        # (false positives only)
        m[f"{ph}_still_present"] = int(vals["chk"])
        yield
    old += N
    # --- C: consolidation cost of a log of NCONS committed rows
    N = C["NCONS"]
    times, mk, _ = cl.script([("lsn0", LSN.format("c0")), ("ins", inserts(t, nxt, N, N)), ("lsn1", LSN.format("c1")),
                              ("vac", vac), ("lsn2", LSN.format("c2"))])
    nxt += N
    m["C_ins_ms"] = times["ins"]
    m["C_ins_wal"] = mk["c1"] - mk["c0"]
    m["C_vac_ms"] = times["vac"]
    m["C_vac_wal"] = mk["c2"] - mk["c1"]
    m["C_ins_vac_ms"] = times["ins"] + times["vac"]
    m["info1"] = qf_info(cl, t)
    return m, nxt, old


def run_interleaved(gens, order):
    """Advance the generators {version: one_repeat_qf(...)} phase by phase,
    in the given order of versions; returns {version: their return value}."""
    out = {}
    while len(out) < len(gens):
        for v in order:
            if v in out:
                continue
            try:
                next(gens[v])
            except StopIteration as e:
                out[v] = e.value
    return out


def equalize_page_cache(cls, tables):
    """Give both clusters' filter files the same OS page-cache state: write
    them back, drop them from the page cache and read them sequentially.
    At 4x shared_buffers almost every operation writes back an evicted
    dirty buffer, and on this kernel (ext4, large folios) the cost of that
    8 kB pwrite grows with the size of the page-cache folio it lands in,
    which depends on how the file was read and written before (a measured
    0.69 ratio became 0.95-0.97 when both files were re-read the same way;
    docs/bench-changelog.md)."""
    L.sh("sync")
    for cl in cls.values():
        for t in tables:
            rel = os.path.join(cl.data, cl.psql(f"SELECT pg_relation_filepath('{t}')"))
            seg = 0
            while os.path.exists(rel if seg == 0 else f"{rel}.{seg}"):
                path = rel if seg == 0 else f"{rel}.{seg}"
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    while os.read(fd, 1 << 20):
                        pass
                finally:
                    os.close(fd)
                seg += 1


# (metric, label, higher is better)
METRICS = [
    ("A_rows_s", "update rows/s, 10k-row txns", True),
    ("A_rows_s_flush", "update rows/s, 10k-row txns, incl. flush", True),
    ("B_rows_s", "update rows/s, 100-row txns", True),
    ("B_rows_s_flush", "update rows/s, 100-row txns, incl. flush", True),
    ("L1p_ops_s", "lookups/s present, log unconsolidated", True),
    ("L1a_ops_s", "lookups/s absent, log unconsolidated", True),
    ("L2p_ops_s", "lookups/s present, after flush", True),
    ("L2a_ops_s", "lookups/s absent, after flush", True),
    ("B_mixed_ops_s", "ops/s, 100-row txns then the L1 lookups", True),
    ("A_wal_row", "WAL B/row, 10k txns", False),
    ("A_wal_row_flush", "WAL B/row, 10k txns incl. flush", False),
    ("B_wal_row", "WAL B/row, 100-row txns", False),
    ("B_wal_row_flush", "WAL B/row, 100-row txns incl. flush", False),
    ("A_walrec_row", "WAL records/row, 10k txns incl. flush", False),
    ("A_fpi_row", "FPI/row, 10k txns incl. flush", False),
    ("B_walrec_row", "WAL records/row, 100 txns incl. flush+lookups", False),
    ("B_fpi_row", "FPI/row, 100 txns incl. flush+lookups", False),
    ("A_flush_ms", "flush ms after 10k txns", False),
    ("B_flush_ms", "flush ms after 100-row txns", False),
    ("L1_wal", "WAL B written by the L1 lookups", False),
    ("C_ins_ms", "consolidation: NCONS-row txn ms", False),
    ("C_flush_ms", "consolidation: flush ms", False),
    ("C_ins_flush_ms", "consolidation: txn + flush ms", False),
    ("C_ins_wal", "consolidation: txn WAL B", False),
    ("C_flush_wal", "consolidation: flush WAL B", False),
    ("C_vac_ms", "consolidation: VACUUM ms", False),
    ("C_vac_wal", "consolidation: VACUUM WAL B", False),
    ("C_ins_vac_ms", "consolidation: txn + VACUUM ms", False),
]
GATED = {"A_rows_s", "A_rows_s_flush", "B_rows_s", "B_rows_s_flush", "L1p_ops_s", "L1a_ops_s", "L2p_ops_s", "L2a_ops_s",
         "B_mixed_ops_s"}

# the quotient filter family: VACUUM instead of the flush, deletes
METRICS_QF = [
    ("A_rows_s", "insert rows/s, 10k-row txns", True),
    ("A_rows_s_flush", "insert rows/s, 10k-row txns, incl. VACUUM", True),
    ("B_rows_s", "insert rows/s, 100-row txns", True),
    ("B_rows_s_flush", "insert rows/s, 100-row txns, incl. VACUUM", True),
    ("L1p_ops_s", "qf_contains/s present, right after the inserts", True),
    ("L1a_ops_s", "qf_contains/s absent, right after the inserts", True),
    ("L2p_ops_s", "qf_contains/s present, after VACUUM", True),
    ("L2a_ops_s", "qf_contains/s absent, after VACUUM", True),
    ("L2c_ops_s", "qf_count/s present, after VACUUM", True),
    ("B_mixed_ops_s", "ops/s, 100-row txns then the first lookups", True),
    ("D_rows_s", "qf_delete/s recent keys, 100-row txns", True),
    ("D_rows_s_flush", "qf_delete/s recent keys, 100-row txns, incl. VACUUM", True),
    ("E_rows_s", "qf_delete/s old keys, 100-row txns", True),
    ("E_rows_s_flush", "qf_delete/s old keys, 100-row txns, incl. VACUUM", True),
    ("A_wal_row", "WAL B/row, 10k txns", False),
    ("A_wal_row_flush", "WAL B/row, 10k txns incl. VACUUM", False),
    ("B_wal_row", "WAL B/row, 100-row txns", False),
    ("B_wal_row_flush", "WAL B/row, 100-row txns incl. VACUUM", False),
    ("A_walrec_row", "WAL records/row, 10k txns incl. VACUUM", False),
    ("A_fpi_row", "FPI/row, 10k txns incl. VACUUM", False),
    ("B_walrec_row", "WAL records/row, 100 txns incl. VACUUM+lookups", False),
    ("B_fpi_row", "FPI/row, 100 txns incl. VACUUM+lookups", False),
    ("D_wal_row", "WAL B/delete, recent keys", False),
    ("D_wal_row_flush", "WAL B/delete, recent keys incl. VACUUM", False),
    ("E_wal_row", "WAL B/delete, old keys", False),
    ("E_wal_row_flush", "WAL B/delete, old keys incl. VACUUM", False),
    ("A_flush_ms", "VACUUM ms after 10k txns", False),
    ("B_flush_ms", "VACUUM ms after 100-row txns", False),
    ("D_flush_ms", "VACUUM ms after recent deletes", False),
    ("E_flush_ms", "VACUUM ms after old deletes", False),
    ("L1_wal", "WAL B written by the first lookups", False),
    ("C_ins_ms", "consolidation: NCONS-row txn ms", False),
    ("C_vac_ms", "consolidation: VACUUM ms", False),
    ("C_ins_vac_ms", "consolidation: txn + VACUUM ms", False),
    ("C_ins_wal", "consolidation: txn WAL B", False),
    ("C_vac_wal", "consolidation: VACUUM WAL B", False),
]
GATED_QF = {k for k, _, h in METRICS_QF if h}


def add_mixed(m, updates, lookups):
    """Updates and lookups as one workload: the 100-row transactions and
    then the first lookups (present and absent), whose cost the change log
    moves between them (the log the writers leave is read by the lookups)."""
    need = ("B_rows_s", "L1p_ops_s", "L1a_ops_s")
    if all(m.get(k) for k in need):
        secs = updates / m["B_rows_s"] + lookups / m["L1p_ops_s"] + lookups / m["L1a_ops_s"]
        m["B_mixed_ops_s"] = (updates + 2 * lookups) / secs


def metrics_of(kind):
    return (METRICS_QF, GATED_QF) if kind == "qf" else (METRICS, GATED)


def structure_name(kind, mode, size):
    if kind == "qf":
        return f"{mode}, {size} MB"
    return f"{'bcms' if kind == 'bcms' else 'bloom_filter'} {mode}, {size} MB"


def fill_qf(cls, am, t, plan):
    """Untimed initial fill of a quotient filter family table, both
    clusters at once (threads); returns the seconds each took."""
    import threading
    out = {}

    def run(cl):
        tt = time.time()
        cl.script([("fill", inserts(t, 1, plan["fill"], plan["fill_txn"])), ("vac", f"VACUUM {t};")])
        out[cl.name] = time.time() - tt

    th = [threading.Thread(target=run, args=(cl,)) for cl in cls.values()]
    for x in th:
        x.start()
    for x in th:
        x.join()
    if set(out) != set(cls):
        raise RuntimeError(f"fill of {t} failed")
    return out


def machine_info():
    """The machine of the run, for the report."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = int(open("/proc/meminfo").readline().split()[1]) // 1024
    return dict(cpu=cpu, cores=os.cpu_count(), ram_mb=mem, kernel=platform.release())


def main():
    res = dict(config=C, started=time.strftime("%Y-%m-%d %H:%M:%S"), machine=machine_info(), runs=[])
    res["after_head"] = L.sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture=True).strip()
    earlier = None
    if C["MERGE"] and os.path.exists(C["OUT_JSON"]):
        earlier = json.load(open(C["OUT_JSON"]))
    cls = {n: Cluster(n, tr, p) for n, tr, p in VERSIONS}
    for cl in cls.values():
        so = os.path.join(cl.tree, "usr/lib/postgresql/15/lib/streamsketch.so")
        res.setdefault("so_md5", {})[cl.name] = L.sh(["md5sum", so], capture=True).split()[0][:12]
        cl.init()
    try:
        structs = [s.split(":") for s in C["STRUCTS"]]
        tables = {}
        for kind, mode in structs:
            for size in (C["QF_SIZES_MB"] if kind == "qf" else C["SIZES_MB"]):
                t = f"qf_{QF_SHORT[mode]}_{size}" if kind == "qf" else f"{kind}_{mode}_{size}"
                tables[(kind, mode, size)] = t
        # order: by size, then as given (like the earlier runs)
        tables = dict(sorted(tables.items(), key=lambda kv: (kv[0][2], structs.index([kv[0][0], kv[0][1]]))))
        for (kind, mode, size), t in tables.items():
            for cl in cls.values():
                tt = time.time()
                cl.psql(qf_create_sql(mode, size, t) if kind == "qf" else create_sql(kind, mode, size, t))
                pages = cl.psql(f"SELECT pg_relation_size('{t}') / 8192")
                log(f"[{cl.name}] created {t}: {pages} pages in {time.time() - tt:.1f}s")
        # warm-up (untimed): a bulk transaction and WARM rows in 10,000-row
        # transactions after one CHECKPOINT touch every page of the structure
        # (the relations grow on demand) and the change log's pages;
        # no checkpoint happens during the measurements (max_wal_size,
        # checkpoint_timeout), so full-page images are (nearly) absent from
        # the measured WAL: the steady state between checkpoints.
        # The quotient filter family gets its initial fill (qf_plan) instead
        # of the bulk transaction.
        nxt, old = {}, {}
        for k, t in tables.items():
            kind, mode, size = k
            if kind == "qf":
                plan = qf_plan(mode, size)
                secs = fill_qf(cls, mode, t, plan)
                res.setdefault("qf_fill", {})[t] = dict(plan=plan, seconds=secs,
                                                      info={n: qf_info(cl, t) for n, cl in cls.items()})
                log(f"filled {t} with {plan['fill']:,} keys ({plan['fill_txn']:,}-row txns, capacity "
                    f"{plan['capacity']:,}): " + ", ".join(f"{n} {v:.0f}s {res['qf_fill'][t]['info'][n]}"
                                                          for n, v in secs.items()))
                nxt[k] = 1 + plan["fill"]
                old[k] = 1
                continue
            for cl in cls.values():
                cl.script([("bulk", inserts(t, 1, C["BULK"], C["BULK"])),
                           ("flush", f"SELECT {flush_fn(k[0])}('{t}');")])
            nxt[k] = 1 + C["BULK"]
        for cl in cls.values():
            cl.psql("CHECKPOINT")
        for k, t in tables.items():
            fl = f"VACUUM {t};" if k[0] == "qf" else f"SELECT {flush_fn(k[0])}('{t}');"
            for cl in cls.values():
                tt = time.time()
                cl.script([("warm", inserts(t, nxt[k], C["WARM"], 10000)), ("flush", fl)])
                pages = cl.psql(f"SELECT pg_relation_size('{t}') / 8192")
                log(f"[{cl.name}] warmed {t}: {pages} pages in {time.time() - tt:.1f}s")
            nxt[k] += C["WARM"]
        qtabs = [t for k, t in tables.items() if k[0] == "qf"]
        if qtabs and C["EQUALIZE_CACHE"]:
            tt = time.time()
            equalize_page_cache(cls, qtabs)
            log(f"page cache of the quotient filter files equalized in {time.time() - tt:.1f}s")
        for rep in range(C["REPEATS"]):
            for (kind, mode, size), t in tables.items():
                k = (kind, mode, size)
                start = nxt[k]
                if kind == "qf":
                    # phase by phase, BEFORE first in even repeats, AFTER first in odd ones
                    tt = time.time()
                    order = ("before", "after") if rep % 2 == 0 else ("after", "before")
                    qres = run_interleaved({v: one_repeat_qf(cls[v], mode, t, start, old[k]) for v in order}, order)
                    el = (time.time() - tt) / 2
                for name in ("before", "after"):
                    tt = time.time()
                    if kind == "qf":
                        m, n2, o2 = qres[name]
                    else:
                        m, n2 = one_repeat(cls[name], kind, mode, t, start)
                    nxt[k] = n2
                    res["runs"].append(dict(rep=rep, version=name, kind=kind, mode=mode, size_mb=size, m=m))
                    msg = (f"rep {rep} {t} {name}: {(el if kind == 'qf' else time.time() - tt):.0f}s  A {m['A_rows_s']:,.0f}/{m['A_rows_s_flush']:,.0f} rows/s"
                           f"  B {m['B_rows_s']:,.0f}/{m['B_rows_s_flush']:,.0f}  L1 {m['L1p_ops_s']:,.0f}/{m['L1a_ops_s']:,.0f}"
                           f"  L2 {m['L2p_ops_s']:,.0f}/{m['L2a_ops_s']:,.0f}  WAL/row A {m['A_wal_row_flush']:.0f} B {m['B_wal_row_flush']:.0f}")
                    if kind == "qf":
                        msg += (f"  D {m['D_rows_s']:,.0f}/{m['D_rows_s_flush']:,.0f}  E {m['E_rows_s']:,.0f}/{m['E_rows_s_flush']:,.0f}"
                                f"  resizes {m['info0']['resizes']}->{m['info1']['resizes']}")
                    log(msg)
                if kind == "qf":
                    old[k] = o2
                with open(C["OUT_JSON"] + ".partial", "w") as f:
                    json.dump(res, f, indent=1)
        for cl in cls.values():
            res.setdefault("relation_pages", {})[cl.name] = {
                t: cl.psql(f"SELECT pg_relation_size('{t}') / 8192") for t in tables.values()}
    finally:
        for cl in cls.values():
            cl.stop()
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if earlier is not None:
        kinds = {k for k, _ in structs}
        kept = [r for r in earlier["runs"] if r["kind"] not in kinds]
        if kept:
            meta = {k: earlier.get(k) for k in ("config", "started", "finished", "so_md5", "after_head", "machine")}
            if not meta["after_head"]:
                meta["after_head"] = os.environ.get("EARLIER_AFTER_HEAD", "not recorded")
            meta["qf_fill"] = earlier.get("qf_fill")
            own = {x.split(":")[0] for x in earlier["config"]["STRUCTS"]} - kinds
            meta["kinds"] = sorted(own & {r["kind"] for r in kept})
            meta["relation_pages"] = earlier.get("relation_pages")
            res["earlier"] = ([meta] if meta["kinds"] else []) + [
                dict(e, kinds=sorted(set(e["kinds"]) - kinds)) for e in earlier.get("earlier", [])
                if set(e["kinds"]) - kinds]
            res["runs"] = kept + res["runs"]
    with open(C["OUT_JSON"], "w") as f:
        json.dump(res, f, indent=1)
    if os.path.exists(C["OUT_JSON"] + ".partial"):
        os.unlink(C["OUT_JSON"] + ".partial")
    log(f"results: {C['OUT_JSON']}")


if __name__ == "__main__":
    main()
