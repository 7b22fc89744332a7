#!/usr/bin/python3
"""
Background consolidation: the foreground insert rate of each structure
with streamsketch's background workers on (the default) against off (the
writers consolidate a log past streamsketch.change_log_limit themselves),
and who ran the rounds.

Run as root through test/bench/background_bench.sh (which builds and
installs the extension into a private tree first).  One throwaway cluster
under $WORK (default /tmp/ssbench-background) with the measuring settings
of the other benchmarks (fsync and synchronous_commit on, wal_level
replica, autovacuum off, shared_buffers SB_MB), restarted with
streamsketch.background_consolidation on or off.

Per structure and setting, REPEATS times, interleaved (off, on, off, on,
...): a fresh table, then ROWS rows in transactions of BATCH rows from one
session (one psql script: the time from its first statement to its last
commit is the foreground time).  Right after the last commit: the rounds
the structure's change log went through (streamsketch_log_info's
consolidations) and those the workers ran (streamsketch_background_stats'
rounds, the only structure written), so foreground rounds = consolidations
- worker rounds; then the time until its log is empty (DRAIN_MAX seconds
at most; a short tail waits for streamsketch.background_quiet_time), or
with the workers off the time of a VACUUM that consolidates what the
writer left: the stream plus that is the time until everything committed
is consolidated.

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import env_int, env_float, log, psql  # noqa: E402

CONFIG = dict(
    STRUCTS=os.environ.get("STRUCTS", "bcms,bloom,qf,lert,cbt,bfile").split(","),
    ROWS=env_int("ROWS", 300000),
    BATCH=env_int("BATCH", 1000),
    REPEATS=env_int("REPEATS", 3),
    DRAIN_MAX=env_float("DRAIN_MAX", 15),
    SB_MB=env_int("SB_MB", 128),
    PORT=env_int("PORT", 5482),
    WORK=os.environ.get("WORK", "/tmp/ssbench-background"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-background.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-background.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "background_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["SB_MB"])

# per structure: how to create table t, and the rows of stream items lo..hi
STRUCTS = {
    "bcms": dict(
        label="bcms (buffered)",
        create="CREATE TABLE {t} (key int8) USING bcms",
        rows="SELECT hashint8extended(g, 0) FROM generate_series({lo}, {hi}) g"),
    "bloom": dict(
        label="bloom_filter (elevator)",
        create="SELECT bloom_create('{t}', 'int8', capacity => 2000000, fp_rate => 0.01, mode => 'elevator')",
        rows="SELECT hashint8extended(g, 0) FROM generate_series({lo}, {hi}) g"),
    "qf": dict(
        label="cascade_filter",
        create="SELECT qf_create('{t}', 'int8', capacity => 2000000, fp_rate => 0.001, access_method => 'cascade_filter')",
        rows="SELECT hashint8extended(g, 0) FROM generate_series({lo}, {hi}) g"),
    "lert": dict(
        label="lert (count stretch)",
        create="SELECT lert_create('{t}', 'int8', threshold => 24)",
        rows="SELECT g % 50000 FROM generate_series({lo}, {hi}) g"),
    "cbt": dict(
        label="cbt (count, sum by key)",
        create="SELECT cbt_create('{t}', group_by => 'k int8', aggregates => 'count(*) AS n, sum(v::int8) AS s')",
        cols=" (k, v)",
        rows="SELECT g % 100000, g FROM generate_series({lo}, {hi}) g"),
    "bfile": dict(
        label="bfile (uniform, 10,000 rows)",
        create="SELECT bfile_create('{t}', 'id int8', sample_size => 10000)",
        rows="SELECT g FROM generate_series({lo}, {hi}) g"),
}


def server(background):
    L.restart_measuring(C["SB_MB"], background, "background")


def worker_rounds():
    return int(psql("SELECT rounds FROM streamsketch_background_stats()"))


def log_state(t):
    v = psql(f"SELECT log_records, consolidations FROM streamsketch_log_info('{t}')").split("|")
    return int(v[0]), int(v[1])


def run_one(name, background, rep):
    s = STRUCTS[name]
    t = f"b_{name}_{'on' if background else 'off'}_{rep}"
    psql(s["create"].format(t=t))
    psql("CHECKPOINT")
    lines = []
    for lo in range(1, C["ROWS"] + 1, C["BATCH"]):
        hi = min(lo + C["BATCH"] - 1, C["ROWS"])
        lines.append(f"INSERT INTO {t}{s.get('cols', '')} {s['rows'].format(lo=lo, hi=hi)};\n")
    path = L.write_sql(f"{t}.sql", "".join(lines))
    r0 = worker_rounds()
    start = time.time()
    L.psql_file(path)
    seconds = time.time() - start
    r1 = worker_rounds()
    pending, rounds = log_state(t)
    worker = r1 - r0
    # the rest of the log: consolidated by the workers (on), by a VACUUM
    # (off: nobody else would)
    drain = None
    if not background:
        d0 = time.time()
        psql(f"VACUUM {t}")
        drain = time.time() - d0
    else:
        d0 = time.time()
        while time.time() - d0 < C["DRAIN_MAX"]:
            if log_state(t)[0] == 0:
                drain = time.time() - d0
                break
            time.sleep(0.05)
    res = dict(rows=C["ROWS"], batch=C["BATCH"], seconds=seconds,
               rows_per_s=C["ROWS"] / seconds, rounds=rounds, worker_rounds=worker,
               foreground_rounds=max(rounds - worker, 0), pending_after=pending,
               drain_s=drain, consolidated_s=None if drain is None else seconds + drain)
    log(f"{name} {'on ' if background else 'off'} #{rep}: {res['rows_per_s']:,.0f} rows/s, "
        f"rounds {rounds} (worker {worker}), {pending} records left, drain {drain}")
    psql(f"DROP TABLE {t}")
    return res


def summarize(runs):
    out = {}
    for name, per in runs.items():
        row = {}
        for mode in ("off", "on"):
            rs = per[mode]
            row[mode] = dict(
                rows_per_s=statistics.median(r["rows_per_s"] for r in rs),
                rounds=statistics.median(r["rounds"] for r in rs),
                worker_rounds=statistics.median(r["worker_rounds"] for r in rs),
                foreground_rounds=statistics.median(r["foreground_rounds"] for r in rs),
                pending_after=statistics.median(r["pending_after"] for r in rs),
                drain_s=statistics.median([r["drain_s"] for r in rs if r["drain_s"] is not None] or [0]),
                consolidated_s=statistics.median([r["consolidated_s"] for r in rs
                                                  if r["consolidated_s"] is not None] or [0]),
            )
        # a lert's worker counts each cone's round, its log only the rounds
        # that moved the head: the share is of the rounds each side ran
        bg = sum(r["worker_rounds"] for r in per["on"])
        tot = bg + sum(r["foreground_rounds"] for r in per["on"])
        row["worker_share"] = bg / tot if tot else None
        row["ratio"] = row["on"]["rows_per_s"] / row["off"]["rows_per_s"]
        out[name] = row
    return out


def main():
    results = dict(config={k: v for k, v in C.items() if not k.startswith("OUT_")},
                   started=datetime.datetime.now().isoformat())
    os.makedirs(L.SQLDIR, exist_ok=True)
    L.shutil.chown(L.WORK, "postgres")
    L.shutil.chown(L.SQLDIR, "postgres")
    results["machine"] = L.machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    L.sh(L.as_pg(f"{L.PGBIN}/initdb -D {L.PGDATA} -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null"))
    server(False)
    psql("CREATE DATABASE bench", db="postgres")
    psql("CREATE EXTENSION streamsketch")
    results["load_before"] = os.getloadavg()
    runs = {name: dict(off=[], on=[]) for name in C["STRUCTS"]}
    for rep in range(C["REPEATS"]):
        for background in (False, True):
            server(background)
            for name in C["STRUCTS"]:
                runs[name]["on" if background else "off"].append(run_one(name, background, rep))
    L.server_stop()
    results["load_after"] = os.getloadavg()
    results["runs"] = runs
    results["summary"] = summarize(runs)
    results["labels"] = {n: STRUCTS[n]["label"] for n in runs}
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import background_bench_report
    background_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "background_bench_report", CONFIG)
