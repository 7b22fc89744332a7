#!/usr/bin/python3
"""
Partitions on other servers (postgres_fdw): what the hop costs.

Run as root through test/bench/fdw_bench.sh (which builds and installs the
extension into a private tree first).  Up to five throwaway clusters under
$WORK from that tree, each its own data directory and port (PORT for the
coordinator, PORT+1 .. PORT+4 for the shards), shared_buffers SB_MB each,
the same settings everywhere; the coordinator has postgres_fdw and one
foreign server per shard (over the Unix socket).

The stream: ROWS text keys, Zipf-like (a log-uniform rank in 1..KEYS, in
decimal), in a heap table src(id, key) on the coordinator.

Ingest: per structure (bcms; lert with threshold LERT_T, if LERT=1) and
per target, the structure is created afresh and the stream is INSERTed
from src in transactions of BATCH rows (INSERT ... SELECT ... WHERE id
BETWEEN, one psql session), timed from the first statement to the last
commit, into:
  * local:   one table on the coordinator;
  * local2:  a parent hash-partitioned by the key with 2 local partitions;
  * fdwN:    a parent hash-partitioned by the key whose N = 1, 2, 4
             partitions are postgres_fdw foreign tables on N shards
             (batch_size FDW_BATCH);
  * fdw2b1:  as fdw2 with batch_size 1, ROWS_B1 rows (bcms only).
The targets alternate within each of ROUNDS rounds; the count each target
holds afterwards is checked against the rows sent.

Lookups (after the last round, the lerts flushed): pgbench, one client,
prepared statements, a random key per query, QUERIES queries per variant
in ROUNDS rounds that alternate the variants: bcms_estimate(parent, key),
lert_count(parent, key) and the plain SQL SELECT key FROM lert WHERE key =
$1, on each target; p50 and p99 of the latencies pgbench logs (client round
trip included).

Configuration: environment variables (see CONFIG below).
"""
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import benchlib as L  # noqa: E402
from benchlib import env_int, log  # noqa: E402

CONFIG = dict(
    ROWS=env_int("ROWS", 2_000_000),        # stream rows per ingest run
    ROWS_B1=env_int("ROWS_B1", 100_000),    # rows of the batch_size 1 run
    KEYS=env_int("KEYS", 100_000),          # key ranks (about as many distinct keys)
    BATCH=env_int("BATCH", 100_000),        # rows per INSERT transaction
    FDW_BATCH=env_int("FDW_BATCH", 1000),   # postgres_fdw batch_size
    LERT=env_int("LERT", 1),                # also ingest into lerts
    LERT_T=env_int("LERT_T", 1000),         # lert threshold
    QUERIES=env_int("QUERIES", 15000),       # lookups per variant
    ROUNDS=env_int("ROUNDS", 3),
    SB_MB=env_int("SB_MB", 256),            # shared_buffers of each cluster
    PORT=env_int("PORT", 5700),             # coordinator; shards PORT+1..
    WORK=os.environ.get("WORK", "/tmp/ssbench-fdw"),
    OUT_MD=os.environ.get("OUT_MD", os.path.join(REPO, "docs", "bench-scale-out.md")),
    OUT_PNG=os.environ.get("OUT_PNG", os.path.join(REPO, "docs", "bench-scale-out.png")),
    OUT_JSON=os.environ.get("OUT_JSON", os.path.join(HERE, "fdw_bench_results.json")),
)
C = CONFIG
L.configure(C["WORK"], C["PORT"], C["SB_MB"], C["SB_MB"])
NSHARDS = 4

# target -> (shards, batch_size); no shards: local
TARGETS = {
    "local": (0, None),
    "local2": (0, None),
    "fdw1": (1, C["FDW_BATCH"]),
    "fdw2": (2, C["FDW_BATCH"]),
    "fdw4": (4, C["FDW_BATCH"]),
    "fdw2b1": (2, 1),
}
LOOKUP_TARGETS = ("local", "local2", "fdw1", "fdw2", "fdw4")

