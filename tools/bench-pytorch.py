#!/usr/bin/python3
"""The PyTorch side of `vkattn bench`: the same matmul and masked-softmax cases and the same
GPT forward passes and training steps, run by PyTorch on the CPU, printed as the same JSON
(schema vkattn-bench/1, backend "pytorch"), so the two can be laid side by side.

Run it with a Python that has torch (Debian's python3-torch is at /usr/bin/python3; the
`python3` first on PATH may be another one without it):

    build/vkattn bench --json > vkattn.json
    /usr/bin/python3 tools/bench-pytorch.py > pytorch.json
    /usr/bin/python3 tools/bench-pytorch.py --compare vkattn.json pytorch.json

The cases have vkattn's ids, shapes and work formulas (docs/benchmarks.md): the square
matmuls and the default model's linear layers (forward: out = inp . W^T + b; backward:
dinp = dout . W and dW += dout^T . inp), the causal softmax of B*NH (T, T) matrices with scale
1/8 (forward: softmax(mask(scale * x)); backward: dinp += scale * softmax_backward(dout, out)),
and whole models: GPT-2 as llm.c writes it (pre-LN blocks, fused qkv, GELU(tanh), LM head tied
to wte), initialised as GPT-2 (weights N(0, 0.02), biases 0), a forward pass with the mean
cross-entropy, and a training step (zero the gradients, forward, backward, clip the global
gradient norm to 1, AdamW with lr 1e-4, betas (0.9, 0.99), weight decay 0.1 on the 2-D
weights) -- the step `vkattn train` takes. Times are host wall times (PyTorch's CPU ops are
synchronous): warm-up runs, then the median of up to --runs timed runs, fewer once the case's
time budget is spent, with the counts and budgets vkattn bench uses (PLANS, as set_mode in
tools/cmd_bench.c sets them).
"""
import argparse
import fnmatch
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time

SCHEMA = "vkattn-bench/1"

# vkattn bench's tables (tools/bench_cases.c, tools/bench_model.c)
MODELS = {
    "default": dict(L=4, NH=4, C=128, V=65),
    "gpt2-small": dict(L=12, NH=12, C=768, V=65),
    "gpt2-small-V50257": dict(L=12, NH=12, C=768, V=50257),
}
SHAPES = [("default", 12, 64, True), ("gpt2-small", 4, 256, False)]  # (model, B, T, quick)
LINEARS = [("qkv", 3, 1), ("attproj", 1, 1), ("fc", 4, 1), ("fcproj", 1, 4)]  # OC, IC in C
SQUARES = [(256, True), (512, True), (1024, True), (2048, False), (4096, False)]
SOFTMAX_T = [(64, True), (128, False), (256, True), (512, False), (1024, True), (2048, False)]
ATTENTION_T = [(64, True), (256, True), (1024, False), (4096, False)]  # B*T 4096, NH 4, HS 64
MODEL_CASES = [  # (model, B, T, quick forward, quick train step)
    ("default", 12, 64, True, True), ("default", 48, 64, False, False),
    ("default", 12, 256, False, False), ("gpt2-small", 1, 64, True, False),
    ("gpt2-small", 4, 256, False, False), ("gpt2-small", 8, 1024, False, False),
    ("gpt2-small", 4, 64, False, False), ("gpt2-small-V50257", 4, 64, False, False),
    ("gpt2-small-V50257", 4, 256, False, False),
]
# bf16 mixed precision (vkattn's ".bf16" rows): torch.autocast("cpu", dtype=torch.bfloat16)
# around the forward pass, as its users write it (no GradScaler: bf16 has float32's range)
BF16_CASES = [("default", 12, 64, False, True), ("gpt2-small", 1, 64, False, False),
              ("gpt2-small", 4, 64, False, False), ("gpt2-small", 1, 1024, False, False)]


# vkattn bench's plans (tools/cmd_bench.c set_mode): warm-up runs (vkattn's check run
# included), timed runs at least and at most, and the budget after which the timed runs stop
# once min_runs are done.
PLANS = {
    "quick": {"kernels": dict(warmup=1, min_runs=3, max_runs=50, budget_s=0.25),
              "models": dict(warmup=1, min_runs=1, max_runs=3, budget_s=1.0)},
    "full": {"kernels": dict(warmup=3, min_runs=5, max_runs=200, budget_s=2.0),
             "models": dict(warmup=2, min_runs=3, max_runs=10, budget_s=10.0)},
}


def padded(v):
    return (v + 127) // 128 * 128


