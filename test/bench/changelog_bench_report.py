#!/usr/bin/python3
"""
Report of changelog_bench.py: medians over the repeats of every
measurement, BEFORE, AFTER and AFTER/BEFORE; docs/bench-changelog.md and a
bar chart of the throughput ratios (docs/bench-changelog.png).
Usage: python3 test/bench/changelog_bench_report.py [results.json]
"""
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import changelog_bench as B  # noqa: E402
from benchlib import table, text_table  # noqa: E402

SRC = sys.argv[1] if len(sys.argv) > 1 else B.C["OUT_JSON"]
res = json.load(open(SRC))
cfg = res["config"]
runs = res["runs"]
# this tree's docs/ (or OUT_MD, OUT_PNG), not the paths of the run
OUT_MD = B.C["OUT_MD"]
OUT_PNG = B.C["OUT_PNG"]


def run_meta(kind):
    """The run (started, finished, so_md5, config) that measured kind: this
    one, or an earlier one merged into the results (MERGE=1)."""
    for e in res.get("earlier", []):
        if kind in e["kinds"]:
            return e
    return res


QF = "qf"
bb_meta, qf_meta = run_meta("bcms"), run_meta(QF)
bb_cfg, qf_cfg = bb_meta["config"], qf_meta["config"]
for r in runs:
    rc = qf_cfg if r["kind"] == QF else bb_cfg
    # lookups run over the last Q (or all U100) keys of the 100-row phase
    B.add_mixed(r["m"], rc["U100"], min(rc["Q"], rc["U100"]))


def med(kind, mode, size, ver, k):
    v = [r["m"][k] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (kind, mode, size, ver)
         and r["m"].get(k) is not None]
    return statistics.median(v) if v else None


def spread(kind, mode, size, ver, k):
    v = [r["m"][k] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (kind, mode, size, ver)]
    return (min(v), max(v)) if v else (None, None)


structs = []
for r in runs:
    s = (r["kind"], r["mode"], r["size_mb"])
    if s not in structs:
        structs.append(s)
bb_structs = [s for s in structs if s[0] != QF]
qf_structs = [s for s in structs if s[0] == QF]


def nrep_of(ss):
    return max([r["rep"] for r in runs if (r["kind"], r["mode"], r["size_mb"]) in ss] or [-1]) + 1


nrep = nrep_of(bb_structs)
qf_nrep = nrep_of(qf_structs)


def f(x):
    if x is None:
        return "-"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:.1f}"
    return f"{x:.3f}"


def ratio(b, a):
    if b is None or a is None or b == 0:
        return None
    return a / b


def name(s):
    return B.structure_name(*s)


# ---------------------------------------------------------------- tables
rows_txt, md_tables, flagged, chart = [], [], [], []
for s in structs:
    rows = []
    metrics, gated = B.metrics_of(s[0])
    for k, label, higher in metrics:
        b = med(*s, "before", k)
        a = med(*s, "after", k)
        r = ratio(b, a)
        flag = ""
        if k in gated and r is not None and r < 0.90:
            flag = " **<0.90**"
            flagged.append((s, label, b, a, r))
        if k in gated:
            chart.append((s, k, r))
        if k.endswith("_ops_s") or k.endswith("_rows_s") or k.endswith("_rows_s_flush"):
            lo_b, hi_b = spread(*s, "before", k)
            lo_a, hi_a = spread(*s, "after", k)
            rng = f"{f(lo_b)}–{f(hi_b)} / {f(lo_a)}–{f(hi_a)}"
        else:
            rng = ""
        rows.append([label, f(b), f(a), (f"{r:.2f}" if r is not None else "-") + flag, rng])
        rows_txt.append([name(s), label, f(b), f(a), f"{r:.2f}" if r is not None else "-"])
    md_tables.append(f"### {name(s)}\n\n" + table(["measurement (median of %d)" % nrep_of([s]), "BEFORE", "AFTER",
                                                     "AFTER/BEFORE", "range BEFORE / AFTER"], rows))

print(text_table(["structure", "measurement", "BEFORE", "AFTER", "ratio"], rows_txt))
print()
print("gated throughputs below 0.90:")
for x in flagged:
    print(f"  {name(x[0]):38s} {x[1]:55s} {f(x[2]):>10s} {f(x[3]):>10s} {x[4]:.2f}")

