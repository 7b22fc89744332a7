#!/usr/bin/python3
"""
Change-log benchmark (issue 8): BEFORE (pre-change-log commit, updates
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

Configuration: environment variables, see CONFIG.
"""
import json
import os
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
    STRUCTS=os.environ.get("STRUCTS", "bcms:buffered,bcms:plain,bloom:plain,bloom:elevator,bloom:localized").split(","),
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
GATED = {"A_rows_s", "A_rows_s_flush", "B_rows_s", "B_rows_s_flush", "L1p_ops_s", "L1a_ops_s", "L2p_ops_s", "L2a_ops_s"}


def main():
    res = dict(config=C, started=time.strftime("%Y-%m-%d %H:%M:%S"), runs=[])
    cls = {n: Cluster(n, tr, p) for n, tr, p in VERSIONS}
    for cl in cls.values():
        so = os.path.join(cl.tree, "usr/lib/postgresql/15/lib/streamsketch.so")
        res.setdefault("so_md5", {})[cl.name] = L.sh(["md5sum", so], capture=True).split()[0][:12]
        cl.init()
    try:
        structs = [s.split(":") for s in C["STRUCTS"]]
        tables = {}
        for size in C["SIZES_MB"]:
            for kind, mode in structs:
                t = f"{kind}_{mode}_{size}"
                tables[(kind, mode, size)] = t
                for cl in cls.values():
                    tt = time.time()
                    cl.psql(create_sql(kind, mode, size, t))
                    pages = cl.psql(f"SELECT pg_relation_size('{t}') / 8192")
                    log(f"[{cl.name}] created {t}: {pages} pages in {time.time() - tt:.1f}s")
        # warm-up (untimed): a bulk transaction and WARM rows in 10,000-row
        # transactions after one CHECKPOINT touch every page of the structure
        # (the relations grow on demand) and the change log's pages;
        # no checkpoint happens during the measurements (max_wal_size,
        # checkpoint_timeout), so full-page images are (nearly) absent from
        # the measured WAL: the steady state between checkpoints
        nxt = {}
        for k, t in tables.items():
            for cl in cls.values():
                cl.script([("bulk", inserts(t, 1, C["BULK"], C["BULK"])),
                           ("flush", f"SELECT {flush_fn(k[0])}('{t}');")])
        for cl in cls.values():
            cl.psql("CHECKPOINT")
        for k, t in tables.items():
            for cl in cls.values():
                tt = time.time()
                cl.script([("warm", inserts(t, 1 + C["BULK"], C["WARM"], 10000)),
                           ("flush", f"SELECT {flush_fn(k[0])}('{t}');")])
                pages = cl.psql(f"SELECT pg_relation_size('{t}') / 8192")
                log(f"[{cl.name}] warmed {t}: {pages} pages in {time.time() - tt:.1f}s")
            nxt[k] = 1 + C["BULK"] + C["WARM"]
        for rep in range(C["REPEATS"]):
            for (kind, mode, size), t in tables.items():
                start = nxt[(kind, mode, size)]
                for name in ("before", "after"):
                    tt = time.time()
                    m, n2 = one_repeat(cls[name], kind, mode, t, start)
                    nxt[(kind, mode, size)] = n2
                    res["runs"].append(dict(rep=rep, version=name, kind=kind, mode=mode, size_mb=size, m=m))
                    log(f"rep {rep} {t} {name}: {time.time() - tt:.0f}s  A {m['A_rows_s']:,.0f}/{m['A_rows_s_flush']:,.0f} rows/s"
                        f"  B {m['B_rows_s']:,.0f}/{m['B_rows_s_flush']:,.0f}  L1 {m['L1p_ops_s']:,.0f}/{m['L1a_ops_s']:,.0f}"
                        f"  L2 {m['L2p_ops_s']:,.0f}/{m['L2a_ops_s']:,.0f}  WAL/row A {m['A_wal_row_flush']:.0f} B {m['B_wal_row_flush']:.0f}")
                with open(C["OUT_JSON"], "w") as f:
                    json.dump(res, f, indent=1)
        for cl in cls.values():
            res.setdefault("relation_pages", {})[cl.name] = {
                t: cl.psql(f"SELECT pg_relation_size('{t}') / 8192") for t in tables.values()}
    finally:
        for cl in cls.values():
            cl.stop()
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(C["OUT_JSON"], "w") as f:
        json.dump(res, f, indent=1)
    log(f"results: {C['OUT_JSON']}")


if __name__ == "__main__":
    main()
