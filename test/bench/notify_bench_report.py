"""
Report of the notification delay benchmark (notify_bench.py):
docs/bench-notify.md and a PNG of the delays (their distribution per
configuration, and each report's delay over the run).
"""
import os

from benchlib import fmt, notes_section, table

LABELS = {"r10": "10 commits/s, 10 lanes", "r1000": "1,000 commits/s, 1 lane",
          "r1000sync": "as fast as one writer commits (synchronous_commit on), 1 lane",
          "off": "background consolidation off, 10 commits/s, 10 lanes"}


def label(name, r):
    s = LABELS.get(name, name)
    if r.get("sync", "on") != "on":
        s += f", synchronous_commit {r['sync']}"
    return s


def ms(x, d=0):
    return "-" if x is None else fmt(x, d)


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    fig, ax = plt.subplots(1, 2, figsize=(15, 6.8), layout="constrained")
    delay = int(results["settings"].get("streamsketch.background_delay", "200ms").rstrip("ms"))
    for i, (name, r) in enumerate(runs.items()):
        ys = r["quantiles_ms"]
        if not ys:
            continue
        # a CDF over every expected report (those never notified stay at the top)
        frac = [j / 1000 * r["received"] / r["expected"] for j in range(len(ys))]
        style = "--" if not r["background"] else "-"
        lab = label(name, r) + f" ({r['expected']:,} reports)"
        if r.get("reader_ms"):
            lab += ";\nnotified only after a reader queried, " \
                   f"{r['last_commit_to_reader_ms'] / 1000:.0f} s after the last commit"
        ax[0].plot(ys, frac, style, color=f"C{i}", label=lab)
        ts = [t / 1000 for t, _ in r["timeline"]]
        ds = [d for _, d in r["timeline"]]
        if r["background"]:
            ax[1].plot(ts, ds, ".", color=f"C{i}", markersize=1.5 if r["lanes"] == 1 else 4,
                       alpha=0.4 if r["lanes"] == 1 else 0.8, label=label(name, r),
                       zorder=2 if r["lanes"] == 1 else 3)
    for a in ax:
        a.axhline(0, color="none")
    ax[0].axvline(delay, color="gray", linestyle=":", linewidth=1)
    ax[0].text(delay * 1.05, 0.12, f"background_delay\n{delay} ms", fontsize=8, color="gray")
    ax[0].axvline(1000, color="C3", linestyle=":", linewidth=1)
    ax[0].text(1050, 0.02, "target:\np99 <= 1 s", fontsize=8, color="C3")
    ax[0].axvline(10000, color="gray", linestyle=":", linewidth=1)
    ax[0].set_xscale("log")
    ax[0].set_ylim(0, 1.02)
    ax[0].set_xlabel("delay: notification arrival - the COMMIT of the T-th observation returned (ms, log scale)")
    ax[0].set_ylabel("fraction of the reports")
    ax[0].set_title("Distribution of the notification delay")
    ax[0].grid(True, which="both", alpha=0.3)
    ax[0].legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    ax[1].set_xlabel("time of the commit since the run's start (s)")
    ax[1].set_ylabel("delay (ms)")
    ax[1].set_title("Each report's delay over the run (background consolidation on)")
    ax[1].axhline(delay, color="gray", linestyle=":", linewidth=1)
    ax[1].set_ylim(bottom=0)
    ax[1].grid(True, alpha=0.3)
    ax[1].legend(fontsize=8.5, markerscale=4, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.suptitle(f"LERT notifications at a client that LISTENs and never queries (T = {C['T']})", fontsize=13)
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    m = results["machine"]
    st = results["settings"]
    out = ["# LERT notification delay\n",
           f"Command: `bash test/bench/notify_bench.sh` (as root; parameters in "
           f"`test/bench/notify_bench.py`). Run {results['started']} on {m.get('cpu', '?')}, "
           f"{m.get('cores', '?')} cores, {m.get('ram_mb', 0):,} MB RAM, {m.get('disk', '?')}, "
           f"{m.get('os', '?')}, kernel {m.get('kernel', '?')}, {m.get('pg', '?')}; "
           f"build `{results['ext'].get('head', '?')}`. Load average at the start: "
           f"`{results.get('uptime', '?').split('load average:')[-1].strip()}`, at the end: "
           f"`{results.get('uptime_end', '?').split('load average:')[-1].strip()}`.\n",
           f"A lert with a `notify` channel sends `pg_notify(channel, key)` for each report when the "
           f"transaction that consolidates the change log commits. Here nobody queries: a client LISTENs "
           f"on the channel and waits on its socket, and the background worker consolidates the log "
           f"`streamsketch.background_delay` after a commit (settings at their defaults: "
           f"background_delay {st.get('streamsketch.background_delay', '?')}, "
           f"change_log_limit {st.get('streamsketch.change_log_limit', '?')}, "
           f"max_background_workers {st.get('streamsketch.max_background_workers', '?')}; "
           f"fsync {st.get('fsync', '?')}, synchronous_commit {st.get('synchronous_commit', '?')} "
           f"unless the table says otherwise, shared_buffers {st.get('shared_buffers', '?')}).\n",
           "## Delay from commit to notification\n"]
    rows = []
    for name, r in results["runs"].items():
        d = r["delay_ms"]
        rows.append([label(name, r), fmt(r["commit_rate"], 1), fmt(r["expected"]), fmt(r["received"]),
                     r["duplicates"], r["unexpected"],
                     ms(d.get("p50"), 1), ms(d.get("p95"), 1), ms(d.get("p99"), 1), ms(d.get("max"), 1),
                     ms(r.get("first_delay_ms"), 1),
                     f"{r['within_1s'] * 100:.1f} %",
                     f"{r['within_10s'] * 100:.1f} %" if "within_10s" in r else "-",
                     fmt(r["worker_rounds"])])
    out.append(table(["configuration", "commits/s", "reports", "notified", "dup.", "other keys",
                      "delay p50 ms", "p95", "p99", "max", "first report", "within 1 s",
                      "within 10 s", "worker rounds"], rows))
    on = [(n, r) for n, r in results["runs"].items() if r["background"] and r["delay_ms"].get("n")]
    if on:
        worst = max(r["delay_ms"]["p99"] for _, r in on)
        out.append(f"\nTarget: p99 <= 1 s at the default settings; measured p99 at most {worst:,.0f} ms "
                   f"({'met' if worst <= 1000 else 'not met'}).")
    off = results["runs"].get("off")
    if off and off.get("reader_ms"):
        a = off["after_reader_from_query_ms"]
        out.append(f"\nWith background consolidation off, {off['before_reader']:,} of {off['expected']:,} "
                   f"notifications arrived without a reader ({off['within_10s'] * 100:.1f} % within 10 s of "
                   f"their commit); one `SELECT count(*)` on the lert "
                   f"{off['last_commit_to_reader_ms'] / 1000:.1f} s after the last commit consolidated the "
                   f"log, and {off['after_reader']:,} notifications arrived "
                   + (f"{ms(a.get('min'), 0)} to {ms(a.get('max'), 0)} ms" if a.get("max", 0) - a.get("min", 0) >= 1
                      else f"{ms(a.get('max'), 0)} ms")
                   + " after that query began (the delays in the table for this row are therefore the "
                   "wait for the reader).")
    out.append(f"\n![notification delay]({os.path.basename(C['OUT_PNG'])})\n")
    out.append("## The writer\n")
    rows = []
    for name, r in results["runs"].items():
        cl, lag = r["commit_latency_ms"], r["schedule_lag_ms"]
        rows.append([label(name, r), fmt(r["commits_made"]), fmt(r["rate"]), fmt(r["commit_rate"], 1),
                     r["lanes"] * C["T"], r["sync"], fmt(cl["p50"], 2), fmt(cl["p99"], 2), fmt(cl["max"], 1),
                     fmt(lag["max"], 1), f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f}"])
    out.append(table(["configuration", "commits", "target commits/s", "achieved", "rows per commit",
                      "synchronous_commit", "commit latency p50 ms", "p99", "max", "max lag behind schedule ms",
                      "load (1 min) before / after"], rows))
    out.append("")
    out.append("## How it was measured\n")
    out.append(
        f"`test/bench/notify_delay.c` (libpq, two connections in two threads of one process, one "
        f"monotonic clock). The listener sends `LISTEN` before the writer starts and then never sends a "
        f"query: it waits on its socket with `poll()`, reads with `PQconsumeInput` and takes each "
        f"notification with `PQnotifies`, stamping its arrival. The writer commits one `INSERT` per "
        f"transaction (autocommit) on a fixed schedule of the target rate and stamps the moment each "
        f"`COMMIT` returned. Commit i inserts the keys i-{C['T'] - 1} .. i of each lane, so key k of a lane "
        f"reaches T = {C['T']} in commit k+{C['T'] - 1} and every commit from the {C['T']}th on makes "
        f"exactly one key per lane reach T. A report's delay is the arrival of its notification minus "
        f"the time the commit of its T-th observation returned. Each configuration uses a fresh lert "
        f"(`lert_create(..., 'int8', threshold => {C['T']}, notify => ...)`, the default "
        f"count_stretch variant and level 0, which the run never fills, so every key is reported at "
        f"its T-th observation); every expected key must be notified exactly once and no other key at "
        f"all, and afterwards `lert_reports` must hold exactly the expected keys, each at count T. The "
        f"listener stops {C['LINGER']:g} s after the last expected key arrived (duplicates would arrive "
        f"in that time) or {C['WAIT']:g} s after the last commit. *First report* is the delay of the "
        f"first key of the run; the run's first commit starts the database's worker (a worker leaves "
        f"after five idle seconds and the next commit starts one). With background consolidation off "
        f"(server setting), the listener waits {C['WAIT']:g} s after the last commit, then a third "
        f"connection queries the lert once. *Worker rounds* counts the structures the workers "
        f"consolidated during the run (`streamsketch_background_stats()`). A delay can be slightly "
        f"below zero: the commit is visible, and the worker's round in progress may consolidate it and "
        f"commit, a moment before the writer's client has read the result of its `COMMIT`.\n")
    for name, r in results["runs"].items():
        lr = r["lert_reports"]
        neg = r.get("negative", 0)
        out.append(f"- {label(name, r)}: `lert_reports` {lr['reports']:,} reports of {lr['distinct']:,} "
                   f"keys, {lr['count_not_T']} at a count other than T, {lr['beyond']} of keys that never "
                   f"reached T; {r['missing']} expected keys not notified"
                   + (f"; {neg} delay{'s' if neg > 1 else ''} below zero (the lowest {r['delay_ms']['min']:.1f} ms)"
                      if neg else "")
                   + ".")
    out.append("")
    out.extend(notes_section("notify_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