# summary: one row per structure, the 8 throughput ratios
short = {"A_rows_s": "updates, 10,000-row transactions",
         "A_rows_s_flush": "updates, 10,000-row transactions, incl. flush",
         "B_rows_s": "updates, 100-row transactions",
         "B_rows_s_flush": "updates, 100-row transactions, incl. flush",
         "L1p_ops_s": "lookups of present keys before the flush (log not consolidated)",
         "L1a_ops_s": "lookups of absent keys before the flush (log not consolidated)",
         "L2p_ops_s": "lookups of present keys after the flush",
         "L2a_ops_s": "lookups of absent keys after the flush",
         "B_mixed_ops_s": "100-row updates, then the first lookups (one workload)"}
gk = [k for k, _, _ in B.METRICS if k in B.GATED]
summ = []
for s in bb_structs:
    row = [name(s)]
    for k in gk:
        r = ratio(med(*s, "before", k), med(*s, "after", k))
        row.append("-" if r is None else (f"**{r:.2f}**" if r < 0.9 else f"{r:.2f}"))
    for k in ("A_wal_row_flush", "B_wal_row_flush"):
        row.append(f"{f(med(*s, 'before', k))} → {f(med(*s, 'after', k))}")
    summ.append(row)
summary = table(["structure, size"] + [short[k] for k in gk] + ["WAL B/row 10k-txn (+flush)", "WAL B/row 100-txn (+flush)"], summ)

qf_short = {"A_rows_s": "inserts, 10,000-row transactions",
            "A_rows_s_flush": "inserts, 10,000-row transactions, incl. VACUUM",
            "B_rows_s": "inserts, 100-row transactions",
            "B_rows_s_flush": "inserts, 100-row transactions, incl. VACUUM",
            "L1p_ops_s": "qf_contains of present keys right after the inserts",
            "L1a_ops_s": "qf_contains of absent keys right after the inserts",
            "L2p_ops_s": "qf_contains of present keys after VACUUM",
            "L2a_ops_s": "qf_contains of absent keys after VACUUM",
            "L2c_ops_s": "qf_count of present keys after VACUUM",
            "D_rows_s": "qf_delete of recent keys",
            "D_rows_s_flush": "qf_delete of recent keys, incl. VACUUM",
            "E_rows_s": "qf_delete of old keys",
            "E_rows_s_flush": "qf_delete of old keys, incl. VACUUM",
            "B_mixed_ops_s": "100-row inserts, then the first lookups (one workload)"}
qgk = [k for k, _, _ in B.METRICS_QF if k in B.GATED_QF]
qsumm = []
for s in qf_structs:
    row = [name(s)]
    for k in qgk:
        r = ratio(med(*s, "before", k), med(*s, "after", k))
        row.append("-" if r is None else (f"**{r:.2f}**" if r < 0.9 else f"{r:.2f}"))
    for k in ("A_wal_row_flush", "B_wal_row_flush", "E_wal_row_flush"):
        row.append(f"{f(med(*s, 'before', k))} → {f(med(*s, 'after', k))}")
    qsumm.append(row)
qf_summary = table(["access method, size"] + [qf_short[k] for k in qgk]
                   + ["WAL B/row 10k-txn (+VAC)", "WAL B/row 100-txn (+VAC)", "WAL B/old delete (+VAC)"], qsumm)

qcons = []
for s in qf_structs:
    qcons.append([name(s)] + [f"{f(med(*s, 'before', k))} → {f(med(*s, 'after', k))}" for k in
                              ("C_ins_ms", "C_vac_ms", "C_ins_vac_ms", "C_ins_wal", "C_vac_wal")])
qf_cons_t = table(["access method, size", "txn ms", "VACUUM ms", "txn+VACUUM ms", "txn WAL B", "VACUUM WAL B"], qcons)

