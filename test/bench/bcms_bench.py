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
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def env_int(name, default):
    return int(os.environ.get(name, default))


def env_list(name, default):
    v = os.environ.get(name, default)
    return [int(x) for x in re.split(r"[ ,]+", v.strip()) if x]


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

WORK = C["WORK"]
PGROOT = os.path.join(WORK, "pg")
PGBIN = os.path.join(PGROOT, "usr/lib/postgresql/15/bin")
PGDATA = os.path.join(WORK, "data")
SOCK = WORK
LOG = os.path.join(WORK, "server.log")
SQLDIR = os.path.join(WORK, "sql")
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def sh(cmd, check=True, capture=False, **kw):
    r = subprocess.run(cmd, shell=isinstance(cmd, str), check=False,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None,
                       text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"command failed ({r.returncode}): {cmd}\n{r.stdout or ''}")
    return r.stdout if capture else r.returncode


def as_pg(cmd):
    return ["su", "postgres", "-s", "/bin/sh", "-c", cmd]


PSQL = [os.path.join(PGBIN, "psql"), "-X", "-q", "-h", SOCK, "-p", str(C["PORT"]),
        "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-At"]


def psql(sql, db="bench"):
    r = subprocess.run(PSQL + ["-d", db, "-c", sql], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql failed: {sql[:200]}\n{r.stderr}\n--- server log tail ---\n{tail_log()}")
    return r.stdout.strip()


def psql_file(path, db="bench"):
    r = subprocess.run(PSQL + ["-d", db, "-f", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql -f {path} failed:\n{r.stderr[-3000:]}\n--- server log tail ---\n{tail_log()}")
    return r.stdout.strip()


def psql_bg(path, db="bench"):
    return subprocess.Popen(PSQL + ["-d", db, "-f", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_bg(procs):
    for p, what in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{err[-3000:]}\n{tail_log()}")


def tail_log(n=30):
    try:
        with open(LOG, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------- cgroup

class Cgroup:
    """A memory cgroup around the measuring server (v2 or v1)."""

    def __init__(self, limit_bytes):
        self.limit = limit_bytes
        self.path = None
        self.version = None
        own = open("/proc/self/cgroup").read().splitlines()
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            # unified hierarchy: a child of the root (the "no internal
            # processes" rule forbids a child under our own populated group)
            ctrl = open("/sys/fs/cgroup/cgroup.subtree_control").read()
            if "memory" not in ctrl.split():
                with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
                    f.write("+memory")
            self.version = 2
            self.path = "/sys/fs/cgroup/ssbench_%d" % os.getpid()
        else:
            mem = [l.split(":", 2)[2] for l in own if l.split(":")[1] == "memory"]
            base = "/sys/fs/cgroup/memory"
            if not mem or not os.path.isdir(base):
                raise RuntimeError("no memory cgroup controller found")
            self.version = 1
            self.path = os.path.join(base + mem[0], "ssbench_%d" % os.getpid())
        os.makedirs(self.path, exist_ok=True)
        self.write("memory.max" if self.version == 2 else "memory.limit_in_bytes",
                   str(limit_bytes))

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def reset_peak(self):
        try:
            if self.version == 1:
                self.write("memory.max_usage_in_bytes", "0")
        except OSError:
            pass

    def stats(self):
        st = {}
        for line in self.read("memory.stat").splitlines():
            k, _, v = line.partition(" ")
            st[k] = int(v) if v.isdigit() else v
        if self.version == 1:
            return dict(limit=int(self.read("memory.limit_in_bytes") or 0),
                        current=int(self.read("memory.usage_in_bytes") or 0),
                        peak=int(self.read("memory.max_usage_in_bytes") or 0),
                        failcnt=int(self.read("memory.failcnt") or 0),
                        cache=st.get("total_cache", 0), rss=st.get("total_rss", 0),
                        shmem=st.get("total_shmem", 0),
                        file=st.get("total_cache", 0) - st.get("total_shmem", 0),
                        oom_kill=0)
        ev = {}
        for line in self.read("memory.events").splitlines():
            k, _, v = line.partition(" ")
            ev[k] = int(v)
        return dict(limit=self.limit, current=int(self.read("memory.current") or 0),
                    peak=int(self.read("memory.peak") or 0) if self.read("memory.peak") else 0,
                    failcnt=ev.get("max", 0), cache=st.get("file", 0) + st.get("shmem", 0),
                    rss=st.get("anon", 0), shmem=st.get("shmem", 0),
                    file=st.get("file", 0) - st.get("shmem", 0), oom_kill=ev.get("oom_kill", 0))

    def procs(self):
        return [int(x) for x in self.read("cgroup.procs").split()]

    def remove(self):
        if self.path and os.path.isdir(self.path):
            for _ in range(50):
                try:
                    os.rmdir(self.path)
                    return
                except OSError:
                    time.sleep(0.2)


CG = None


def drop_caches():
    sh("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


# ---------------------------------------------------------------- server

COMMON_GUCS = {
    "listen_addresses": "''",
    "unix_socket_directories": f"'{SOCK}'",
    "port": str(C["PORT"]),
    "max_connections": "20",
    "autovacuum": "off",
    "jit": "off",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "log_checkpoints": "on",
    "track_io_timing": "on",
}
LOADER_GUCS = dict(COMMON_GUCS, **{
    "shared_buffers": f"{C['LOADER_SB_MB']}MB",
    "wal_level": "minimal",          # bulk loads of tables created in the
    "max_wal_senders": "0",          # same transaction skip WAL
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "maintenance_work_mem": "1GB",
    "work_mem": "256MB",
    "streamsketch.pending_memory": "512MB",
})
MEASURE_GUCS = dict(COMMON_GUCS, **{
    "shared_buffers": f"{C['SB_MB']}MB",
    "wal_level": "replica",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "30min",
})
server_mode = None


def write_conf(gucs):
    with open(os.path.join(PGDATA, "postgresql.auto.conf"), "w") as f:
        for k, v in gucs.items():
            f.write(f"{k} = {v}\n")


def server_start(mode):
    global server_mode
    write_conf(LOADER_GUCS if mode == "loader" else MEASURE_GUCS)
    cmd = f"{PGBIN}/pg_ctl -D {PGDATA} -l {LOG} -w -t 600 start"
    if mode == "measure":
        CG.reset_peak()
        # the shell joins the cgroup, then execs pg_ctl: the postmaster and
        # every backend inherit the cgroup
        sh(["sh", "-c", f"echo $$ > {CG.path}/cgroup.procs && exec su postgres -s /bin/sh -c '{cmd}' >/dev/null"])
        pid = int(open(os.path.join(PGDATA, "postmaster.pid")).readline())
        if pid not in CG.procs():
            raise RuntimeError("postmaster is not in the memory cgroup")
    else:
        sh(as_pg(cmd + " >/dev/null"))
    server_mode = mode


def server_stop():
    global server_mode
    if server_mode:
        sh(as_pg(f"{PGBIN}/pg_ctl -D {PGDATA} -w -t 600 -m fast stop >/dev/null"), check=False)
        server_mode = None


def restart(mode, drop=True):
    server_stop()
    if drop:
        drop_caches()
    server_start(mode)


# ---------------------------------------------------------------- stats

def blockdev_stat_path(path):
    st = os.stat(path)
    maj, mnr = os.major(st.st_dev), os.minor(st.st_dev)
    p = f"/sys/dev/block/{maj}:{mnr}/stat"
    return p if os.path.exists(p) else None


DEVSTAT = None


def devstat():
    if not DEVSTAT:
        return (0, 0, 0, 0)
    f = open(DEVSTAT).read().split()
    return (int(f[0]), int(f[2]), int(f[4]), int(f[6]))  # rd ios, rd sect, wr ios, wr sect


def snapshot(rels):
    rl = ",".join(f"'{r}'::regclass" for r in rels)
    q = (f"SELECT pg_stat_clear_snapshot();"
         f"SELECT coalesce(sum(heap_blks_read),0), coalesce(sum(heap_blks_hit),0),"
         f" coalesce(sum(idx_blks_read),0), coalesce(sum(idx_blks_hit),0),"
         f" (SELECT buffers_checkpoint FROM pg_stat_bgwriter),"
         f" (SELECT buffers_clean FROM pg_stat_bgwriter),"
         f" (SELECT buffers_backend FROM pg_stat_bgwriter),"
         f" pg_current_wal_lsn() - '0/0'::pg_lsn,"
         f" (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)"
         f" FROM pg_statio_all_tables WHERE relid IN ({rl})")
    out = psql(q).splitlines()[-1].split("|")
    v = [float(x) for x in out]
    d = devstat()
    return dict(heap_read=v[0], heap_hit=v[1], idx_read=v[2], idx_hit=v[3],
                bw=v[4] + v[5] + v[6], wal=v[7], ckpts=v[8],
                dev_rd=d[0], dev_rd_sect=d[1], dev_wr=d[2], dev_wr_sect=d[3])


def delta(a, b):
    return {k: b[k] - a[k] for k in a}


def measure(rels, fn, nops, checkpoint=False):
    """Run fn() (timed); return time and per-op I/O from stats deltas.
    With checkpoint=True, a CHECKPOINT after the timed part (untimed) writes
    the pages the operations dirtied, so buffer writes are all counted."""
    time.sleep(1.1)          # let earlier sessions' stats be flushed
    s0 = snapshot(rels)
    CG.reset_peak()
    t = time.time()
    extra = fn()
    dt = time.time() - t
    mem = CG.stats()
    if checkpoint:
        psql("CHECKPOINT")
    time.sleep(1.1)
    d = delta(s0, snapshot(rels))
    per = lambda k: d[k] / nops if nops else 0.0
    res = dict(ops=nops, seconds=dt, ops_per_s=nops / dt if dt > 0 else 0,
               reads_per_op=per("heap_read") + per("idx_read"),
               accesses_per_op=per("heap_read") + per("heap_hit") + per("idx_read") + per("idx_hit"),
               buf_writes_per_op=per("bw"), wal_bytes_per_op=per("wal"),
               dev_reads_per_op=per("dev_rd"), dev_read_kb_per_op=per("dev_rd_sect") / 2,
               dev_writes_per_op=per("dev_wr"), dev_write_kb_per_op=per("dev_wr_sect") / 2,
               checkpoints=d["ckpts"], mem_peak_mb=mem["peak"] / 2**20,
               mem_file_mb=mem["file"] / 2**20, mem_shmem_mb=mem["shmem"] / 2**20,
               mem_rss_mb=mem["rss"] / 2**20, mem_failcnt=mem["failcnt"])
    if isinstance(extra, dict):
        res.update(extra)
    return res


# ---------------------------------------------------------------- SQL

def key(expr="g", seed=0):
    return f"hashint8extended({expr}, {seed})"


def write_batches(path, table, first, count, batch, kind):
    """INSERT statements for stream items first .. first+count-1, `batch`
    rows per statement (= per transaction, autocommit)."""
    with open(path, "w") as f:
        i = first
        end = first + count
        while i < end:
            j = min(i + batch, end)
            src = f"FROM generate_series({i}, {j - 1}) g"
            if kind == "upsert":
                f.write(f"INSERT INTO {table} SELECT {key()}, 1 {src} "
                        f"ON CONFLICT (key) DO UPDATE SET n = {table}.n + EXCLUDED.n;\n")
            else:
                f.write(f"INSERT INTO {table} SELECT {key()} {src};\n")
            i = j
    os.chmod(path, 0o644)
    return path


def run_batches(table, first, count, batch, kind, tag):
    p = write_batches(os.path.join(SQLDIR, f"{tag}.sql"), table, first, count, batch, kind)
    psql_file(p)


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
    files[b] = os.path.join(SQLDIR, f"load_{b}.sql")
    with open(files[b], "w") as f:
        f.write("BEGIN;\n")
        f.write(f"SELECT bcms_create('{b}', 'int8', delta => {C['DELTA']}, width => {g['width']}, "
                f"mode => 'buffered', buffer_size => '{C['BUF_MB']}MB');\n")
        f.write(f"INSERT INTO {b} SELECT {key()} FROM generate_series(1, {plan[b]['A']}) g;\n")
        f.write("COMMIT;\n")
    files[p] = os.path.join(SQLDIR, f"load_{p}.sql")
    with open(files[p], "w") as f:
        f.write("BEGIN;\n")
        f.write(f"SELECT bcms_create('{p}', 'int8', delta => {C['DELTA']}, width => {g['width']}, "
                f"mode => 'plain');\n")
        f.write(f"INSERT INTO {p} SELECT {key()} FROM generate_series(1, {plan[p]['A']}) g;\n")
        f.write("COMMIT;\n")
    if do_base:
        files[up] = os.path.join(SQLDIR, f"load_{up}.sql")
        with open(files[up], "w") as f:
            f.write("BEGIN;\n")
            f.write(f"CREATE TABLE {up} (key int8, n bigint NOT NULL) WITH (autovacuum_enabled = off);\n")
            # the keys of the stream are distinct (64-bit random), so each
            # bulk-loaded item is one row with n = 1, as the upserts would make
            f.write(f"INSERT INTO {up} SELECT {key()}, 1 FROM generate_series(1, {plan[up]['A']}) g;\n")
            f.write(f"ALTER TABLE {up} ADD PRIMARY KEY (key);\n")
            f.write("COMMIT;\n")
            f.write(f"VACUUM ANALYZE {up};\n")
        files[h] = os.path.join(SQLDIR, f"load_{h}.sql")
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
        fp = write_batches(os.path.join(SQLDIR, f"s_{tag}.sql"), t, first, small,
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


def machine_info():
    cpu = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(open("/proc/meminfo").readline().split()[1]) // 1024
    osr = ""
    try:
        osr = [l.split("=", 1)[1].strip().strip('"') for l in open("/etc/os-release")
               if l.startswith("PRETTY_NAME")][0]
    except Exception:
        pass
    disk = ""
    if DEVSTAT:
        dev = os.path.basename(os.path.dirname(os.path.realpath(DEVSTAT)))
        rot = ""
        try:
            rot = open(f"/sys/class/block/{dev}/queue/rotational").read().strip()
            if rot == "0":
                rot = "non-rotational"
            else:
                rot = "rotational"
        except OSError:
            rot = "?"
        disk = f"{dev} ({rot})"
    return dict(cpu=cpu, cores=os.cpu_count(), ram_mb=mem, os=osr,
                kernel=platform.release(), disk=disk,
                pg=sh([os.path.join(PGBIN, "postgres"), "--version"], capture=True).strip())


def rand_read_latency_us():
    """Random 8 kB reads of a cold 256 MB file: the device's latency."""
    fn = os.path.join(WORK, "ddtest")
    with open(fn, "wb") as f:
        for _ in range(256):
            f.write(os.urandom(2**20))
    drop_caches()
    import random
    rnd = random.Random(1)
    fd = os.open(fn, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    nr = 3000
    t = time.time()
    for _ in range(nr):
        os.pread(fd, 8192, rnd.randrange(32768) * 8192)
    dt = time.time() - t
    os.close(fd)
    os.unlink(fn)
    return dt / nr * 1e6


def main():
    global CG, DEVSTAT
    if os.geteuid() != 0:
        sys.exit("run as root (cgroups, drop_caches, su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat(),
                   ratios=[])
    os.makedirs(SQLDIR, exist_ok=True)
    shutil.chown(WORK, "postgres")
    shutil.chown(SQLDIR, "postgres")
    DEVSTAT = blockdev_stat_path(WORK)
    results["machine"] = machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    limit = (C["SB_MB"] + C["CG_EXTRA_MB"]) * 2**20
    CG = Cgroup(limit)
    results["cgroup"] = dict(version=CG.version, path=CG.path, limit_mb=limit / 2**20)
    log(f"memory cgroup v{CG.version} {CG.path}, limit {limit / 2**20:.0f} MB "
        f"(shared_buffers {C['SB_MB']} MB + {C['CG_EXTRA_MB']} MB)")
    results["rand_read_us"] = rand_read_latency_us()
    log(f"device random 8 kB read latency (queue depth 1): {results['rand_read_us']:.0f} us")

    sh(as_pg(f"{PGBIN}/initdb -D {PGDATA} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
    server_start("loader")
    psql("CREATE DATABASE bench", db="postgres")
    psql("CREATE EXTENSION streamsketch; CREATE EXTENSION pg_prewarm; CREATE EXTENSION pg_buffercache")
    results["ext"]["installed_version"] = psql(
        "SELECT extversion FROM pg_extension WHERE extname = 'streamsketch'")

    for r in C["RATIOS"]:
        g = geometry(r)
        do_base = r in C["BASE_RATIOS"]
        small = C["U_SMALL"] if r in C["SMALL_RATIOS"] else 0
        names = (f"bcms_{r}", f"plain_{r}", f"upsert_{r}", f"heap_{r}")
        b, p, up, h = names
        log(f"ratio 1:{r}: sketch {g['sketch_mb']:.0f} MB, width {g['width']}, n = {g['n']} items")
        if server_mode != "loader":
            restart("loader", drop=False)
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

    results["finished"] = datetime.datetime.now().isoformat()
    results["runtime_s"] = time.time() - T0
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import bcms_bench_report
    bcms_bench_report.report(results, C)


def cleanup():
    try:
        server_stop()
    except Exception:
        pass
    if CG:
        CG.remove()
    if os.environ.get("KEEP_WORK") != "1":
        shutil.rmtree(PGDATA, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    if len(sys.argv) > 1 and sys.argv[1] == "--report":
        import bcms_bench_report
        bcms_bench_report.report(json.load(open(C["OUT_JSON"])), C)
        sys.exit(0)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        main()
    finally:
        cleanup()
