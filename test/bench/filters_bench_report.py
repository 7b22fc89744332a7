"""
Tables, target checks, docs/bench-filters.md and the plots
(docs/bench-filters.png, -inram.png, -inserts.png) from the results of
filters_bench.py (also: `filters_bench.py --report` re-renders them from
test/bench/filters_bench_results.json without re-running anything).
"""
import math
import os

import bench_compare
from benchlib import fmt, notes_section, table, text_table

TARGET_INSERT_X = 8.6       # CF and BQF inserts vs the best Bloom variant on disk
TARGET_LOOKUP_X = 0.94      # lookups at least on par (paper: 0.94-2.56x)
TARGET_BTREE_X = 3.0        # CF inserts vs a btree index
TARGET_BTREE_SIZE = 0.25    # CF size <= 1/4 of the btree's

NA = "not available in this build"

# Table 1 of the paper (operations per second)
PAPER_INRAM = {  # fp -> (BF inserts, QF inserts, BF uniform, QF uniform, BF successful, QF successful)
    64: (1.72e6, 2.44e6, 3.1e6, 2.1e6, 1.93e6, 1.61e6),
    512: (1.29e6, 2.43e6, 3.35e6, 1.98e6, 1.65e6, 1.7e6),
    4096: (991e3, 2.45e6, 3.37e6, 2.13e6, 1.44e6, 1.71e6),
}
PAPER_DISK = {  # ratio -> structure -> (inserts, uniform lookups, successful lookups)
    4: {"cf4": (1.075e6, 2200, 2950), "bqf": (1.32e6, 4480, 4690), "ebf": (205e3, 2180, 372),
        "bbf": (249e3, 2340, 441)},
    24: {"cf4": (728e3, 1940, 2380), "bqf": (576e3, 3600, 3780), "ebf": (53e3, None, None),
         "bbf": (44.6e3, None, None)},
}
ORDER = ["cf2", "cf4", "cf16", "bqf", "ebf", "bbf", "btree", "hash"]
LABEL = {"cf2": "CF fanout 2", "cf4": "CF fanout 4", "cf16": "CF fanout 16", "bqf": "BQF",
         "ebf": "EBF", "bbf": "BBF", "btree": "btree index", "hash": "hash index"}


def x(a, b):
    return a / b if a is not None and b else None


def fx(v, d=2):
    return "-" if v is None else f"{v:.{d}f}x"


def mb(b):
    return b / 2**20


def names(R):
    return [k for k in ORDER if k in R["structures"]]


def ins_rate(st):
    return st["insert"]["ops_per_s"]


def end_rate(st):
    """Insert rate at the end of the stream: the window, or the last chunk
    of a run from empty."""
    i = st["insert"]
    return i["ops_per_s"] if i["mode"] == "window" else i["last_chunk_per_s"]


def lk(st, what):
    return st["lookups"][what]["ops_per_s"]


def best_bloom(R, f):
    b = [(f(R["structures"][k]), k) for k in ("ebf", "bbf") if k in R["structures"]]
    return max(b) if b else (None, None)


# ---------------------------------------------------------------- targets

def targets(res):
    out = []
    have_bloom = res.get("have_bloom")
    for R in res["ratios"]:
        r = R["geometry"]["ratio"]
        S = R["structures"]
        if not have_bloom or best_bloom(R, ins_rate)[1] is None:
            why = f"Bloom filter {NA}" if not have_bloom else "no Bloom filter at this ratio in this run"
            out.append((f"1:{r}: CF and BQF inserts >= {TARGET_INSERT_X}x the best Bloom variant", None, why))
            out.append((f"1:{r}: CF and BQF lookups >= {TARGET_LOOKUP_X}x the best Bloom variant", None, why))
            continue
        bi, bk = best_bloom(R, ins_rate)
        parts, ok = [], True
        for k in ("cf4", "bqf"):
            if k not in S:
                continue
            a = x(ins_rate(S[k]), bi)
            e = x(end_rate(S[k]), bi)
            ok = ok and a >= TARGET_INSERT_X
            mode = S[k]["insert"]["mode"]
            parts.append(f"{LABEL[k]} {a:.1f}x ({ins_rate(S[k]):,.0f} vs {LABEL[bk]} {bi:,.0f} inserts/s"
                         + (f"; {e:.1f}x over the last chunk of the stream, same state as the Bloom window"
                            if mode == "full" else "") + ")")
        out.append((f"1:{r}: CF and BQF inserts >= {TARGET_INSERT_X}x the best Bloom variant", ok, "; ".join(parts)))
        parts, ok = [], True
        for what in ("uniform", "successful"):
            bl, bk2 = best_bloom(R, lambda st: lk(st, what))
            for k in ("cf4", "bqf"):
                if k not in S:
                    continue
                a = x(lk(S[k], what), bl)
                ok = ok and a >= TARGET_LOOKUP_X
                parts.append(f"{what} {LABEL[k]} {a:.2f}x ({lk(S[k], what):,.0f} vs {LABEL[bk2]} {bl:,.0f}/s)")
        out.append((f"1:{r}: CF and BQF lookups >= {TARGET_LOOKUP_X}x the best Bloom variant", ok, "; ".join(parts)))
    for R in res["ratios"]:
        r = R["geometry"]["ratio"]
        S = R["structures"]
        if "btree" not in S or "cf4" not in S:
            continue
        cf, bt = S["cf4"], S["btree"]
        a = x(ins_rate(cf), ins_rate(bt))
        e = x(end_rate(cf), ins_rate(bt))
        sz = cf["rel_bytes"] / bt["total_bytes"]
        szi = cf["rel_bytes"] / bt["index_bytes"]
        ok = a >= TARGET_BTREE_X and e >= TARGET_BTREE_X and szi <= TARGET_BTREE_SIZE
        out.append((f"1:{r}: CF inserts >= {TARGET_BTREE_X:.0f}x a btree index's at <= 1/4 of the index's size", ok,
                    f"inserts {a:.1f}x cumulative, {e:.1f}x at the end of the stream ({ins_rate(cf):,.0f} and "
                    f"{end_rate(cf):,.0f} vs {ins_rate(bt):,.0f} rows/s); size {mb(cf['rel_bytes']):,.0f} MB vs "
                    f"{mb(bt['total_bytes']):,.0f} MB for the table with its btree index "
                    f"({sz:.2f}; against the index alone, {mb(bt['index_bytes']):,.0f} MB: {szi:.2f})"
                    + (f"; after qf_flush and VACUUM FULL {mb(cf['vacuum_full_bytes']):,.0f} MB: "
                       f"{cf['vacuum_full_bytes'] / bt['total_bytes']:.2f} and "
                       f"{cf['vacuum_full_bytes'] / bt['index_bytes']:.2f}"
                       if "vacuum_full_bytes" in cf else "")))
    return out


