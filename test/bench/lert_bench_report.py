"""
Report of the LERT benchmark (lert_bench.py): docs/bench-lert.md and a PNG
of the count- and time-stretch distributions of every variant (the paper's
Figure 1) and of the throughput against the baselines.
"""
import os

from benchlib import fmt, notes_section, table

NAMES = {"csl": "count_stretch (CSL)", "tsl1": "time_stretch a=1 (TSL1)",
         "tsl2": "time_stretch a=2 (TSL2)", "tsl3": "time_stretch a=3 (TSL3)",
         "tsl4": "time_stretch a=4 (TSL4)", "irl": "immediate (IRL)",
         "cf": "cascade (CF, no timeliness)"}


def variant_order(results):
    """The variants in the paper's order (a merged run appends its own)."""
    vs = results["variants"]
    return [v for v in NAMES if v in vs] + [v for v in vs if v not in NAMES]


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    V = [v for v in variant_order(results) if "check" in results["variants"][v]]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
    x = range(len(V))
    for i, (what, title) in enumerate((("cs", "count stretch (count at report / T)"),
                                       ("ts", "time stretch ((reported - first) / (T-th - first))"))):
        for j, (stat, mark) in enumerate((("max", "v"), ("p99", "o"), ("mean", "s"))):
            y = [results["variants"][v]["check"][f"{what}_{stat}"] or 0 for v in V]
            ax[i].plot(x, y, mark, label=stat)
        ax[i].set_xticks(list(x))
        ax[i].set_xticklabels([v.upper() for v in V])
        ax[i].set_title(title)
        ax[i].set_yscale("log")
        ax[i].legend()
    names = [v.upper() for v in V]
    thr = [results["variants"][v]["insert"]["ops_per_s"] for v in V]
    for key, name in (("upsert_logged", "upsert"), ("upsert_unlogged", "upsert unl."),
                      ("inram_pg", "CSL in RAM")):
        if key in results:
            names.append(name)
            thr.append(results[key]["insert"]["ops_per_s"])
    if "inram" in results:
        names.append("simulated")
        thr.append(results["inram"]["obs_per_s"])
    ax[2].bar(range(len(names)), thr)
    ax[2].set_xticks(range(len(names)))
    ax[2].set_xticklabels(names, rotation=45, ha="right")
    ax[2].set_yscale("log")
    ax[2].set_title("observations/s")
    fig.tight_layout()
    fig.savefig(C["OUT_PNG"], dpi=100)


