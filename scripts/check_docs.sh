#!/usr/bin/env bash
# scripts/check_docs.sh -- checks README.md and docs/ against the tree:
#
#   1. every Markdown link or image of README.md and docs/*.md that points
#      to a file of the repository points to one that exists (and, for a
#      link with #anchor into a Markdown file, to a heading that exists);
#   2. no "issue N" (any case) in README.md or docs/: user-facing text does
#      not refer to the project's issue numbers;
#   3. every function and aggregate that sql/parts/*.sql creates is named
#      somewhere in README.md or docs/ (type I/O and aggregate support
#      functions and planner support functions, whose names end in _in,
#      _out, _recv, _send, _handler, _support,
#      _trans, _combine, _serial, _deserial or _final, are not required);
#   4. every file under docs/ (pages and plots) is linked from README.md or
#      from another page under docs/.
#
# Prints what is wrong and exits 1 if anything is; exits 0 otherwise.
# Usage: bash scripts/check_docs.sh      (from anywhere; needs python3)
set -euo pipefail

SS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

exec python3 - "$SS_ROOT" <<'PY'
import os
import re
import sys
import unicodedata

root = sys.argv[1]
os.chdir(root)

problems = []

pages = ["README.md"] + sorted(
    os.path.join(dp, f)
    for dp, _, fs in os.walk("docs")
    for f in fs
    if f.endswith(".md"))
docs_files = sorted(
    os.path.normpath(os.path.join(dp, f))
    for dp, _, fs in os.walk("docs")
    for f in fs)

text = {}
for p in pages:
    with open(p, encoding="utf-8") as fh:
        text[p] = fh.read()


def strip_code(s):
    """The text without fenced code blocks and inline code spans."""
    s = re.sub(r"^```.*?^```[ \t]*$", "", s, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", s)


def slug(heading):
    """GitHub's anchor for a heading."""
    h = heading.strip().lower()
    h = re.sub(r"`", "", h)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)      # links: their text
    out = []
    for ch in h:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LN":
            out.append(ch)
    return "".join(out).replace(" ", "-")


anchors = {}


def anchors_of(path):
    if path not in anchors:
        found = set()
        seen = {}
        with open(path, encoding="utf-8") as fh:
            body = fh.read()
        body = re.sub(r"^```.*?^```[ \t]*$", "", body, flags=re.S | re.M)
        for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", body, re.M):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else "%s-%d" % (s, n))
        for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', body):
            found.add(m.group(1))
        anchors[path] = found
    return anchors[path]


# 1. links to missing files or headings
link_re = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
linked = set()
for p in pages:
    body = strip_code(text[p])
    for m in link_re.finditer(body):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue                    # http:, https:, mailto: ...
        path, _, anchor = target.partition("#")
        if path == "":
            dest = p
        else:
            dest = os.path.normpath(os.path.join(os.path.dirname(p), path))
        line = text[p].count("\n", 0, text[p].find(m.group(0))) + 1 \
            if text[p].find(m.group(0)) >= 0 else 0
        if not os.path.exists(dest):
            problems.append("%s:%d: link to a missing file: %s" % (p, line, target))
            continue
        linked.add(dest)
        if anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
            problems.append("%s:%d: link to a missing heading: %s" % (p, line, target))

# 2. issue numbers
issue_re = re.compile(r"issue\s*#?\s*[0-9]", re.I)
for p in pages:
    for n, line in enumerate(text[p].split("\n"), 1):
        for m in issue_re.finditer(line):
            problems.append("%s:%d: names an issue number: %s" % (p, n, line.strip()))

# 3. functions nobody documents
skip = re.compile(r"_(in|out|recv|send|handler|support|trans|combine|serial|deserial|final)$")
fn_re = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|AGGREGATE)\s+"
                   r"(?:[A-Za-z_][A-Za-z0-9_]*\.)?\"?([A-Za-z_][A-Za-z0-9_]*)", re.I)
functions = set()
sqldir = os.path.join("sql", "parts")
for f in sorted(os.listdir(sqldir)):
    if f.endswith(".sql"):
        with open(os.path.join(sqldir, f), encoding="utf-8") as fh:
            sql = fh.read()
        sql = re.sub(r"--[^\n]*", "", sql)
        sql = re.sub(r"/\*.*?\*/", "", sql, flags=re.S)
        for m in fn_re.finditer(sql):
            functions.add(m.group(1).lower())
alltext = "\n".join(text.values()).lower()
for name in sorted(functions):
    if skip.search(name):
        continue
    if not re.search(r"(?<![a-z0-9_])%s(?![a-z0-9_])" % re.escape(name), alltext):
        problems.append("sql/parts: function %s is documented nowhere in README.md or docs/" % name)

# 4. files under docs/ that nothing links to
for f in docs_files:
    if f not in linked:
        problems.append("%s: linked from nowhere (README.md or docs/)" % f)

for pr in problems:
    print(pr)
if problems:
    print("check_docs: %d problem(s)" % len(problems))
    sys.exit(1)
print("check_docs: README.md and %d docs pages OK (%d functions, %d files under docs/)"
      % (len(pages) - 1, len(functions), len(docs_files)))
PY
