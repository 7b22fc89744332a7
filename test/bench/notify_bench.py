#!/usr/bin/python3
"""
LERT notification delay: how long after the commit of the observation that
makes a key reach T a client that LISTENs on the lert's `notify` channel,
and never queries, receives the key, with committed change logs
consolidated by the background workers at their default settings.

Run as root through test/bench/notify_bench.sh (which builds and installs
the extension into a private tree first).  Everything happens in a
throwaway cluster under $WORK (default /tmp/ssbench-notify): one server
with the measuring settings of the other benchmarks (fsync and
synchronous_commit on, wal_level replica), shared_buffers SB_MB, no memory
cgroup (the structure is tiny: this measures time, not I/O).

Per configuration, a fresh lert (int8 keys, T = 8, the default variant and
level 0, notify => its own channel) and test/bench/notify_delay.c: a writer
connection commits one INSERT per transaction at RATE commits per second,
commit i observing keys i-7 .. i of each of LANES lanes, so that each
commit makes exactly one key per lane reach T; a listener connection
LISTENs and waits on its socket.  The delay of a report is the arrival of
its notification minus the time the COMMIT of its T-th observation
returned.  Every expected key must be notified exactly once and no other;
afterwards lert_reports must hold exactly the expected keys, each reported
at count T.

Configurations (CONFIGS, comma-separated names):
  r10     10 commits/s, 10 lanes (100 reports/s), DURATION_R10 seconds
  r1000   1,000 commits/s, 1 lane, DURATION_R1000 seconds, with
          synchronous_commit SYNC_R1000 (default off: one writer waiting
          for each commit's WAL flush cannot commit 1,000 times per second
          on a virtual disk)
  r1000sync  the same with synchronous_commit on: as fast as one writer
          commits (behind the schedule, it does not sleep)
  off     streamsketch.background_consolidation = off on the server, 10
          commits/s, 10 lanes, OFF_COMMITS commits: then no one
          consolidates; the listener waits WAIT seconds after the last
          commit (the fraction delivered within 10 s), then one reader
          queries the lert and the listener goes on.

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import math
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
from benchlib import env_float, env_int, log, psql  # noqa: E402

CONFIG = dict(
    T=8,
    CONFIGS=os.environ.get("CONFIGS", "r10,r1000,r1000sync,off").split(","),
    DURATION_R10=env_float("DURATION_R10", 60),
    DURATION_R1000=env_float("DURATION_R1000", 30),
    LANES_R10=env_int("LANES_R10", 10),
    SYNC_R1000=os.environ.get("SYNC_R1000", "off"),
    OFF_COMMITS=env_int("OFF_COMMITS", 150),
    WAIT=env_float("WAIT", 10),          # seconds after the last commit
    LINGER=env_float("LINGER", 2),       # after the last expected key: duplicates?
    TIMELINE=env_int("TIMELINE", 2000),  # points per configuration kept for the plot
    SB_MB=env_int("SB_MB", 128),
    PORT=env_int("PORT", 5481),
    WORK=os.environ.get("WORK", "/tmp/ssbench-notify"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-notify.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-notify.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "notify_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["SB_MB"])

RUNS = {
    "r10": dict(rate=10, lanes=C["LANES_R10"], commits=int(10 * C["DURATION_R10"]),
                background=True, sync="on"),
    "r1000": dict(rate=1000, lanes=1, commits=int(1000 * C["DURATION_R1000"]),
                  background=True, sync=C["SYNC_R1000"]),
    "r1000sync": dict(rate=1000, lanes=1, commits=int(1000 * C["DURATION_R1000"]),
                      background=True, sync="on"),
    "off": dict(rate=10, lanes=C["LANES_R10"], commits=C["OFF_COMMITS"],
                background=False, sync="on", reader=True),
}


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs, sorted."""
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, math.ceil(p / 100 * len(xs)) - 1))
    return xs[k]


def dist(xs):
    xs = sorted(xs)
    if not xs:
        return dict(n=0)
    return dict(n=len(xs), p50=pct(xs, 50), p95=pct(xs, 95), p99=pct(xs, 99),
                max=xs[-1], min=xs[0], mean=statistics.fmean(xs))


def plot_data(pairs):
    """For the plot: the delay at every 0.1 % of the notified reports
    (quantiles_ms, 1,001 values), and (commit time, delay) of at most
    TIMELINE of them, evenly spread over the run (timeline, ms)."""
    ds = sorted(d for _, d in pairs)
    q = [round(ds[min(len(ds) - 1, math.ceil(i / 1000 * len(ds)) - 1 if i else 0)], 2)
         for i in range(1001)] if ds else []
    step = max(1, math.ceil(len(pairs) / C["TIMELINE"]))
    return dict(quantiles_ms=q, timeline=[[round(t, 1), round(d, 2)] for t, d in pairs[::step]])


