#!/usr/bin/python3
"""Reference data for tests/test_gpt_pytorch.c: a tiny GPT-2 in PyTorch, llm.c's test_gpt2 way.

Run (from the repository root, with Debian's python3-torch; the pyenv `python3` has no torch):

    /usr/bin/python3 tools/make_reference.py            # writes tests/data/gpt_tiny*.bin
    /usr/bin/python3 tools/make_reference.py --check    # also re-derives everything in float64
                                                          # and finite-difference checks the grads

The output is deterministic (fixed seeds, one thread): running it again gives the same bytes.

The model follows vkattn's (= llm.c's) conventions exactly: wte (Vp, C) with the Vp - V padding
rows zero, wpe (maxT, C), L pre-LN blocks (ln_1 -> causal self-attention with fused qkv (C -> 3C)
and output projection -> residual; ln_2 -> MLP C -> 4C -> GELU(tanh) -> C -> residual), ln_f, LM
head tied to wte producing Vp logits, loss = mean cross-entropy over the V real columns.
Linear weights are (out, in), as F.linear and llm.c store them.

Files written (all little-endian):

tests/data/gpt_tiny.bin              llm.c checkpoint: int32 header[256] = {20240326, 3, maxT, V,
                                     L, NH, C, Vp, 0...}, then fp32 wte, wpe, ln1w, ln1b, qkvw,
                                     qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw,
                                     fcprojb, lnfw, lnfb (per-layer tensors stacked over L).
tests/data/gpt_tiny.tokenizer.bin    llm.c tokenizer: int32 header[256] = {20240328, 2, V, eot},
                                     then per token a length byte and its byte. The vocabulary is
                                     tinyshakespeare's 65 characters (written out below, so the
                                     corpus is not needed), eot = '\\n' = id 0.
tests/data/gpt_tiny_debug_state.bin  llm.c debug state: int32 header[256] = {20240327, 2, B, T,
                                     0...}; int32 inputs (B, T); int32 targets (B, T);
                                     fp32 logits (B, T, V) (real columns only); fp32 loss;
                                     fp32 gradients of all parameters (checkpoint order/layout,
                                     padding rows included).
                                     vkattn extension, directly after:
                                       int32 n_steps;
                                       fp32 lr, beta1, beta2, eps, weight_decay, grad_clip;
                                       fp32 losses[n_steps]     (loss of step i, before its update)
                                       fp32 grad_norms[n_steps] (global L2 norm before clipping)
                                       fp32 params[num_params]  (parameters after the n_steps
                                                                 updates, checkpoint order)
                                     The steps all train on the same batch (inputs, targets), with
                                     global grad-norm clipping then AdamW with weight decay on the
                                     2-D weights only (wte, wpe, qkvw, attprojw, fcw, fcprojw).

Why this configuration: V = 65 (a character vocabulary, Vp = 128 so padding is exercised),
maxT = 16, L = 2, NH = 4, C = 36 so HS = 9 (odd) and C are not powers of two (a kernel that assumes
tiles of 8/16 or vec4 head rows fails), B = 3, T = 13 < maxT so the model must use T (not maxT)
as the sequence stride and must leave the gradients of wpe rows T..maxT-1 at exactly zero.
The initialisation is larger than GPT-2's N(0, 0.02) so that attention is clearly non-uniform
(last-row max weight 0.17-0.34 over 13 keys; scaling by 1/HS instead of 1/sqrt(HS) moves the loss
by 0.03, 600x its test tolerance), GELU sees inputs in its curved region, and
biases and layernorm parameters are randomly perturbed so their paths carry signal.
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------
VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
V = len(VOCAB)                   # 65
VP = (V + 127) // 128 * 128      # 128
MAX_T, L, NH, C = 16, 2, 4, 36
HS = C // NH                     # 9
B, T = 3, 13
SEED = 1337

N_STEPS = 10
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-2, 0.9, 0.999, 1e-8, 0.1
GRAD_CLIP = 1.0                  # clips the first steps (norms printed when run)

# llm.c's parameter tensors, in checkpoint order, and whether AdamW decays them (2-D weights).
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def shapes():
    return {
        "wte": (VP, C), "wpe": (MAX_T, C),
        "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }


def init_params(gen):
    """Float32 parameters as a dict name -> tensor. Weights are scaled like 1/sqrt(fan_in) so
    activations stay O(1); biases and layernorm parameters get small random perturbations."""
    sh = shapes()

    def normal(name, std, mean=0.0):
        return mean + std * torch.randn(sh[name], generator=gen, dtype=torch.float32)

    p = {
        "wte": normal("wte", 0.1), "wpe": normal("wpe", 0.1),
        "ln1w": normal("ln1w", 0.1, 1.0), "ln1b": normal("ln1b", 0.05),
        "qkvw": normal("qkvw", 1.0 / math.sqrt(C)), "qkvb": normal("qkvb", 0.05),
        "attprojw": normal("attprojw", 0.5 / math.sqrt(C)), "attprojb": normal("attprojb", 0.05),
        "ln2w": normal("ln2w", 0.1, 1.0), "ln2b": normal("ln2b", 0.05),
        "fcw": normal("fcw", 1.0 / math.sqrt(C)), "fcb": normal("fcb", 0.05),
        "fcprojw": normal("fcprojw", 0.5 / math.sqrt(4 * C)), "fcprojb": normal("fcprojb", 0.05),
        "lnfw": normal("lnfw", 0.1, 1.0), "lnfb": normal("lnfb", 0.05),
    }
    p["wte"][V:] = 0.0  # padding rows of the vocabulary
    return p


def make_batch(gen):
    """Random token ids; the extremes 0 and V-1 are forced in so the first and last real rows of
    wte are gathered (and their gradients have both embedding and LM-head parts)."""
    x = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    y = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    x[0, 0], x[B - 1, T - 1] = 0, V - 1
    y[0, 1], y[B - 1, 0] = V - 1, 0
    return x, y


# ----------------------------------------------------------------------------------------------
# The model: written out op by op, in llm.c's order, on the flat parameter dict
# ----------------------------------------------------------------------------------------------
def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv):
    """qkv (B, T, 3C) -> (B, T, C): causal multi-head self-attention, scale 1/sqrt(HS)."""
    b, t, _ = qkv.shape
    q, k, v = qkv.split(C, dim=2)
    q = q.view(b, t, NH, HS).transpose(1, 2)  # (B, NH, T, HS)
    k = k.view(b, t, NH, HS).transpose(1, 2)
    v = v.view(b, t, NH, HS).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))  # (B, NH, T, T)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    att = att.masked_fill(~causal, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, NH, T, HS)
    return y.transpose(1, 2).contiguous().view(b, t, C)


def forward(p, x, y=None):
    """Logits (B, T, Vp) and, with targets y, the mean cross-entropy over the V real columns."""
    t = x.shape[1]
    h = p["wte"][x] + p["wpe"][:t]  # (B, T, C)
    for l in range(L):
        a = F.layer_norm(h, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        a = F.linear(a, p["qkvw"][l], p["qkvb"][l])  # (B, T, 3C)
        a = attention(a)
        h = h + F.linear(a, p["attprojw"][l], p["attprojb"][l])
        m = F.layer_norm(h, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        m = F.gelu(F.linear(m, p["fcw"][l], p["fcb"][l]), approximate="tanh")  # (B, T, 4C)
        h = h + F.linear(m, p["fcprojw"][l], p["fcprojb"][l])
    h = F.layer_norm(h, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = h @ p["wte"].t()  # (B, T, Vp); padding columns are 0 (zero wte rows)
    if y is None:
        return logits, None
    loss = F.cross_entropy(logits[..., :V].reshape(-1, V), y.reshape(-1))
    return logits, loss


def leaf_params(p, dtype):
    return {n: p[n].detach().clone().to(dtype).requires_grad_(True) for n in NAMES}


def forward_backward(p32, x, y, dtype):
    """Logits (B, T, V), loss and gradients dict, computed in dtype from the float32 params."""
    p = leaf_params(p32, dtype)
    logits, loss = forward(p, x, y)
    loss.backward()
    return logits[..., :V].detach(), loss.detach(), {n: p[n].grad.detach() for n in NAMES}


def train(p32, x, y, dtype):
    """N_STEPS of clip + AdamW on the same batch. Returns (losses, norms, final params)."""
    p = leaf_params(p32, dtype)
    groups = [{"params": [p[n] for n in NAMES if n in DECAYED], "weight_decay": WEIGHT_DECAY},
              {"params": [p[n] for n in NAMES if n not in DECAYED], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses, norms = [], []
    for _ in range(N_STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = forward(p, x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_([p[n] for n in NAMES], GRAD_CLIP)
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
    return losses, norms, {n: p[n].detach() for n in NAMES}


def train_by_formula(p32, x, y):
    """The same steps in float64 written out as vkattn.h documents them (vka_grad_norm, vka_adamw),
    without torch.optim or clip_grad_norm_: checks that PyTorch's semantics are the documented ones.
    """
    p = leaf_params(p32, torch.float64)
    m = {n: torch.zeros_like(p[n]) for n in NAMES}
    v = {n: torch.zeros_like(p[n]) for n in NAMES}
    losses = []
    for step in range(1, N_STEPS + 1):
        for n in NAMES:
            p[n].grad = None
        loss = forward(p, x, y)[1]
        loss.backward()
        losses.append(loss.item())
        norm = math.sqrt(sum((p[n].grad ** 2).sum().item() for n in NAMES))
        scale = min(1.0, GRAD_CLIP / (norm + 1e-6))
        bc1, bc2 = 1 - BETA1 ** step, 1 - BETA2 ** step
        with torch.no_grad():
            for n in NAMES:
                g = p[n].grad * scale
                m[n] = BETA1 * m[n] + (1 - BETA1) * g
                v[n] = BETA2 * v[n] + (1 - BETA2) * g * g
                wd = WEIGHT_DECAY if n in DECAYED else 0.0
                p[n] -= LR * ((m[n] / bc1) / (torch.sqrt(v[n] / bc2) + EPS) + wd * p[n])
    return losses, {n: p[n].detach() for n in NAMES}


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------
def header(values):
    h = np.zeros(256, dtype="<i4")
    h[: len(values)] = values
    return h.tobytes()


def f32(t):
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype="<f4").tobytes()


def i32(t):
    return np.ascontiguousarray(t.cpu().numpy(), dtype="<i4").tobytes()


def flat(p):
    return b"".join(f32(p[n]) for n in NAMES)


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    print(f"wrote {path} ({len(data)} bytes)")


def tokenizer_bytes():
    body = b"".join(bytes([1, ord(ch)]) for ch in VOCAB)
    return header([20240328, 2, V, VOCAB.index("\n")]) + body


# ----------------------------------------------------------------------------------------------
# Checks of the reference itself
# ----------------------------------------------------------------------------------------------
def max_abs(a, b):
    return (a.double() - b.double()).abs().max().item()


def check_building_blocks(gen):
    """The ops the model uses against their textbook formulas, in float64."""
    x = torch.randn(7, C, generator=gen, dtype=torch.float64) * 3
    w = torch.randn(C, generator=gen, dtype=torch.float64)
    bb = torch.randn(C, generator=gen, dtype=torch.float64)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    ln = (x - mean) / torch.sqrt(var + 1e-5) * w + bb
    print(f"  layer_norm vs formula       max|diff| {max_abs(F.layer_norm(x, (C,), w, bb, 1e-5), ln):.2e}")
    print(f"  gelu(tanh) vs formula       max|diff| "
          f"{max_abs(F.gelu(x, approximate='tanh'), gelu_tanh(x)):.2e}")
    qkv = torch.randn(2, 5, 3 * C, generator=gen, dtype=torch.float64)
    q, k, v = qkv.split(C, dim=2)
    loop = torch.zeros(2, 5, C, dtype=torch.float64)
    for b in range(2):  # attention one (batch, head, query) at a time, as llm.c loops
        for h in range(NH):
            s = slice(h * HS, (h + 1) * HS)
            for t in range(5):
                sc = torch.stack([q[b, t, s] @ k[b, u, s] for u in range(t + 1)]) / math.sqrt(HS)
                loop[b, t, s] = torch.softmax(sc, 0) @ v[b, : t + 1, s]
    print(f"  attention vs per-head loop  max|diff| {max_abs(attention(qkv), loop):.2e}")
    # gradcheck of one block's pieces (autograd vs finite differences), float64
    blk = (x.clone().requires_grad_(), w.clone().requires_grad_(), bb.clone().requires_grad_())
    ok = torch.autograd.gradcheck(lambda a, b_, c: F.gelu(F.layer_norm(a, (C,), b_, c, 1e-5),
                                                            approximate="tanh"), blk)
    ok &= torch.autograd.gradcheck(attention, (qkv[:, :4].clone().requires_grad_(),))
    print(f"  gradcheck layernorm+gelu, attention: {'ok' if ok else 'FAILED'}")
    return ok


def check_grads_by_finite_differences(p32, x, y, grads64, gen):
    """Directional derivative of the float64 loss along a random direction in each tensor
    (central differences) vs <grad, direction>: checks the model's gradient end to end."""
    p = {n: p32[n].double() for n in NAMES}
    worst = 0.0
    for n in NAMES:
        d = torch.randn(p[n].shape, generator=gen, dtype=torch.float64)
        if n == "wte":
            d[V:] = 0.0  # padding rows must stay zero (they are not real parameters)
        h = 1e-5
        p[n] += h * d
        lp = forward(p, x, y)[1].item()
        p[n] -= 2 * h * d
        lm = forward(p, x, y)[1].item()
        p[n] += h * d
        fd = (lp - lm) / (2 * h)
        an = (grads64[n] * d).sum().item()
        rel = abs(fd - an) / max(abs(an), 1e-12)
        worst = max(worst, rel)
        print(f"  {n:9s} finite diff {fd: .10e} autograd {an: .10e} rel {rel:.1e}")
    return worst


