"""
Report of the partitions-on-other-servers benchmark (fdw_bench.py):
docs/bench-scale-out.md and a PNG (ingest rows/s per target; lookup
latency per target).
"""
import os

from benchlib import fmt, notes_section, run_header, table

LABELS = {
    "local": "one local table",
    "local2": "parent, 2 local partitions",
    "fdw1": "parent, 1 shard (postgres_fdw)",
    "fdw2": "parent, 2 shards (postgres_fdw)",
    "fdw4": "parent, 4 shards (postgres_fdw)",
    "fdw2b1": "parent, 2 shards, batch_size 1",
}
SHORT = {"local": "local table", "local2": "local parent,\n2 partitions", "fdw1": "1 shard",
         "fdw2": "2 shards", "fdw4": "4 shards", "fdw2b1": "2 shards,\nbatch_size 1"}


def ratio(x):
    return "%.2f" % x if x >= 0.1 else "%.3f" % x


def batch_of(t, C):
    return "-" if t.startswith("local") else ("1" if t == "fdw2b1" else fmt(C["FDW_BATCH"]))


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ing = results["ingest"]
    look = results.get("lookups", {})
    fig, ax = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    kinds = list(ing)
    targets = list(LABELS)
    w = 0.8 / len(kinds)
    for j, k in enumerate(kinds):
        xs = [i + (j - (len(kinds) - 1) / 2) * w for i, t in enumerate(targets) if t in ing[k]]
        ys = [ing[k][t]["median_rows_per_s"] for t in targets if t in ing[k]]
        ax[0].bar(xs, ys, w, label=k, color=f"C{j}")
        for x, t in zip(xs, [t for t in targets if t in ing[k]]):
            ax[0].scatter([x] * len(ing[k][t]["runs"]), ing[k][t]["runs"], marker="_", s=120,
                          color="black")
    ax[0].set_xticks(range(len(targets)), [SHORT[t] for t in targets], fontsize=9)
    ax[0].set_ylabel("rows/s (median; ticks: each round)")
    ax[0].set_yscale("log")
    ax[0].set_title("Ingest: INSERT ... SELECT through the parent")
    ax[0].legend(fontsize=9)
    ax[0].grid(True, axis="y", alpha=0.3)
    fns = list(look)
    lts = [t for t in LABELS if any(t in look[f] for f in fns)]
    w = 0.8 / max(len(lts), 1)
    for j, t in enumerate(lts):
        xs = [i + (j - (len(lts) - 1) / 2) * w for i in range(len(fns))]
        ax[1].bar(xs, [look[f][t]["p50_us"] / 1000 for f in fns], w, label=LABELS[t], color=f"C{j}")
        ax[1].scatter(xs, [look[f][t]["p99_us"] / 1000 for f in fns], marker="_", s=120, color="black")
    ax[1].set_xticks(range(len(fns)), fns)
    ax[1].set_ylabel("latency (ms; bar p50, tick p99)")
    ax[1].set_yscale("log")
    ax[1].set_title("Key lookup through the parent (one client)")
    ax[1].legend(fontsize=8, loc="upper left")
    ax[1].grid(True, axis="y", alpha=0.3)
    fig.suptitle("Partitions on other servers with postgres_fdw: 1 coordinator + up to 4 shard clusters "
                 "on one 2-core machine", fontsize=12)
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    cores = results["machine"].get("cores", "?")
    out = ["# Partitions on other servers (postgres_fdw) benchmark\n",
           run_header(results, "fdw_bench"),
           "**What this measures.** Up to five PostgreSQL clusters run on this one %s-core machine: "
           "a coordinator and up to 4 shards, each its own data directory and port, shared_buffers "
           "%s MB each, the same settings everywhere, postgres_fdw over the Unix socket. Four shards "
           "share %s cores with the coordinator, so this measures the cost of the hop and of the "
           "routing, not scale-out throughput: on separate machines each shard would have its own "
           "cores and disk.\n" % (cores, fmt(C["SB_MB"]), cores),
           "**Ingest.** A stream of %s text keys (Zipf-like: a log-uniform rank in 1..%s written in "
           "decimal, %s distinct keys) sits in a heap table on the coordinator and is `INSERT ... SELECT`ed, in "
           "transactions of %s rows from one session, into a structure created afresh: one local "
           "table; a parent hash-partitioned by the key with 2 local partitions; a parent whose 1, 2 "
           "or 4 hash partitions are postgres_fdw foreign tables (`batch_size` %s) on as many shards, "
           "each holding a structure of the same kind; and the 2-shard parent with `batch_size` 1 "
           "(%s rows). bcms with the default parameters; lert with threshold %s. Rows/s from the "
           "first statement to the last commit, median of %s rounds that alternate the targets (the "
           "order rotating by round); every target's count is checked equal to the rows sent. "
           "Ratios against the one local table.\n"
           % (fmt(C["ROWS"]), fmt(C["KEYS"]), fmt(results["distinct_keys"]), fmt(C["BATCH"]),
              fmt(C["FDW_BATCH"]), fmt(C["ROWS_B1"]), fmt(C["LERT_T"]), C["ROUNDS"]),
           "## Ingest\n"]
    header = ["structure", "target", "shards", "batch_size", "rows", "rows/s (median)",
              "each round", "against one local table"]
    rows = []
    for k, ts in results["ingest"].items():
        base = ts["local"]["median_rows_per_s"]
        for t in LABELS:
            if t not in ts:
                continue
            r = ts[t]
            rows.append([k, LABELS[t], {"local": "-", "local2": "-"}.get(t, t[3]), batch_of(t, C),
                         fmt(r["rows"]), fmt(r["median_rows_per_s"]),
                         ", ".join(fmt(x) for x in r["runs"]),
                         ratio(r["median_rows_per_s"] / base)])
    out.append(table(header, rows))
    b = results["ingest"]["bcms"]
    if "fdw2b1" in b:
        out.append("\nInto 2 shards, `batch_size` %s carried the bcms stream %.0f times as fast as "
                   "`batch_size` 1 (one remote round trip per row)."
                   % (fmt(C["FDW_BATCH"]), b["fdw2"]["median_rows_per_s"] / b["fdw2b1"]["median_rows_per_s"]))
    look = results.get("lookups")
    if look:
        out.append("\n## Lookups through the parent\n")
        out.append(
            "After the last round (the lerts flushed: %s of the local lert's keys reported), pgbench "
            "on the coordinator, one client, prepared statements, a random key rank in 1..%s per "
            "query, %s queries per variant in %s rounds that alternate the variants; p50 / p99 in "
            "microseconds, client round trip included. `bcms_estimate(parent, key)` and "
            "`lert_count(parent, key)` route to the partition that holds the key: on a foreign "
            "partition, one remote call of the same function on its shard through postgres_fdw's "
            "connection. `SELECT key FROM lert_parent WHERE key = $1` (the report, if any: the lert "
            "has no count column) is pruned to one partition and, on a foreign one, shipped to the "
            "shard by postgres_fdw, where the lert's lookup path answers it. Ratios of the p50 "
            "against the one local table.\n"
            % (fmt(results.get("reported_keys")), fmt(C["KEYS"]), fmt(C["QUERIES"]), C["ROUNDS"]))
        header = ["lookup"] + [f"{LABELS[t]} p50 / p99 us" for t in LABELS if t in next(iter(look.values()))]
        ts = [t for t in LABELS if t in next(iter(look.values()))]
        rows = []
        for fn, r in look.items():
            rows.append([f"`{fn}`"] + ["%s / %s" % (fmt(r[t]["p50_us"]), fmt(r[t]["p99_us"])) for t in ts])
        out.append(table(header, rows))
        out.append("\np50 against the one local table:\n")
        out.append(table(["lookup"] + [LABELS[t] for t in ts[1:]],
                         [[f"`{fn}`"] + ["%.2f" % (r[t]["p50_us"] / r["local"]["p50_us"]) for t in ts[1:]]
                          for fn, r in look.items()]))
    out.append("\n![ingest and lookups through a parent of foreign partitions](%s)\n"
               % os.path.basename(C["OUT_PNG"]))
    out.extend(notes_section("fdw_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
