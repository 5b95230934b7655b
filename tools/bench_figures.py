#!/usr/bin/env python3
"""The docs' performance figures, generated from one kept `vkattn bench --json` run.

    tools/bench_figures.py record [--vkattn build/vkattn] [--out docs/bench/NAME.json] -- BENCH_ARGS
        runs `vkattn bench --json BENCH_ARGS` (with OPENBLAS_CORETYPE=Haswell unless set) and keeps
        its document with the machine, the date, the commit and the load around it
    tools/bench_figures.py [--check] [--data docs/bench/NAME.json] [FILES...]
        rewrites every marked region `<!-- bench:NAME -->` ... `<!-- /bench -->` of README.md and
        docs/*.md from the kept run; with --check, changes nothing and exits 1 (naming the file
        and region) where a region differs from what would be generated

A figure in the docs either sits in such a region or is not a performance figure (ctest
`bench_figures` runs --check). Pure Python 3, standard library only.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(ROOT, "docs", "bench", "lavapipe-epyc-2core.json")
REGION = re.compile(r"(<!-- bench:([a-z0-9_-]+) -->\n)(.*?)(<!-- /bench -->)", re.S)


# --- record ------------------------------------------------------------------------------------

def _loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def _machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_bytes": mem, "os": platform.platform()}


def record(args):
    env = dict(os.environ)
    env.setdefault("OPENBLAS_CORETYPE", "Haswell")
    cmd = [args.vkattn, "bench", "--json"] + args.bench_args
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    load0 = _loadavg()
    start = datetime.datetime.now(datetime.timezone.utc)
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        sys.stderr.write("bench_figures: %s exited %d\n" % (" ".join(cmd), run.returncode))
        return 1
    kept = {
        "machine": _machine(),
        "date": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit + ("-dirty" if dirty else ""),
        "load": {"before": load0, "after": _loadavg(),
                 "note": "load average (1, 5, 15 min) of the host around the run"},
        "command": "vkattn bench --json " + " ".join(args.bench_args),
        "env": {k: env[k] for k in ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")
                if k in env},
        "bench": json.loads(run.stdout),
    }
    tmp = args.out + ".tmp"  # written whole, then renamed over the kept run
    with open(tmp, "w") as f:
        json.dump(kept, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, args.out)
    print("bench_figures: kept %s (%s, %.0f s)" % (args.out, kept["commit"],
                                                    kept["bench"].get("seconds", 0)))
    return 0


# --- the figures --------------------------------------------------------------------------------

def num(x):
    """A figure as the docs show it: 3 significant digits, no exponent."""
    if x is None:
        return "—"
    a = abs(x)
    if a >= 100:
        return "%.0f" % x
    if a >= 10:
        return "%.1f" % x
    if a >= 1:
        return "%.2f" % x
    return "%.3f" % x


class Kept:
    def __init__(self, doc, path):
        self.doc, self.path = doc, os.path.relpath(path, ROOT)
        self.bench = doc["bench"]
        self.cases = {c["id"]: c for c in self.bench["cases"]}
        self.backends = {b["backend"]: b for b in self.bench["backends"]}

    def case(self, cid):
        if cid not in self.cases:
            raise KeyError("%s has no case %s (run `record` with a --filter covering it)"
                           % (self.path, cid))
        return self.cases[cid]

    def res(self, cid, be):
        r = self.case(cid)["results"].get(be)
        return r if r and r.get("status") == "ok" else None

    def ms(self, cid, be, host=False):
        r = self.res(cid, be)
        return r and r["host_ms_median" if host else "ms_median"]

    def order(self):
        return [b for b in ("vulkan", "cpu") if b in self.backends]

    def name(self, be):
        b = self.backends[be]
        if be == "cpu":
            return "CPU backend (%d threads)" % b["threads"]
        return "Vulkan on %s" % b["device"].split(" (")[0]


def source_line(k):
    d = k.doc
    load = d["load"]
    b = k.backends.get("cpu") or next(iter(k.backends.values()))
    return ("From [`%s`](%s): `%s` on %s (%d CPUs), %s, commit `%s`, load average %s before and "
            "%s after, %s build (`%s`), %s." % (
                os.path.basename(k.path), "%s", d["command"], d["machine"]["cpu"],
                d["machine"]["cpus"], d["date"], d["commit"][:7],
                " / ".join("%.2f" % x for x in load["before"] or []),
                " / ".join("%.2f" % x for x in load["after"] or []),
                b["build_type"], b["build_flags"],
                ", ".join("%s=%s" % kv for kv in sorted(d["env"].items())) or "no BLAS settings"))


def link_to_data(k, doc_path):
    return os.path.relpath(os.path.join(ROOT, k.path), os.path.dirname(doc_path))


def r_source(k, doc):
    return source_line(k) % link_to_data(k, doc) + "\n"


def r_ceilings(k, doc):
    out = ["| backend | FMA, as built | processor FMA peak | copy | how the copy was measured |",
           "|---|---|---|---|---|"]
    for be in k.order():
        c = k.backends[be]["ceilings"]
        hw = c.get("hw_fma_gflops")
        how = "%s MB per buffer (last-level cache %s MB), best of %d passes, source %s" % (
            num(c["copy_mbytes"]), num(c.get("llc_mbytes")), c.get("copy_passes") or 0,
            "written first" if c.get("copy_source_written") else "NOT written")
        out.append("| %s | %s GFLOP/s | %s | %s GB/s | %s |" % (
            k.name(be), num(c["built_fma_gflops"]),
            "%s GFLOP/s (%s)" % (num(hw), c.get("hw_isa")) if hw else "—",
            num(c["copy_gbps"]), how))
    return "\n".join(out) + "\n"


KERNELS = ["matmul/square.1024/forward", "matmul/default.qkv/forward",
           "attention/default/forward", "attention/default/backward", "softmax/T1024/forward",
           "softmax/T1024/backward", "layernorm/default/forward", "adamw/default/update",
           "model/default.B12.T64/train_step"]


def r_kernels(k, doc):
    bes = k.order()
    head = "| case | shape | " + " | ".join("%s: ms, rate, %% of ceiling" % k.name(b) for b in bes)
    out = [head + " |", "|---|---|" + "---|" * len(bes)]
    for cid in KERNELS:
        c = k.case(cid)
        cells = []
        for be in bes:
            r = k.res(cid, be)
            if not r:
                cells.append("skipped")
                continue
            unit = "GF/s" if r["throughput_unit"] == "GFLOP/s" else "GB/s"
            cells.append("%s ms, %s %s, %s%%" % (num(r["ms_median"]), num(r["throughput"]), unit,
                                                  num(r["percent_of_ceiling"])))
        out.append("| `%s` | %s | %s |" % (cid, c["shape"], " | ".join(cells)))
    return "\n".join(out) + "\n"


def r_train_step(k, doc):
    cid = "model/default.B12.T64/train_step"
    parts = []
    for be in k.order():
        r = k.res(cid, be)
        if r:
            parts.append("%s %s ms per step (%s tokens/s)" % (
                k.name(be), num(r["ms_median"]), num(r["tokens_per_s"])))
    return "; ".join(parts) + "\n"


def r_generate(k, doc):
    rows = [("default (L4 C128)", "default"), ("GPT-2 small (L12 C768, V 50257)",
                                               "gpt2-small-V50257")]
    out = ["| model, backend | KV cache, per token, prompt 64 / 1000 |", "|---|---|"]
    for label, name in rows:
        for be in k.order():
            v = [k.ms("generate/%s.P%d/kv_cache" % (name, p), be, host=True) for p in (64, 1000)]
            out.append("| %s, %s | %s / %s ms |" % (label, k.name(be), num(v[0]), num(v[1])))
    return "\n".join(out) + "\n"


def r_attention(k, doc):
    bes = k.order()
    out = ["| T | " + " | ".join("fused, %s | composed, %s" % (k.name(b), k.name(b))
                                 for b in bes) + " |",
           "|---|" + "---|---|" * len(bes)]
    for T in (1024,):
        cells = []
        for be in bes:
            for kind in ("fused", "composed"):
                f = k.ms("attention/%s.T%d/forward" % (kind, T), be)
                b = k.ms("attention/%s.T%d/backward" % (kind, T), be)
                cells.append("%s / %s" % (num(f), num(b)))
        out.append("| %d | %s |" % (T, " | ".join(cells)))
    return "\n".join(out) + "\n"


def r_gpt2(k, doc):
    bes = k.order()
    out = ["| `vkattn bench` case | " + " | ".join(k.name(b) for b in bes) + " |",
           "|---|" + "---|" * len(bes)]
    gen = ["/".join(num(k.ms("generate/gpt2-small-V50257.P%d/kv_cache" % p, b, host=True))
                    for p in (64, 1000)).replace("/", " / ") + " ms" for b in bes]
    out.append("| `generate/gpt2-small-V50257.P64` / `.P1000` `/kv_cache`: a new token, KV cache, "
               "prompt 64 / 1000 | " + " | ".join(gen) + " |")
    cid = "model/gpt2-small-V50257.B4.T64/train_step"
    step = []
    for b in bes:
        r = k.res(cid, b)
        step.append("%s ms" % num(r["ms_median"]) if r else "skipped")
    out.append("| `%s`: a training step, B=4 T=64 (what `train --init` runs) | %s |"
               % (cid, " | ".join(step)))
    return "\n".join(out) + "\n"


RENDER = {"source": r_source, "ceilings": r_ceilings, "kernels": r_kernels,
          "train-step": r_train_step, "generate": r_generate, "attention": r_attention,
          "gpt2": r_gpt2}


# A measured rate, or a time per step or token, written by hand: it belongs in a region.
FIGURE = re.compile(r"\b\d[\d.,]*\s?(GFLOP/s|GF/s|GB/s|tokens/s|tok/s|ms per (step|token|frame)"
                    r"|ms/(step|token))")


def stray_figures(text):
    """(line number, text) of each figure outside the marked regions."""
    out = []
    bare = REGION.sub(lambda m: m.group(1) + "\n" * m.group(3).count("\n") + m.group(4), text)
    for i, line in enumerate(bare.split("\n"), 1):
        if FIGURE.search(line):
            out.append((i, line.strip()))
    return out


def doc_files():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def rewrite(a):
    with open(a.data) as f:
        k = Kept(json.load(f), a.data)
    bad = 0
    for path in [os.path.abspath(p) for p in a.files] or doc_files():
        with open(path) as f:
            text = f.read()

        def sub(m):
            nonlocal bad
            name = m.group(2)
            if name not in RENDER:
                sys.stderr.write("%s: unknown region bench:%s\n" % (path, name))
                bad += 1
                return m.group(0)
            want = RENDER[name](k, path)
            if want != m.group(3):
                if a.check:
                    sys.stderr.write("%s: region bench:%s differs from %s (run "
                                     "tools/bench_figures.py)\n--- in the file:\n%s--- generated:\n"
                                     "%s" % (os.path.relpath(path, ROOT), name, k.path,
                                             m.group(3), want))
                    bad += 1
            return m.group(1) + want + m.group(4)

        new = REGION.sub(sub, text)
        for line, what in stray_figures(new):
            sys.stderr.write("%s:%d: a performance figure outside a bench region (generate it "
                             "or remove it): %s\n" % (os.path.relpath(path, ROOT), line, what))
            bad += 1
        if new != text and not a.check:
            with open(path + ".tmp", "w") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
            print("bench_figures: rewrote %s" % os.path.relpath(path, ROOT))
    return 1 if bad else 0


# --- main ---------------------------------------------------------------------------------------

def main(argv):
    if argv and argv[0] == "record":
        p = argparse.ArgumentParser(prog="bench_figures.py record")
        p.add_argument("--vkattn", default=os.path.join(ROOT, "build", "vkattn"))
        p.add_argument("--out", default=DEFAULT_DATA)
        p.add_argument("bench_args", nargs="*")
        return record(p.parse_args(argv[1:]))
    p = argparse.ArgumentParser(prog="bench_figures.py")
    p.add_argument("--check", action="store_true")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("files", nargs="*")
    a = p.parse_args(argv)
    return rewrite(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
