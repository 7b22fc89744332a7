"""
Report of the background consolidation benchmark (background_bench.py):
docs/bench-background.md and a PNG (foreground insert rate with the
workers on against off, and the share of the rounds the workers ran).
"""
import os

from benchlib import fmt, notes_section, run_header, table


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ = results["summary"]
    names = list(summ)
    labels = [results["labels"].get(n, n) for n in names]
    fig, ax = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    x = range(len(names))
    w = 0.38
    off = [summ[n]["off"]["rows_per_s"] / 1000 for n in names]
    on = [summ[n]["on"]["rows_per_s"] / 1000 for n in names]
    ax[0].bar([i - w / 2 for i in x], off, w, label="workers off: the writers consolidate")
    ax[0].bar([i + w / 2 for i in x], on, w, label="workers on (default)")
    for i, n in enumerate(names):
        ax[0].text(i + w / 2, on[i], f"{summ[n]['ratio']:.2f}x", ha="center", va="bottom", fontsize=9)
    ax[0].set_xticks(list(x), labels, rotation=20, ha="right", fontsize=9)
    ax[0].set_ylabel("foreground insert rate (thousand rows/s, median)")
    ax[0].set_title("One writer, transactions of %s rows" % fmt(C["BATCH"]))
    ax[0].set_ylim(0, max(off + on) * 1.3)
    ax[0].legend(fontsize=9, loc="upper left")
    ax[0].grid(True, axis="y", alpha=0.3)
    fg = [summ[n]["on"]["foreground_rounds"] for n in names]
    bg = [summ[n]["on"]["worker_rounds"] for n in names]
    fg_off = [summ[n]["off"]["foreground_rounds"] for n in names]
    ax[1].bar([i - w / 2 for i in x], fg_off, w, color="C0", label="rounds by the writer, workers off")
    ax[1].bar([i + w / 2 for i in x], bg, w, color="C1", label="rounds by the workers, workers on")
    ax[1].bar([i + w / 2 for i in x], fg, w, bottom=bg, color="C3", label="rounds by the writer, workers on")
    ax[1].set_xticks(list(x), labels, rotation=20, ha="right", fontsize=9)
    ax[1].set_ylabel("consolidation rounds during the stream (median)")
    ax[1].set_title("Who consolidates")
    ax[1].set_ylim(0, max(fg_off + [b + f for b, f in zip(bg, fg)]) * 1.3 or 1)
    ax[1].legend(fontsize=9, loc="upper left")
    ax[1].grid(True, axis="y", alpha=0.3)
    fig.suptitle("Background consolidation: %s rows per structure" % fmt(C["ROWS"]), fontsize=13)
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    out = ["# Background consolidation benchmark\n",
           run_header(results, "background_bench"),
           "One session streams %s rows into a fresh structure in transactions of %s rows, "
           "with `streamsketch.background_consolidation` off (the writer consolidates the change log "
           "whenever a statement finds it longer than `streamsketch.change_log_limit`, 1 MB) and on "
           "(the default: a background worker consolidates a structure as soon as its log passes a "
           "quarter of the limit). %s repeats, off and on interleaved; medians. fsync and "
           "synchronous_commit on, autovacuum off. *Rounds* are the change log's consolidation "
           "rounds during the stream; the workers' come from `streamsketch_background_stats()`, the "
           "writer's are the rest. *Drain* is the time from the last commit until the log is empty; "
           "with the workers off a VACUUM consolidates what the writer left (nobody else would), and "
           "*all consolidated* adds that to the stream's time.\n"
           % (fmt(C["ROWS"]), fmt(C["BATCH"]), C["REPEATS"]),
           "## Results\n"]
    rows = []
    for n, s in results["summary"].items():
        share = s["worker_share"]
        rows.append([results["labels"].get(n, n), fmt(s["off"]["rows_per_s"]), fmt(s["on"]["rows_per_s"]),
                     "%.2f" % s["ratio"], fmt(s["off"]["foreground_rounds"]),
                     fmt(s["on"]["worker_rounds"]), fmt(s["on"]["foreground_rounds"]),
                     "-" if share is None else "%.0f %%" % (share * 100),
                     fmt(s["off"]["drain_s"], 2), fmt(s["on"]["drain_s"], 2),
                     fmt(s["off"]["consolidated_s"], 2), fmt(s["on"]["consolidated_s"], 2)])
    out.append(table(["structure", "rows/s, workers off", "rows/s, workers on", "on / off",
                      "rounds by the writer (off)", "rounds by the workers (on)",
                      "rounds by the writer (on)", "workers' share (on)", "VACUUM after (off) s",
                      "drain (on) s", "all consolidated (off) s", "all consolidated (on) s"], rows))
    out.append("\n![background consolidation](%s)\n" % os.path.basename(C["OUT_PNG"]))
    out.extend(notes_section("background_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
