"""
Report of the bfile benchmark (bfile_bench.py): docs/bench-bfile.md and a
PNG of maintenance throughput and query costs.
"""
import os

from benchlib import fmt, notes_section, table


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b, r, h = results["bfile"], results["reservoir"], results["stream_heap"]
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    fig, ax = plt.subplots(1, 2, figsize=(15, 6.4), gridspec_kw=dict(width_ratios=(1, 1.3)))
    names = ["bfile", "heap reservoir\n(UPDATE of a random slot)", "whole stream\nin a heap table"]
    us = [1e6 / x["insert"]["ops_per_s"] for x in (b, r, h)]
    g = results.get("generate")
    gen = 1e6 / g["insert"]["ops_per_s"] if g else 0.0
    ax[0].bar(range(3), [gen] * 3, label="producing the item (the same statements, not stored)", color="C7")
    ax[0].bar(range(3), [u - gen for u in us], bottom=[gen] * 3, label="keeping the sample", color="C1")
    for i, u in enumerate(us):
        ax[0].text(i, u, f"{u:.2f} µs", ha="center", va="bottom")
    ax[0].set_xticks(range(3))
    ax[0].set_xticklabels(names)
    ax[0].set_ylabel("µs per stream item (lower is better)")
    ax[0].set_ylim(0, max(us) * 1.15)
    ax[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax[0].set_title(f"Maintenance cost per stream item\n(the last {C['WINDOW']:,} items, "
                    f"{C['BATCH']:,}-item transactions)", fontsize=11)
    qn = [f"bfile_subsample\n({C['SUBSAMPLE']:,} rows)", "count(*) of the\nwhole sample",
          f"bfile_window\n(last {C['WINDOW_Q']:,}\nitems)", "the same rows,\nby filtering\nthe sample",
          "TABLESAMPLE\nBERNOULLI,\nwhole stream", "TABLESAMPLE\nSYSTEM,\nwhole stream"]
    qv = [b["subsample"]["ms"], b["scan"]["ms"], b["window"]["ms"], b["window_filter"]["ms"],
          h["bernoulli"]["ms"], h["system"]["ms"]]
    col = ["C0"] * 4 + ["C2"] * 2
    ax[1].bar(range(len(qn)), qv, color=col)
    for i, v in enumerate(qv):
        ax[1].text(i, v * 1.05, f"{v:,.0f} ms", ha="center", va="bottom", fontsize=9)
    ax[1].set_xticks(range(len(qn)))
    ax[1].set_xticklabels(qn, fontsize=8.5)
    ax[1].set_yscale("log")
    ax[1].set_ylim(min(qv) / 2, max(qv) * 3)
    ax[1].set_ylabel("query time, ms (log scale; lower is better)")
    ax[1].set_title("Query time, cold cache: on the bfile sample (blue) and on a heap table\nof the whole "
                    "stream (green)", fontsize=11)
    ax[1].grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"bfile (a sample of a stream kept in a table) against a heap reservoir and a heap of the whole "
                 f"stream\n{C['N']:,} items into a sample of at most {C['S']:,} rows; shared_buffers "
                 f"{C['SB_MB']} MB in a memory cgroup of {ram} MB", fontsize=12)
    fig.tight_layout()
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    ram = C["SB_MB"] + C["CG_EXTRA_MB"]
    b, r, h = results["bfile"], results["reservoir"], results["stream_heap"]
    net = {}
    out = ["# bfile benchmark\n",
           f"Command: `bash test/bench/bfile_bench.sh` (as root; parameters in "
           f"`test/bench/bfile_bench.py`). Run {results['started']} on "
           f"{results['machine'].get('cpu', '?')}, {results['machine'].get('cores', '?')} cores; "
           f"build `{results['ext'].get('head', '?')}`.\n",
           f"A stream of {C['N']:,} items (an id and {C['PAYLOAD']} bytes of text) into a sample of "
           f"at most {C['S']:,} rows (min_fraction 0.8), shared_buffers {C['SB_MB']} MB in a memory "
           f"cgroup of {ram} MB; all but the last {C['WINDOW']:,} items loaded untimed, those timed "
           f"in {C['BATCH']:,}-item transactions, the page cache dropped before each phase.\n",
           "## Maintenance\n"]
    rows = []
    for label, x, size in (("bfile", b, b["sample_mb"]), ("heap reservoir (UPDATE of a random slot)", r, r["size_mb"]),
                           ("whole stream in a heap", h, h["size_mb"])):
        m = x["insert"]
        rows.append([label, fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 4), fmt(m["buf_writes_per_op"], 4),
                     fmt(m["wal_bytes_per_op"], 1), fmt(size), fmt(size / ram, 1)])
    out.append(table(["structure", "stream items/s", "page reads/item", "buffer writes/item",
                      "WAL bytes/item", "size MB", "size / RAM"], rows))
    g = results.get("generate")
    if g:
        gen_us = 1e6 / g["insert"]["ops_per_s"]
        net = {k: 1e6 / x["insert"]["ops_per_s"] - gen_us for k, x in (("b", b), ("r", r), ("h", h))}

        def net_ratio():
            # bfile's net cost is within the noise of producing the items
            # when it comes out at or below zero: no ratio to print then
            if net['b'] <= 0 or net['r'] <= 0:
                return "not measurable: bfile's net cost is within the noise of producing the items"
            return f"{fmt(net['r'] / net['b'], 0)}x bfile's"

        out.append(f"\nProducing the items alone (the same statements, counted instead of stored) runs at "
                   f"{fmt(g['insert']['ops_per_s'])} items/s ({fmt(gen_us, 2)} µs/item), which every row "
                   f"above includes. The rest, the maintenance cost per stream item: bfile "
                   f"{fmt(net['b'], 3)} µs, heap reservoir {fmt(net['r'], 2)} µs "
                   f"({net_ratio()}), whole stream in a heap "
                   f"{fmt(net['h'], 2)} µs.")
    out.append(f"\nbfile: {b['added']:,} items put in the sample during the timed part, "
               f"{fmt(b['written_pages'])} sample pages written (full images; the change log, which holds "
               f"the items that can enter the sample until a round, is in the buffer writes and WAL "
               f"above) against an ideal of "
               f"{fmt(b['ideal_pages'])} "
               f"({fmt(b['written_pages'] / max(b['ideal_pages'], 1), 2)}x; items of "
               f"{fmt(b['item_bytes'])} bytes); {b['after']['discards']:,} discards, "
               f"{b['after']['unrolls']:,} unrolls in all.\n")
    out.append(f"![maintenance and queries]({os.path.basename(C['OUT_PNG'])})\n")
    out.append("## Queries (cold)\n")
    rows = [[f"bfile_subsample(NULL::bf, {C['SUBSAMPLE']:,})", fmt(b["subsample"]["ms"]), fmt(b["subsample"]["blocks"])],
            ["SELECT count(*) FROM bf (the whole sample)", fmt(b["scan"]["ms"]), fmt(b["scan"]["blocks"])],
            [f"bfile_window over the last {C['WINDOW_Q']:,} items", fmt(b["window"]["ms"]), fmt(b["window"]["blocks"])],
            ["the same rows by filtering the sample", fmt(b["window_filter"]["ms"]), fmt(b["window_filter"]["blocks"])],
            ["TABLESAMPLE BERNOULLI on the whole stream", fmt(h["bernoulli"]["ms"]), fmt(h["bernoulli"]["blocks"])],
            ["TABLESAMPLE SYSTEM on the whole stream", fmt(h["system"]["ms"]), fmt(h["system"]["blocks"])]]
    out.append(table(["query", "ms", "blocks"], rows))
    if "window_rows" in b:
        res_pages = b["window_rows"] * b["item_bytes"] / 8192
        out.append(f"\nThe window holds {b['window_rows']:,} rows, {fmt(res_pages)} pages of items: bfile_window "
                   f"read {fmt(b['window']['blocks'] - res_pages)} blocks beyond them (the metapage, each "
                   f"bucket's skip-list descent and the partial pages at the window's ends).")
    out.append("\n## Targets\n")
    maint = f"{fmt(b['insert']['ops_per_s'] / r['insert']['ops_per_s'], 1)}x at {fmt(b['ratio'], 1)}x RAM"
    if g:
        if net['b'] > 0 and net['r'] > 0:
            maint += f" ({fmt(net['r'] / net['b'], 0)}x net of producing the items)"
    out.append(table(["target", "measured"], [
        ["maintenance >= 100x the heap reservoir at sample:RAM >= 10", maint],
        ["pages written within 2x of the ideal", f"{fmt(b['written_pages'] / max(b['ideal_pages'], 1), 2)}x"],
        ["a window reads O(log) pages plus its result", f"{fmt(b['window']['blocks'])} blocks against "
         f"{fmt(b['window_filter']['blocks'])} for the filter"]]))
    out.append("")
    out.extend(notes_section("bfile_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