# ---------------------------------------------------------------- plots

# the structures spelled out for the plots
PLOT_LABEL = {"cf2": "cascade filter (CF), fanout 2", "cf4": "cascade filter (CF), fanout 4",
              "cf16": "cascade filter (CF), fanout 16", "bqf": "buffered quotient filter (BQF)",
              "ebf": "elevator Bloom filter (EBF)", "bbf": "buffered Bloom filter (BBF, mode localized)",
              "btree": "table with a btree index (exact)", "hash": "table with a hash index (exact)"}


def ratio_tick(R):
    r = R["geometry"]["ratio"]
    return f"RAM:filter 1:{r}\n(each filter about {r}x the RAM)"


def plot_disk(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    c = res["config"]
    fig, ax = plt.subplots(1, 3, figsize=(17, 7))
    ratios = [R["geometry"]["ratio"] for R in res["ratios"]]
    keys = [k for k in ORDER if any(k in R["structures"] for R in res["ratios"])]
    w = 0.8 / max(1, len(keys))
    titles = [f"Inserts ({c['BATCH']:,}-row transactions)", "Lookups of random absent keys (uniform), cold cache",
              "Lookups of inserted keys (successful), cold cache"]
    ylabels = ["inserts per second (log scale)", "lookups per second (log scale)", "lookups per second (log scale)"]
    any_full = False
    for j, a in enumerate(ax):
        missing = []
        for i, k in enumerate(keys):
            xs, ys, hatch = [], [], []
            for ri, R in enumerate(res["ratios"]):
                st = R["structures"].get(k)
                x = ri + (i - len(keys) / 2 + 0.5) * w
                if not st:
                    missing.append(x)
                    continue
                xs.append(x)
                ys.append(ins_rate(st) if j == 0 else lk(st, "uniform" if j == 1 else "successful"))
                hatch.append(j == 0 and st["insert"]["mode"] == "full")
            bars = a.bar(xs, ys, w, label=PLOT_LABEL[k], color=f"C{ORDER.index(k)}")
            for bar, h in zip(bars, hatch):
                if h:
                    bar.set_hatch("///")
                    bar.set_edgecolor("white")
                    any_full = True
        a.set_yscale("log")
        lo = a.get_ylim()[0]
        for x in missing:
            a.text(x, lo * 1.08, "not run", rotation=90, ha="center", va="bottom", fontsize=8, color="dimgrey")
        a.set_xticks(range(len(ratios)))
        a.set_xticklabels([ratio_tick(R) for R in res["ratios"]])
        a.set_xlim(-0.5, len(ratios) - 0.5)
        a.set_title(titles[j], fontsize=11)
        a.set_ylabel(ylabels[j])
        a.grid(True, axis="y", which="both", alpha=0.3)
    handles = [Patch(facecolor=f"C{ORDER.index(k)}") for k in keys]
    labels = [PLOT_LABEL[k] for k in keys]
    if any_full:
        handles.append(Patch(facecolor="lightgrey", hatch="///", edgecolor="white"))
        labels.append("hatched: inserts timed over the whole stream from empty; plain: the last keys of the stream")
    handles.append(Patch(facecolor="none", edgecolor="none"))
    labels.append('"not run": the structure was not measured at that ratio')
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    bl = "" if res.get("have_bloom") else f" (Bloom filters {NA})"
    fig.suptitle(f"Filters on disk: the quotient filter family (CF, BQF) against Bloom filters (EBF, BBF) and "
                 f"indexed tables{bl}\nfalse-positive rate 1/{c['FP_INV']}; RAM = {c['SB_MB']} MB of "
                 f"shared_buffers in a memory cgroup of {c['SB_MB'] + c['CG_EXTRA_MB']} MB", fontsize=13)
    fig.tight_layout(rect=(0, 0.13, 1, 0.99))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_inram(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = res.get("inram", [])
    c = res["config"]
    kinds = [k for k in ("qf", "bf", "qfilter") if any(r["kind"] == k for r in rows)]
    lab = {"qf": "quotient_filter table (unlogged)", "bf": "bloom_filter table, mode plain (unlogged)",
           "qfilter": "qfilter value in backend memory"}
    fps = c["INRAM_FPS"]
    fig, ax = plt.subplots(1, 3, figsize=(15, 5.6))
    w = 0.8 / max(1, len(kinds))
    for j, (m, title, ylabel) in enumerate((
            ("insert", "Inserts", "million inserts per second"),
            ("uniform", "Lookups of random absent keys (uniform)", "million lookups per second"),
            ("successful", "Lookups of inserted keys (successful)", "million lookups per second"))):
        a = ax[j]
        for i, k in enumerate(kinds):
            xs, ys = [], []
            for fi, fp in enumerate(fps):
                r = [r for r in rows if r["kind"] == k and r["fp_inv"] == fp]
                if r:
                    xs.append(fi + (i - len(kinds) / 2 + 0.5) * w)
                    ys.append((r[0]["insert_per_s"] if m == "insert" else r[0][m]["per_s"]) / 1e6)
            a.bar(xs, ys, w, label=lab[k], color=f"C{i}")
        a.set_xticks(range(len(fps)))
        a.set_xticklabels([f"1/{f}" for f in fps])
        a.set_xlabel("false-positive rate")
        a.set_ylabel(ylabel)
        a.set_title(title, fontsize=11)
        a.grid(True, axis="y", alpha=0.3)
    handles, labels = ax[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9.5, frameon=False)
    bl = "" if res.get("have_bloom") else f" (bloom_filter {NA})"
    fig.suptitle((f"In RAM: quotient filter against Bloom filter (and the in-memory qfilter value), "
                  f"{rows[0]['n']:,} keys{bl}\none SQL function call "
                  f"per key; shared_buffers {c['LOADER_SB_MB']:,} MB, larger than the filters") if rows else "In RAM",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_inserts(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    c = res["config"]
    full = [R for R in res["ratios"] if any(st["insert"]["mode"] == "full" for st in R["structures"].values())]
    if not full:
        return False
    fig, ax = plt.subplots(1, len(full), figsize=(13 * len(full), 10), squeeze=False)
    for a, R in zip(ax[0], full):
        n = R["geometry"]["n"]
        flat = []
        for k in names(R):
            st = R["structures"][k]
            col = f"C{ORDER.index(k)}"
            if st["insert"]["mode"] == "full":
                ch = st["insert"]["chunks"]
                a.plot([100 * c_["items"] / n for c_ in ch], [c_["ops_per_s"] for c_ in ch], "o-", color=col,
                       label=f"{PLOT_LABEL[k]}: each tenth of the stream")
                a.plot([100 * c_["items"] / n for c_ in ch], [c_["cum_per_s"] for c_ in ch], ":", color=col,
                       alpha=0.8, label=f"{PLOT_LABEL[k]}: cumulative from the start")
            else:
                # dashes, or dash-dots for the hash index, whose line
                # may overlap the btree's
                a.axhline(ins_rate(st), color=col, ls="-." if k == "hash" else "--",
                          label=f"{PLOT_LABEL[k]}: the last {st['insert']['ops']:,} keys of the stream "
                                f"(drawn across)")
                flat.append((ins_rate(st), k))
        a.set_yscale("log")
        a.set_xlabel("% of the stream inserted")
        a.set_ylabel("inserts per second (log scale)")
        a.set_title(f"RAM:filter 1:{R['geometry']['ratio']} (each filter about {R['geometry']['ratio']}x the RAM), "
                    f"{n:,} keys, {c['BATCH']:,}-row transactions", fontsize=11)
        a.grid(True, which="both", alpha=0.3)
        a.set_xlim(0, 138)
        a.set_xticks(range(0, 101, 10))
        # the dashed lines, named at their right end; lines closer than
        # 10% share one label, which says they overlap
        flat.sort()
        groups = []
        for v, k in flat:
            if groups and v / groups[-1][-1][0] < 1.1:
                groups[-1].append((v, k))
            else:
                groups.append([(v, k)])
        for g in groups:
            txt = "\n".join(f"{PLOT_LABEL[k]}: {v:,.0f}/s" for v, k in reversed(g))
            if len(g) > 1:
                txt += "\n(these lines overlap)"
            a.text(102, max(v for v, _ in g) * 1.04, txt, ha="left", va="bottom", fontsize=8.5,
                   bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1))
        a.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, frameon=False)
    fig.suptitle("Insert throughput over the stream on the RAM-limited server: the quotient filter family inserted "
                 "from empty,\nthe Bloom filters and the indexed tables measured on the last keys of the stream",
                 fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- report

def sizing_section(before, after):
    """The same benchmark before the quotient filters were sized to their
    capacity (power-of-two home slots) and now: every structure's insert and
    lookup rates at every RAM:filter ratio both runs have, and the in-RAM
    rows.  Each run's stream is the capacity of a filter of ratio x M pages
    in its own build, so the on-disk rows compare the same RAM:filter
    ratio, not the same keys."""
    rows, cal = [], []
    B = {R["geometry"]["ratio"]: R for R in before["ratios"]}
    A = {R["geometry"]["ratio"]: R for R in after["ratios"]}
    for r in sorted(set(B) & set(A)):
        conf = f"1:{r}"
        for k in ORDER:
            sb, sa = B[r]["structures"].get(k), A[r]["structures"].get(k)
            if sb is None or sa is None:
                continue
            # the sizing changes the quotient filters only
            out = rows if k.startswith("cf") or k == "bqf" else cal
            name = f"{conf} {LABEL[k]}"
            out.append((name, "keys in the stream", sb["insert"].get("n"), sa["insert"].get("n"), True, 0))
            out.append((name, f"inserts/s ({sa['insert']['mode']})", ins_rate(sb), ins_rate(sa), True, 0))
            if sb["insert"]["mode"] == "full" and sa["insert"]["mode"] == "full":
                out.append((name, "inserts/s, last tenth", end_rate(sb), end_rate(sa), True, 0))
            for what in ("uniform", "successful"):
                out.append((name, f"lookups/s, {what}", lk(sb, what), lk(sa, what), True, 0))
                out.append((name, f"page reads/lookup, {what}", sb["lookups"][what]["reads_per_op"],
                            sa["lookups"][what]["reads_per_op"], False, 2))
            nb, na = sb["insert"].get("n"), sa["insert"].get("n")
            if nb and na:
                out.append((name, "bits per key at the end of the stream", sb["rel_bytes"] * 8 / nb,
                            sa["rel_bytes"] * 8 / na, False, 1))
    IB = {(e["kind"], e["fp_inv"]): e for e in before.get("inram", [])}
    IA = {(e["kind"], e["fp_inv"]): e for e in after.get("inram", [])}
    for key in sorted(set(IB) & set(IA)):
        eb, ea = IB[key], IA[key]
        out = cal if key[0] == "bf" else rows
        name = f"in RAM {key[0]} fp 1/{key[1]}"
        out.append((name, "inserts/s", eb["insert_per_s"], ea["insert_per_s"], True, 0))
        for what in ("uniform", "successful"):
            out.append((name, f"lookups/s, {what}", eb[what]["per_s"], ea[what]["per_s"], True, 0))
        out.append((name, "bits per key", eb["bits_per_item"], ea["bits_per_item"], False, 1))
    intro = (f"BEFORE: the run of `{before['ext']['head']}` ({before['started'][:16]}, "
             f"`streamsketch.so` md5 {before['ext']['so_md5']}), quotient filters of a power of two of home "
             f"slots per page and per filter; AFTER: this run (`{after['ext']['head']}`), quotient filters "
             "sized to their capacity.  Same script and configuration, run back to back on the same "
             f"machine (BEFORE started {before['started'][:16]}, AFTER {after['started'][:16]}).  On disk "
             "each run's stream is the capacity of a filter of ratio × M pages in its own build, so the rows "
             "compare the same RAM:filter ratio with about twice the keys AFTER (row *keys in the stream*; "
             "rates are per key).  The calibration rows (Bloom filters, btree and hash indexes, whose code "
             "the change does not touch; the Bloom filters and indexes hold the same keys in both runs only "
             "in RAM) show how much the machine moved between the runs.  The BEFORE results are kept in "
             "`test/bench/filters_bench_results.before-sizing.json`.")
    return bench_compare.section("Before and after sizing to the capacity", intro, rows, cal)


def btree_space_rows(res):
    """The CF and BQF at the end of the stream and after VACUUM FULL
    against the btree index on the same keys; where no btree was built at
    a ratio, its size is its bytes per key at a ratio where it was, times
    the keys (a btree index on int8 grows in proportion to its keys)."""
    per_key = None
    for R in res["ratios"]:
        bt = R["structures"].get("btree")
        if bt:
            n = bt["insert"].get("n", R["geometry"]["n"])
            per_key = (bt["index_bytes"] / n, bt["total_bytes"] / n, R["geometry"]["ratio"])
            break
    head = ["RAM:filter", "keys", "structure", "MB at the end of the stream", "MB after VACUUM FULL",
            "btree index MB", "/ btree index", "after VACUUM FULL / btree index", "/ table + btree index"]
    rows = []
    if per_key is None:
        return head, rows
    for R in res["ratios"]:
        S = R["structures"]
        n = R["geometry"]["n"]
        bt = S.get("btree")
        idx, tot = (bt["index_bytes"], bt["total_bytes"]) if bt else (per_key[0] * n, per_key[1] * n)
        idx_lab = fmt(mb(idx)) + ("" if bt else f" (scaled from 1:{per_key[2]})")
        for k in ("cf2", "cf4", "cf16", "bqf"):
            st = S.get(k)
            if st is None:
                continue
            vf = st.get("vacuum_full_bytes")
            rows.append([f"1:{R['geometry']['ratio']}", fmt(n), LABEL[k], fmt(mb(st["rel_bytes"])),
                         fmt(mb(vf)) if vf else "-", idx_lab, fmt(st["rel_bytes"] / idx, 3),
                         fmt(vf / idx, 3) if vf else "-", fmt(st["rel_bytes"] / tot, 3)])
    return head, rows


def space_rows(res):
    """The space table: bits per key at capacity of each kind, its measured
    fp rate, and the plain Bloom filter's bits per key at that rate (its own
    bits at capacity scaled by ln(1/fp), the rate a Bloom filter's size
    follows)."""
    sp = [e for e in res.get("space", []) if e.get("part", 1.0) == 1.0]
    head = ["fp rate", "structure", "bits per key after VACUUM FULL", "live pages", "whole relation",
            "measured fp", "Bloom bits per key at that fp", "after VACUUM FULL / Bloom", "live / Bloom"]
    rows = []
    for fpinv in sorted({e["fp_inv"] for e in sp}):
        for e in [e for e in sp if e["fp_inv"] == fpinv]:
            # the Bloom filter is the reference: its own pages, not a ratio
            adj = bloom_bits_at(res, fpinv, e["measured_fp"]) if e["kind"] != "bf" else None
            vf = e.get("vacuum_full_bits_per_key", e["bits_per_key"])
            rows.append([f"1/{fpinv}", e["label"], fmt(vf, 2), fmt(e["live_bits_per_key"], 2),
                         fmt(e["bits_per_key"], 2), fmt(e["measured_fp"], 6), fmt(adj, 2) if adj else "-",
                         fx(x(vf, adj)) if adj else "-", fx(x(e["live_bits_per_key"], adj)) if adj else "-"])
    return head, rows


def bloom_bits_at(res, fpinv, fp):
    """Bits per key of a plain Bloom filter at rate fp: the one at capacity
    of target 1/fpinv, its bits scaled by ln(1/fp) / ln(1/its fp)."""
    bf = [e for e in res.get("space", []) if e["fp_inv"] == fpinv and e["kind"] == "bf"
          and e.get("part", 1.0) == 1.0]
    if not bf or not 0 < bf[0]["measured_fp"] < 1 or not 0 < fp < 1:
        return None
    bf = bf[0]
    # its metapage, bit pages and buffer pages (VACUUM FULL may copy
    # change-log pages too)
    return bf["live_bits_per_key"] * math.log(1 / fp) / math.log(1 / bf["measured_fp"])


def part_rows(res):
    """Filters of a capacity holding only part of it: bits per key and fp,
    against the Bloom filter at the same measured fp (bloom_bits_at) and
    against the Bloom filter of the same capacity holding the same keys."""
    sp = [e for e in res.get("space", []) if e.get("part", 1.0) < 1.0]
    head = ["fp rate", "keys / capacity", "structure", "bits per key", "measured fp",
            "Bloom bits per key at that fp", "/ Bloom at that fp", "/ Bloom of the same capacity and keys",
            "that Bloom filter's fp"]
    rows = []
    for e in sp:
        if e["kind"] == "bf":
            continue
        vf = e.get("vacuum_full_bits_per_key", e["bits_per_key"])
        adj = bloom_bits_at(res, e["fp_inv"], e["measured_fp"])
        same = [b for b in sp if b["kind"] == "bf" and b["fp_inv"] == e["fp_inv"] and b["part"] == e["part"]]
        sb = same[0] if same else None
        sbits = sb["live_bits_per_key"] if sb else None
        rows.append([f"1/{e['fp_inv']}", f"{e['part']:g}", e["label"], fmt(vf, 2), fmt(e["measured_fp"], 6),
                     fmt(adj, 2) if adj else "-", fx(x(vf, adj)) if adj else "-",
                     fx(x(vf, sbits)) if sbits else "-", fmt(sb["measured_fp"], 6) if sb else "-"])
    return head, rows


def report(res, cfg):
    c = res["config"]
    have_bloom = res.get("have_bloom")
    T = targets(res)
    L = []
    P = []   # printed text tables

    # ---- in RAM
    inr = res.get("inram", [])
    fps = c["INRAM_FPS"]

    def get(kind, fp):
        r = [r for r in inr if r["kind"] == kind and r["fp_inv"] == fp]
        return r[0] if r else None

    head_r = ["operation"]
    for fp in fps:
        head_r += [f"BF 1/{fp}", f"QF 1/{fp}", "QF/BF", "paper QF/BF"]
    rows_r = []
    for m, lab, pi in (("insert", "inserts/s", 0), ("uniform", "uniform random lookups/s", 2),
                       ("successful", "successful lookups/s", 4)):
        row = [lab]
        for fp in fps:
            q, b = get("qf", fp), get("bf", fp)
            val = lambda r: None if r is None else (r["insert_per_s"] if m == "insert" else r[m]["per_s"])
            pb, pq = PAPER_INRAM.get(fp, (None,) * 6)[pi], PAPER_INRAM.get(fp, (None,) * 6)[pi + 1]
            row += [fmt(val(b)) if b else "n/a", fmt(val(q)), fx(x(val(q), val(b))), fx(x(pq, pb))]
        rows_r.append(row)
    for m, lab in (("measured_fp", "measured fp rate (uniform lookups)"), ("bits_per_item", "bits per key")):
        row = [lab]
        for fp in fps:
            q, b = get("qf", fp), get("bf", fp)
            d = 5 if m == "measured_fp" else 1
            row += [fmt(b[m], d) if b else "n/a", fmt(q[m], d) if q else "-", "", ""]
        rows_r.append(row)
    qfv = [r for r in inr if r["kind"] == "qfilter"]
    head_q = ["fp rate", "qfilter inserts/s", "uniform lookups/s", "successful lookups/s", "measured fp",
              "bits per key"]
    rows_q = [[f"1/{r['fp_inv']}", fmt(r["insert_per_s"]), fmt(r["uniform"]["per_s"]),
               fmt(r["successful"]["per_s"]), fmt(r["measured_fp"], 5), fmt(r["bits_per_item"], 1)] for r in qfv]

    # ---- on disk (Table 1b)
    disk_tables = []
    for R in res["ratios"]:
        g = R["geometry"]
        r = g["ratio"]
        S = R["structures"]
        ks = names(R)
        head = ["", *[LABEL[k] for k in ks]]
        rows = []
        rows.append(["keys inserted (n)"] + [fmt(S[k]["insert"].get("n", g["n"])) for k in ks])
        rows.append(["inserts/s"] + [fmt(ins_rate(S[k])) for k in ks])
        rows.append(["insert measurement"] + [
            ("from empty, cumulative" if S[k]["insert"]["mode"] == "full" else
             f"last {S[k]['insert']['ops']:,} of the stream") for k in ks])
        rows.append(["inserts/s at the end of the stream"] + [fmt(end_rate(S[k])) for k in ks])
        rows.append(["uniform random lookups/s"] + [fmt(lk(S[k], "uniform")) for k in ks])
        rows.append(["successful lookups/s"] + [fmt(lk(S[k], "successful")) for k in ks])
        rows.append(["page reads / uniform lookup"] + [fmt(S[k]["lookups"]["uniform"]["reads_per_op"], 2) for k in ks])
        rows.append(["page reads / successful lookup"] + [fmt(S[k]["lookups"]["successful"]["reads_per_op"], 2)
                                                          for k in ks])
        rows.append(["false positives / uniform lookups"] + [
            f"{S[k]['lookups']['uniform']['positives']} / {S[k]['lookups']['uniform']['ops']:,}" for k in ks])
        rows.append(["size MB (filter relation; table + index)"] + [fmt(mb(S[k]["total_bytes"])) for k in ks])
        rows.append(["RAM : size"] + [f"1:{S[k]['total_bytes'] / (c['SB_MB'] * 2**20):.1f}" for k in ks])
        if any("live_bytes" in S[k] for k in ks):
            rows.append(["size MB of the live levels (QF family)"] + [
                fmt(mb(S[k]["live_bytes"])) if "live_bytes" in S[k] else "-" for k in ks])
        if any("vacuum_full_bytes" in S[k] for k in ks):
            rows.append(["size MB after qf_flush and VACUUM FULL (QF family)"] + [
                fmt(mb(S[k]["vacuum_full_bytes"])) if "vacuum_full_bytes" in S[k] else "-" for k in ks])
        rows.append(["levels (QF family) / hashes (Bloom)"] + [
            str(S[k]["info"].get("levels", S[k]["info"].get("hashes", "-"))) for k in ks])
        if have_bloom:
            bi, bk = best_bloom(R, ins_rate)
            rows.append(["inserts vs best Bloom variant"] + [fx(x(ins_rate(S[k]), bi), 1) for k in ks])
            for what in ("uniform", "successful"):
                bl, _ = best_bloom(R, lambda st: lk(st, what))
                rows.append([f"{what} lookups vs best Bloom variant"] + [fx(x(lk(S[k], what), bl)) for k in ks])
        else:
            rows.append(["EBF, BBF"] + [NA if i == 0 else "" for i in range(len(ks))])
        pp = PAPER_DISK.get(r, {})
        if pp:
            rows.append(["paper: inserts/s"] + [fmt(pp[k][0]) if k in pp else "" for k in ks])
            rows.append(["paper: uniform / successful lookups/s"] + [
                (f"{fmt(pp[k][1])} / {fmt(pp[k][2])}" if k in pp and pp[k][1] else "") for k in ks])
        disk_tables.append((R, head, rows))

    # ---- fanouts
    head_f = ["RAM:filter", "fanout", "inserts/s", "uniform lookups/s", "successful lookups/s",
              "reads/uniform lookup", "levels", "merges", "size MB"]
    rows_f = []
    for R in res["ratios"]:
        for k in ("cf2", "cf4", "cf16"):
            if k in R["structures"] and len([q for q in ("cf2", "cf16") if q in R["structures"]]):
                st = R["structures"][k]
                rows_f.append([f"1:{R['geometry']['ratio']}", k[2:], fmt(ins_rate(st)), fmt(lk(st, "uniform")),
                               fmt(lk(st, "successful")), fmt(st["lookups"]["uniform"]["reads_per_op"], 2),
                               str(st["info"]["levels"]), str(st["info"]["resizes"]), fmt(mb(st["rel_bytes"]))])

    # ---- btree / hash
    head_b = ["RAM:filter", "structure", "inserts/s", "uniform lookups/s", "successful lookups/s",
              "reads/insert", "WAL B/insert", "heap MB", "index MB", "total MB", "CF4 inserts x", "CF4 size /"]
    rows_b = []
    for R in res["ratios"]:
        S = R["structures"]
        if "btree" not in S:
            continue
        cf = S.get("cf4")
        for k in ("cf4", "bqf", "btree", "hash"):
            if k not in S:
                continue
            st = S[k]
            ins = st["insert"]
            rd = ins["reads_per_op"] if ins["mode"] == "window" else (
                sum(ch["reads_per_op"] * ch["ops"] for ch in ins["chunks"]) / ins["n"])
            wal = ins["wal_bytes_per_op"] if ins["mode"] == "window" else (
                sum(ch["wal_bytes_per_op"] * ch["ops"] for ch in ins["chunks"]) / ins["n"])
            base = k in ("btree", "hash")
            rows_b.append([f"1:{R['geometry']['ratio']}", LABEL[k], fmt(ins_rate(st)), fmt(lk(st, "uniform")),
                           fmt(lk(st, "successful")), fmt(rd, 3), fmt(wal),
                           fmt(mb(st["rel_bytes"])) if base else "-",
                           fmt(mb(st["index_bytes"])) if base else "-", fmt(mb(st["total_bytes"])),
                           fx(x(ins_rate(cf), ins_rate(st)), 1) if base and cf else "",
                           f"{cf['rel_bytes'] / st['total_bytes']:.2f} (index alone {cf['rel_bytes'] / st['index_bytes']:.2f})"
                           if base and cf else ""])

    # ---- insert curves
    head_c = ["RAM:filter", "structure", "% inserted", "chunk inserts/s", "cumulative/s", "page reads/insert",
              "WAL B/insert", "device write kB/insert", "levels", "merges so far"]
    rows_c = []
    for R in res["ratios"]:
        n = R["geometry"]["n"]
        for k in names(R):
            st = R["structures"][k]
            if st["insert"]["mode"] != "full":
                continue
            for ch in st["insert"]["chunks"]:
                rows_c.append([f"1:{R['geometry']['ratio']}", LABEL[k], f"{100 * ch['items'] / n:.0f}",
                               fmt(ch["ops_per_s"]), fmt(ch["cum_per_s"]), fmt(ch["reads_per_op"], 4),
                               fmt(ch["wal_bytes_per_op"]), fmt(ch["dev_write_kb_per_op"], 2),
                               str(ch["levels"]), str(ch["merges"])])

    # ---- I/O of the measured windows and lookups
    head_io = ["RAM:filter", "structure", "operation", "ops", "s", "ops/s", "page reads/op", "page accesses/op",
               "buffer writes/op", "WAL B/op", "device reads/op", "cgroup peak MB", "page cache MB", "note"]
    rows_io = []
    for R in res["ratios"]:
        for k in names(R):
            st = R["structures"][k]
            ph = []
            if st["insert"]["mode"] == "window":
                i = st["insert"]
                note = (f"{i['merges_in_window']} merges" if "merges_in_window" in i else
                        f"{i['flushes_in_window']} buffer flushes" if "flushes_in_window" in i else "")
                ph.append(("insert (window)", i, note))
            for what in ("uniform", "successful"):
                m = st["lookups"][what]
                ph.append((f"{what} lookup", m, f"{m['positives']} positive, {m['prewarmed_pages']} pages prewarmed"))
            for lab, m, note in ph:
                rows_io.append([f"1:{R['geometry']['ratio']}", LABEL[k], lab, fmt(m["ops"]), fmt(m["seconds"], 1),
                                fmt(m["ops_per_s"]), fmt(m["reads_per_op"], 3), fmt(m["accesses_per_op"], 2),
                                fmt(m["buf_writes_per_op"], 3), fmt(m["wal_bytes_per_op"]),
                                fmt(m["dev_reads_per_op"], 3), fmt(m["mem_peak_mb"]), fmt(m["mem_file_mb"]), note])

    # ---- print
    print()
    print("In RAM (operations/s):")
    print(text_table(head_r, rows_r))
    if rows_q:
        print(text_table(head_q, rows_q))
    for R, head, rows in disk_tables:
        print()
        print(f"On disk, RAM:filter 1:{R['geometry']['ratio']} (n = {R['geometry']['n']:,}):")
        print(text_table(head, rows))
    if rows_b:
        print()
        print(text_table(head_b, rows_b))
    print()
    for name, ok, txt in T:
        print(f"[{'MET' if ok else 'MISSED' if ok is not None else 'NOT RUN'}] {name}: {txt}")

    pngs = {}
    if cfg.get("OUT_PNG"):
        base = cfg["OUT_PNG"][:-4] if cfg["OUT_PNG"].endswith(".png") else cfg["OUT_PNG"]
        plot_disk(res, base + ".png")
        pngs["disk"] = os.path.basename(base + ".png")
        if inr:
            plot_inram(res, base + "-inram.png")
            pngs["inram"] = os.path.basename(base + "-inram.png")
        if plot_inserts(res, base + "-inserts.png"):
            pngs["inserts"] = os.path.basename(base + "-inserts.png")
    if not cfg.get("OUT_MD"):
        return

    m = res["machine"]
    ext = res.get("ext", {})
    cg = res["cgroup"]
    partial = not have_bloom
    L.append("# Filter benchmark: the paper's Table 1 inside PostgreSQL\n")
    if partial:
        L.append(f"> **Partial run: the Bloom filter access method (`bloom_filter`) was {NA}** "
                 f"(`bloom_create` did not exist in the extension built from `{ext.get('head', '?')}`), so the "
                 "Bloom columns are empty and the targets that compare with Bloom filters are not evaluated. "
                 "The script runs them as soon as the build has `bloom_create`.\n")
    L.append("Reproduces Table 1 of Bender et al., *Don't Thrash: How to Cache Your Hash on Flash* (VLDB 2012, "
             "section 5) with the extension's access methods: the quotient filter (`quotient_filter`) against "
             "the Bloom filter (`bloom_filter`, mode `plain`) in RAM at false-positive rates 1/64, 1/512 and "
             "1/4096; the cascade filter (`cascade_filter`, fanouts 2, 4 and 16) and the buffered quotient "
             "filter (`buffered_quotient_filter`) against the elevator Bloom filter (`bloom_filter` mode "
             "`elevator`, EBF) and the buffered Bloom filter (mode `localized`, BBF) on disk at RAM:filter "
             f"ratios {' and '.join('1:%d' % R['geometry']['ratio'] for R in res['ratios'])} with RAM enforced "
             "by small shared_buffers and a memory cgroup; and what a PostgreSQL user would use instead for "
             "exact membership, a table with a btree or a hash index on the key. All ratios below are measured "
             "side by side in one run.\n")
    if "disk" in pngs:
        L.append(f"![on-disk throughput]({pngs['disk']})\n")
    if "inserts" in pngs:
        L.append(f"![insert throughput over the stream]({pngs['inserts']})\n")
    if "inram" in pngs:
        L.append(f"![in-RAM QF vs BF]({pngs['inram']})\n")
    L.append("## Command\n")
    L.append("```sh\nsudo bash test/bench/filters_bench.sh            # as root; ~%.0f minutes on the machine below\n```\n"
             % (res.get("runtime_s", 0) / 60))
    L.append("It builds and installs the extension from this work tree, copies the PostgreSQL 15 binaries and "
             f"the freshly built extension into a private tree under `{c['WORK']}` (so a concurrent "
             "`make install` of another tree cannot change the code under test; `test/bench/benchlib.sh`), "
             "creates a throwaway cluster there, runs everything, prints the tables, writes this file, the "
             "plots and `test/bench/filters_bench_results.json`, and removes the cluster and the cgroup. "
             "Parameters are environment variables (see `CONFIG` in `test/bench/filters_bench.py`), e.g. "
             "`RATIOS=4 FANOUTS=4 SB_MB=64 bash test/bench/filters_bench.sh`; "
             "`/usr/bin/python3 test/bench/filters_bench.py --report` re-renders the outputs from the JSON.\n")
    L.append("## Machine and run\n")
    L.append(f"- {m['cpu']}, {m['cores']} cores, {m['ram_mb'] / 1024:.0f} GiB RAM, {m['os']}, kernel {m['kernel']}; "
             f"disk {m['disk'].split(' ')[0]} (virtual block device): random 8 kB read latency "
             f"{res['rand_read_us']:.0f} µs at queue depth 1 (measured by the script on a cold 256 MB file).")
    L.append(f"- {m['pg']}; streamsketch built from `{ext.get('head', '?')}`"
             f"{' + uncommitted changes' if ext.get('dirty') else ''} (`streamsketch.so` md5 {ext.get('so_md5', '?')}); "
             f"bloom_filter: {'yes' if have_bloom else NA}; qfilter type: "
             f"{'yes' if res.get('have_qfilter') else NA}.")
    L.append(f"- Started {res['started']}, runtime {res.get('runtime_s', 0) / 60:.1f} min. Other developers "
             "shared the 2 cores and the disk during the run, so absolute numbers carry some noise; the "
             "structures are measured back to back.")
    if res.get("note"):
        L.append(f"- {res['note']}.")
    L.append("")
    L.append("## Setup: what was measured\n")
    n0 = inr[0]["n"] if inr else 0
    L.append(f"- **In RAM** (paper 5.1): the unconstrained server (shared_buffers {c['LOADER_SB_MB']} MB, far "
             f"larger than the filters), UNLOGGED tables. The QF has 2^{c['INRAM_LOG2_SLOTS']} home slots "
             f"(`capacity` = 0.95 × 2^{c['INRAM_LOG2_SLOTS']}) and receives n = {n0:,} keys "
             f"({c['LOAD']:.0%} load, the paper's Table 1 point); the Bloom filter is created with "
             "`capacity => n` at the same fp rate, i.e. it is full at the end, as the paper's. Inserts: "
             f"`INSERT INTO t SELECT hashint8extended(g, 0) FROM generate_series(a, b) g` in {c['INRAM_BATCH']:,}-row "
             f"transactions. Lookups: {c['Q_INRAM']:,} calls in one statement "
             "`SELECT count(*) FILTER (WHERE qf_contains('t', k)) FROM generate_series(1, Q) g`, second of two "
             "runs; uniform random keys are `hashint8extended(g, 1)` (absent: positives are false positives), "
             "successful lookups pick a random inserted key. Every number includes PostgreSQL's cost of a SQL "
             f"function call in a query: the same statement without the filter call takes "
             f"{res.get('inram_loop_us', 0):.2f} µs per row.")
    L.append(f"- **On disk** (paper 5.2, 5.3): **RAM M = {c['SB_MB']} MB of `shared_buffers`**; the measuring server "
             f"runs in a memory cgroup (v{cg['version']}) limited to {cg['limit_mb']:.0f} MB = shared_buffers + "
             f"{c['CG_EXTRA_MB']} MB for the processes and the OS page cache (columns *cgroup peak MB* and "
             "*page cache MB* below), and `sync; echo 3 > /proc/sys/vm/drop_caches` plus a server restart precede "
             f"every measured phase. fp rate 1/{c['FP_INV']}. The RAM part of each structure is "
             f"`buffer_size => '{c['BUF_MB']}MB'` (M/2): level 0 of the CF/BQF, the buffer of the EBF/BBF; after "
             "each restart it is loaded with `pg_prewarm` (the paper keeps it in RAM), the rest of "
             "shared_buffers caches whatever the structure reads. Consolidation there (background workers, "
             f"flushes, VACUUM) works in `maintenance_work_mem = {c.get('MEASURE_MAINT_MB', 64)}MB`, within the "
             "cgroup's room for processes.")
    L.append(f"- **Stream size**: n = the capacity of a quotient filter whose pages are ratio × M at fp "
             f"1/{c['FP_INV']} ({res.get('capacity_per_page', 0):,.0f} keys of capacity per 8 kB page), i.e. "
             + ", ".join(f"n = {R['geometry']['n']:,} at 1:{R['geometry']['ratio']}" for R in res["ratios"])
             + ": the keys `hashint8extended(i, 0)`, i = 1..n, and `capacity => n` for the CF, BQF, btree and "
             "hash tables. The **Bloom filters are sized to the same RAM:filter ratio** (their bit pages = "
             "ratio × M, the paper's \"grown to about four times the size of RAM\") and filled to their "
             "capacity, the paper's maximum occupancy: "
             + ", ".join(f"n = {R['geometry']['n_bf']:,} at 1:{R['geometry']['ratio']}" for R in res["ratios"]
                         if "n_bf" in R["geometry"])
             + ". Every structure ends the stream at its capacity.")
    L.append(f"- **Inserts**: {c['BATCH']:,}-row transactions (synchronous commit, logged tables, full_page_writes on). "
             f"The QF family at {', '.join('1:%d' % r for r in c['FULL_RATIOS'])} is inserted **from empty on the "
             f"RAM-limited server** and timed over the whole stream in {c['FULL_CHUNKS']} chunks (the paper's "
             "cumulative throughput; the plot shows each chunk). Elsewhere, and for the Bloom filters and the "
             "indexes always, an unconstrained loader server (shared_buffers "
             f"{c['LOADER_SB_MB']} MB, `wal_level = minimal`) bulk-loads the start of the stream untimed and "
             "consolidates it (`VACUUM`); on the "
             f"RAM-limited server {c['W_WARM']:,} untimed warm-up keys follow, then the **last keys of the stream "
             f"are timed**: {c['QF_WINDOW']:g} level-0 capacities for the CF/BQF (so the window contains "
             f"{c['QF_WINDOW']:g} merges), {c['BLOOM_WINDOW']:g} EBF buffer capacities for the EBF and BBF (EBF "
             f"buffer flushes in the window are listed), {c['U_BASE']:,} rows for the btree and hash tables. "
             "A window at the end of the stream is the most expensive part for the QF family (its merges grow "
             "with the filter) and a typical part for the Bloom filters (cost independent of occupancy).")
    L.append(f"- **Lookups**: {c['Q_LOOKUP']:,} uniform random keys and {c['Q_LOOKUP']:,} successful lookups "
             "(random inserted keys) per structure, each after dropping caches and restarting, one statement as "
             "above; btree and hash tables: `EXISTS (SELECT 1 FROM t WHERE key = k)` (index-only scan for the "
             "btree, index scan for the hash index; checked with EXPLAIN).")
    L.append("- **Baselines**: `CREATE TABLE t (key int8 NOT NULL)` with `CREATE INDEX ... USING btree (key)` or "
             "`USING hash (key)`, built after the bulk load, then VACUUM ANALYZE; sizes are "
             "`pg_total_relation_size` (heap + index), filter sizes `pg_relation_size` of the filter table.")
    L.append("- **I/O per operation** from statistics deltas: *page reads* = shared_buffers misses "
             "(`heap_blks_read + idx_blks_read` of `pg_statio_all_tables`), *page accesses* = reads + hits, "
             "*buffer writes* = `buffers_checkpoint + buffers_clean + buffers_backend` (an untimed CHECKPOINT "
             "closes each insert window), *WAL B/op* from `pg_current_wal_lsn()`, *device* counters from "
             "`/sys/block/.../stat` (machine-wide).")
    L.append("")
    L.append("## Results\n")
    L.append("### In RAM: QF vs Bloom filter (Table 1a)\n")
    L.append(f"Operations per second, n = {n0:,} keys; *paper QF/BF* is the ratio in the paper's Table 1a "
             "(their fp rates 0.01, 0.002, 0.0002 ≈ 1/64, 1/512, 1/4096)."
             + ("" if have_bloom else f" Bloom filter: {NA}.") + "\n")
    L.append(table(head_r, rows_r))
    L.append("")
    if rows_q:
        L.append("The in-memory `qfilter` type (a `qfilter` value built by `qfilter_agg(key, capacity, fp_rate)`, "
                 "looked up with `qfilter_contains`), same keys and capacity:\n")
        L.append(table(head_q, rows_q))
        L.append("")
    head_s, rows_s = space_rows(res)
    if rows_s:
        L.append("### Space at the requested capacity\n")
        L.append(f"Each structure created with capacity {c.get('SPACE_N', 0):,} at the rate and filled with "
                 "that many keys (UNLOGGED; the BQF and CF with a "
                 f"{c.get('SPACE_BUF_KB', 0)} kB level 0), then consolidated (`qf_flush`, `bloom_flush`, "
                 "VACUUM); *live pages* counts the metapage and the live levels (a Bloom filter's bit and "
                 "buffer pages), *whole relation* the file, which also holds freed change-log pages and "
                 "spare runs; `VACUUM FULL` leaves a buffered or cascade filter's fingerprints in its "
                 "largest level; the qfilter value is `pg_column_size`. The measured fp rate "
                 f"comes from {c.get('SPACE_Q', 0):,} absent keys. A plain Bloom filter needs bits per key "
                 "in proportion to ln(1/fp), so its bits at another structure's measured rate are its own "
                 "scaled by that ratio.\n")
        L.append(table(head_s, rows_s))
        L.append("")
    head_p, rows_p = part_rows(res)
    if rows_p:
        L.append("Filters of that capacity holding part of it (the same steps; a filter's pages are fixed by "
                 "its capacity, so its bits per key grow as the keys shrink, while its fp rate falls with "
                 "its load):\n")
        L.append(table(head_p, rows_p))
        L.append("")
    L.append("### On disk (Table 1b)\n")
    for R, head, rows in disk_tables:
        g = R["geometry"]
        L.append(f"**RAM:filter 1:{g['ratio']}**: n = {g['n']:,} keys, M = {c['SB_MB']} MB.\n")
        L.append(table(head, rows))
        L.append("")
    if rows_f:
        L.append("### Cascade filter fanouts (section 5.3)\n")
        L.append(table(head_f, rows_f))
        L.append("")
    head_bs, rows_bs = btree_space_rows(res)
    if rows_bs:
        L.append("### Space against a btree index\n")
        L.append("The CF and BQF at the end of the stream (the whole relation: live levels, level 0, spare "
                 "runs and freed change-log pages) and after `qf_flush` and `VACUUM FULL` (one level), "
                 "against a btree index on the same keys (`pg_relation_size` of the index; the table with "
                 "it in the last column).\n")
        L.append(table(head_bs, rows_bs))
        L.append("")
    if rows_b:
        L.append("### Against exact membership in PostgreSQL\n")
        L.append("Same keys, same transactions; the btree and hash rows are windows at the end of the stream "
                 "(the index already holds n − window keys); *CF4 size /* = CF size divided by the table's "
                 "total size (heap + index) and by the index alone.\n")
        L.append(table(head_b, rows_b))
        L.append("")
    if rows_c:
        L.append("### Inserts over the stream (from empty, RAM-limited)\n")
        L.append(table(head_c, rows_c))
        L.append("")
    L.append("### I/O per operation\n")
    L.append(table(head_io, rows_io))
    L.append("")
    L.append("## Targets\n")
    for name, ok, txt in T:
        L.append(f"- **{'MET' if ok else 'MISSED' if ok is not None else 'NOT EVALUATED'}** — {name}: {txt}.")
    L.append("")
    before = bench_compare.load_before(cfg["OUT_JSON"], "sizing")
    if before:
        L.append(sizing_section(before, res))
    L.extend(notes_section("filters_bench_notes.md"))
    with open(cfg["OUT_MD"], "w") as f:
        f.write("\n".join(L))