# sizes of the quotient filter family: plan, after the fill, at the end
qsizes = []
fills = res.get("qf_fill", {}) if qf_meta is res else qf_meta.get("qf_fill", {})
endpages = qf_meta.get("relation_pages") or {}
for s in qf_structs:
    t = f"qf_{B.QF_SHORT[s[1]]}_{s[2]}"
    fi = fills.get(t)
    if not fi:
        continue
    last = {v: [r["m"]["info1"] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (*s, v)][-1]
            for v in ("before", "after")}
    ib, ia = fi["info"]["before"], fi["info"]["after"]
    mb = lambda p: f"{int(p) * 8 / 1024:.0f}"
    qsizes.append([name(s), f"{fi['plan']['capacity']:,}", f"{fi['plan']['fill']:,}",
                   f"{ib['levels']} / {ia['levels']}", f"{mb(ib['pages'])} / {mb(ia['pages'])}",
                   f"{mb(ib['relation_pages'])} / {mb(ia['relation_pages'])}",
                   f"{last['before']['items']:,}", f"{last['before']['levels']} / {last['after']['levels']}",
                   f"{mb(last['before']['pages'])} / {mb(last['after']['pages'])}",
                   f"{mb(endpages.get('before', {}).get(t, 0))} / {mb(endpages.get('after', {}).get(t, 0))}",
                   f"{fi['seconds']['before']:.0f} / {fi['seconds']['after']:.0f}"])
qf_sizes_t = table(["access method, size", "capacity", "fill keys", "levels after fill", "live MB after fill",
                    "relation MB after fill", "items at end", "levels at end", "live MB at end", "relation MB at end",
                    "fill s (parallel, untimed)"], qsizes)

# merges (qf_info.resizes) inside the measured repeats
merges_in = []
for s in qf_structs:
    for v in ("before", "after"):
        for r in runs:
            if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (*s, v) and \
                    r["m"]["info1"]["resizes"] != r["m"]["info0"]["resizes"]:
                merges_in.append(f"{name(s)} {v} repeat {r['rep']}: {r['m']['info0']['resizes']} → "
                                 f"{r['m']['info1']['resizes']}")
merges_md = ("- " + "\n- ".join(merges_in)) if merges_in else "none (no level merge or growth in any measured repeat)"

# correctness: present keys found, deleted keys gone
chk = []
for s in qf_structs:
    for v in ("before", "after"):
        rs = [r["m"] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (*s, v)]
        chk.append([name(s), v, "/".join(str(m.get("L1p_result")) for m in rs),
                    "/".join(str(m.get("L2a_result")) for m in rs), "/".join(str(m.get("L2c_result")) for m in rs),
                    "/".join(str(m.get("D_still_present")) for m in rs),
                    "/".join(str(m.get("E_still_present")) for m in rs)])
qf_chk_t = table(["access method, size", "version", f"present found (of {qf_cfg.get('Q')})",
                  "absent reported present", "sum of qf_count (present)",
                  "recent deleted still present (of 1000)", "old deleted still present (of 1000)"], chk)

cons = []
for s in bb_structs:
    cons.append([name(s)] + [f"{f(med(*s, 'before', k))} → {f(med(*s, 'after', k))}" for k in
                             ("C_ins_ms", "C_flush_ms", "C_ins_flush_ms", "C_ins_wal", "C_flush_wal", "C_vac_ms", "C_vac_wal")])
cons_t = table(["structure, size", "txn ms", "flush ms", "txn+flush ms", "txn WAL B", "flush WAL B", "VACUUM ms", "VACUUM WAL B"], cons)

# ---------------------------------------------------------------- chart
import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402

THRESHOLD = 0.90   # the most a throughput may lose to the change log: 10%


def color_of(keys):
    """tab20 colours: one hue per measurement, dark and light for its
    variant with the flush (or VACUUM) and for present and absent keys;
    the combined workload is grey."""
    hue = {}
    out = {}
    for k in keys:
        base = k.replace("_flush", "")
        base = {"L1p_ops_s": "L1", "L1a_ops_s": "L1", "L2p_ops_s": "L2", "L2a_ops_s": "L2"}.get(base, base)
        if base == "B_mixed_ops_s":
            h = 7                       # grey
        else:
            if base not in hue:
                used = set(hue.values()) | {7}
                hue[base] = min(i for i in range(10) if i not in used)
            h = hue[base]
        light = k.endswith("_flush") or k in ("L1a_ops_s", "L2a_ops_s")
        out[k] = plt.cm.tab20.colors[2 * h + (1 if light else 0)]
    return out


