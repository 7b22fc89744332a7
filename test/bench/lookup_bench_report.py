"""
Report of the plain SQL lookup benchmark (lookup_bench.py):
docs/bench-lookup.md and a PNG (point query and 100-row join latency per
structure: SQL predicate, function, btree table).
"""
import os

from benchlib import fmt, notes_section, run_header, table

VARIANTS = ("SQL predicate", "function", "btree table")


def plot(results, C):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    structs = results["structs"]
    names = list(structs)
    fig, ax = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    w = 0.27
    for a, kind, title in ((ax[0], "points", "Point query (one key, or one time range)"),
                           (ax[1], "joins", "Join with a 100-row outer table")):
        for j, v in enumerate(VARIANTS):
            xs = [i + (j - 1) * w for i in range(len(names))]
            p50 = [structs[n][kind][v]["p50_us"] / 1000 for n in names]
            p99 = [structs[n][kind][v]["p99_us"] / 1000 for n in names]
            a.bar(xs, p50, w, label=f"{v} (p50; tick: p99)", color=f"C{j}")
            a.scatter(xs, p99, marker="_", s=300, color="black")
        a.set_xticks(range(len(names)), [structs[n]["label"].replace(": ", ":\n") for n in names],
                     fontsize=9)
        a.set_ylabel("latency (ms)")
        a.set_yscale("log")
        a.set_title(title)
        a.legend(fontsize=9)
        a.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Plain SQL lookups against the function and a btree table (in RAM, one client)",
                 fontsize=13)
    fig.savefig(C["OUT_PNG"], dpi=100)
    plt.close(fig)


def rows_of(structs, kind):
    rows = []
    for n, s in structs.items():
        r = s[kind]
        sql, fn, bt = (r[v] for v in VARIANTS)
        rows.append([s["label"]]
                    + ["%s / %s" % (fmt(r[v]["p50_us"]), fmt(r[v]["p99_us"])) for v in VARIANTS]
                    + ["%.2f" % (sql["p50_us"] / fn["p50_us"]), "%.2f" % (sql["p50_us"] / bt["p50_us"])]
                    + [fmt(r[v]["pages"], 1) for v in VARIANTS]
                    + [" > ".join(sql["plan"])])
    return rows


def report(results, C):
    C = dict(results.get("config", {}), **{k: v for k, v in C.items() if k.startswith("OUT_")})
    out = ["# Plain SQL lookup benchmark\n",
           run_header(results, "lookup_bench"),
           "Each structure and a heap table with a btree index holding the same answer are loaded "
           "from one stream of %s rows (a cbt of %s groups and its upsert table; a lert with threshold "
           "24 over a Zipf-like stream and a table of its reported keys; the same lert's exact counts "
           "through a view over `lert_counts` and a table of the counts; a bfile whose sample holds "
           "every row and a table of the rows indexed by time). Everything is in RAM "
           "(shared_buffers %s MB). *Latency*: pgbench, one client, prepared statements, a random key "
           "(or range start) per query, %s point queries and %s joins per variant; p50 / p99 in "
           "microseconds, client round trip included. *Pages*: shared buffers hit + read per query "
           "(EXPLAIN ANALYZE BUFFERS of the top plan node, planning excluded), mean over %s queries. "
           "The joins' answers are checked equal across the three variants.\n"
           % (fmt(C["ROWS"]), fmt(C["KEYS"]), fmt(C["SB_MB"]), fmt(C["QUERIES"]), fmt(C["JOINS"]),
              fmt(C["EXPLAINS"])),
           "## Point queries\n"]
    header = ["structure"] + [f"{v} p50 / p99 us" for v in VARIANTS] + [
        "SQL / function (p50)", "SQL / btree (p50)"] + [f"{v} pages" for v in VARIANTS] + [
        "plan of the SQL predicate"]
    out.append(table(header, rows_of(results["structs"], "points")))
    out.append("\n## Join with a 100-row outer table\n")
    out.append(table(header, rows_of(results["structs"], "joins")))
    out.append("\n![plain SQL lookups](%s)\n" % os.path.basename(C["OUT_PNG"]))
    out.extend(notes_section("lookup_bench_notes.md"))
    with open(C["OUT_MD"], "w") as f:
        f.write("\n".join(out) + "\n")
    plot(results, C)
