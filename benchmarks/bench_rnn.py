"""Recurrent layers and the character-level LM beside PyTorch 2.13, in one run.

    .venv/bin/python benchmarks/bench_rnn.py [--rounds 5] [--seconds 1.5] [--no-write]
                                             [--kernels asis[,SkylakeX,...]]

(1) Training step of one layer, hidden 128, input 128, sequence 50, batch 32, float32:
    forward, loss = mean of squared outputs, backward, SGD step.  LSTM (the issue's
    target) and, for information, GRU.
(2) The char-LM end to end: Embedding(V,128) -> LSTM(128) -> Linear(128,V), cross-entropy,
    backward, gradient clipping at 5, Adam, truncated BPTT (state detached between chunks)
    over the King James Bible, sequence 50, batch 32: characters per second.

Both libraries run on one BLAS/OpenMP thread and the clock is process CPU time, with
rounds interleaved and the best round kept, because the 2-core machine is shared (with
2 threads each library's pool stalls whenever a neighbour takes a core, which measures the
neighbours).  Ratio = varlens / PyTorch throughput (> 1: varlens faster).  Rewrites the
"recurrent" section of benchmarks/RESULTS.md.

BLAS kernel: NumPy's bundled OpenBLAS picks its GEMM kernels from OPENBLAS_CORETYPE when that is
set before NumPy loads (this machine's environment sets it to Haswell: AVX2 kernels), else from
the CPU it detects (here an AVX-512 CPU, for which it picks its SkylakeX kernels, about twice as
fast at these shapes).  PyTorch's LSTM runs oneDNN's own kernels either way.  The kernel in use
is recorded beside the figures.  ``--kernels asis,SkylakeX`` additionally re-runs everything in
child processes with OPENBLAS_CORETYPE set to each listed name ("asis" = the environment as given).
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import time
import warnings

warnings.filterwarnings("ignore", message=".*TF32.*")

THREADS = os.environ.get("VARLENS_BENCH_THREADS", "1")
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = THREADS

import numpy as np  # noqa: E402
import torch  # noqa: E402

import varlens as vl  # noqa: E402
from varlens import nn  # noqa: E402
from _common import machine, write_section  # noqa: E402  (benchmarks/_common.py)

torch.set_num_threads(int(THREADS))
SECTION = "## recurrent (bench_rnn.py)"
_clock = time.process_time
NOTES = (
    "Each LSTM/GRU layer direction is one fused op (varlens/ops/nn/rnn.py). The LSTM works "
    "gate-major: each step is ONE GEMM, W (4H, I+H+1) @ [x_t; h; 1] (B columns), with both "
    "biases folded in as a column of W and the sigmoid rows pre-halved so that a single tanh "
    "call activates all four gates in place; the backward has one GEMM per step "
    "(W_hh^T dA_t) and one GEMM after the loop for dW_ih, dW_hh and both biases together "
    "(plus one for dx when the input needs it). The per-step GEMMs are a compiled kernel "
    "(varlens/ops/kernels/recurrent.py, for batches of 16 to 64 in steps of 16) on weights "
    "packed once per call, where NumPy's OpenBLAS re-packs them on every call; the GEMMs after "
    "the loop are NumPy's. Its work buffers come from a small pool, so "
    "steady-state training touches no fresh pages (in a process without PyTorch loaded this "
    "alone took the LSTM step from about 1,500 page faults to none). The 'GEMMs alone' "
    "column replays exactly the op's GEMMs (the same kernels) on arrays of the same shapes: it "
    "is the floor for this design; PyTorch's CPU LSTM runs oneDNN's fused AVX-512 LSTM kernel (with oneDNN "
    "switched off it falls back to per-step autograd ops: the 'info' row). The remainder "
    "(forward minus its GEMMs, backward minus its GEMMs, rest of the step) is the compiled "
    "gate/cell pass of each step each way, the layout copies around the loop (input, output, "
    "cotangents), and the loss/slicing/optimizer ops of the step. GRU: pooled "
    "buffers, otherwise unchanged (input GEMM for all steps, one small GEMM per step).")
T, B, I, H = 50, 32, 128, 128


def _timed(fn, seconds):
    """Run fn repeatedly for about ``seconds`` of CPU time; return calls per second."""
    fn()  # warm-up
    n, t0 = 0, _clock()
    while True:
        fn()
        n += 1
        dt = _clock() - t0
        if dt >= seconds:
            return n / dt


def layer_steps(kind, onednn=True):
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((T, B, I)).astype(np.float32)
    vcls, tcls = (nn.LSTM, torch.nn.LSTM) if kind == "lstm" else (nn.GRU, torch.nn.GRU)
    tm = tcls(I, H)
    vm = vcls(I, H)
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    vopt = vl.optim.SGD(vm.parameters(), lr=1e-3)
    topt = torch.optim.SGD(tm.parameters(), lr=1e-3)
    vx, tx = vl.tensor(xa), torch.from_numpy(xa)

    def vstep():
        out, _ = vm(vx)
        loss = (out * out).mean()
        vopt.zero_grad()
        loss.backward()
        vopt.step()

    def tstep():
        with torch.backends.mkldnn.flags(enabled=onednn):
            out, _ = tm(tx)
            loss = (out * out).mean()
            topt.zero_grad()
            loss.backward()
            topt.step()
    return vstep, tstep


def charlm_steps():
    from varlens.datasets.text import CharVocab, load_kjv
    from varlens.models.char_rnn import CharRNN
    from varlens.text.char_lm import detach_state, iterate_chunks, make_streams
    from varlens.nn import functional as F
    from varlens.nn.utils import clip_grad_norm_
    text = load_kjv()[:400_000]
    vocab = CharVocab(text)
    streams = make_streams(vocab.encode(text), B)
    chunks = list(iterate_chunks(streams, T))
    vl.manual_seed(0)
    vm = CharRNN(vocab.size, H)
    V = vocab.size

    class TorchCharRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, H)
            self.rnn = torch.nn.LSTM(H, H)
            self.head = torch.nn.Linear(H, V)

        def forward(self, x, state=None):
            out, state = self.rnn(self.embed(x), state)
            return self.head(out), state
    tm = TorchCharRNN()
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in vm.state_dict().items()})
    vopt = vl.optim.Adam(vm.parameters(), lr=2e-3)
    topt = torch.optim.Adam(tm.parameters(), lr=2e-3)
    vs = {"i": 0, "state": None}
    ts = {"i": 0, "state": None}

    def vstep():
        x, y = chunks[vs["i"] % len(chunks)]
        vs["i"] += 1
        st = detach_state(vs["state"])
        logits, vs["state"] = vm(vl.Tensor._make(x), st)
        loss = F.cross_entropy(logits.reshape(-1, V), vl.Tensor._make(y.reshape(-1)))
        vopt.zero_grad()
        loss.backward()
        clip_grad_norm_(vm.parameters(), 5.0)
        vopt.step()

    def tstep():
        x, y = chunks[ts["i"] % len(chunks)]
        ts["i"] += 1
        st = ts["state"]
        if st is not None:
            st = tuple(s.detach() for s in st)
        logits, ts["state"] = tm(torch.from_numpy(x), st)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.from_numpy(y.reshape(-1)))
        topt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tm.parameters(), 5.0)
        topt.step()
    return vstep, tstep


def lstm_profile(rounds, seconds):
    """Where the LSTM training step's time goes (ms per step, each column's best round): the
    fused op's forward and backward (timed inside the step), the rest of the step, and the
    GEMMs the op issues replayed alone on arrays of the same shapes (its floor with NumPy's
    BLAS)."""
    from varlens.ops.nn import rnn as R
    vstep, tstep = layer_steps("lstm")
    acc = [0.0, 0.0]
    cls = R.LSTMLayerFunction
    fwd, bwd = cls.forward, cls.backward

    def tf(self, *a, **k):
        t0 = _clock()
        out = fwd(self, *a, **k)
        acc[0] += _clock() - t0
        return out

    def tb(self, *a, **k):
        t0 = _clock()
        out = bwd(self, *a, **k)
        acc[1] += _clock() - t0
        return out
    rng = np.random.default_rng(1)
    K = I + H + 1
    ws, f4 = {}, np.dtype(np.float32)            # buffers allocated as the op's (R._buf: huge pages)
    W = R._buf(ws, "W", (4 * H, K), f4, np)
    XH = R._buf(ws, "XH", (K, T + 1, B), f4, np)
    act = R._buf(ws, "ACT", (T, 4 * H, B), f4, np)
    dA = R._buf(ws, "dA", (4 * H, T, B), f4, np)
    R._buf(ws, "Wp", (4 * H * K,), f4, np), R._buf(ws, "WhTp", (H * 4 * H,), f4, np)
    W[...], XH[...], dA[...] = (rng.standard_normal(a.shape) for a in (W, XH, dA))
    whT = np.ascontiguousarray(W[:, I:I + H].T)
    hw = np.empty((H, B), np.float32)
    sg = R.step_gemm(B)                          # the op's compiled per-step GEMM, if it applies

    def gemms():
        if sg is None:
            for t in range(T):
                np.matmul(W, XH[:, t], out=act[t])   # forward: one GEMM per step over [x; h; 1]
            for t in range(T):
                np.matmul(whT, dA[:, t], out=hw)     # backward: dh_prev = W_hh^T dA_t
        else:                                        # the same with W packed once per call
            p = sg.pack(W, False, 4 * H, B, K, ws, "Wp")
            for t in range(T):
                sg.compute(p, XH[:, t].ctypes.data, (T + 1) * B, act[t].ctypes.data, B)
            p = sg.pack(whT, False, H, B, 4 * H, ws, "WhTp")
            for t in range(T):
                sg.compute(p, dA[:, t].ctypes.data, T * B, hw.ctypes.data, B)
        dA.reshape(4 * H, T * B) @ XH[:, :T].reshape(K, T * B).T   # [dW_ih | dW_hh | db]
    best = None
    cls.forward, cls.backward = tf, tb
    try:
        for _ in range(rounds):
            vstep()
            acc[0] = acc[1] = 0.0
            n, t0 = 0, _clock()
            while _clock() - t0 < seconds:
                vstep()
                n += 1
            step = (_clock() - t0) / n
            row = [step, acc[0] / n, acc[1] / n]
            g = 1.0 / _timed(gemms, seconds / 3)
            tt = 1.0 / _timed(tstep, seconds)
            row += [g, tt]
            best = row if best is None else [min(u, v) for u, v in zip(best, row)]
    finally:
        cls.forward, cls.backward = fwd, bwd
    return [1e3 * v for v in best]


def blas_kernel():
    """The OpenBLAS core type NumPy's BLAS runs with (threadpoolctl's 'architecture')."""
    from threadpoolctl import threadpool_info
    for d in threadpool_info():
        if d.get("internal_api") == "openblas" and "numpy" in d.get("filepath", ""):
            return d.get("architecture") or "unknown"
    return "not OpenBLAS"


def measure(pair, rounds, seconds):
    vstep, tstep = pair
    vr, tr = [], []
    for _ in range(rounds):
        vr.append(_timed(vstep, seconds))
        tr.append(_timed(tstep, seconds))
    ratios = [a / b for a, b in zip(vr, tr)]
    return max(vr), max(tr), float(np.median(ratios)), min(ratios), max(ratios)


WORKLOADS = (
    ("LSTM(128, 128) training step, seq 50, batch 32", "lstm", "steps/s", 1),
    ("LSTM step as above, PyTorch with oneDNN off (info)", "lstm_nodnn", "steps/s", 1),
    ("GRU(128, 128) training step, seq 50, batch 32", "gru", "steps/s", 1),
    ("char-LM (LSTM 128) end to end, seq 50, batch 32", "charlm", "chars/s", T * B))


def run_here(rounds, seconds):
    """Measure every workload in this process; returns (kernel, rows)."""
    make = {"lstm": lambda: layer_steps("lstm"), "lstm_nodnn": lambda: layer_steps("lstm", False),
            "gru": lambda: layer_steps("gru"), "charlm": charlm_steps}
    kernel = blas_kernel()
    rows = []
    prof = lstm_profile(max(2, rounds // 2), seconds)
    print(f"[{kernel}] LSTM step profile (ms): " + ", ".join(f"{v:.2f}" for v in prof), flush=True)
    for name, key, unit, per in WORKLOADS:
        v, t, med, lo, hi = measure(make[key](), rounds, seconds)
        rows.append((name, v * per, t * per, med, lo, hi, unit))
        print(f"[{kernel}] {name}: varlens {v * per:,.0f} {unit}, torch {t * per:,.0f} {unit}, "
              f"ratio {med:.2f} ({lo:.2f}-{hi:.2f})", flush=True)
    return kernel, rows, prof


def main():
    import json
    import sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--kernels", default="asis",
                    help="comma-separated OpenBLAS core types, each run in a child process with "
                         "OPENBLAS_CORETYPE set to it ('asis': the environment as given, in this process "
                         "when it is the only entry)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # measure in this process and hand the rows to the parent as JSON
        kernel, rows, prof = run_here(args.rounds, args.seconds)
        print("JSON " + json.dumps({"kernel": kernel, "rows": rows, "prof": prof}), flush=True)
        return
    load0 = os.getloadavg()[0]
    kernels = [s.strip() for s in args.kernels.split(",") if s.strip()]
    results = []
    if kernels == ["asis"]:
        results.append(("asis",) + run_here(args.rounds, args.seconds))
    else:
        for k in kernels:
            env = dict(os.environ)
            if k != "asis":
                env["OPENBLAS_CORETYPE"] = k
            cmd = [sys.executable, __file__, "--child", "--rounds", str(args.rounds),
                   "--seconds", str(args.seconds)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            print("\n".join(ln for ln in out.splitlines() if not ln.startswith("JSON ")), flush=True)
            got = json.loads(next(ln for ln in out.splitlines() if ln.startswith("JSON "))[5:])
            results.append((k, got["kernel"], got["rows"], got["prof"]))
    load1 = os.getloadavg()[0]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    env_core = os.environ.get("OPENBLAS_CORETYPE", "unset")
    lines = [SECTION, "",
             f"{stamp}; {machine()}; NumPy {np.__version__}, PyTorch {torch.__version__} "
             f"({THREADS} thread(s), OpenBLAS likewise); float32; process CPU time, best of "
             f"{args.rounds} interleaved rounds of {args.seconds} s; load average {load0:.1f} at the "
             f"start, {load1:.1f} at the end. Ratio = varlens / PyTorch throughput (median over "
             "rounds; range). 'NumPy's GEMM kernel': the core type NumPy's OpenBLAS ran with "
             f"(OPENBLAS_CORETYPE in this machine's environment: {env_core}).", "",
             "| workload | NumPy's GEMM kernel | varlens | PyTorch | ratio (median; range) | target |",
             "|---|---|---:|---:|---:|---:|"]
    for name, _, _, _ in WORKLOADS:
        for k, kernel, rows, _ in results:
            v, t, med, lo, hi, unit = next(r[1:] for r in rows if r[0] == name)
            label = kernel + (" (environment as given)" if k == "asis" else f" (OPENBLAS_CORETYPE={k})")
            target = "info" if ("GRU" in name or "info" in name) else \
                ">= 1 (" + ("met" if med >= 1 else "not met") + ")"
            lines.append(f"| {name} | {label} | {v:,.0f} {unit} | {t:,.0f} {unit} | "
                         f"{med:.2f} ({lo:.2f}-{hi:.2f}) | {target} |")
    lines += ["", "Where the LSTM training step's time goes (ms per step, CPU time, each column's "
              "best round):", "",
              "| NumPy's GEMM kernel | varlens step | fused LSTM forward | fused LSTM backward | "
              "rest of the step | the op's GEMMs alone | PyTorch step |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for k, kernel, _, (step, f, b, g, tt) in results:
        lines.append(f"| {kernel} | {step:.2f} | {f:.2f} | {b:.2f} | {step - f - b:.2f} | {g:.2f} "
                     f"| {tt:.2f} |")
    lines += ["", NOTES, ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
