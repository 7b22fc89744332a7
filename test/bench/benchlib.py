"""
Shared machinery of the streamsketch benchmarks (bcms_bench.py,
filters_bench.py): a throwaway cluster under $WORK run from a private copy of
the PostgreSQL binaries and of the freshly built extension (prepared by
benchlib.sh), a memory cgroup around the measuring server, dropping the page
cache, statistics deltas (pg_statio, pg_stat_bgwriter, WAL, block device)
around a timed operation, machine information and markdown/text tables.

Use: call configure() once with the benchmark's settings, then start_run()
in main() and cleanup() at exit.  Module state (CG, DEVSTAT, server_mode)
lives here; access it as benchlib.CG etc.
"""
import datetime
import importlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import time

T0 = time.time()

# set by configure()
CFG = {}
WORK = PGROOT = PGBIN = PGDATA = SOCK = LOG = SQLDIR = None
PSQL = []
COMMON_GUCS = LOADER_GUCS = MEASURE_GUCS = {}
CG = None
DEVSTAT = None
server_mode = None


def env_int(name, default):
    return int(os.environ.get(name, default))


def env_float(name, default):
    return float(os.environ.get(name, default))


def env_list(name, default):
    v = os.environ.get(name, default)
    return [int(x) for x in re.split(r"[ ,]+", v.strip()) if x]


def configure(work, port, sb_mb, loader_sb_mb, loader_extra=None, measure_extra=None):
    """Paths and server settings.  sb_mb is the measuring server's
    shared_buffers (the RAM M), loader_sb_mb the unconstrained loader's."""
    global WORK, PGROOT, PGBIN, PGDATA, SOCK, LOG, SQLDIR, PSQL, COMMON_GUCS, LOADER_GUCS, MEASURE_GUCS
    CFG.update(work=work, port=port, sb_mb=sb_mb, loader_sb_mb=loader_sb_mb)
    WORK = work
    PGROOT = os.path.join(WORK, "pg")
    PGBIN = os.path.join(PGROOT, "usr/lib/postgresql/15/bin")
    PGDATA = os.path.join(WORK, "data")
    SOCK = WORK
    LOG = os.path.join(WORK, "server.log")
    SQLDIR = os.path.join(WORK, "sql")
    PSQL = [os.path.join(PGBIN, "psql"), "-X", "-q", "-h", SOCK, "-p", str(port),
            "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-At"]
    COMMON_GUCS = {
        "listen_addresses": "''",
        "unix_socket_directories": f"'{SOCK}'",
        "port": str(port),
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
        "shared_buffers": f"{loader_sb_mb}MB",
        "wal_level": "minimal",          # bulk loads of tables created in the
        "max_wal_senders": "0",          # same transaction skip WAL
        "max_wal_size": "8GB",
        "checkpoint_timeout": "30min",
        "maintenance_work_mem": "1GB",
        "work_mem": "256MB",
        "streamsketch.pending_memory": "512MB",
    }, **(loader_extra or {}))
    MEASURE_GUCS = dict(COMMON_GUCS, **{
        "shared_buffers": f"{sb_mb}MB",
        "wal_level": "replica",
        "max_wal_size": "4GB",
        "checkpoint_timeout": "30min",
    }, **(measure_extra or {}))


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


