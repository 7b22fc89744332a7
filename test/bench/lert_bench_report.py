"""
Report of the LERT benchmark (lert_bench.py): docs/bench-lert.md and a PNG
of the count- and time-stretch distributions of every variant (the paper's
Figure 1) and of the throughput against the baselines.
"""
import os
import re

from benchlib import fmt, notes_section, table

NAMES = {"csl": "count_stretch (CSL)", "tsl1": "time_stretch a=1 (TSL1)",
         "tsl2": "time_stretch a=2 (TSL2)", "tsl3": "time_stretch a=3 (TSL3)",
         "tsl4": "time_stretch a=4 (TSL4)", "irl": "immediate (IRL)",
         "cf": "cascade (CF, no timeliness)"}


def variant_order(results):
    """The variants in the paper's order (a merged run appends its own)."""
    vs = results["variants"]
    return [v for v in NAMES if v in vs] + [v for v in vs if v not in NAMES]


# the variants spelled out for the plot (CF is the LERT's cascade variant,
# not the cascade filter)
PLOT_NAMES = {"csl": "count_stretch (CSL)", "tsl1": "time_stretch, a = 1 (TSL1)",
              "tsl2": "time_stretch, a = 2 (TSL2)", "tsl3": "time_stretch, a = 3 (TSL3)",
              "tsl4": "time_stretch, a = 4 (TSL4)", "irl": "immediate (IRL)",
              "cf": "cascade variant (CF), no timeliness bound"}
TICKS = {"csl": "CSL\ncount\nstretch", "tsl1": "TSL1\ntime stretch\na = 1", "tsl2": "TSL2\ntime stretch\na = 2",
         "tsl3": "TSL3\ntime stretch\na = 3", "tsl4": "TSL4\ntime stretch\na = 4", "irl": "IRL\nimmediate",
         "cf": "CF\ncascade\nvariant"}


def reused(r, ram=True):
    """' (earlier run, in N MB RAM)' for a row taken from an earlier run."""
    src = r.get("reused_from")
    if not src:
        return ""
    m = re.search(r"(\d+) MB cgroup", src) if ram else None
    return " (earlier run" + (f", in {m.group(1)} MB RAM)" if m else ")")


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    V = [v for v in variant_order(results) if "check" in results["variants"][v]]
    fig = plt.figure(figsize=(15, 11.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=(1, 1.05))
    ax = list(top.subplots(1, 2)) + [bottom.subplots(1, 1)]
    x = range(len(V))
    for i, (what, title, ylabel) in enumerate((
            ("cs", "Count stretch: how far past T the count is at the report",
             "count at the report / T\n(1 = reported at the T-th observation)"),
            ("ts", "Time stretch: how late the report comes",
             "(report position - first) / (T-th position - first)\n(1 = reported at the T-th observation)"))):
        # side by side, so that close values do not hide each other
        for dx, (stat, mark, label) in zip((-0.15, 0, 0.15), (("max", "v", "maximum"), ("p99", "o", "99th percentile"),
                                                             ("mean", "s", "mean"))):
            y = [results["variants"][v]["check"][f"{what}_{stat}"] or 0 for v in V]
            ax[i].plot([xi + dx for xi in x], y, mark, label=label, markersize=8)
        ax[i].set_xticks(list(x))
        ax[i].set_xticklabels([TICKS.get(v, v) for v in V], fontsize=8.5)
        ax[i].set_xlim(-0.5, len(V) - 0.5)
        ax[i].yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
        ax[i].set_title(title, fontsize=11)
        ax[i].set_ylabel(ylabel)
        ax[i].grid(True, axis="y", alpha=0.3)
        ax[i].legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3, frameon=False)
        ax[i].set_xlabel(f"LERT variant, over all reported keys (T = {C['T']}); CF has no timeliness bound",
                         fontsize=9)
    names, thr, colors = [], [], []
    for v in V:
        r = results["variants"][v]
        names.append(PLOT_NAMES.get(v, v) + (f" (in {r['ram_mb']} MB RAM)" if r.get("ram_mb", ram) != ram else ""))
        thr.append(r["insert"]["ops_per_s"])
        colors.append("C0")
    for key, name in (("upsert_logged", "upsert-and-report table, logged"),
                      ("upsert_unlogged", "upsert-and-report table, unlogged")):
        if key in results:
            names.append(name + f",\nlast {results[key]['window']:,} observations" + reused(results[key]))
            thr.append(results[key]["insert"]["ops_per_s"])
            colors.append("C3")
    if "inram_pg" in results:
        names.append(f"count_stretch with everything in RAM\n(shared_buffers {C['LOADER_SB_MB']:,} MB, no cgroup)"
                     + reused(results["inram_pg"], ram=False))
        thr.append(results["inram_pg"]["insert"]["ops_per_s"])
        colors.append("C2")
    if "inram" in results:
        names.append("simulated count_stretch LERT in RAM\n(unit test, without PostgreSQL)" + reused(results["inram"], False))
        thr.append(results["inram"]["obs_per_s"])
        colors.append("C2")
    a = ax[2]
    y = list(range(len(names)))[::-1]
    a.barh(y, thr, color=colors)
    for yi, t in zip(y, thr):
        a.text(t * 1.05, yi, f"{t:,.0f}", va="center", fontsize=8.5)
    a.set_yticks(y)
    a.set_yticklabels(names, fontsize=8.5)
    a.set_xscale("log")
    a.set_xlim(min(thr) / 2, max(thr) * 3)
    a.set_xlabel("observations inserted per second (log scale; higher is better)")
    a.set_title(f"Insert throughput: LERT variants (blue), the upsert-and-report table a PostgreSQL user\n"
                f"would write (red), in-RAM references (green); RAM: a memory cgroup of {ram} MB "
                f"(shared_buffers {C['SB_MB']} MB) unless the label says otherwise", fontsize=11)
    a.grid(True, axis="x", which="major", alpha=0.3)
    fig.suptitle(f"LERT benchmark: {C['N'] / 1e6:,.0f} M observations; each variant reports every key whose "
                 f"count reaches T = {C['T']}", fontsize=13)
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def kept_run_files(C):
    """The title and notes of the page: for a kept run's results
    (lert_bench_results.LABEL.json), lert_bench_intro.LABEL.md (the page's
    title and what the run was) and lert_bench_notes.LABEL.md, if there;
    for the current run, the plain title and lert_bench_notes.md."""
    m = re.fullmatch(r"lert_bench_results\.(.+)\.json", os.path.basename(C.get("OUT_JSON", "")))
    if not m:
        return "# LERT benchmark\n", "lert_bench_notes.md"
    here = os.path.dirname(os.path.abspath(__file__))
    intro = os.path.join(here, f"lert_bench_intro.{m.group(1)}.md")
    title = open(intro).read().strip() + "\n" if os.path.exists(intro) else "# LERT benchmark\n"
    return title, f"lert_bench_notes.{m.group(1)}.md"


def report(results, C):
    # the run's parameters (a re-render may run with other settings), this
    # invocation's output paths
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    s = results["stream"]
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    title, notes = kept_run_files(C)
    out = [title,
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
    out.extend(notes_section(notes))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
