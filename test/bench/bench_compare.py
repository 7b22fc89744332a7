"""
Before/after tables for a benchmark rerun: the results JSON of an earlier
run (kept as <results>.before-<label>.json) against the current one.  The
two runs are not interleaved (different days on a shared machine), so each
table also carries calibration rows, measurements that the change under
comparison does not touch (for example PostgreSQL's own heap and btree
baselines): how far those moved says how much of every other ratio is the
machine.
"""
import json
import os
import statistics

from benchlib import fmt, table


def before_path(out_json, label):
    root, ext = os.path.splitext(out_json)
    return f"{root}.before-{label}{ext}"


def load_before(out_json, label):
    p = before_path(out_json, label)
    return json.load(open(p)) if os.path.exists(p) else None


def _ratio(before, after, higher_better):
    if not before or not after:
        return None
    return after / before if higher_better else before / after


def section(title, intro, rows, calibration, threshold=0.90):
    """Markdown for rows of (configuration, measurement, before, after,
    higher_is_better, digits); calibration rows have the same shape.  The
    ratio column is AFTER/BEFORE as a throughput (BEFORE/AFTER for costs,
    where lower is better), bold below threshold."""
    def render(rs):
        out = []
        for conf, what, b, a, hb, dig in rs:
            r = _ratio(b, a, hb)
            rtxt = "-" if r is None else (f"**{r:.2f}**" if r < threshold else f"{r:.2f}")
            out.append([conf, what, fmt(b, dig) if b is not None else "-",
                        fmt(a, dig) if a is not None else "-", rtxt])
        return out

    head = ["configuration", "measurement", "BEFORE", "AFTER", "ratio (throughput; lower-is-better inverted)"]
    L = [f"## {title}\n", intro, "", table(head, render(rows)), ""]
    cal = [r for r in (_ratio(b, a, hb) for _, _, b, a, hb, _ in calibration) if r is not None]
    if calibration:
        L.append("Calibration (measurements the change does not touch; their spread is the machine's):\n")
        L.append(table(head, render(calibration)))
        L.append("")
        if cal:
            L.append(f"Calibration ratios: median {statistics.median(cal):.2f}, "
                     f"range {min(cal):.2f}-{max(cal):.2f}.\n")
    below = [(c, w, _ratio(b, a, hb)) for c, w, b, a, hb, _ in rows
             if _ratio(b, a, hb) is not None and _ratio(b, a, hb) < threshold]
    if below:
        L.append("Below " + f"{threshold:.2f}: " + "; ".join(f"{c} {w} {r:.2f}" for c, w, r in below) + ".\n")
    else:
        L.append(f"No ratio is below {threshold:.2f}.\n")
    return "\n".join(L)