def report(results, C):
    # the run's parameters (a re-render may run with other settings), this
    # invocation's output paths
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    s = results["stream"]
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    out = [f"# LERT benchmark\n",
           f"Command: `bash test/bench/lert_bench.sh` (as root; parameters in "
           f"`test/bench/lert_bench.py`). Run {results['started']} on "
           f"{results['machine'].get('cpu', '?')}, {results['machine'].get('cores', '?')} cores; "
           f"build `{results['ext'].get('head', '?')}`.\n",
           f"Stream: {C['N']:,} observations of the Firehose-like active-set generator "
           f"(`test/bench/firehose.c`: {C['ACTIVE']:,} active keys, lifetime counts power law "
           f"with exponent -1.5 capped at 65,536), {s['keys']:,} distinct keys, "
           f"{s['heavy']:,} reach T = {C['T']}, the largest count {s['max_count']:,}. "
           f"Level 0 {C['BUF_MB']} MB, growth {C['GROWTH']}, {C['LEVELS']} on-disk levels; "
           f"RAM: shared_buffers {C['SB_MB']} MB in a memory cgroup of {ram} MB; "
           f"{C['BATCH']:,}-row transactions in stream order.\n",
           "## Correctness and timeliness\n",
           "Every report against the offline count of the same stream: false positives, keys the "
           "variant must have reported by the end of the stream (all keys of count >= T for "
           "immediate, >= T + sum(tau) for count_stretch), duplicates, wrong count at the report, "
           "wrong first or reported position, and reports over the variant's bound; then, after "
           "`lert_flush`, keys of count >= T still not reported.\n"]
    rows = []
    for v in variant_order(results):
        r = results["variants"][v]
        if "check" not in r:
            continue
        c, cf = r["check"], r["check_flushed"]
        rows.append([NAMES.get(v, v), fmt(c["reports"]), c["false_positives"], c["missed"],
                     c["duplicates"], c["wrong_count"], c["wrong_positions"],
                     f"{c['over_count_bound']}/{c['over_time_bound']}", cf["missed"],
                     fmt(c["cs_max"], 3), fmt(c["cs_p99"], 3), fmt(c["cs_mean"], 3),
                     fmt(c["ts_max"], 3), fmt(c["ts_p99"], 3), fmt(c["ts_mean"], 3)])
    out.append(table(["variant", "reports", "false pos.", "missed", "dup.", "wrong count",
                      "wrong pos.", "over bound (count/time)", "missed after flush",
                      "count stretch max", "p99", "mean", "time stretch max", "p99", "mean"], rows))
    out.append(f"\n![stretch and throughput]({os.path.basename(C['OUT_PNG'])})\n")
    out.append("## Throughput and I/O\n")
    rows = []
    for v in variant_order(results):
        r = results["variants"][v]
        m = r["insert"]
        rows.append([NAMES.get(v, v) + (f" (build `{r['build']}`)" if "build" in r else ""),
                     r["sessions"], fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                     fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"]),
                     fmt(r["relation_mb"]), r.get("ram_mb", ram), fmt(r["ratio"], 1),
                     fmt(m["mem_peak_mb"])])
    for sname, r in results.get("scaling", {}).items():
        if sname == "1" and r.get("cones", 1) == 1:
            continue
        m = r["insert"]
        cones = f", {r['cones']} cones" if r.get("cones", 1) > 1 else ""
        rows.append([NAMES["csl"] + cones + (f" (build `{r['build']}`)" if "build" in r else ""),
                     r["sessions"], fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                     fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"]),
                     fmt(r["relation_mb"]), r.get("ram_mb", ram), fmt(r["ratio"], 1),
                     fmt(m["mem_peak_mb"])])
    for key, label in (("upsert_logged", "upsert-and-report table"),
                       ("upsert_unlogged", "upsert-and-report table, unlogged")):
        if key not in results:
            continue
        r = results[key]
        m = r["insert"]
        rows.append([f"{label} (last {r['window']:,} observations)", 1, fmt(m["ops_per_s"]),
                     fmt(m["reads_per_op"], 4), fmt(m["buf_writes_per_op"], 4),
                     fmt(m["wal_bytes_per_op"]), fmt(r["size_mb"]), ram, fmt(r["size_mb"] / ram, 1),
                     fmt(m["mem_peak_mb"])])
    ram_pg = results.get("inram_pg")
    if ram_pg:
        m = ram_pg["insert"]
        rows.append([f"in-RAM reference: {NAMES['csl']}, shared_buffers {C['LOADER_SB_MB']:,} MB, no cgroup", 1,
                     fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4), fmt(m["buf_writes_per_op"], 4),
                     fmt(m["wal_bytes_per_op"]), fmt(ram_pg["relation_mb"]), "-", "-", "-"])
    if "inram" in results:
        rows.append(["in-RAM reference without PostgreSQL (simulated count_stretch LERT)", 1,
                     fmt(results["inram"]["obs_per_s"]), "-", "-", "-", "-", "-", "-", "-"])
    out.append(table(["structure", "sessions", "observations/s", "page reads/obs", "buffer writes/obs",
                      "WAL bytes/obs", "size MB", "RAM MB", "size / RAM", "memory peak MB"], rows))
    csl = results["variants"].get("csl")
    if csl and "upsert_logged" in results and "inram" in results:
        up = results["upsert_logged"]["insert"]["ops_per_s"]
        ram_ref = results["inram"]["obs_per_s"]
        target = (f"\nTargets: count_stretch {csl['insert']['ops_per_s'] / up:.1f}x the upsert-and-report "
                  f"table (target >= 10x) at {csl['ratio']:.1f}x RAM (target >= 12.5); ")
        if ram_pg:
            target += (f"the in-RAM reference in PostgreSQL "
                       f"{ram_pg['insert']['ops_per_s'] / csl['insert']['ops_per_s']:.2f}x count_stretch "
                       f"(target <= 4x), the one without PostgreSQL "
                       f"{ram_ref / csl['insert']['ops_per_s']:.1f}x.\n")
        else:
            target += f"the in-RAM reference {ram_ref / csl['insert']['ops_per_s']:.1f}x count_stretch (target <= 4x).\n"
        out.append(target)
    out.extend(notes_section("lert_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
