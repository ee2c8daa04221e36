"""Convolution speed and memory, varlens against PyTorch eager in the same run.

(1) Conv2d forward + backward (input, weight and bias gradients) at LeNet sizes and at
    ResNet basic-block sizes, and LeNet's two 2x2 max pools, float32, batch 64.
(2) A LeNet-5 training step (batch 64, 28x28, ReLU, max pool, CrossEntropyLoss, Adam):
    steps per second of both, the same weights and batch.
(3) Peak memory of one LeNet training step, measured two ways:
    * tracemalloc: NumPy reports every array buffer it allocates to Python's tracemalloc,
      so the traced peak during one step (minus what was live before it) is varlens'
      exact array high-water mark.  PyTorch's CPU allocator does not report to tracemalloc.
    * peak RSS, the same method for both: each library runs in a fresh subprocess (glibc's
      mmap threshold set to 64 KiB so freed buffers leave the resident set); before a step
      the kernel's resident high-water mark is reset to the current RSS (``5`` into
      /proc/self/clear_refs) and after it VmHWM - VmRSS(before) is the step's peak extra
      memory.  Steps 2-4 give the steady state (max of the three); step 1, which also
      allocates the optimiser state, is reported separately.

Timing: rounds of the two libraries are interleaved and the median of per-round times is
reported, in process CPU time (the machine is shared; CPU time does not count the
waits while the process is descheduled).  Both libraries use the same thread count (--threads,
default 1: on a loaded 2-core machine 2-thread BLAS pools stall whenever a worker is
descheduled, which measures the contention, not the code).

    python benchmarks/bench_conv.py            # print the tables
    python benchmarks/bench_conv.py --write    # also refresh its section of RESULTS.md
    python benchmarks/bench_conv.py --profile  # where varlens' LeNet step spends its time
    python benchmarks/bench_conv.py --winograd # 3x3 rows: Winograd against the shifted rows
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

_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = _threads  # before NumPy/PyTorch load their BLAS

import numpy as np  # noqa: E402
import torch  # noqa: E402

import varlens as vl  # noqa: E402
import varlens.nn.functional as F  # noqa: E402
from varlens import optim as vopt  # noqa: E402
from varlens.models import LeNet5  # noqa: E402
from _common import machine  # noqa: E402  (benchmarks/_common.py)

HERE = os.path.dirname(os.path.abspath(__file__))
SECTION = "## Convolution and LeNet training step (bench_conv.py)"
torch.set_num_threads(int(_threads))

CONV_CASES = [  # (label, N, C_in, C_out, k, H, padding, stride)
    ("LeNet conv1 1->6 5x5 pad 2, 28x28", 64, 1, 6, 5, 28, 2, 1),
    ("LeNet conv2 6->16 5x5, 14x14", 64, 6, 16, 5, 14, 0, 1),
    ("ResNet block 16->16 3x3, 28x28", 64, 16, 16, 3, 28, 1, 1),
    ("ResNet block 32->32 3x3, 14x14", 64, 32, 32, 3, 14, 1, 1),
    ("ResNet down 32->64 3x3 s2, 14x14", 64, 32, 64, 3, 14, 1, 2),
    ("ResNet block 64->64 3x3, 7x7", 64, 64, 64, 3, 7, 1, 1),
]


NOTES = """\
How varlens computes these layers (varlens/ops/nn/conv.py, docs/cnn.md): stride-1 convolutions
(all of LeNet's, the ResNet blocks') use the "shifted rows" layout: each padded image is
flattened, so the im2col row of kernel offset (c, i, j) is one contiguous run of it; columns are
built by long copies a 1 MiB chunk of images at a time (and rebuilt in backward rather than kept,
for memory), the bias rides in the product as a row of ones, and the Wp - Wo wrapped columns
per output row are computed and dropped (LeNet conv2: 14 columns per 10 valid ones, 40% extra
GEMM work).  Backward builds g shifted by each kernel column once (kw copies) and uses it for
both products: dL/dx = W_j @ g_shifted followed by kh row-aligned adds (no kh*kw col2im), and
dL/dW = g_shifted @ x_rows^T with only C*kh shifted rows of x.  LeNet conv1's weight gradient
(6 output channels) runs as six matrix-vector products, which OpenBLAS does 1.5x faster than a
6-row GEMM.  3x3 stride-1 float32 convolutions with at least 8 input and output channels (the
ResNet blocks here; not LeNet-5's 5x5 layers) take Winograd's F(2x2, 3x3) instead
(varlens/ops/kernels/winograd.py): 16 products (O, C) @ (C, tiles) per 2x2 output block instead
of 36 multiply-adds, for forward, dL/dx (the full correlation with the flipped kernel) and dL/dW
(the adjoint in the weight), with the tile transforms as compiled passes; against the shifted
rows in one process (`--winograd`, 2026-11-26, load 7-10): 1.2x, 1.25x, 1.17x faster on the
three ResNet block rows.  Max pooling runs compiled kernels (float32): one pass forward keeping each
window's winner (PyTorch's: first maximum, last NaN), one pass backward writing dL/dx (2x2
stride 2: every input written once, no zero fill).
Where the time goes is table (4).  LeNet conv2's products (forward, dL/dW, dL/dx) are about
65-75% of the layer's time and run near OpenBLAS's single-core peak (80-100 GFLOP/s), the rest
is the column and shifted-g copies and the row adds.  PyTorch's oneDNN kernels do the same
arithmetic without column copies or wrapped columns and faster than OpenBLAS's GEMM, hence the
remaining gap (ratios < 1) in table (1); in the Winograd rows the tile transforms (about 10 ns
per 4x4 tile and channel, not vectorised: a tile row is only Wo/2 long) take about as long as
the products; stride 2 (ResNet down) still uses the exact per-sample im2col.  The ResNet rows also
pay for fresh memory: interleaved with PyTorch, varlens' multi-MiB arrays (output, padded input,
dL/dx) come back from glibc as new pages, about 4,000 page faults per call at 16x28x28 (15 ms
alone, 20 ms interleaved on a loaded machine); LeNet's smaller arrays are reused without faults.  (Table (1)'s conv1
row includes dL/dx, which PyTorch computes slowly for one input channel; LeNet's step does not
need it.)  varlens wins the step back on max pooling (PyTorch's CPU max_pool2d is slower at
these sizes) and on a shorter rest of the step.  Memory: the conv chunk buffers (2.2 MiB for LeNet,
each at most varlens.ops.nn.conv.SCRATCH_MAX elements) are allocated in step 1 and reused after,
so the steady-state rise in table (3) does not include them; step 1's row does, and also
numba's import and the loading of the compiled kernels (the pooling and ReLU kernels run from
the first step; about 100 MiB once per process, not per step).
"""


def interleaved(fa, fb, rounds, inner):
    """Median seconds per call of fa and fb over interleaved rounds."""
    fa(), fb()
    ta, tb = [], []
    clock = time.process_time  # CPU time of this process: robust to being descheduled on a shared machine
    for _ in range(rounds):
        t = clock()
        for _ in range(inner):
            fa()
        ta.append((clock() - t) / inner)
        t = clock()
        for _ in range(inner):
            fb()
        tb.append((clock() - t) / inner)
    return statistics.median(ta), statistics.median(tb)


POOL_CASES = [  # (label, N, C, H): 2x2 max pool, stride 2, after a ReLU (many tied zeros)
    ("LeNet pool1 2x2, 6x28x28", 64, 6, 28),
    ("LeNet pool2 2x2, 16x10x10", 64, 16, 10),
]


def pool_case(N, C, H, rounds):
    rng = np.random.default_rng(0)
    x = np.maximum(rng.standard_normal((N, C, H, H)), 0).astype(np.float32)
    go = rng.standard_normal((N, C, H // 2, H // 2)).astype(np.float32)
    vx, vg = vl.tensor(x, requires_grad=True), vl.tensor(go)
    tx, tg = torch.from_numpy(x.copy()).requires_grad_(True), torch.from_numpy(go.copy())

    def fv():
        F.max_pool2d(vx, 2).backward(vg)
        vx.grad = None

    def ft():
        torch.nn.functional.max_pool2d(tx, 2).backward(tg)
        tx.grad = None
    return interleaved(fv, ft, rounds, 3)


def conv_case(N, cin, cout, k, H, p, s, rounds):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, cin, H, H)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, k, k)) * 0.1).astype(np.float32)
    b = np.zeros(cout, np.float32)
    vx, vw, vb = (vl.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, w, b))
    go = rng.standard_normal(tuple(F.conv2d(vx, vw, vb, s, p).shape)).astype(np.float32)
    vg, tg = vl.tensor(go), torch.from_numpy(go.copy())

    def fv():
        F.conv2d(vx, vw, vb, s, p).backward(vg)
        vx.grad = vw.grad = vb.grad = None

    def ft():
        torch.nn.functional.conv2d(tx, tw, tb, s, p).backward(tg)
        tx.grad = tw.grad = tb.grad = None
    return interleaved(fv, ft, rounds, 3)


def winograd_ab(rounds):
    """The 3x3 rows of table (1), varlens with Winograd against varlens with the shifted rows
    (varlens.ops.nn.conv.WINOGRAD_MIN_CHANNELS raised past every layer), interleaved in this
    process: ms per forward + backward and the speed-up."""
    from varlens.ops.nn import conv as C
    keep = C.WINOGRAD_MIN_CHANNELS
    for label, N, cin, cout, k, H, p, s in CONV_CASES:
        if k != 3 or s != 1:
            continue
        rng = np.random.default_rng(0)
        vx, vw, vb = (vl.tensor(a.astype(np.float32), requires_grad=True) for a in (
            rng.standard_normal((N, cin, H, H)), rng.standard_normal((cout, cin, k, k)) * 0.1, np.zeros(cout)))
        vg = vl.tensor(rng.standard_normal((N, cout, H + 2 * p - 2, H + 2 * p - 2)).astype(np.float32))

        def run(on):
            def f():
                C.WINOGRAD_MIN_CHANNELS = keep if on else 10 ** 9
                F.conv2d(vx, vw, vb, s, p).backward(vg)
                vx.grad = vw.grad = vb.grad = None
            return f
        tw, ts = interleaved(run(True), run(False), rounds, 3)
        C.WINOGRAD_MIN_CHANNELS = keep
        print(f"| {label} | Winograd {tw * 1e3:.2f} ms | shifted rows {ts * 1e3:.2f} ms | {ts / tw:.2f}x |", flush=True)


def torch_lenet():
    T = torch.nn
    return T.Sequential(
        T.Sequential(T.Conv2d(1, 6, 5, padding=2), T.ReLU(), T.MaxPool2d(2), T.Conv2d(6, 16, 5), T.ReLU(), T.MaxPool2d(2)),
        T.Sequential(T.Flatten(), T.Linear(400, 120), T.ReLU(), T.Linear(120, 84), T.ReLU(), T.Linear(84, 10)))


def lenet_steps(batch=64, seed=0):
    rng = np.random.default_rng(seed)
    vm, tm = LeNet5(), torch_lenet()
    with torch.no_grad():
        for v, t in zip(vm.parameters(), tm.parameters()):
            t.copy_(torch.from_numpy(np.array(v._data)))
    x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    vx, vy = vl.tensor(x), vl.tensor(y)
    tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
    vo, to = vopt.Adam(vm.parameters(), lr=1e-3), torch.optim.Adam(tm.parameters(), lr=1e-3)

    def vstep():
        vo.zero_grad()
        F.cross_entropy(vm(vx), vy).backward()
        vo.step()

    def tstep():
        to.zero_grad()
        torch.nn.functional.cross_entropy(tm(tx), ty).backward()
        to.step()
    return vstep, tstep


def _status_kib(key):
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def _rss_child(lib):
    """Run in a subprocess: the largest rise of resident memory (KiB) during one LeNet step.

    Before each step the kernel's high-water mark is reset to the current RSS (writing 5 to
    /proc/self/clear_refs); after it, VmHWM - VmRSS(before) is that step's peak extra memory.
    The parent starts this process with glibc's mmap threshold at 64 KiB so freed buffers
    leave the resident set (otherwise the allocator's cache hides the peak).  Step 1 (with
    one-time allocations such as the optimiser state) is reported separately.
    """
    vstep, tstep = lenet_steps()
    f = vstep if lib == "varlens" else tstep
    out = []
    for _ in range(4):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        base = _status_kib("VmRSS")
        f()
        out.append(_status_kib("VmHWM") - base)
    print(f"{max(out[1:])} {out[0]}")


def rss_delta(lib):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", lib, "--threads", _threads],
                         capture_output=True, text=True, check=True, env=env).stdout.split()
    return int(out[0]), int(out[1])


def tracemalloc_peak():
    import tracemalloc
    vstep, _ = lenet_steps()
    vstep()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    vstep()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def op_times(steps=100):
    """Process time per LeNet step spent in each op's forward and backward (conv and pool
    split by layer), measured by wrapping every Function subclass; the rest is 'other'."""
    from collections import defaultdict
    from varlens.autograd.function import Function
    acc = defaultdict(float)
    clock = time.process_time
    saved = []

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    def wrap(cls, meth, tag):
        f0 = cls.__dict__[meth]
        layered = cls.__name__.startswith(("Conv", "MaxPool"))

        def f(self, *a, **k):
            t = clock()
            r = f0(self, *a, **k)
            key = cls.__name__ + tag
            if layered:  # the input's (forward) or cotangent's (backward) shape tells the layers apart
                key += " " + "x".join(str(d) for d in a[0].shape)
            acc[key] += clock() - t
            return r
        saved.append((cls, meth, f0))
        setattr(cls, meth, f)

    for cls in set(subclasses(Function)):
        for meth, tag in (("forward", " forward"), ("backward", " backward")):
            if meth in cls.__dict__:
                wrap(cls, meth, tag)
    try:
        vstep, _ = lenet_steps()
        for _ in range(5):
            vstep()
        acc.clear()
        t0 = clock()
        for _ in range(steps):
            vstep()
        total = clock() - t0
    finally:
        for cls, meth, f0 in saved:
            setattr(cls, meth, f0)
    rows = sorted(acc.items(), key=lambda kv: -kv[1])
    rows.append(("other (engine, module calls, Adam, zero_grad)", total - sum(acc.values())))
    return total / steps, [(k, v / steps) for k, v in rows]


def profile():
    import cProfile
    import pstats
    per_step, rows = op_times()
    print(f"varlens LeNet step: {per_step * 1e3:.2f} ms of process time; by op:")
    for k, v in rows:
        print(f"  {v * 1e3:7.3f} ms  {100 * v / per_step:5.1f}%  {k}")
    vstep, _ = lenet_steps()
    vstep()
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    for _ in range(30):
        vstep()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(15)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rss-child", default=None)
    ap.add_argument("--winograd", action="store_true", help="only: Winograd against shifted rows, 3x3 rows")
    a = ap.parse_args()
    if a.rss_child:
        return _rss_child(a.rss_child)
    if a.winograd:
        return winograd_ab(a.rounds)
    if a.profile:
        return profile()
    lines = []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    lines.append(f"{now}; {machine()}; NumPy {np.__version__}, PyTorch {torch.__version__}, Python "
                 f"{platform.python_version()}; BLAS and PyTorch on {_threads} thread(s); float32; median of "
                 f"{a.rounds} interleaved rounds; load average {load:.1f} at the start. Ratio = PyTorch time / "
                 "varlens time (> 1: varlens faster).")
    lines.append("")
    lines.append("**(1) Conv2d and max-pool forward + backward** (conv: dL/dx, dL/dW, dL/db), batch 64, ms per call:")
    lines.append("")
    lines.append("| layer | varlens ms | PyTorch ms | ratio |")
    lines.append("|---|---:|---:|---:|")
    for label, *case in CONV_CASES:
        tv, tt = conv_case(*case, rounds=a.rounds)
        lines.append(f"| {label} | {tv * 1e3:.2f} | {tt * 1e3:.2f} | {tt / tv:.2f} |")
        print(lines[-1], flush=True)
    for label, *case in POOL_CASES:
        tv, tt = pool_case(*case, rounds=a.rounds)
        lines.append(f"| MaxPool2d forward + backward: {label} | {tv * 1e3:.2f} | {tt * 1e3:.2f} | {tt / tv:.2f} |")
        print(lines[-1], flush=True)
    vstep, tstep = lenet_steps()
    tv, tt = interleaved(vstep, tstep, a.rounds, 10)
    lines.append("")
    lines.append("**(2) LeNet-5 training step**, batch 64, Adam (forward, loss, backward, update):")
    lines.append("")
    lines.append("| | varlens | PyTorch | ratio (target >= 1) |")
    lines.append("|---|---:|---:|---:|")
    lines.append(f"| steps/s | {1 / tv:.0f} | {1 / tt:.0f} | {tt / tv:.2f} ({'met' if tt >= tv else 'not met'}) |")
    print(lines[-1], flush=True)
    tm_peak = tracemalloc_peak()
    (v1, v0), (t1, t0) = rss_delta("varlens"), rss_delta("torch")
    lines.append("")
    lines.append("**(3) Peak memory of a LeNet training step** (batch 64; method in the script's docstring):")
    lines.append("")
    lines.append("| measure | varlens | PyTorch | varlens / PyTorch (target <= 1.5) |")
    lines.append("|---|---:|---:|---:|")
    lines.append(f"| tracemalloc peak of one step (NumPy arrays) | {tm_peak / 2**20:.1f} MiB | n/a | |")
    ratio = v1 / t1 if t1 > 0 else float("nan")
    lines.append(f"| peak RSS rise during a step (steps 2-4) | {v1 / 1024:.1f} MiB | {t1 / 1024:.1f} MiB | "
                 f"{ratio:.2f} ({'met' if ratio <= 1.5 else 'not met'}) |")
    lines.append(f"| peak RSS rise during step 1 (with optimiser state) | {v0 / 1024:.1f} MiB | {t0 / 1024:.1f} MiB | "
                 f"{v0 / t0 if t0 else float('nan'):.2f} |")
    per_step, rows = op_times(50)
    lines.append("")
    lines.append(f"**(4) Where varlens' LeNet step goes** (process time per step, {per_step * 1e3:.2f} ms in all; "
                 "measured after (2) with every op wrapped in a timer, so read the shares; conv and pool labelled "
                 "by the shape of their input (forward) or cotangent (backward)):")
    lines.append("")
    lines.append("| op | ms per step | share |")
    lines.append("|---|---:|---:|")
    for k, v in rows:
        if v >= 0.02e-3:
            lines.append(f"| {k} | {v * 1e3:.3f} | {100 * v / per_step:.0f}% |")
    lines.append("")
    lines.append(NOTES.rstrip("\n"))
    text = "\n".join(lines)
    print(text)
    if a.write:
        path = os.path.join(HERE, "RESULTS.md")
        body = open(path).read()
        block = f"{SECTION}\n\n{text}\n"
        if SECTION in body:
            body = re.sub(re.escape(SECTION) + r"\n.*?(?=\n## |\Z)", lambda m: block, body, flags=re.S)
        else:
            body = body.rstrip("\n") + "\n\n" + block
        open(path, "w").write(body)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