def softmax_bnh(t):
    return max(1, min(48, (1 << 22) // (t * t)))


# ----------------------------------------------------------------------------------------------
# Cases: each is a dict with vkattn's fields and a setup() returning (run, state): the function
# to time and a dict it fills (a model's "loss"; empty for the kernels)
# ----------------------------------------------------------------------------------------------
def case(kind, name, pass_, shape, bound, flop, nbytes, setup, **extra):
    c = dict(id=f"{kind}/{name}/{pass_}", kind=kind, name=name, pass_=pass_, shape=shape,
             bound=bound, flop=flop if flop > 0 else None, bytes=nbytes if nbytes > 0 else None,
             setup=setup)
    c.update(extra)
    return c


def rand(torch, *shape):
    return torch.rand(*shape) * 2 - 1


def square_case(torch, n):
    def setup():
        a, b, out = rand(torch, n, n), rand(torch, n, n), torch.empty(n, n)
        return lambda: torch.matmul(a, b, out=out), {}
    return case("matmul", f"square.{n}", "forward", f"M={n} N={n} K={n}", "compute",
                2.0 * n * n * n, 4.0 * 3 * n * n, setup)


def linear_cases(torch, name, bt, ic, oc, bias):
    def fwd():
        inp, w, b = rand(torch, bt, ic), rand(torch, oc, ic), rand(torch, oc)
        out = torch.empty(bt, oc)
        if bias:
            return lambda: torch.addmm(b, inp, w.t(), out=out), {}
        return lambda: torch.matmul(inp, w.t(), out=out), {}

    def bwd():
        dout, w, inp = rand(torch, bt, oc), rand(torch, oc, ic), rand(torch, bt, ic)
        dinp, dw = torch.empty(bt, ic), rand(torch, oc, ic)

        def run():
            torch.matmul(dout, w, out=dinp)
            dw.addmm_(dout.t(), inp)
        return run, {}
    BT, IC, OC = float(bt), float(ic), float(oc)
    return [
        case("matmul", name, "forward", f"BT={bt} IC={ic} OC={oc}{' +bias' if bias else ''}",
             "compute", 2 * BT * IC * OC,
             4 * (BT * IC + OC * IC + BT * OC + (OC if bias else 0)), fwd),
        case("matmul", name, "backward", f"BT={bt} IC={ic} OC={oc}", "compute", 4 * BT * IC * OC,
             4 * (BT * OC + 3 * OC * IC + 2 * BT * IC), bwd),
    ]


def softmax_cases(torch, t):
    bnh = softmax_bnh(t)
    scale = 0.125
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)

    def fwd():
        x = rand(torch, bnh, t, t) * 4
        return lambda: torch.softmax((x * scale).masked_fill_(mask, float("-inf")), dim=-1), {}

    def bwd():
        dinp, dout = rand(torch, bnh, t, t), rand(torch, bnh, t, t)
        out = torch.softmax(rand(torch, bnh, t, t), dim=-1)
        return lambda: dinp.add_(torch._softmax_backward_data(dout, out, -1, torch.float32),
                                 alpha=scale), {}
    rows, half = float(bnh) * t, float(bnh) * t * (t + 1) / 2
    shape = f"B*NH={bnh} T={t} causal"
    return [case("softmax", f"T{t}", "forward", shape, "memory", 0, 4 * (half + rows * t), fwd),
            case("softmax", f"T{t}", "backward", shape, "memory", 0, 16 * rows * t, bwd)]


def attention_cases(torch, F, t):
    """vkattn's fused attention rows (attention/fused.T*/...): causal self-attention of
    B = 4096 / t sequences, NH 4, HS 64, as PyTorch users write it: q, k, v split from one
    (B, T, 3C) projection and viewed as (B, NH, T, HS), F.scaled_dot_product_attention with
    is_causal=True (PyTorch's fused kernel), out back to (B, T, C). Work counted as vkattn
    counts it (4 B NH T^2 HS forward, twice that backward)."""
    B, NH, HS = 4096 // t, 4, 64
    C = NH * HS
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0
        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:  # PyTorch 1.13 (Debian 12): the same op, not yet public
        def sdpa(q, k, v):
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]

    def heads(x):
        return x.view(B, t, NH, HS).transpose(1, 2)

    def fwd():
        qkv = rand(torch, B, t, 3 * C)

        def run():
            with torch.no_grad():
                q, k, v = qkv.split(C, dim=2)
                out = sdpa(heads(q), heads(k), heads(v))
                out.transpose(1, 2).reshape(B, t, C)
        return run, {}

    def bwd():
        qkv = rand(torch, B, t, 3 * C).requires_grad_(True)
        q, k, v = qkv.split(C, dim=2)
        out = sdpa(heads(q), heads(k), heads(v))
        out = out.transpose(1, 2).reshape(B, t, C)
        dout = rand(torch, B, t, C)

        def run():
            qkv.grad = None
            torch.autograd.backward(out, dout, retain_graph=True)
        return run, {}
    flop = 4.0 * B * NH * t * t * HS
    btc, bnht = float(B) * t * C, float(B) * NH * t
    shape = f"B={B} T={t} NH={NH} HS={HS} fused"
    return [case("attention", f"fused.T{t}", "forward", shape, "compute", flop,
                 4 * (4 * btc + bnht), fwd),
            case("attention", f"fused.T{t}", "backward", shape, "compute", 2 * flop,
                 4 * (9 * btc + bnht), bwd)]