# the SQL creating one structure named {n} with the column key text
CREATE = {
    "bcms": "CREATE TABLE {n} (key text) USING bcms",
    "lert": "SELECT lert_create('{n}', 'text', threshold => {t})",
}
# the count a structure (or parent) holds
ITEMS = {
    "bcms": "SELECT (bcms_info('{n}')).items",
    "lert": "SELECT (lert_info('{n}')).observations",
}


class Cluster:
    """One throwaway cluster of the private install: data directory
    $WORK/NAME, the port given, the common settings."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.data = os.path.join(L.WORK, name)
        self.log = os.path.join(L.WORK, f"{name}.log")
        self.cmd = [os.path.join(L.PGBIN, "psql"), "-X", "-q", "-h", L.SOCK, "-p", str(port),
                    "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-At", "-d"]
        self.running = False

    def start(self):
        L.sh(L.as_pg(f"{L.PGBIN}/initdb -D {self.data} -A trust -E UTF8 --locale=C.UTF-8 "
                     f"--no-sync >/dev/null"))
        gucs = dict(L.MEASURE_GUCS, port=str(self.port))
        with open(os.path.join(self.data, "postgresql.auto.conf"), "w") as f:
            f.writelines(f"{k} = {v}\n" for k, v in gucs.items())
        L.sh(L.as_pg(f"{L.PGBIN}/pg_ctl -D {self.data} -l {self.log} -w -t 600 start >/dev/null"))
        self.running = True
        self.psql("CREATE DATABASE bench", db="postgres")
        self.psql("CREATE EXTENSION streamsketch")

    def stop(self):
        if self.running:
            L.sh(L.as_pg(f"{L.PGBIN}/pg_ctl -D {self.data} -w -t 600 -m fast stop >/dev/null"),
                 check=False)
            self.running = False

    def _run(self, args, what):
        r = subprocess.run(self.cmd + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            try:
                tail = "".join(open(self.log, errors="replace").readlines()[-20:])
            except OSError:
                tail = ""
            raise RuntimeError(f"{self.name}: {what} failed:\n{r.stderr[-3000:]}\n"
                               f"--- {self.log} tail ---\n{tail}")
        return r.stdout.strip()

    def psql(self, sql, db="bench"):
        return self._run([db, "-c", sql], sql[:200])

    def psql_file(self, path, db="bench"):
        return self._run([db, "-f", path], f"psql -f {path}")


COORD = Cluster("data", C["PORT"])      # $WORK/data: benchlib.sh stops it
SHARDS = [Cluster(f"shard{i}", C["PORT"] + 1 + i) for i in range(NSHARDS)]


def clusters():
    return [COORD] + SHARDS


def create_target(kind, target):
    """The structure `kind` as target (dropped first), named kind_target;
    returns its name."""
    p = f"{kind}_{target}"
    nshards, batch = TARGETS[target]
    create = lambda n: CREATE[kind].format(n=n, t=C["LERT_T"])
    COORD.psql(f"DROP TABLE IF EXISTS {p} CASCADE")
    if target == "local":
        COORD.psql(create(p))
        return p
    COORD.psql(f"CREATE TABLE {p} (key text) PARTITION BY HASH (key)")
    if target == "local2":
        for i in range(2):
            # a lert is made by lert_create and attached; a bcms by
            # CREATE TABLE ... PARTITION OF ... USING, as a user would
            if kind == "lert":
                COORD.psql(create(f"{p}_{i}"))
                COORD.psql(f"ALTER TABLE {p} ATTACH PARTITION {p}_{i} "
                           f"FOR VALUES WITH (MODULUS 2, REMAINDER {i})")
            else:
                COORD.psql(f"CREATE TABLE {p}_{i} PARTITION OF {p} "
                           f"FOR VALUES WITH (MODULUS 2, REMAINDER {i}) USING bcms")
        return p
    for i in range(nshards):
        SHARDS[i].psql(f"DROP TABLE IF EXISTS {p}_{i}")
        SHARDS[i].psql(create(f"{p}_{i}"))
        COORD.psql(f"CREATE FOREIGN TABLE {p}_{i} PARTITION OF {p} "
                   f"FOR VALUES WITH (MODULUS {nshards}, REMAINDER {i}) "
                   f"SERVER shard{i} OPTIONS (batch_size '{batch}')")
    return p


def parts(target, p):
    """(cluster, name) of each structure that target p consists of (a
    lert's info function takes no parent)."""
    nshards = TARGETS[target][0]
    if target == "local":
        return [(COORD, p)]
    if target == "local2":
        return [(COORD, f"{p}_{i}") for i in range(2)]
    return [(SHARDS[i], f"{p}_{i}") for i in range(nshards)]


def checkpoint_all():
    for c in clusters():
        c.psql("CHECKPOINT")


def ingest(kind, target):
    """One timed run of the stream into a fresh target: rows/s."""
    p = create_target(kind, target)
    rows = C["ROWS_B1"] if target == "fdw2b1" else C["ROWS"]
    lines = []
    for lo in range(1, rows + 1, C["BATCH"]):
        hi = min(lo + C["BATCH"] - 1, rows)
        lines.append(f"INSERT INTO {p} SELECT key FROM src WHERE id BETWEEN {lo} AND {hi};\n")
    path = L.write_sql(f"ingest_{p}.sql", "".join(lines))
    checkpoint_all()
    time.sleep(1)
    t = time.time()
    COORD.psql_file(path)
    dt = time.time() - t
    held = sum(int(c.psql(ITEMS[kind].format(n=n))) for c, n in parts(target, p))
    if held != rows:
        raise RuntimeError(f"{p}: holds {held} items, {rows} were sent")
    return dict(rows=rows, seconds=dt, rows_per_s=rows / dt)


def pgbench_latencies(name, sql, count):
    """Latencies (us) of count runs of sql against the coordinator, one
    client, prepared, a random key rank :r per run."""
    script = L.write_sql(f"{name}.pgb", f"\\set r random(1, {C['KEYS']})\n{sql};\n")
    return L.pgbench_latencies(script, COORD.port, count)


# lookup -> (structure, query on target {t}); the key is the parameter
# itself (postgres_fdw ships key = $1, but in a generic plan it kept
# key = 'k' || $1 on the coordinator and fetched the whole partition)
LOOKUPS = {
    "bcms_estimate": ("bcms", "SELECT bcms_estimate('bcms_{t}', :r::text)"),
    "lert_count": ("lert", "SELECT lert_count('lert_{t}', :r::text)"),
    "SQL key =": ("lert", "SELECT key FROM lert_{t} WHERE key = :r::text"),
}


def lookups(kinds):
    variants = [(fn, t) for fn in LOOKUPS for t in LOOKUP_TARGETS
                if LOOKUPS[fn][0] in kinds]
    lats = {v: [] for v in variants}
    n = max(C["QUERIES"] // C["ROUNDS"], 1)
    for r in range(C["ROUNDS"]):
        for fn, t in variants:
            lats[(fn, t)] += pgbench_latencies(f"lookup_{t}", LOOKUPS[fn][1].format(t=t), n)
        log(f"lookups: round {r + 1} done")
    out = {}
    for (fn, t), lat in lats.items():
        lat.sort()
        out.setdefault(fn, {})[t] = dict(p50_us=lat[len(lat) // 2], p99_us=lat[int(len(lat) * 0.99)],
                                         mean_us=statistics.mean(lat), n=len(lat))
        log(f"{fn} on {t}: p50 {lat[len(lat) // 2]} us, p99 {lat[int(len(lat) * 0.99)]} us")
    return out


def flush_lerts():
    """Every lert merged (every key that reached T reported), so that the
    local and remote ones are in the same state for the lookups; returns
    the reported keys of the local lert."""
    for c in clusters():
        names = c.psql("SELECT string_agg(c.oid::regclass::text, ' ') FROM pg_class c "
                       "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'lert'").split()
        for n in names:
            c.psql(f"SELECT lert_flush('{n}')")
    return int(COORD.psql("SELECT count(*) FROM lert_local"))


def main():
    results = dict(config={k: v for k, v in C.items() if not k.startswith("OUT_")},
                   started=datetime.datetime.now().isoformat())
    os.makedirs(L.SQLDIR, exist_ok=True)
    L.shutil.chown(L.WORK, "postgres")
    L.shutil.chown(L.SQLDIR, "postgres")
    L.DEVSTAT = L.blockdev_stat_path(L.WORK)
    results["machine"] = L.machine_info()
    results["ext"] = json.loads(os.environ.get("SSBENCH_EXT", "{}"))
    try:
        for c in clusters():
            c.start()
        COORD.psql("CREATE EXTENSION postgres_fdw")
        for i, s in enumerate(SHARDS):
            COORD.psql(f"CREATE SERVER shard{i} FOREIGN DATA WRAPPER postgres_fdw "
                       f"OPTIONS (host '{L.SOCK}', port '{s.port}', dbname 'bench')")
            COORD.psql(f"CREATE USER MAPPING FOR CURRENT_USER SERVER shard{i}")
        COORD.psql("CREATE TABLE src (id int8 PRIMARY KEY, key text)")
        # Zipf-like: a log-uniform rank in [1, KEYS]
        COORD.psql(f"INSERT INTO src SELECT g, floor(exp(((hashint8extended(g, 3) & 4294967295)"
                   f"::float8 / 4294967296.0) * ln({C['KEYS']}::float8 + 1)))::int8::text "
                   f"FROM generate_series(1, {C['ROWS']}) g")
        COORD.psql("VACUUM ANALYZE src")
        results["distinct_keys"] = int(COORD.psql("SELECT count(DISTINCT key) FROM src"))
        log(f"src: {C['ROWS']} rows, {results['distinct_keys']} distinct keys")
        results["load_before"] = os.getloadavg()

        kinds = ["bcms"] + (["lert"] if C["LERT"] else [])
        plan = [(k, t) for k in kinds for t in TARGETS if not (k == "lert" and t == "fdw2b1")]
        runs = {f"{k}/{t}": [] for k, t in plan}
        for r in range(C["ROUNDS"]):
            # the order rotates by round: no target always follows another
            for k, t in plan[r % len(plan):] + plan[:r % len(plan)]:
                res = ingest(k, t)
                runs[f"{k}/{t}"].append(res)
                log(f"round {r + 1}: {k} into {t}: {res['rows_per_s']:,.0f} rows/s "
                    f"({res['seconds']:.1f} s)")
        results["ingest"] = {}
        for name, rs in runs.items():
            k, t = name.split("/")
            results["ingest"].setdefault(k, {})[t] = dict(
                rows=rs[0]["rows"], runs=[x["rows_per_s"] for x in rs],
                median_rows_per_s=statistics.median(x["rows_per_s"] for x in rs))

        if C["LERT"]:
            results["reported_keys"] = flush_lerts()
        time.sleep(2)
        results["lookups"] = lookups(kinds)
        results["load_after"] = os.getloadavg()
    finally:
        for c in clusters():
            c.stop()
        # the coordinator's directory is benchlib's PGDATA, removed by
        # benchlib.cleanup(); the shards' go the same way
        if os.environ.get("KEEP_WORK") != "1":
            for s in SHARDS:
                L.shutil.rmtree(s.data, ignore_errors=True)
    L.finish_run(results)
    with open(C["OUT_JSON"], "w") as f:
        json.dump(results, f, indent=1)
    import fdw_bench_report
    fdw_bench_report.report(results, C)


if __name__ == "__main__":
    L.run(main, "fdw_bench_report", CONFIG)