def write_sql(name, text):
    """A SQL script under SQLDIR, readable by the postgres user."""
    path = os.path.join(SQLDIR, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


def pgbench_latencies(script, port, count, db="bench"):
    """Latencies (us) of count runs of pgbench script (a path) against the
    server on port: one client, prepared statements, each run logged."""
    logdir = os.path.join(WORK, "pgblog")
    os.makedirs(logdir, exist_ok=True)
    shutil.chown(logdir, "postgres")
    for f in os.listdir(logdir):
        os.unlink(os.path.join(logdir, f))
    sh(as_pg(f"cd {logdir} && {PGBIN}/pgbench -n -M prepared -h {SOCK} -p {port} "
             f"-c 1 -t {count} -l --log-prefix={logdir}/lat -f {script} {db} >/dev/null 2>&1"))
    lat = []
    for f in os.listdir(logdir):
        for line in open(os.path.join(logdir, f)):
            lat.append(int(line.split()[2]))
    return lat


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


def drop_caches():
    sh("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


# ---------------------------------------------------------------- server

def write_conf(gucs):
    with open(os.path.join(PGDATA, "postgresql.auto.conf"), "w") as f:
        for k, v in gucs.items():
            f.write(f"{k} = {v}\n")


def set_measure_memory(sb_mb, limit_mb):
    """The measuring server's shared_buffers and its cgroup's limit, from
    its next start (call with the measuring server stopped: a cgroup does
    not shrink below what its processes use)."""
    if server_mode == "measure":
        raise RuntimeError("set_measure_memory with the measuring server running")
    MEASURE_GUCS["shared_buffers"] = f"{sb_mb}MB"
    CG.limit = limit_mb * 2**20
    CG.write("memory.max" if CG.version == 2 else "memory.limit_in_bytes", str(CG.limit))


def server_start(mode):
    """mode "loader": unconstrained, big shared_buffers; "measure": small
    shared_buffers, inside the memory cgroup; "inram": the measuring
    settings with the loader's shared_buffers, outside the cgroup (a
    reference with everything in RAM)."""
    global server_mode
    if mode == "loader":
        write_conf(LOADER_GUCS)
    elif mode == "inram":
        write_conf(dict(MEASURE_GUCS, shared_buffers=LOADER_GUCS["shared_buffers"]))
    else:
        write_conf(MEASURE_GUCS)
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


def restart_measuring(sb_mb, background, mode):
    """The measuring server (no memory cgroup), restarted with
    shared_buffers sb_mb and streamsketch's background workers on or off."""
    global server_mode
    gucs = dict(MEASURE_GUCS, shared_buffers=f"{sb_mb}MB")
    gucs["streamsketch.background_consolidation"] = "on" if background else "off"
    server_stop()
    write_conf(gucs)
    sh(as_pg(f"{PGBIN}/pg_ctl -D {PGDATA} -l {LOG} -w -t 600 start >/dev/null"))
    server_mode = mode


def restart(mode, drop=True):
    server_stop()
    if drop:
        drop_caches()
    server_start(mode)


def ensure(mode):
    """The server in this mode (restarted without dropping caches if needed)."""
    if server_mode != mode:
        restart(mode, drop=False)


# ---------------------------------------------------------------- stats

def blockdev_stat_path(path):
    st = os.stat(path)
    maj, mnr = os.major(st.st_dev), os.minor(st.st_dev)
    p = f"/sys/dev/block/{maj}:{mnr}/stat"
    return p if os.path.exists(p) else None


def devstat():
    if not DEVSTAT:
        return (0, 0, 0, 0)
    f = open(DEVSTAT).read().split()
    return (int(f[0]), int(f[2]), int(f[4]), int(f[6]))  # rd ios, rd sect, wr ios, wr sect


def snapshot(rels):
    rl = ",".join(f"'{r}'::regclass" for r in rels) or "NULL"  # none: server-wide counters only
    q = (f"SELECT pg_stat_clear_snapshot();"
         f"SELECT coalesce(sum(heap_blks_read),0), coalesce(sum(heap_blks_hit),0),"
         f" coalesce(sum(idx_blks_read),0), coalesce(sum(idx_blks_hit),0),"
         f" (SELECT buffers_checkpoint FROM pg_stat_bgwriter),"
         f" (SELECT buffers_clean FROM pg_stat_bgwriter),"
         f" (SELECT buffers_backend FROM pg_stat_bgwriter),"
         f" pg_current_wal_lsn() - '0/0'::pg_lsn,"
         f" (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),"
         f" (SELECT wal_fpi FROM pg_stat_wal)"
         f" FROM pg_statio_all_tables WHERE relid IN ({rl})")
    out = psql(q).splitlines()[-1].split("|")
    v = [float(x) for x in out]
    d = devstat()
    return dict(heap_read=v[0], heap_hit=v[1], idx_read=v[2], idx_hit=v[3],
                bw=v[4] + v[5] + v[6], wal=v[7], ckpts=v[8], wal_fpi=v[9],
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
               wal_fpi_per_op=per("wal_fpi"),
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
    rows per statement (= per transaction, autocommit).  kind "insert"
    (one key column) or "upsert" (key, n with ON CONFLICT)."""
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


# ---------------------------------------------------------------- machine

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


def start_run(results, sb_mb, cg_extra_mb, extensions=("pg_prewarm", "pg_buffercache")):
    """Common start of a run: machine and build information into results,
    the memory cgroup, the device latency, a fresh cluster with database
    `bench` and the extensions, the loader server running."""
    global CG, DEVSTAT
    os.makedirs(SQLDIR, exist_ok=True)
    shutil.chown(WORK, "postgres")
    shutil.chown(SQLDIR, "postgres")
    DEVSTAT = blockdev_stat_path(WORK)
    results["machine"] = machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    limit = (sb_mb + cg_extra_mb) * 2**20
    CG = Cgroup(limit)
    results["cgroup"] = dict(version=CG.version, path=CG.path, limit_mb=limit / 2**20)
    log(f"memory cgroup v{CG.version} {CG.path}, limit {limit / 2**20:.0f} MB "
        f"(shared_buffers {sb_mb} MB + {cg_extra_mb} MB)")
    results["rand_read_us"] = rand_read_latency_us()
    log(f"device random 8 kB read latency (queue depth 1): {results['rand_read_us']:.0f} us")

    sh(as_pg(f"{PGBIN}/initdb -D {PGDATA} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
    server_start("loader")
    psql("CREATE DATABASE bench", db="postgres")
    psql("CREATE EXTENSION streamsketch; " + "; ".join(f"CREATE EXTENSION {e}" for e in extensions))
    results["ext"]["installed_version"] = psql(
        "SELECT extversion FROM pg_extension WHERE extname = 'streamsketch'")


def finish_run(results):
    results["finished"] = datetime.datetime.now().isoformat()
    results["runtime_s"] = time.time() - T0


def cleanup():
    try:
        server_stop()
    except Exception:
        pass
    if CG:
        CG.remove()
    if os.environ.get("KEEP_WORK") != "1" and PGDATA:
        shutil.rmtree(PGDATA, ignore_errors=True)


# ---------------------------------------------------------------- report

def fmt(x, d=0):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if d == 0:
        return f"{x:,.0f}"
    return f"{x:,.{d}f}"


def notes_section(name):
    """The hand-written analysis test/bench/NAME (pasted into a report
    under "## Analysis"), as lines; none if the file is missing or empty."""
    nf = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    notes = open(nf).read().strip() if os.path.exists(nf) else ""
    return ["## Analysis\n", notes, ""] if notes else []


def run_header(results, name):
    """A report's first paragraph: the command of benchmark NAME
    (test/bench/NAME.sh, parameters in NAME.py), when and on what it ran,
    the build, and the load average at its start and end."""
    m = results["machine"]
    return ("Command: `bash test/bench/%s.sh` (as root; parameters in "
            "`test/bench/%s.py`). Run %s on %s, %s cores, %s MB RAM, %s, kernel %s, %s; "
            "build `%s`. Load average (1, 5, 15 min) at the start: %s, at the end: %s.\n"
            % (name, name, results["started"], m.get("cpu", "?"), m.get("cores", "?"),
               fmt(m.get("ram_mb", 0)), m.get("disk", "?"), m.get("kernel", "?"), m.get("pg", "?"),
               results["ext"].get("head", "?"),
               " ".join("%.2f" % v for v in results["load_before"]),
               " ".join("%.2f" % v for v in results["load_after"])))


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(out)


def text_table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w[i]) for i, x in enumerate(r))
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in rows])


def run(main, report_module, config):
    """A benchmark script's entry point: with --report, re-render the report
    from the results file (config["OUT_JSON"]) with report_module; else run
    main, stopping the servers however it ends (SIGTERM included)."""
    if len(sys.argv) > 1 and sys.argv[1] == "--report":
        importlib.import_module(report_module).report(json.load(open(config["OUT_JSON"])), config)
        return
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        main()
    finally:
        cleanup()