def panel(ax, ss, keys, labels, title, xlabel):
    """AFTER/BEFORE of each structure and measurement as a bar from 1 on a
    log scale (up: faster with the change log, down: slower), so that no
    bar is cut off; ratios below the threshold are written under their
    bar."""
    w = 0.84 / len(keys)
    col = color_of(keys)
    vals = []
    for j, k in enumerate(keys):
        xs, ys = [], []
        for i, s in enumerate(ss):
            r = ratio(med(*s, "before", k), med(*s, "after", k))
            if r is None:
                continue
            xs.append(i + (j - len(keys) / 2 + 0.5) * w)
            ys.append(r)
        vals += ys
        ax.bar(xs, [y - 1 for y in ys], w, bottom=1, label=labels[k], color=col[k])
        for x, y in zip(xs, ys):
            if y < THRESHOLD:
                ax.text(x, y * 0.97, f"{y:.2f}", ha="center", va="top", fontsize=7, rotation=90,
                        color="firebrick")
    ax.axhline(THRESHOLD, color="red", linestyle="--", linewidth=1.2,
               label=f"{THRESHOLD:.2f}: the most a throughput may lose is 10% (values below are written under their bar)")
    ax.axhline(1.0, color="black", linewidth=0.8, label="1.0: as fast as before the change log")
    ax.set_yscale("log", base=2)
    lo = min([0.5] + [v * 0.8 for v in vals])
    hi = max([2.0] + [v * 1.3 for v in vals])
    ax.set_ylim(lo, hi)
    ax.set_yticks([t for t in (0.25, 0.5, 0.75, 0.9, 1, 1.5, 2, 3, 4, 8, 16, 32) if lo <= t <= hi])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_xticks(range(len(ss)))
    ax.set_xticklabels([name(s).replace(", ", "\n") for s in ss], fontsize=9)
    ax.set_xlim(-0.5, len(ss) - 0.5)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel("throughput AFTER / BEFORE\n(ratio of the medians, log scale)")
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.17), frameon=False)


def sizes_label(what, sizes, sb_mb):
    small = [x for x in sizes if x <= sb_mb]
    big = [x for x in sizes if x > sb_mb]
    out = f"{what}; size " + " and ".join(f"{x} MB" for x in sizes) + ": "
    parts = []
    if small:
        parts.append(" and ".join(f"{x} MB" for x in small) + f" fits in shared_buffers ({sb_mb} MB)")
    if big:
        parts.append(", ".join(f"{x} MB is {x / sb_mb:g}x shared_buffers" for x in big))
    return out + "; ".join(parts)


npan = (1 if bb_structs else 0) + (1 if qf_structs else 0)
fig, axs = plt.subplots(npan, 1, figsize=(16, 8.2 * npan), squeeze=False)
pi = 0
if bb_structs:
    panel(axs[pi][0], bb_structs, gk, short,
          f"bcms and bloom_filter: throughput with the change log relative to without it "
          f"(median of {nrep} interleaved repeats)",
          sizes_label("structure and mode", sorted({s[2] for s in bb_structs}), bb_cfg["SB_MB"]))
    pi += 1
if qf_structs:
    panel(axs[pi][0], qf_structs, qgk, qf_short,
          f"quotient filter family: throughput with the change log relative to without it "
          f"(median of {qf_nrep} repeats interleaved phase by phase; VACUUM takes the place of the flush)",
          sizes_label("access method", sorted({s[2] for s in qf_structs}), qf_cfg["SB_MB"])
          + " (size of the live levels)")
fig.suptitle("Change-log benchmark: throughput AFTER (updates appended to the change log) / "
             "BEFORE (updates applied at commit)\nbars start at 1: up = faster with the change log, "
             "down = slower", fontsize=13)
fig.tight_layout(rect=(0, 0, 1, 0.965))
fig.savefig(OUT_PNG, dpi=100)
plt.close(fig)

# ---------------------------------------------------------------- markdown


def machine_line(meta):
    """The machine a run recorded (the report may run elsewhere)."""
    m = meta.get("machine")
    if not m:
        return "not recorded in the results"
    return f"{m['cpu']}, {m['cores']} cores, {m['ram_mb']} MB RAM, {m['kernel']}, PostgreSQL 15."


machine = machine_line(res)
if bb_meta is not res and bb_meta.get("machine") and bb_meta.get("machine") != res.get("machine"):
    machine = f"bcms and bloom_filter: {machine_line(bb_meta)} Quotient filter family: {machine}"


