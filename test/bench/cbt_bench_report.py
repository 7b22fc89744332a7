"""
Report of the cbt benchmark (cbt_bench.py): docs/bench-cbt.md, and a PNG
of ingestion throughput, sizes and GROUP BY times per dataset.
"""
import os

from benchlib import fmt, notes_section, table


def count_words(n):
    """100000 -> '100 k', 10000000 -> '10 M'."""
    for div, unit in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= div and n % div == 0:
            return f"{n // div:,} {unit}"
    return f"{n:,}"


def dataset_label(name, r, N):
    """A dataset's tick label: its code and what it is."""
    ds = r["dataset"]
    dist = "uniform" if ds["dist"] == "uniform" else "Zipf (exponent 1)" if ds["dist"] == "zipf" else ds["dist"]
    rows = r.get("rows", N)
    return (f"{name}\n{dist} over\n{count_words(ds['keys'])} words, {ds['keylen']} bytes each\n"
            f"{count_words(rows)} rows")


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # a sweep-only run (SWEEP_ONLY=1) has no main phases to plot
    R = {d: r for d, r in results["datasets"].items() if "cbt" in r}
    D = list(R)
    if not D:
        return
    fig, ax = plt.subplots(3, 1, figsize=(15, 14.5))
    window = count_words(C["WINDOW"])
    panels = [
        ("Ingestion throughput (higher is better)", "rows per second (log scale)", [
            ("cbt", "C0", lambda r: r["cbt"]["insert"]["ops_per_s"]),
            ("cbt, compression off", "C1", lambda r: r["cbt_nocomp"]["insert"]["ops_per_s"]),
            ("raw rows in a heap table (no counting)", "C2", lambda r: r["raw"]["insert"]["ops_per_s"]),
            (f"upsert table (INSERT ... ON CONFLICT), logged;\nlast {window} rows, preloaded with the others",
             "C3", lambda r: r["upsert_logged"]["insert"]["ops_per_s"]),
            ("upsert table, unlogged (same)", "C4", lambda r: r["upsert_unlogged"]["insert"]["ops_per_s"])]),
        ("Size on disk after ingestion (lower is better)", "MB (log scale)", [
            ("cbt", "C0", lambda r: r["cbt"]["relation_mb"]),
            ("cbt after cbt_finalize", "C9", lambda r: r["cbt"]["finalized_mb"]),
            ("cbt, compression off", "C1", lambda r: r["cbt_nocomp"]["relation_mb"]),
            ("upsert table (heap + primary key index)", "C3", lambda r: r["upsert_logged"]["size_mb"]),
            ("raw rows in a heap table", "C2", lambda r: r["raw"]["size_mb"])]),
        ("Time to the GROUP BY answer (count per word), cold cache (lower is better)", "seconds (log scale)", [
            ("cbt scan (finalizes as it reads)", "C0", lambda r: r["cbt"]["scan_s"]),
            ("cbt scan after cbt_finalize", "C9", lambda r: r["cbt"]["scan_final_s"]),
            (f"raw heap table, GROUP BY with HashAggregate,\nwork_mem {C['WORK_MEM_MB']} MB (spills to disk)", "C2",
             lambda r: r["raw"]["hashagg"]["ms"] / 1000),
            ("raw heap table, GROUP BY with HashAggregate,\nwork_mem large enough not to spill", "C8",
             lambda r: r["raw"]["hashagg_nospill"]["ms"] / 1000)]),
    ]
    for a, (title, ylabel, series) in zip(ax, panels):
        w = 0.8 / len(series)
        for i, (label, color, f) in enumerate(series):
            a.bar([x + (i - len(series) / 2 + 0.5) * w for x in range(len(D))], [f(R[d]) for d in D], w,
                  label=label, color=color)
        a.set_yscale("log")
        a.set_title(title, fontsize=11)
        a.set_ylabel(ylabel)
        a.set_xticks(range(len(D)))
        a.set_xticklabels([dataset_label(d, R[d], C["N"]) for d in D], fontsize=8.5)
        a.set_xlim(-0.5, len(D) - 0.5)
        a.grid(True, axis="y", which="major", alpha=0.3)
        a.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax[-1].set_xlabel("dataset: a stream of words (its code; how words are drawn from a vocabulary of that size; "
                      "word length; rows in the stream)")
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    fig.suptitle(f"cbt (a count(*) per word kept by the table) against a heap table of the raw rows and an "
                 f"upsert table\n{C['BATCH']:,}-row transactions; shared_buffers {C['SB_MB']} MB, "
                 f"work_mem {C['WORK_MEM_MB']} MB, memory cgroup of {ram} MB", fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    R = {d: r for d, r in results["datasets"].items() if "cbt" in r}
    out = ["# cbt benchmark\n",
           f"Command: `bash test/bench/cbt_bench.sh` (as root; parameters in "
           f"`test/bench/cbt_bench.py`). Run {results['started']} on "
           f"{results['machine'].get('cpu', '?')}, {results['machine'].get('cores', '?')} cores; "
           f"build `{results['ext'].get('head', '?')}`.\n",
           f"Each dataset is a stream of {C['N']:,} words (unless the datasets table says otherwise), fed in {C['BATCH']:,}-row transactions "
           f"into a cbt `count(*)` per word (the paper's wordcount) and its baselines, with "
           f"shared_buffers {C['SB_MB']} MB and work_mem {C['WORK_MEM_MB']} MB in a memory cgroup "
           f"of {ram} MB, the page cache dropped before each phase. The upsert table is "
           f"measured on the last {C['WINDOW']:,} rows, preloaded with the counts of the others.\n",
           "## Datasets\n"]
    rows = []
    for d, r in R.items():
        ds, s = r["dataset"], r["stream"]
        n = r.get("rows", C["N"])
        rows.append([d, ds["dist"], fmt(ds["keys"]), ds["keylen"], fmt(n), fmt(s["groups"]),
                     fmt(n / s["groups"], 1), fmt(s["max_count"]), fmt(s["stream_mb"]),
                     f"`{r['build']}` ({r['started'][:10]})" if "build" in r else "this run"])
    out.append(table(["dataset", "distribution", "key space", "word bytes", "rows", "groups",
                      "rows per group", "largest group", "stream heap MB", "run"], rows))
    out.append(f"\n![ingestion, sizes, GROUP BY]({os.path.basename(C['OUT_PNG'])})\n")
    out.append("## Ingestion\n")
    rows = []
    for d, r in R.items():
        for key, label in (("cbt", "cbt"), ("cbt_nocomp", "cbt, compression off")):
            m = r[key]["insert"]
            rows.append([d, label, fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                         fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"], 1),
                         fmt(m["mem_peak_mb"]), r[key]["wrong"]])
        for v, f in r.get("factors", {}).items():
            m = f["insert"]
            rows.append([d, f"cbt, {v}", fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                         fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"], 1),
                         fmt(m["mem_peak_mb"]), f["wrong"]])
        m = r["raw"]["insert"]
        rows.append([d, "raw rows, heap", fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                     fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"], 1),
                     fmt(m["mem_peak_mb"]), "-"])
        for key, label in (("upsert_logged", "upsert"), ("upsert_unlogged", "upsert, unlogged")):
            m = r[key]["insert"]
            rows.append([d, label, fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4),
                         fmt(m["buf_writes_per_op"], 4), fmt(m["wal_bytes_per_op"], 1),
                         fmt(m["mem_peak_mb"]), r[key]["wrong"]])
    out.append(table(["dataset", "structure", "rows/s", "page reads/row", "buffer writes/row",
                      "WAL bytes/row", "memory peak MB", "groups wrong"], rows))
    out.append("\n## Size and answers\n")
    rows = []
    for d, r in R.items():
        c = r["cbt"]
        rows.append([d, fmt(c["relation_mb"]), fmt(c.get("log_mb")), fmt(c["info"]["stored_bytes"] / 2**20),
                     fmt(c["finalized_mb"]), fmt(r["cbt_nocomp"]["relation_mb"]),
                     fmt(r["upsert_logged"]["size_mb"]), fmt(r["raw"]["size_mb"]),
                     fmt(c["scan_s"], 2), fmt(c["finalize_s"], 2), fmt(c["scan_final_s"], 2),
                     fmt(r["raw"]["hashagg"]["ms"] / 1000, 2),
                     str(r["raw"]["hashagg"]["batches"]),
                     fmt(r["raw"]["hashagg_nospill"]["ms"] / 1000, 2),
                     fmt(r["raw"]["nospill_work_mem_mb"])])
    out.append(table(["dataset", "cbt MB", "of which change log MB", "cbt tree (compressed) MB", "cbt finalized MB",
                      "cbt no compression MB", "upsert heap+index MB", "raw heap MB",
                      "cbt scan s", "cbt_finalize s", "scan after s",
                      f"HashAgg s (work_mem {C['WORK_MEM_MB']} MB)", "batches", "HashAgg s (no spill, in RAM)",
                      "work_mem for no spill MB"], rows))
    out.append("\n## Targets\n")
    rows = []
    for d, r in R.items():
        c = r["cbt"]
        up = r["upsert_logged"]
        rows.append([d, fmt(c["insert"]["ops_per_s"] / up["insert"]["ops_per_s"], 1),
                     fmt(c["relation_mb"] / up["size_mb"], 2),
                     fmt(c["relation_mb"] / r["raw"]["size_mb"], 2),
                     fmt(c["scan_s"] / (r["raw"]["hashagg"]["ms"] / 1000), 2)])
    out.append(table(["dataset", "ingestion cbt / upsert (>= 10)", "size cbt / upsert (<= 0.5)",
                      "size cbt / raw rows (<= 0.25)", "finalizing scan / HashAgg (<= 1)"], rows))
    sweeps = [(d, r) for d, r in results["datasets"].items() if r.get("sb_sweep")]
    for d, r in sweeps:
        out.append(f"\n## shared_buffers needed to stay fast ({d})\n")
        build = r.get("sb_sweep_build")
        out.append(f"Ingestion of the same stream with each shared_buffers, in a memory cgroup of it plus "
                   f"{C['CG_EXTRA_MB']} MB" + (f" (build `{build}`)" if build else "") +
                   "; the upsert table on its last rows, preloaded as above.\n")
        rows = []
        for p in r["sb_sweep"]:
            c, u = p["cbt"], p["upsert"]
            rows.append([fmt(p["sb_mb"]), fmt(p["ram_mb"]), fmt(c["insert"]["ops_per_s"]),
                         fmt(c["insert"]["reads_per_op"], 4), fmt(c["relation_mb"]), c["wrong"],
                         fmt(u["insert"]["ops_per_s"]), fmt(u["insert"]["reads_per_op"], 4),
                         fmt(u["size_mb"]), u["wrong"],
                         fmt(c["insert"]["ops_per_s"] / u["insert"]["ops_per_s"], 1)])
        out.append(table(["shared_buffers MB", "cgroup MB", "cbt rows/s", "cbt page reads/row", "cbt MB",
                          "cbt groups wrong", "upsert rows/s", "upsert page reads/row", "upsert MB",
                          "upsert groups wrong", "cbt / upsert"], rows))
    out.append("")
    out.extend(notes_section("cbt_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
