#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md: each linked file exists, and each
#anchor is a heading of its file (GitHub's anchors: lower case, punctuation dropped, spaces to
hyphens). Usage: tools/check_doc_links.py [REPO_DIR]; exit 1 and a line per broken link."""
import os
import re
import sys

FENCE = re.compile(r"^\s*```")
HEADING = re.compile(r"^(#+) (.*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(text):
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def scan(path):
    """(anchors, links with line numbers) of a Markdown file, ignoring code blocks."""
    anchors, links, fence = set(), [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fence = not fence
                continue
            if fence:
                continue
            m = HEADING.match(line)
            if m:
                a = slug(m.group(2))
                k = 0
                while (a if k == 0 else "%s-%d" % (a, k)) in anchors:
                    k += 1
                anchors.add(a if k == 0 else "%s-%d" % (a, k))
            links += [(n, t) for t in LINK.findall(line)]
    return anchors, links


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    docs = [os.path.join(root, "README.md")]
    docs += sorted(os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
                   if f.endswith(".md"))
    scanned = {os.path.normpath(d): scan(d) for d in docs}
    bad = 0
    for doc, (anchors, links) in scanned.items():
        for n, target in links:
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(dest):
                print("%s:%d: %s: no such file" % (os.path.relpath(doc, root), n, target))
                bad += 1
            elif anchor:
                if dest not in scanned and dest.endswith(".md"):
                    scanned[dest] = scan(dest)
                if dest not in scanned or anchor not in scanned[dest][0]:
                    print("%s:%d: %s: no such heading" % (os.path.relpath(doc, root), n, target))
                    bad += 1
    total = sum(len(links) for _, links in scanned.values())
    print("%d links in %d files, %d broken" % (total, len(scanned), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