def paired(s, k):
    """AFTER/BEFORE of each repeat (the two ran next to each other)."""
    b = {r["rep"]: r["m"][k] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (*s, "before")}
    a = {r["rep"]: r["m"][k] for r in runs if (r["kind"], r["mode"], r["size_mb"], r["version"]) == (*s, "after")}
    return [a[i] / b[i] for i in sorted(b) if i in a and b[i]]


def flag_line(x):
    pr = paired(x[0], next(k for k, lab, _ in B.metrics_of(x[0][0])[0] if lab == x[1]))
    below = sum(1 for r in pr if r < 0.9)
    return (f"- {name(x[0])}: {x[1]}: {f(x[2])} → {f(x[3])} (**{x[4]:.2f}**); per repeat "
            f"{' '.join(f'{r:.2f}' for r in pr)} (median {statistics.median(pr):.2f}, {below}/{len(pr)} below 0.90)")


flag_bb = [x for x in flagged if x[0][0] != QF]
flag_qf = [x for x in flagged if x[0][0] == QF]
flag_md = "\n".join(flag_line(x) for x in flag_bb) or "- none"
flag_qf_md = "\n".join(flag_line(x) for x in flag_qf) or "- none"
notes_path = os.path.join(REPO, "test", "bench", "changelog_bench_notes.md")
notes = open(notes_path).read() if os.path.exists(notes_path) else ""
qf_notes_path = os.path.join(REPO, "test", "bench", "changelog_bench_qf_notes.md")
qf_notes = open(qf_notes_path).read() if os.path.exists(qf_notes_path) else ""
cfg = bb_cfg
env = " ".join(f"{k}={cfg[k]}" for k in ("REPEATS", "SIZES_MB", "SB_MB", "BUF_MB", "U10", "U100", "Q", "NCONS", "BULK", "WARM", "FP") if k in cfg)
env = env.replace("[", "").replace("]", "").replace(", ", ",")
qenv = " ".join(f"{k}={qf_cfg[k]}" for k in ("REPEATS", "QF_SIZES_MB", "SB_MB", "QF_FP", "QF_BUF_MB", "QF_FANOUT",
                                               "QF_FILL", "QF_BQF_FILL", "U10", "U100", "Q", "QF_DEL", "NCONS", "WARM")
                if k in qf_cfg).replace("[", "").replace("]", "").replace(", ", ",")
qstructs = ",".join(x for x in qf_cfg.get("STRUCTS", []) if x.startswith("qf:"))


def runline(meta):
    return (f"{meta['started']} – {meta.get('finished', '?')}, AFTER at `{meta.get('after_head', '?')}`; extension "
            f"modules (md5) BEFORE `{meta['so_md5']['before']}`, AFTER `{meta['so_md5']['after']}`")


