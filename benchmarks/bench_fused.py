"""Fused normalisation and cross-entropy ops beside the same maths composed from small varlens
ops and beside PyTorch 2.13, forward + backward, in one run.

    .venv/bin/python benchmarks/bench_fused.py [--quick] [--no-write]

Cases (float32): BatchNorm over (256, 512) and (32, 64, 16, 16) in training mode (batch
statistics), LayerNorm over (256, 768), cross-entropy of (256, 1000) logits against class
indices (mean reduction).  "fused" is what varlens.nn.functional runs (one Function with a
closed-form backward); "composed" is the same function built from small varlens ops (mean,
sub, mul, sqrt, log_softmax, gather, ...), whose backward the engine assembles op by op;
"torch" is PyTorch eager's native kernel.

Timings: process CPU time, best of several interleaved repeats, BLAS and PyTorch on one
thread (VARLENS_BENCH_THREADS to change): on a shared 2-core machine wall-clock time would
measure the neighbours.  Ratios > 1 mean the fused varlens op is faster.
The "fused ops" section of benchmarks/RESULTS.md is rewritten with the figures.
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import subprocess
import time

THREADS = os.environ.get("VARLENS_BENCH_THREADS", "1")
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = THREADS

import numpy as np  # noqa: E402
import torch  # noqa: E402

import varlens as vl  # noqa: E402
import varlens.nn.functional as F  # noqa: E402
from _common import machine, write_section  # noqa: E402  (benchmarks/_common.py)

torch.set_num_threads(int(THREADS))

RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")
SECTION = "## fused ops"
_clock = time.process_time


def _interleaved(fns, number, repeat):
    best = [float("inf")] * len(fns)
    for f in fns:
        f()
    for _ in range(repeat):
        for i, f in enumerate(fns):
            t0 = _clock()
            for _ in range(number):
                f()
            best[i] = min(best[i], (_clock() - t0) / number)
    return best


# ------------------------------------------------------------------ composed references
def bn_composed(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shp = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mu = vl.mean(x, axes, keepdim=True)
    xc = x - mu
    var = vl.mean(xc * xc, axes, keepdim=True)
    return xc / vl.sqrt(var + eps) * w.reshape(shp) + b.reshape(shp)


def ln_composed(x, w, b, eps=1e-5):
    mu = vl.mean(x, -1, keepdim=True)
    xc = x - mu
    var = vl.mean(xc * xc, -1, keepdim=True)
    return xc / vl.sqrt(var + eps) * w + b


def ce_composed(z, t):
    logp = vl.log_softmax(z, 1)
    return -vl.mean(vl.gather(logp, 1, t.reshape(-1, 1)))


# ------------------------------------------------------------------ cases
def make_cases(rng):
    cases = []

    def norm_case(name, shape, C, vfused, vcomp, tfn):
        x = rng.standard_normal(shape).astype(np.float32)
        g = rng.standard_normal(shape).astype(np.float32)
        w = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
        b = (0.1 * rng.standard_normal(C)).astype(np.float32)
        vx, vw, vb = (vl.tensor(a, requires_grad=True) for a in (x, w, b))
        vg = vl.tensor(g)
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        tg = torch.tensor(g)

        def run_v(fn):
            def f():
                vx.grad = vw.grad = vb.grad = None
                fn(vx, vw, vb).backward(vg)
            return f

        def run_t():
            tx.grad = tw.grad = tb.grad = None
            tfn(tx, tw, tb).backward(tg)
        # check the three agree before timing
        outs = []
        for f in (run_v(vfused), run_v(vcomp)):
            f()
            outs.append(vx.grad._data.copy())
        run_t()
        for o in outs:
            np.testing.assert_allclose(o, tx.grad.numpy(), rtol=2e-3, atol=2e-4)
        cases.append((name, run_v(vfused), run_v(vcomp), run_t))

    norm_case("BatchNorm1d train, (256, 512)", (256, 512), 512,
              lambda x, w, b: F.batch_norm(x, None, None, w, b, True), bn_composed,
              lambda x, w, b: torch.nn.functional.batch_norm(x, None, None, w, b, True))
    norm_case("BatchNorm2d train, (32, 64, 16, 16)", (32, 64, 16, 16), 64,
              lambda x, w, b: F.batch_norm(x, None, None, w, b, True), bn_composed,
              lambda x, w, b: torch.nn.functional.batch_norm(x, None, None, w, b, True))
    norm_case("LayerNorm, (256, 768)", (256, 768), 768,
              lambda x, w, b: F.layer_norm(x, (768,), w, b), ln_composed,
              lambda x, w, b: torch.nn.functional.layer_norm(x, (768,), w, b))

    z = rng.standard_normal((256, 1000)).astype(np.float32)
    t = rng.integers(0, 1000, 256)
    vz, vt = vl.tensor(z, requires_grad=True), vl.tensor(t)
    tz, tt = torch.tensor(z, requires_grad=True), torch.tensor(t)

    def ce_v(fn):
        def f():
            vz.grad = None
            fn(vz, vt).backward()
        return f

    def ce_t():
        tz.grad = None
        torch.nn.functional.cross_entropy(tz, tt).backward()
    grads = []
    for f in (ce_v(F.cross_entropy), ce_v(ce_composed)):
        f()
        grads.append(vz.grad._data.copy())
    ce_t()
    for gr in grads:
        np.testing.assert_allclose(gr, tz.grad.numpy(), rtol=1e-3, atol=1e-7)
    cases.append(("cross-entropy, (256, 1000) logits", ce_v(F.cross_entropy), ce_v(ce_composed), ce_t))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    number, repeat = (3, 3) if args.quick else (10, 7)
    rows = []
    for name, fv, fc, ft in make_cases(np.random.default_rng(0)):
        tv, tc, tt = _interleaved([fv, fc, ft], number, repeat)
        rows.append((name, tv, tc, tt))
        print(f"{name:40s} fused {tv * 1e3:7.3f} ms  composed {tc * 1e3:7.3f} ms  torch {tt * 1e3:7.3f} ms  "
              f"composed/fused {tc / tv:5.2f}  torch/fused {tt / tv:5.2f}")
    lines = [SECTION, "",
             f"`benchmarks/bench_fused.py{' --quick' if args.quick else ''}` on "
             f"{datetime.date.today().isoformat()}, {machine()}; NumPy {np.__version__}, "
             f"PyTorch {torch.__version__}, Python {platform.python_version()}; one thread, process CPU time, "
             "best of interleaved repeats.", "",
             "Forward + backward, float32, milliseconds per call. *fused*: the varlens op "
             "(one Function, closed-form backward); *composed*: the same maths from small varlens ops; "
             "ratios > 1 mean the fused op is faster.", "",
             "| case | fused | composed | torch | composed / fused | torch / fused |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, tv, tc, tt in rows:
        lines.append(f"| {name} | {tv * 1e3:.3f} | {tc * 1e3:.3f} | {tt * 1e3:.3f} | {tc / tv:.2f} | {tt / tv:.2f} |")
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
