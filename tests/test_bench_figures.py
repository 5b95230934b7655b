#!/usr/bin/env python3
"""tools/bench_figures.py --check: the docs' figures are what the kept bench run gives, and the
check fails on a changed figure, on a region it does not know and on a rate written by hand
outside a region. Pure Python: no bench is run."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "bench_figures.py")


def check(*files):
    return subprocess.run([sys.executable, TOOL, "--check"] + list(files), capture_output=True,
                          text=True)


def expect_failure(tmp, name, text, why):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    r = check(path)
    if r.returncode == 0:
        sys.exit("test_bench_figures: --check passed %s (%s)" % (name, why))
    print("ok: %s fails: %s" % (name, r.stderr.strip().splitlines()[0]))


def main():
    r = check()
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit("test_bench_figures: the docs differ from docs/bench/ (run tools/bench_figures.py)")
    print("ok: README.md and docs/*.md match the kept run")
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        doc = f.read()
    start = doc.index("<!-- bench:kernels -->")
    end = doc.index("<!-- /bench -->", start) + len("<!-- /bench -->")
    region = doc[start:end] + "\n"
    first = region.index("\n") + 1
    digit = next(i for i in range(first, len(region)) if region[i].isdigit())
    changed = region[:digit] + ("1" if region[digit] != "1" else "2") + region[digit + 1:]
    tmp = tempfile.mkdtemp()
    try:
        same = os.path.join(tmp, "same.md")
        with open(same, "w") as f:
            f.write(region)
        r = check(same)
        if r.returncode != 0:
            sys.exit("test_bench_figures: the kernels region alone fails --check:\n" + r.stderr)
        print("ok: the kernels region alone passes")
        expect_failure(tmp, "changed.md", changed, "a figure changed")
        expect_failure(tmp, "unknown.md", "<!-- bench:nonesuch -->\n<!-- /bench -->\n",
                       "an unknown region")
        expect_failure(tmp, "stray.md", "The matmul ran at 12.5 GFLOP/s here.\n",
                       "a rate outside a region")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