# ----------------------------------------------------------------------------------------------
# The model (llm.c's GPT-2, as tools/make_reference.py and vkattn write it)
# ----------------------------------------------------------------------------------------------
def gpt_model(torch, F, L, NH, C, V, T, seed=1337):
    """GPT-2 as a PyTorch user writes it: an nn.Module per block, one Parameter per weight of
    each layer. (Stacking a kind of weight of all layers in one (L, ...) tensor, as an earlier
    version did, makes autograd zero-fill and add a full (L, ...) gradient for every layer's
    slice: 3.5x slower at GPT-2 small, same losses.) Initialised in llm.c's order of draws."""
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    vp = padded(V)

    def normal(*shape):
        return nn.Parameter(torch.randn(*shape, generator=gen) * 0.02)

    def zeros(n):
        return nn.Parameter(torch.zeros(n))

    def ones(n):
        return nn.Parameter(torch.ones(n))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1w, self.ln1b = ones(C), zeros(C)
            self.qkvw, self.qkvb = normal(3 * C, C), zeros(3 * C)
            self.attprojw, self.attprojb = normal(C, C), zeros(C)
            self.ln2w, self.ln2b = ones(C), zeros(C)
            self.fcw, self.fcb = normal(4 * C, C), zeros(4 * C)
            self.fcprojw, self.fcprojb = normal(C, 4 * C), zeros(C)

        def forward(self, h, mask):
            b, t, _ = h.shape
            hs = C // NH
            a = F.layer_norm(h, (C,), self.ln1w, self.ln1b, eps=1e-5)
            qkv = F.linear(a, self.qkvw, self.qkvb)
            q, k, v = (z.view(b, t, NH, hs).transpose(1, 2) for z in qkv.split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            a = (att @ v).transpose(1, 2).contiguous().view(b, t, C)
            h = h + F.linear(a, self.attprojw, self.attprojb)
            m = F.layer_norm(h, (C,), self.ln2w, self.ln2b, eps=1e-5)
            m = F.gelu(F.linear(m, self.fcw, self.fcb), approximate="tanh")
            return h + F.linear(m, self.fcprojw, self.fcprojb)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = normal(vp, C), normal(T, C)
            with torch.no_grad():
                self.wte[V:] = 0.0
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.lnfw, self.lnfb = ones(C), zeros(C)

        def forward(self, x, y):
            t = x.shape[1]
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            h = self.wte[x] + self.wpe[:t]
            for block in self.blocks:
                h = block(h, mask)
            h = F.layer_norm(h, (C,), self.lnfw, self.lnfb, eps=1e-5)
            logits = h @ self.wte.t()
            return F.cross_entropy(logits[..., :V].reshape(-1, V), y.reshape(-1))
    return GPT()


def forward_flop(L, C, V, B, T):
    """vkattn bench's count: the matmuls of a forward pass (tools/bench_model.c)."""
    bt = float(B) * T
    return bt * (24.0 * L * C * C + 2.0 * C * padded(V)) + 4.0 * B * L * float(T) * T * C


def model_case(torch, F, model, B, T, train, bf16=False):
    cfg = MODELS[model]
    L, NH, C, V = cfg["L"], cfg["NH"], cfg["C"], cfg["V"]

    def setup():
        model = gpt_model(torch, F, L, NH, C, V, T)
        gen = torch.Generator().manual_seed(B * 1000 + T)
        x = torch.randint(0, V, (B, T), generator=gen)
        y = torch.randint(0, V, (B, T), generator=gen)
        state = {}

        def forward():
            if not bf16:
                return model(x, y)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return model(x, y)
        if not train:
            def run():
                with torch.no_grad():
                    state["loss"] = forward().item()
            return run, state
        # weight decay on the 2-D weights (wte, wpe and the blocks' matrices), as vkattn train
        params = list(model.parameters())
        opt = torch.optim.AdamW(
            [{"params": [t for t in params if t.dim() == 2], "weight_decay": 0.1},
             {"params": [t for t in params if t.dim() != 2], "weight_decay": 0.0}],
            lr=1e-4, betas=(0.9, 0.99), eps=1e-8)

        def run():
            opt.zero_grad(set_to_none=True)
            loss = forward()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            state.setdefault("loss", loss.item())
        return run, state
    vp = padded(V)
    params = vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    name = f"{model}.B{B}.T{T}" + (".bf16" if bf16 else "")
    return case("model", name, "train_step" if train else "forward",
                f"L={L} NH={NH} C={C} V={V} B={B} T={T}", "compute",
                forward_flop(L, C, V, B, T) * (3 if train else 1), 0, setup,
                model=dict(name=model, L=L, NH=NH, C=C, V=V, Vp=vp, max_T=T, params=params),
                B=B, T=T, tokens=B * T)


def all_cases(torch, F, quick):
    cases = [square_case(torch, n) for n, q in SQUARES if q or not quick]
    for model, B, T, q in SHAPES:
        if quick and not q:
            continue
        m = MODELS[model]
        for layer, oc, ic in LINEARS:
            cases += linear_cases(torch, f"{model}.{layer}", B * T, ic * m["C"], oc * m["C"], True)
        cases += linear_cases(torch, f"{model}.lm_head", B * T, m["C"], padded(m["V"]), False)
    if not quick:
        m = MODELS["gpt2-small-V50257"]
        cases += linear_cases(torch, "gpt2-small-V50257.lm_head", 1024, m["C"], padded(m["V"]),
                              False)
    for t, q in SOFTMAX_T:
        if q or not quick:
            cases += softmax_cases(torch, t)
    for t, q in ATTENTION_T:
        if q or not quick:
            cases += attention_cases(torch, F, t)
    for bf16, table in ((False, MODEL_CASES), (True, BF16_CASES)):
        for model, B, T, qf, qt in table:
            for train, q in ((False, qf), (True, qt)):
                if q or not quick:
                    cases.append(model_case(torch, F, model, B, T, train, bf16))
    return cases


# ----------------------------------------------------------------------------------------------
# Timing and output
# ----------------------------------------------------------------------------------------------
def measure(run, warmup, min_runs, max_runs, budget):
    for _ in range(warmup):
        run()
    times, spent = [], 0.0
    while len(times) < max_runs and (len(times) < min_runs or spent < budget):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        times.append(dt * 1e3)
        spent += dt
    return times


def result(c, times, state):
    med = statistics.median(times)
    compute = c["bound"] == "compute"
    rate = (c["flop"] if compute else c["bytes"]) / (med * 1e6)
    r = dict(status="ok", runs=len(times), ms_median=med, ms_min=min(times), ms_max=max(times),
             host_ms_median=med)
    if c["flop"]:
        r["gflops"] = c["flop"] / (med * 1e6)
    if c["bytes"]:
        r["gbps"] = c["bytes"] / (med * 1e6)
    r.update(throughput=rate, throughput_unit="GFLOP/s" if compute else "GB/s", ceiling=None,
             percent_of_ceiling=None, check="unchecked")
    if "tokens" in c:
        r["tokens_per_s"] = c["tokens"] / (med * 1e-3)
        r["loss"] = state.get("loss")
    return r


def selected(c, patterns):
    if not patterns:
        return True
    for pat in patterns:
        if any(ch in pat for ch in "*?[") and fnmatch.fnmatchcase(c["id"], pat):
            return True
        if not any(ch in pat for ch in "*?[") and pat in c["id"]:
            return True
    return False


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def blas_in_use():
    """The BLAS libraries this process has mapped (Debian's libblas.so.3 is the reference BLAS
    unless an alternative such as OpenBLAS is installed or put on LD_LIBRARY_PATH)."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "blas" in os.path.basename(path) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def run_bench(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    quick = not args.full
    plans = {k: dict(v) for k, v in PLANS["quick" if quick else "full"].items()}
    for plan in plans.values():  # --runs as vkattn bench takes it
        if args.runs:
            plan["max_runs"] = args.runs
            plan["min_runs"] = min(plan["min_runs"], args.runs)
    kernels, models = plans["kernels"], plans["models"]
    patterns = [p for p in (args.filter or "").split(",") if p]
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))  # loads the BLAS
    t_start = time.perf_counter()
    out = []
    for c in all_cases(torch, F, quick):
        if not selected(c, patterns):
            continue
        plan = models if c["kind"] == "model" else kernels
        print(f"{c['id']} ...", file=sys.stderr, flush=True)
        run, state = c["setup"]()
        times = measure(run, plan["warmup"], plan["min_runs"], plan["max_runs"],
                        plan["budget_s"])
        row = {k: v for k, v in c.items() if k not in ("setup", "pass_")}
        row["pass"] = c["pass_"]
        row["results"] = {"pytorch": result(c, times, state)}
        out.append(row)
        del run, state
    # the same keys, in vkattn's order
    order = ["id", "kind", "name", "pass", "shape", "bound", "flop", "bytes", "model", "B", "T",
             "tokens", "results"]
    cases = [{k: row[k] for k in order if k in row} for row in out]
    return {
        "schema": SCHEMA, "vkattn_version": None, "mode": "quick" if quick else "full",
        "seed": None, "filter": args.filter,
        "plan": {"kernels": kernels, "models": models},
        "backends": [{"backend": "pytorch", "device": cpu_name(), "device_type": "CPU",
                      "threads": torch.get_num_threads(), "torch_version": torch.__version__,
                      "blas": blas_in_use(),
                      "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                      "timer": "host", "ceilings": None}],
        "cases": cases, "seconds": time.perf_counter() - t_start,
    }


def compare(paths):
    """One table: every case of the first file, with each file's backends' median ms."""
    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    columns = []  # (doc index, backend)
    for i, d in enumerate(docs):
        for b in d["backends"]:
            columns.append((i, b["backend"]))
    names = [b for _, b in columns]
    # a backend in two files is told apart by the file's name
    labels = [b if names.count(b) == 1 else f"{b}:{os.path.splitext(os.path.basename(paths[i]))[0]}"
              for i, b in columns]
    by_id = [{c["id"]: c for c in d["cases"]} for d in docs]
    wms = [max(10, len(x) + 3) for x in labels]
    wsp = [max(10, len(x) + 8) for x in labels]
    head = f"{'case':40} {'shape':30}" + "".join(f" {x + ' ms':>{w}}" for x, w in zip(labels, wms))
    if len(columns) > 1:
        head += "".join(f" {x + ' speedup':>{w}}" for x, w in zip(labels[:-1], wsp))
    print(head)
    for c in docs[0]["cases"]:
        ms = []
        for i, b in columns:
            r = by_id[i].get(c["id"], {}).get("results", {}).get(b, {})
            ms.append(r.get("ms_median") if r.get("status") == "ok" else None)
        line = f"{c['id']:40} {c['shape']:30}" + "".join(
            f" {m:{w}.4g}" if m else f" {'-':>{w}}" for m, w in zip(ms, wms))
        if len(columns) > 1:
            last = ms[-1]
            line += "".join(f" {last / m:{w - 1}.2f}x" if m and last else f" {'-':>{w}}"
                            for m, w in zip(ms[:-1], wsp))
        print(line)
    if len(columns) > 1:
        print(f"speedup: {labels[-1]}'s time / that one's (above 1: faster than {labels[-1]})")
    for i, d in enumerate(docs):
        for b in d["backends"]:
            extra = f", torch {b['torch_version']}" if "torch_version" in b else ""
            if b.get("blas"):
                extra += ", BLAS " + " ".join(os.path.basename(x) for x in b["blas"])
            if "openblas_coretype" in b:
                extra += f", OPENBLAS_CORETYPE={b['openblas_coretype'] or '(unset)'}"
            threads = f", {b['threads']} threads" if "threads" in b else ""
            print(f"{b['backend']} ({paths[i]}): {b['device']}{threads}{extra}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="every case (default: the --quick set)")
    ap.add_argument("--filter", help="case ids containing this (or matching it, with * or ?); "
                    "several separated by commas")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="torch threads (default: the CPUs, as vkattn's OpenMP default)")
    ap.add_argument("--runs", type=int, help="timed runs per case at most")
    ap.add_argument("--compare", nargs="+", metavar="JSON",
                    help="print the cases of these bench JSON files side by side and exit")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare)
        return 0
    if args.threads < 1 or (args.runs is not None and args.runs < 1):
        ap.error("--threads and --runs must be at least 1")
    if importlib.util.find_spec("torch") is None:
        print("bench-pytorch.py: torch is not installed for this Python "
              f"({sys.executable}); try /usr/bin/python3 (Debian's python3-torch)", file=sys.stderr)
        return 1
    json.dump(run_bench(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