qf_section = ""
if qf_structs:
    qf_section = f"""## The quotient filter family

Run {runline(qf_meta)}.

### Method

Same clusters and settings as above, but interleaved **phase by phase**
(A on BEFORE, A on AFTER, B on BEFORE, ...; AFTER first in odd repeats),
medians of {qf_nrep} repeats, because the machine was shared and bursts of
another test suite hit one whole version's repeat otherwise. Before the
repeats the filters' files are written back, dropped from the OS page cache
and read sequentially on both clusters ({"done" if qf_cfg.get("EQUALIZE_CACHE", 0) else "not done in this run"}): at the larger size nearly
every operation writes back an evicted dirty buffer, and the cost of that
8 kB pwrite on this kernel (ext4, large page-cache folios) depends on the
folio sizes the file's earlier I/O left (see the notes). Access methods
`quotient_filter`, `buffered_quotient_filter` (BQF) and `cascade_filter`
(CF, fanout {qf_cfg['QF_FANOUT']}), fp_rate {qf_cfg['QF_FP']}, key type int8; BQF and CF have
`buffer_size => '{qf_cfg['QF_BUF_MB']}MB'` (level 0, the GUC's default). There is no flush
function: **VACUUM takes its place** (AFTER: it consolidates the change log
into the levels; BEFORE: the updates were applied at commit and VACUUM only
resolves deletes, so it is a near no-op). In AFTER a writing statement
consolidates a log longer than `streamsketch.change_log_limit`; a lookup
consolidates a log under 64 kB (when the consolidation lock is free) and
otherwise reads the committed records of its key's fingerprint bucket
through the per-session index of the log (a logged insert of the
fingerprint with no logged delete answers `qf_contains` at once).

**Sizes** ({qf_cfg['QF_SIZES_MB']} MB, the live levels: the pages a lookup or
an insert can touch; `qf_info(...).pages`, checked after the fill, table
below): the first fits in shared_buffers ({qf_cfg['SB_MB']} MB), the second is 4–6×
it. `quotient_filter`: one level of that size (capacity 0.95·2^t);
BQF: level 0 ({qf_cfg['QF_BUF_MB']} MB) plus level 1, which the first merge creates at the
capacity's size (16 MB / 256 MB); CF: its levels follow the keys (level i
holds fanout^i times level 0), so it is filled with enough keys to have
level 0 + level 1 (small) or four levels (large). Each filter is filled
untimed ({qf_cfg['QF_FILL']} keys by size, BQF {qf_cfg['QF_BQF_FILL']:,}, in large
transactions, both clusters at once), then VACUUM, CHECKPOINT and
{qf_cfg['WARM']:,} rows in 10,000-row transactions. The relation is larger than the
live levels: merges write out of place (the largest level keeps a spare run)
and in AFTER the change log's pages stay allocated (reused) after the fill's
large transactions.

Per repeat, on each cluster:

- **A** {qf_cfg['U10']:,} inserts (`INSERT INTO t SELECT hashint8extended(g, 0) ...`)
  in 10,000-row transactions, then VACUUM; rows/s without and with the
  VACUUM, WAL bytes per row (insert-LSN deltas), WAL records and FPIs;
- **B** {qf_cfg['U100']:,} inserts in 100-row transactions; {qf_cfg['Q']:,}
  `qf_contains` of present keys (the last inserted) and {qf_cfg['Q']:,} of absent
  keys **right after the inserts** (AFTER: the first lookup consolidates the
  up to 8 pages of log the inserts left), VACUUM, the same lookups **after
  VACUUM**, and {qf_cfg['Q']:,} `qf_count` of the present keys;
- **D** {qf_cfg['QF_DEL']:,} `qf_delete` of keys inserted by this repeat's A
  (recent: level 0 of BQF/CF), `SELECT count(qf_delete('t', k)) FROM
  generate_series(...)` in 100-row transactions, then VACUUM;
- **E** {qf_cfg['QF_DEL']:,} `qf_delete` of keys of the initial fill (old: the
  deeper levels of BQF/CF), the same way;
- **C** one {qf_cfg['NCONS']:,}-row transaction, then VACUUM (consolidation cost).

Level merges during the measured repeats (`qf_info().resizes` before and
after each repeat): {merges_md}. So the insert rates below are level-0 (QF:
in-place) inserts without merges, which are the same work in both versions;
the fill times in the sizes table include merges but ran both clusters at
once and are not a comparison.

### Sizes (BEFORE / AFTER)

{qf_sizes_t}

### Summary: AFTER/BEFORE throughput ratios (bold: below 0.90)

{qf_summary}

Below 0.90 (ratio of the medians, as above; then the ratio of each repeat's
pair, which ran phase by phase next to each other and so is the better
guide on a noisy machine):

{flag_qf_md}

### Consolidation cost (median BEFORE → AFTER), log of {qf_cfg['NCONS']:,} committed rows

{qf_cons_t}

### Answers (per repeat)

{qf_chk_t}

{qf_notes}
"""

