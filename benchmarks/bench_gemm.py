"""GEMM throughput: NumPy's OpenBLAS (as the environment configures it, and with its AVX-512
kernels) against PyTorch's CPU GEMM, float32, at the shapes varlens' models use.

varlens sends every matrix product to NumPy (varlens/core/array.py), so this is the ceiling of
every GEMM-bound benchmark in this folder.  Two facts it records:

* OpenBLAS picks its kernels from the CPU unless ``OPENBLAS_CORETYPE`` says otherwise.  The
  machine these results come from sets ``OPENBLAS_CORETYPE=Haswell`` in its environment (AVX2
  kernels) although its CPU has AVX-512; varlens leaves that setting alone (it is the
  user's), and this script measures both, each in a fresh process.
* Optional faster GEMMs were considered for the backend (issue 3: MKL or BLIS from PyPI):
  pass ``--mkl PATH/libmkl_rt.so`` (from ``pip install mkl``) and/or have the ``blis``
  package installed to add their columns.  On this machine neither beat OpenBLAS, so the
  backend keeps NumPy's GEMM.

    python benchmarks/bench_gemm.py                # print the table
    python benchmarks/bench_gemm.py --write        # also refresh its section of RESULTS.md
    python benchmarks/bench_gemm.py --threads 2
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

SECTION = "## GEMM throughput (bench_gemm.py)"
SHAPES = [  # (m, k, n): what the benchmarks' models multiply
    (256, 256, 256, "square 256"),
    (128, 784, 512, "MLP layer 1, batch 128"),
    (128, 512, 512, "MLP layer 2, batch 128"),
    (32, 128, 512, "LSTM step (batch 32, 4H = 512)"),
    (1600, 128, 512, "LSTM input projection, 50 steps"),
    (3136, 576, 64, "ResNet 64->64 3x3 conv (im2col)"),
    (12544, 288, 32, "ResNet 32->32 3x3 conv (im2col)"),
    (32, 64, 32, "tiny MLP layer, batch 32"),
]


def _measure(which, threads, mkl_path=None):
    """Run in a child process: GFLOP/s of each shape for one library."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(threads)
    rng = np.random.default_rng(0)
    out = {"arch": None, "gflops": []}
    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            out["arch"] = info.get("architecture")
    if which == "torch":
        import torch
        torch.set_num_threads(threads)
    if which == "mkl":
        import ctypes
        lib = ctypes.CDLL(mkl_path)
        lib.MKL_Set_Num_Threads(threads)
        f = lib.cblas_sgemm
        f.restype = None
        ci, cf, vp = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
        f.argtypes = [ci, ci, ci, ci, ci, ci, cf, vp, ci, vp, ci, cf, vp, ci]
    if which == "blis":
        import blis.py
    for m, k, n, _ in SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        if which == "torch":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            fn = lambda: ta @ tb  # noqa: E731
        elif which == "mkl":
            c = np.empty((m, n), np.float32)
            fn = lambda: f(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n,  # noqa: E731
                           0.0, c.ctypes.data, n)
        elif which == "blis":
            fn = lambda: blis.py.gemm(a, b)  # noqa: E731
        else:
            fn = lambda: a @ b  # noqa: E731
        fn()
        best = float("inf")
        for _ in range(5):
            reps, t0 = 0, time.perf_counter()
            while True:
                fn()
                reps += 1
                dt = time.perf_counter() - t0
                if dt > 0.15:
                    break
            best = min(best, dt / reps)
        out["gflops"].append(2 * m * k * n / best / 1e9)
    print(json.dumps(out))


def _child(which, threads, env_extra=None, mkl=None):
    env = dict(os.environ)
    if env_extra:
        env.update(env_extra)
    cmd = [sys.executable, __file__, "--child", which, "--threads", str(threads)]
    if mkl:
        cmd += ["--mkl", mkl]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        return all(x in flags for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl"))
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--mkl", default=None, help="path to libmkl_rt.so (optional column)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _measure(args.child, args.threads, args.mkl)
        return
    cols = []
    given = os.environ.get("OPENBLAS_CORETYPE")
    r = _child("numpy", args.threads)
    cols.append((f"NumPy, environment as given ({r['arch']} kernels)", r["gflops"]))
    if _has_avx512() and (r["arch"] or "").lower() != "skylakex":
        r2 = _child("numpy", args.threads, {"OPENBLAS_CORETYPE": "SkylakeX"})
        cols.append((f"NumPy, OPENBLAS_CORETYPE=SkylakeX ({r2['arch']} kernels)", r2["gflops"]))
    cols.append(("PyTorch", _child("torch", args.threads)["gflops"]))
    if args.mkl:
        cols.append(("MKL cblas_sgemm", _child("mkl", args.threads, mkl=args.mkl)["gflops"]))
    try:
        import blis  # noqa: F401
        cols.append(("BLIS (blis package)", _child("blis", args.threads)["gflops"]))
    except ImportError:
        pass
    head = "| shape (m x k x n) | use | " + " | ".join(c[0] for c in cols) + " |"
    lines = [head, "|---|---|" + "---:|" * len(cols)]
    for i, (m, k, n, use) in enumerate(SHAPES):
        lines.append(f"| {m}x{k}x{n} | {use} | " + " | ".join(f"{c[1][i]:.0f}" for c in cols) + " |")
    for ln in lines:
        print(ln)
    if args.write:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _common import machine, write_section
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        load = os.getloadavg()[0]
        text = [SECTION, "",
                f"{stamp}; {machine()}; float32 GFLOP/s (higher is better), {args.threads} thread(s), "
                f"best of 5 rounds of 0.15 s, each library in its own process; load average {load:.1f}; "
                f"OPENBLAS_CORETYPE in the environment: {given or 'unset'}.", ""] + lines + [
                "", "varlens multiplies through NumPy, so the first column is what every varlens "
                "benchmark in this file ran with. The machine's environment pins OpenBLAS to its AVX2 "
                "(Haswell) kernels; unsetting OPENBLAS_CORETYPE (or setting SkylakeX) before Python "
                "starts selects the AVX-512 kernels, the second column. varlens does not override the "
                "setting (it belongs to the user), and the targets in this file are judged with the "
                "environment as given."]
        write_section(SECTION, "\n".join(text) + "\n")


if __name__ == "__main__":
    main()
