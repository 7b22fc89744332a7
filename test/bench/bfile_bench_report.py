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
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    names = ["bfile", "heap reservoir", "whole stream in a heap"]
    us = [1e6 / x["insert"]["ops_per_s"] for x in (b, r, h)]
    g = results.get("generate")
    gen = 1e6 / g["insert"]["ops_per_s"] if g else 0.0
    ax[0].bar(range(3), [gen] * 3, label="producing the item")
    ax[0].bar(range(3), [u - gen for u in us], bottom=[gen] * 3, label="keeping the sample")
    for i, u in enumerate(us):
        ax[0].text(i, u, f"{u:.2f}", ha="center", va="bottom")
    ax[0].set_xticks(range(3))
    ax[0].set_xticklabels(names)
    ax[0].set_ylabel("us per stream item")
    ax[0].set_ylim(0, max(us) * 1.2)
    ax[0].legend(loc="upper left")
    ax[0].set_title("maintenance cost per stream item")
    qn = [f"bfile_subsample({C['SUBSAMPLE']:,})", "scan of the sample", "bfile_window",
          "filter of the sample", "TABLESAMPLE BERNOULLI", "TABLESAMPLE SYSTEM"]
    qv = [b["subsample"]["ms"], b["scan"]["ms"], b["window"]["ms"], b["window_filter"]["ms"],
          h["bernoulli"]["ms"], h["system"]["ms"]]
    ax[1].bar(range(len(qn)), qv)
    ax[1].set_xticks(range(len(qn)))
    ax[1].set_xticklabels(qn, rotation=30, ha="right")
    ax[1].set_yscale("log")
    ax[1].set_title("query, ms (cold)")
    fig.tight_layout()
    fig.savefig(C["OUT_PNG"], dpi=100)


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
                   f"{fmt(g['insert']['ops_per_s'])} items/s ({fmt(gen_us, 2)} us/item), which every row "
                   f"above includes. The rest, the maintenance cost per stream item: bfile "
                   f"{fmt(net['b'], 3)} us, heap reservoir {fmt(net['r'], 2)} us "
                   f"({net_ratio()}), whole stream in a heap "
                   f"{fmt(net['h'], 2)} us.")
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