def report_precision(label, a32, a64):
    print(f"  {label:22s} max|f32 - f64| {max_abs(a32, a64):.2e}  (max|f64| {a64.abs().max().item():.2e})")


# ----------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "data"))
    ap.add_argument("--check", action="store_true",
                    help="float64 and finite-difference checks of the reference (slower)")
    args = ap.parse_args()

    torch.set_num_threads(1)  # same summation order, same bytes, every run
    gen = torch.Generator().manual_seed(SEED)
    p32 = init_params(gen)
    x, y = make_batch(gen)

    logits, loss, grads = forward_backward(p32, x, y, torch.float32)
    losses, norms, final = train(p32, x, y, torch.float32)
    assert abs(losses[0] - loss.item()) < 1e-6, "step 0 loss differs from the forward loss"
    for n in NAMES:
        assert torch.isfinite(grads[n]).all() and torch.isfinite(final[n]).all(), n
    assert grads["wte"][V:].abs().max().item() == 0.0 and grads["wpe"][T:].abs().max().item() == 0.0
    assert final["wte"][V:].abs().max().item() == 0.0

    print(f"config: V={V} Vp={VP} maxT={MAX_T} L={L} NH={NH} C={C} HS={HS} B={B} T={T}; "
          f"params {sum(p32[n].numel() for n in NAMES)}")
    print(f"loss {loss.item():.7f} (ln V = {math.log(V):.4f})")
    print("grad norms per tensor: " + ", ".join(f"{n} {grads[n].norm().item():.3g}" for n in NAMES))
    print(f"train: lr {LR} betas ({BETA1}, {BETA2}) eps {EPS} wd {WEIGHT_DECAY} clip {GRAD_CLIP}")
    for i, (l_, g_) in enumerate(zip(losses, norms)):
        print(f"  step {i}: loss {l_:.7f} grad norm {g_:.5f}{'  (clipped)' if g_ > GRAD_CLIP else ''}")
    n_clipped = sum(g_ > GRAD_CLIP for g_ in norms)
    assert 0 < n_clipped < N_STEPS, "pick GRAD_CLIP so that some but not all steps clip"

    if args.check:
        print("building blocks (float64):")
        ok = check_building_blocks(torch.Generator().manual_seed(SEED + 1))
        print("float32 reference vs the same computation in float64:")
        logits64, loss64, grads64 = forward_backward(p32, x, y, torch.float64)
        report_precision("logits", logits, logits64)
        report_precision("loss", loss.reshape(1), loss64.reshape(1))
        for n in NAMES:
            report_precision("grad " + n, grads[n], grads64[n])
        losses64, norms64, final64 = train(p32, x, y, torch.float64)
        report_precision("train losses", torch.tensor(losses), torch.tensor(losses64))
        report_precision("train grad norms", torch.tensor(norms), torch.tensor(norms64))
        for n in NAMES:
            report_precision("after " + n, final[n], final64[n])
        losses_f, final_f = train_by_formula(p32, x, y)
        print("torch.optim.AdamW + clip_grad_norm_ vs vkattn.h's formulas (float64):")
        print(f"  train losses           max|diff| "
              f"{max_abs(torch.tensor(losses64), torch.tensor(losses_f)):.2e}")
        # the key bias is excluded: AdamW turns its rounding-noise gradient into steps of ~lr
        kb = torch.zeros(L, 3 * C, dtype=torch.bool)
        kb[:, C:2 * C] = True
        formula_diff = max(max_abs(final64[n][~kb] if n == "qkvb" else final64[n],
                                   final_f[n][~kb] if n == "qkvb" else final_f[n]) for n in NAMES)
        print(f"  parameters after {N_STEPS} steps  max|diff| {formula_diff:.2e} (key bias excluded)")
        ok &= formula_diff < 1e-9
        print("gradient vs finite differences of the float64 loss:")
        worst = check_grads_by_finite_differences(p32, x, y, grads64,
                                                  torch.Generator().manual_seed(SEED + 2))
        print(f"  worst relative difference {worst:.1e}")
        if not ok or worst > 1e-6:
            sys.exit("reference self-check FAILED")

    ckpt = header([20240326, 3, MAX_T, V, L, NH, C, VP]) + flat(p32)
    state = (header([20240327, 2, B, T]) + i32(x) + i32(y) + f32(logits) + f32(loss.reshape(1))
             + flat(grads)
             + struct.pack("<i6f", N_STEPS, LR, BETA1, BETA2, EPS, WEIGHT_DECAY, GRAD_CLIP)
             + struct.pack(f"<{N_STEPS}f", *losses) + struct.pack(f"<{N_STEPS}f", *norms)
             + flat(final))
    os.makedirs(args.out, exist_ok=True)
    write(os.path.join(args.out, "gpt_tiny.bin"), ckpt)
    write(os.path.join(args.out, "gpt_tiny.tokenizer.bin"), tokenizer_bytes())
    write(os.path.join(args.out, "gpt_tiny_debug_state.bin"), state)


if __name__ == "__main__":
    main()
