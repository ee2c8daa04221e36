"""torch.linalg decompositions: forward + backward time of varlens against PyTorch (CPU, float64),
interleaved in one process, one thread each, median of process CPU time over repeats.

Each case builds its input, runs the decomposition and a gauge-invariant loss, and calls
backward.  The ratio is torch time / varlens time (above 1: varlens faster, as everywhere in RESULTS.md).  Both call LAPACK; what
varlens adds is NumPy's per-call overhead, the packing of several results into one output,
and its backward written with separate array operations.

    python benchmarks/bench_linalg.py            # print the table
    python benchmarks/bench_linalg.py --write    # also refresh its section of RESULTS.md
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import varlens as vl
from _common import machine, write_section

SECTION = "## Linear algebra decompositions (bench_linalg.py)"


def _cases():
    rng = np.random.default_rng(0)

    def spd(*s):
        x = rng.standard_normal(s)
        return x @ np.swapaxes(x, -1, -2) + s[-1] * np.eye(s[-1])

    def sym(*s):
        x = rng.standard_normal(s)
        return (x + np.swapaxes(x, -1, -2)) / 2

    return [
        ("cholesky 128", spd(128, 128), lambda m, a: m.linalg.cholesky(a).sum()),
        ("cholesky 64 x (32, 32)", spd(64, 32, 32), lambda m, a: m.linalg.cholesky(a).sum()),
        ("eigh 128 (values + abs(vectors))", sym(128, 128),
         lambda m, a: (lambda r: r.eigenvalues.sum() + r.eigenvectors.abs().sum())(m.linalg.eigh(a))),
        ("svd 256x64 reduced (S + abs(U))", rng.standard_normal((256, 64)),
         lambda m, a: (lambda r: r.S.sum() + r.U.abs().sum())(m.linalg.svd(a, full_matrices=False))),
        ("svdvals 64 x (16, 16)", rng.standard_normal((64, 16, 16)), lambda m, a: m.linalg.svdvals(a).sum()),
        ("qr 256x64 (Q + R)", rng.standard_normal((256, 64)),
         lambda m, a: (lambda r: r.Q.sum() + r.R.sum())(m.linalg.qr(a))),
        ("pinv 128x64", rng.standard_normal((128, 64)), lambda m, a: m.linalg.pinv(a).sum()),
        ("lu 128 (L + U)", rng.standard_normal((128, 128)),
         lambda m, a: (lambda r: r.L.sum() + r.U.sum())(m.linalg.lu(a))),
        ("matrix_exp 64", rng.standard_normal((64, 64)) * 0.1, lambda m, a: m.linalg.matrix_exp(a).sum()),
    ]


def _time(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return statistics.median(out)


def run(reps=15):
    torch.set_num_threads(1)
    rows = []
    with threadpool_limits(1):
        for name, arr, loss in _cases():
            def v():
                a = vl.tensor(arr, requires_grad=True)
                loss(vl, a).backward()

            def t():
                a = torch.tensor(arr, requires_grad=True)
                loss(torch, a).backward()
            v(), t()  # warm up
            tv, tt = [], []
            for _ in range(3):  # interleaved blocks
                tv.append(_time(v, reps))
                tt.append(_time(t, reps))
            mv, mt = min(tv), min(tt)
            rows.append((name, mv * 1e3, mt * 1e3, mt / mv))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rows = run(args.reps)
    lines = [SECTION, "",
             f"{datetime.date.today()}, {machine()}, 1 thread each, float64, forward + backward, "
             "median process CPU time (best of 3 interleaved blocks).", "",
             "| case | varlens ms | torch ms | torch / varlens (> 1: varlens faster) |", "|---|---:|---:|---:|"]
    lines += [f"| {n} | {a:.2f} | {b:.2f} | {r:.2f} |" for n, a, b, r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
