"""Training-step speed of an MLP, varlens against PyTorch eager in the same run.

One step = zero_grad, forward (Linear/ReLU stack), CrossEntropyLoss, backward, SGD step
(momentum 0.9), all float32.  Two sizes:

* big:  784-512-512-10, batch 128 (GEMM-bound: the time is in matrix products)
* tiny: 64-32-10,       batch 32  (overhead-bound: the time is Python and dispatch)

Both libraries start from the same weights and see the same batch.  Rounds of the two are
interleaved (the machine is shared), and the median of the per-round rates is reported.

    python benchmarks/bench_mlp.py            # print the table
    python benchmarks/bench_mlp.py --write    # also refresh its section of RESULTS.md
    python benchmarks/bench_mlp.py --profile  # where varlens' big step spends its time
    python benchmarks/bench_mlp.py --threads 1  # both libraries on one BLAS thread
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import time

if "--threads" in sys.argv:           # must be set before NumPy/PyTorch load their BLAS
    _n = sys.argv[sys.argv.index("--threads") + 1]
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_v] = _n

import numpy as np
import torch

import varlens as vl
import varlens.nn as vnn
import varlens.optim as vopt
from _common import machine, write_section  # noqa: E402  (benchmarks/_common.py)

HERE = os.path.dirname(os.path.abspath(__file__))
SECTION = "## MLP training step (bench_mlp.py)"


def build(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    tl, vlayers = [], []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        tlin = torch.nn.Linear(a, b)
        vlin = vnn.Linear(a, b)
        vlin.weight._data = tlin.weight.detach().numpy().copy()
        vlin.bias._data = tlin.bias.detach().numpy().copy()
        tl.append(tlin)
        vlayers.append(vlin)
        if i < len(sizes) - 2:
            tl.append(torch.nn.ReLU())
            vlayers.append(vnn.ReLU())
    tm, vm = torch.nn.Sequential(*tl), vnn.Sequential(*vlayers)
    x = rng.normal(size=(batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], size=batch)
    tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
    vx, vy = vl.tensor(x), vl.tensor(y)
    topt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)
    vopt_ = vopt.SGD(vm.parameters(), lr=0.01, momentum=0.9)
    tcrit, vcrit = torch.nn.CrossEntropyLoss(), vnn.CrossEntropyLoss()

    def tstep():
        topt.zero_grad()
        loss = tcrit(tm(tx), ty)
        loss.backward()
        topt.step()
        return loss

    def vstep():
        vopt_.zero_grad()
        loss = vcrit(vm(vx), vy)
        loss.backward()
        vopt_.step()
        return loss

    return tstep, vstep, (vm, vx, vy, vcrit, vopt_)


def rate(fn, seconds):
    """Steps per second over about ``seconds`` of wall time."""
    n = 0
    t0 = time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return n / dt


def bench(sizes, batch, rounds, seconds):
    tstep, vstep, _ = build(sizes, batch)
    # same start, same data: the first losses agree
    lt = [tstep().item() for _ in range(3)]
    lv = [vstep().item() for _ in range(3)]
    assert np.allclose(lt, lv, rtol=1e-4), (lt, lv)
    for _ in range(5):
        tstep()
        vstep()
    tr, vr = [], []
    for _ in range(rounds):
        tr.append(rate(tstep, seconds))
        vr.append(rate(vstep, seconds))
    t, v = statistics.median(tr), statistics.median(vr)
    return t, v, [a / b for a, b in zip(vr, tr)]


def profile_big(seconds=1.0):
    """Split varlens' big step into forward, backward and optimiser, and time the GEMMs."""
    _, _, (vm, vx, vy, crit, opt) = build([784, 512, 512, 10], 128)
    fwd = bwd = stp = 0.0
    n = 0
    t_end = time.perf_counter() + seconds * 3
    while time.perf_counter() < t_end:
        a = time.perf_counter()
        opt.zero_grad()
        loss = crit(vm(vx), vy)
        b = time.perf_counter()
        loss.backward()
        c = time.perf_counter()
        opt.step()
        d = time.perf_counter()
        fwd, bwd, stp, n = fwd + b - a, bwd + c - b, stp + d - c, n + 1
    lines = [f"varlens big step, mean of {n}: forward {1e3 * fwd / n:.2f} ms, backward "
             f"{1e3 * bwd / n:.2f} ms, SGD step {1e3 * stp / n:.2f} ms"]
    # the eight matrix products of one step (3 forward; 2 per layer backward, minus the input grad)
    shapes = [((128, 784), (784, 512)), ((128, 512), (512, 512)), ((128, 512), (512, 10)),
              ((128, 10), (10, 512)), ((10, 128), (128, 512)), ((128, 512), (512, 512)),
              ((512, 128), (128, 512)), ((512, 128), (128, 784))]
    rng = np.random.default_rng(0)
    tot_np = tot_t = 0.0
    for sa, sb in shapes:
        A = rng.normal(size=sa).astype(np.float32)
        Bm = rng.normal(size=sb).astype(np.float32)
        TA, TB = torch.from_numpy(A), torch.from_numpy(Bm)
        tn = 1.0 / rate(lambda: A @ Bm, 0.2)
        tt = 1.0 / rate(lambda: TA @ TB, 0.2)
        tot_np, tot_t = tot_np + tn, tot_t + tt
        lines.append(f"  {sa} @ {sb}: NumPy {1e6 * tn:7.1f} us, torch {1e6 * tt:7.1f} us")
    lines.append(f"  all GEMMs of a step: NumPy (OpenBLAS) {1e3 * tot_np:.2f} ms, "
                 f"torch {1e3 * tot_t:.2f} ms")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="wall time per round and library")
    ap.add_argument("--write", action="store_true", help="refresh this section of RESULTS.md")
    ap.add_argument("--profile", action="store_true", help="break down the big step")
    ap.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP threads for both")
    ap.add_argument("--note", default="", help="a remark to record under the table")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for name, sizes, batch, target in [("784-512-512-10, batch 128", [784, 512, 512, 10], 128, 1.0),
                                       ("64-32-10, batch 32", [64, 32, 10], 32, 2.0)]:
        t, v, ratios = bench(sizes, batch, args.rounds, args.seconds)
        rows.append((name, v, t, v / t, min(ratios), max(ratios), target))
    head = "| MLP | varlens steps/s | PyTorch steps/s | ratio (median; range) | target |"
    lines = [head, "|---|---:|---:|---:|---:|"]
    for name, v, t, r, lo, hi, target in rows:
        ok = "met" if r >= target else "missed"
        lines.append(f"| {name} | {v:,.0f} | {t:,.0f} | {r:.2f} ({lo:.2f}-{hi:.2f}) | "
                     f">= {target:g} ({ok}) |")
    prof = profile_big(args.seconds) if args.profile else []
    for ln in lines + prof:
        print(ln)
    if args.write:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        text = [SECTION, "",
                f"{stamp}; {machine()}; NumPy {np.__version__}, PyTorch {torch.__version__} "
                f"({torch.get_num_threads()} thread(s)"
                f"{', OpenBLAS likewise via --threads' if args.threads else ''}); float32; "
                f"one step = zero_grad, forward, "
                f"CrossEntropyLoss, backward, SGD(momentum=0.9) step; {args.rounds} interleaved "
                f"rounds of {args.seconds:g} s each. Ratio = varlens / PyTorch.", ""] + lines
        if args.note:
            text += ["", args.note]
        if prof:
            text += ["", "Where varlens' big step goes:", "", "```"] + prof + ["```"]
        write_section(SECTION, "\n".join(text) + "\n")


if __name__ == "__main__":
    main()