md = f"""# Change-log benchmark: before and after the change log

This benchmark checks that no structure loses more than 10% of its update or lookup
throughput to the change log, and measures the WAL bytes per insert and the consolidation cost.
BEFORE is commit 0f8eaff (a transaction's updates applied to the
sub-buffers/pages/levels at pre-commit); AFTER is the change log (each
commit appends one xid-stamped batch to the relation's log pages;
consolidation moves committed batches into the structure when a statement
finds the log longer than `streamsketch.change_log_limit` (1 MB), when a lookup finds it
non-empty and under 64 kB or over the limit (in between, bcms and
bloom_filter lookups read it through a per-session index), in
`bcms_flush`/`bloom_flush` and in VACUUM).

- bcms and bloom_filter: run {runline(bb_meta)}.
- quotient filter family (section below): {"run " + runline(qf_meta) if qf_structs else "not measured"}.

## Command

```
bash test/bench/changelog_bench.sh            # as root, from the repository: every structure (~7 + ~12 min)
# the bcms/bloom_filter run below:
{env} STRUCTS={",".join(x for x in bb_cfg["STRUCTS"] if not x.startswith("qf:"))} bash test/bench/changelog_bench.sh
# the quotient filter family, merged into the results of the run above:
STRUCTS={qstructs} MERGE=1 {qenv} bash test/bench/changelog_bench.sh
```

The report alone: `/usr/bin/python3 test/bench/changelog_bench_report.py`.

## Machine

{machine}
The machine is shared (other engineers' builds and tests may run during a
benchmark: noise); the interleaving spreads it over both versions.

![ratios](bench-changelog.png)

## bcms and bloom_filter

### Method

Two clusters run side by side from private installations
(`/tmp/pgtree-before`, `/tmp/pgtree-after`, ports 5691/5692), same settings:
shared_buffers {cfg['SB_MB']} MB, fsync on, synchronous_commit on,
full_page_writes on, wal_level replica, autovacuum off, no checkpoint during
the measurements. Structure sizes {cfg['SIZES_MB']} MB (bcms: width·depth·8
bytes, depth 5; bloom_filter: bits/8, fp_rate {cfg['FP']}), so the first
fits in shared_buffers and the second is {max(cfg['SIZES_MB']) // cfg['SB_MB']}× it; buffered/elevator/localized
modes have buffer_size {cfg['BUF_MB']} MB. Keys are hashint8extended(i, 0) of a
running i (the same stream in both clusters); absent keys are
hashint8extended(−i, 0). No memory cgroup: the larger size is evicted from
shared_buffers but stays in the OS page cache (24 GB RAM), so it measures
buffer-manager traffic, not device reads.

Warm-up (untimed): one {cfg['BULK']}-row transaction and flush, CHECKPOINT,
{cfg['WARM']} rows in 10,000-row transactions and flush (every page and
the change log's pages touched after the checkpoint, so the measured WAL is
the steady state, with few full-page images). Then {nrep} repeats; in each,
per structure, BEFORE runs then AFTER (interleaved), each:

- **A** {cfg['U10']} rows in transactions of 10,000 rows, then the flush
  function; rows/s without and with the flush (times are the server round
  trips of the statements, psql `\\timing`), WAL bytes (insert-LSN deltas),
  WAL records and full-page images (pg_stat_wal) per row;
- **B** {cfg['U100']} rows in transactions of 100 rows; then {cfg['Q']}
  lookups (`bcms_estimate` / `bloom_contains`, one SELECT over
  generate_series) of present keys (the last rows inserted) and {cfg['Q']}
  of absent keys **right after the inserts** (AFTER: the committed log is
  not consolidated yet: the lookups read it through the per-session
  index, or consolidate it when it is under 64 kB); then the flush (timed,
  counted in B "+flush"); then the same lookups **after the flush**;
  "then look" is the 100-row transactions and these first lookups as one
  workload ((U100 + 2Q) operations over the sum of their times): the
  change log moves work from the writers to the first readers, this
  column shows the sum;
- **C** consolidation cost: one transaction of {cfg['NCONS']} rows (AFTER:
  one batch in the log), then the flush function; another such transaction,
  then VACUUM; time and WAL of each.

Medians of the {nrep} repeats; ratio = AFTER/BEFORE for throughputs (higher
is better) and also AFTER/BEFORE for costs (WAL, ms: lower is better).

### Summary: AFTER/BEFORE throughput ratios (bold: below 0.90)

{summary}

Below 0.90:

{flag_md}

### Consolidation cost (median BEFORE → AFTER), log of {cfg['NCONS']} committed rows

{cons_t}

{qf_section}
## All measurements

Medians; the last column is the range (min–max) of the repeats for throughputs.

{chr(10).join(md_tables)}

{notes}
"""
with open(OUT_MD, "w") as fo:
    fo.write(md)
print(f"wrote {OUT_MD} and {OUT_PNG}")