def dump(results):
    """The results file: indented, each timeline point on one line."""
    text = json.dumps(results, indent=1)
    text = re.sub(r"\[\s+(-?[\d.e+-]+),\s+(-?[\d.e+-]+)\s+\]", r"[\1, \2]", text)
    with open(C["OUT_JSON"], "w") as f:
        f.write(text + "\n")


def server(background):
    L.restart_measuring(C["SB_MB"], background, "notify")


def background_stats():
    v = psql("SELECT workers, rounds, errors, not_queued FROM streamsketch_background_stats()").split("|")
    return dict(zip(("workers", "rounds", "errors", "not_queued"), map(int, v)))


def run_config(name, exe):
    cfg = RUNS[name]
    T = C["T"]
    server(cfg["background"])
    bg = psql("LOAD 'streamsketch'; SHOW streamsketch.background_consolidation")
    table = f"n_{name}"
    psql(f"SELECT lert_create('{table}', 'int8', threshold => {T}, notify => '{table}')")
    info = psql(f"SELECT variant, level0_capacity, count_stretch_bound FROM lert_info('{table}')").split("|")
    psql("CHECKPOINT")
    time.sleep(1)
    s0 = background_stats()
    conninfo = f"host={L.SOCK} port={C['PORT']} user=postgres dbname=bench"
    if cfg["sync"] != "on":
        conninfo += f" options='-c synchronous_commit={cfg['sync']}'"
    load0 = os.getloadavg()
    log(f"{name}: {cfg['rate']} commits/s, {cfg['lanes']} lanes, {cfg['commits']:,} commits, "
        f"background_consolidation {bg}, synchronous_commit {cfg['sync']}; load {load0[0]:.2f}")
    t = time.time()
    r = subprocess.run([exe, conninfo, table, table, str(cfg["rate"]), str(cfg["lanes"]),
                        str(cfg["commits"]), str(T), str(C["WAIT"]), str(C["LINGER"]),
                        "1" if cfg.get("reader") else "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t
    load1 = os.getloadavg()
    if r.returncode != 0:
        raise RuntimeError(f"notify_delay failed:\n{r.stderr}\n{L.tail_log()}")
    s1 = background_stats()
    commits, keys, unexpected, reader = [], [], [], None
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "commit":
            commits.append((int(f[2]), int(f[3])))
        elif f[0] == "key":
            keys.append(dict(key=int(f[1]), commit=int(f[2]), done=int(f[3]),
                             arrival=int(f[4]), n=int(f[5])))
        elif f[0] == "unexpected":
            unexpected.append((f[1], int(f[2])))
        elif f[0] == "reader":
            reader = (int(f[1]), int(f[2]))
    ms = 1e-6
    period = 1e9 / cfg["rate"]
    lat = [(d - s) * ms for s, d in commits]
    lag = [(s - i * period) * ms for i, (s, _) in enumerate(commits)]
    span = (commits[-1][1] - commits[0][0]) / 1e9
    got = [k for k in keys if k["arrival"] >= 0]
    delays = [(k["arrival"] - k["done"]) * ms for k in got]
    res = dict(cfg, table=table, background_setting=bg, variant=info[0], level0_capacity=int(info[1]),
               wall_s=wall, load_before=load0, load_after=load1,
               commits_made=len(commits), commit_rate=(len(commits) - 1) / span if span > 0 else None,
               commit_latency_ms=dist(lat), schedule_lag_ms=dist(lag),
               expected=len(keys), received=len(got), missing=len(keys) - len(got),
               duplicates=sum(1 for k in keys if k["n"] > 1), unexpected=len(unexpected),
               delay_ms=dist(delays),
               within_1s=sum(1 for d in delays if d <= 1000) / len(keys),
               # the commit is visible to the worker a moment before the
               # writer's client sees COMMIT return
               negative=sum(1 for d in delays if d < 0),
               first_delay_ms=(keys[0]["arrival"] - keys[0]["done"]) * ms if keys[0]["arrival"] >= 0 else None,
               worker_rounds=s1["rounds"] - s0["rounds"], worker_errors=s1["errors"] - s0["errors"],
               not_queued=s1["not_queued"] - s0["not_queued"])
    # without the first second (the worker starting): the steady state
    steady = [(k["arrival"] - k["done"]) * ms for k in got if k["done"] >= 1e9]
    res["delay_steady_ms"] = dist(steady)
    if reader:
        res["reader_ms"] = (reader[0] * ms, reader[1] * ms)
        before = [k for k in got if k["arrival"] < reader[0]]
        after = [k for k in got if k["arrival"] >= reader[0]]
        res["before_reader"] = len(before)
        res["within_10s"] = sum(1 for d in delays if d <= 10000) / len(keys)
        res["after_reader"] = len(after)
        res["after_reader_from_query_ms"] = dist([k["arrival"] * ms - reader[0] * ms for k in after])
        res["last_commit_to_reader_ms"] = reader[0] * ms - commits[-1][1] * ms
    res.update(plot_data([(k["done"] * ms, (k["arrival"] - k["done"]) * ms) for k in got]))
    # the lert's own reports: exactly the expected keys, each at count T
    chk = psql(f"""WITH r AS (SELECT key::int8 AS k, count FROM lert_reports('{table}'))
SELECT count(*), count(DISTINCT k), count(*) FILTER (WHERE count <> {T}),
       count(*) FILTER (WHERE k % 1000000000 > {cfg['commits'] - T}) FROM r""").split("|")
    res["lert_reports"] = dict(zip(("reports", "distinct", "count_not_T", "beyond"), map(int, chk)))
    d = res["delay_ms"]
    log(f"  {res['commits_made']:,} commits at {res['commit_rate']:,.1f}/s (commit p50 "
        f"{res['commit_latency_ms']['p50']:.2f} ms, p99 {res['commit_latency_ms']['p99']:.2f} ms, "
        f"max schedule lag {res['schedule_lag_ms']['max']:.1f} ms); "
        f"{res['received']:,}/{res['expected']:,} notified, dup {res['duplicates']}, "
        f"unexpected {res['unexpected']}; {res['worker_rounds']:,} worker rounds; load {load1[0]:.2f}")
    if d["n"]:
        log(f"  delay ms: p50 {d['p50']:.1f} p95 {d['p95']:.1f} p99 {d['p99']:.1f} max {d['max']:.1f} "
            f"(first report {res['first_delay_ms'] or -1:.1f}); within 1 s {res['within_1s']:.4f}")
    if reader:
        log(f"  before the reader (queried {res['last_commit_to_reader_ms'] / 1000:.1f} s after the last commit): "
            f"{res['before_reader']:,}, within 10 s {res['within_10s']:.4f}; after it {res['after_reader']:,}")
    lr = res["lert_reports"]
    log(f"  lert_reports: {lr['reports']:,} ({lr['distinct']:,} distinct), count <> T: {lr['count_not_T']},"
        f" beyond the expected keys: {lr['beyond']}")
    psql(f"DROP TABLE {table}")
    return res


def main():
    if os.geteuid() != 0:
        sys.exit("run as root (su postgres)")
    results = dict(config={k: v for k, v in C.items()}, started=datetime.datetime.now().isoformat())
    os.makedirs(L.SQLDIR, exist_ok=True)
    L.DEVSTAT = L.blockdev_stat_path(L.WORK)
    results["machine"] = L.machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    results["uptime"] = L.sh(["uptime"], capture=True).strip()
    log(f"uptime: {results['uptime']}")
    exe = os.path.join(C["WORK"], "notify_delay")
    inc = L.sh(["pg_config", "--includedir"], capture=True).strip()
    L.sh(["cc", "-O2", "-Wall", "-o", exe, os.path.join(HERE, "notify_delay.c"), f"-I{inc}",
          "-lpq", "-lpthread"])
    L.sh(L.as_pg(f"{L.PGBIN}/initdb -D {L.PGDATA} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
    server(True)
    psql("CREATE DATABASE bench", db="postgres")
    psql("CREATE EXTENSION streamsketch")
    results["ext"]["installed_version"] = psql(
        "SELECT extversion FROM pg_extension WHERE extname = 'streamsketch'")
    results["settings"] = dict(r.split("|") for r in psql(
        "LOAD 'streamsketch'; SELECT name, current_setting(name) FROM pg_settings WHERE name IN "
        "('streamsketch.background_delay', 'streamsketch.background_quiet_time', "
        "'streamsketch.max_background_workers', 'streamsketch.change_log_limit', "
        "'synchronous_commit', 'fsync', 'shared_buffers', 'max_worker_processes')").splitlines())
    results["runs"] = {}
    for name in C["CONFIGS"]:
        results["runs"][name] = run_config(name, exe)
        dump(results)
    results["uptime_end"] = L.sh(["uptime"], capture=True).strip()
    log(f"uptime: {results['uptime_end']}")
    L.finish_run(results)
    dump(results)
    import notify_bench_report
    notify_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "notify_bench_report", C)
