"""varlens on the GPU (CuPy) against PyTorch CUDA eager, in the same run, as ratios (issue 21).

Four figures, each beside the issue's target:

(a) GPT training step: 6 layers, d_model 384, 6 heads, context 256, batch 64, vocabulary 65
    (a character vocabulary), AdamW, float32.  varlens trains varlens/models/gpt.py; PyTorch its
    layer-for-layer twin (benchmarks/_common.py) loaded with the same weights.  Ratio: varlens step time over
    PyTorch's (target <= 1.5, goal 1.0).
(b) MLP 4096-4096-4096 training step (Linear, ReLU, Linear, cross-entropy over 4096 classes,
    SGD with momentum 0.9), batch 2048, float32.  Ratio: varlens throughput (samples/s) over
    PyTorch's (target >= 0.8).
(c) matmul throughput, float32 4096 x 4096 @ 4096 x 4096 (no autograd).  Ratio of TFLOP/s
    (target >= 0.9, i.e. within 10%).
(d) peak GPU memory of one step of (a), after one warm-up step (weights, gradients and AdamW
    state are live): varlens.cuda.max_memory_allocated over torch.cuda.max_memory_allocated, each
    library's own allocator counting only its own arrays (target <= 1.3).  Measured after the
    timings, when nothing else of either library is live.

Timing: the two libraries' steps run in interleaved blocks (benchmarks/_common.py), the order
shuffled every round; every step ends with a device synchronisation, so a step's time includes
its GPU work.  Neither library uses TF32 (CuPy's default, and PyTorch's for float32 matmul).
Both models start from the same weights; the first losses must agree before anything is timed.

    python benchmarks/bench_gpu.py              # on a machine with an NVIDIA GPU, CuPy and PyTorch CUDA
    python benchmarks/bench_gpu.py --write      # also write benchmarks/gpu_results/bench_gpu-<date>-<gpu>.md
    python benchmarks/bench_gpu.py --simulated  # tiny sizes on the simulated device: a smoke check only

Without CuPy or a GPU it prints so and exits 0 (nothing is measured).  ``--simulated`` runs the
same code at tiny sizes on varlens's simulated CUDA device (varlens/core/simulated_cuda.py) with
PyTorch on its CPU: its figures measure nothing and are never written (tests/test_bench_gpu.py
runs it so this script cannot rot).
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import pathlib
import re
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import interleaved_blocks, machine, torch_gpt  # noqa: E402  (benchmarks/_common.py)

RESULTS_DIR = pathlib.Path(__file__).with_name("gpu_results")

FULL = dict(gpt=dict(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384, batch=64),
            mlp=dict(width=4096, batch=2048), matmul=4096, steps=30, block=5, warm=3)
SIMULATED = dict(gpt=dict(vocab_size=65, block_size=16, n_layer=2, n_head=2, n_embd=32, batch=4),
                 mlp=dict(width=64, batch=32), matmul=64, steps=4, block=2, warm=1)

# (what the ratio is, target, True when the ratio must be at most the target)
TARGETS = {
    "gpt": ("varlens / PyTorch step time", 1.5, True),
    "mlp": ("varlens / PyTorch throughput", 0.8, False),
    "matmul": ("varlens / PyTorch TFLOP/s", 0.9, False),
    "memory": ("varlens / PyTorch peak allocated", 1.3, True),
}


# ----------------------------------------------------------------------- the MLPs

def torch_mlp(width):
    import torch.nn as tnn
    return tnn.Sequential(tnn.Linear(width, width), tnn.ReLU(), tnn.Linear(width, width))


def varlens_mlp(width):
    import varlens.nn as vnn
    return vnn.Sequential(vnn.Linear(width, width), vnn.ReLU(), vnn.Linear(width, width))


def copy_weights(vm, tm):
    """Load varlens model ``vm``'s weights (on the CPU) into torch model ``tm``."""
    import torch
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in vm.state_dict().items()})


# ----------------------------------------------------------------------- the devices

class Devices:
    """The varlens device ('cuda': CuPy, or the simulator) and PyTorch's, with their syncs."""

    def __init__(self, lib, simulated):
        import torch

        import varlens as vl
        self.lib, self.simulated = lib, simulated
        self.tdev = "cuda" if torch.cuda.is_available() else "cpu"
        torch.backends.cuda.matmul.allow_tf32 = False    # (its default; CuPy's too, unless CUPY_TF32=1)
        if simulated:
            torch.set_num_threads(1)     # (the smoke check on a shared CPU: no thread pool to wait on)
        self._vl, self._torch = vl, torch

    def vsync(self):
        self._vl.cuda.synchronize()
        if not self.simulated:
            self.lib.cuda.Device().synchronize()

    def tsync(self):
        if self.tdev == "cuda":
            self._torch.cuda.synchronize()

    def gpu_name(self):
        if self.simulated:
            return "the simulated CUDA device (varlens/core/simulated_cuda.py, NumPy on the CPU)"
        props = self.lib.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return f"{name} ({props['totalGlobalMem'] / 2**30:.0f} GiB)"


# ----------------------------------------------------------------------- the workloads

def train_step(opt, loss_of, sync):
    """A training step of either library: zero_grad, ``loss_of()``, backward, the optimiser's
    step, then wait for the device (so the step's time includes its GPU work)."""
    def step():
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        opt.step()
        sync()
        return loss
    return step


def gpt_steps(dev, cfg, seed=0):
    """The two GPT training steps (no-argument functions ending in a sync), from the same weights."""
    import torch

    import varlens as vl
    from varlens.models.gpt import GPT, GPTConfig
    c = {k: v for k, v in cfg.items() if k != "batch"}
    V = c["vocab_size"]
    vl.manual_seed(seed)
    vm = GPT(GPTConfig(**c))
    tm = torch_gpt(V, c["block_size"], c["n_layer"], c["n_head"], c["n_embd"])
    copy_weights(vm, tm)
    vm.to("cuda")
    tm.to(dev.tdev)
    rng = np.random.default_rng(seed)
    host = []
    for _ in range(4):
        x = rng.integers(0, c["vocab_size"], (cfg["batch"], c["block_size"]))
        host.append((x, np.roll(x, -1, axis=1)))
    vb = [(vl.tensor(x).cuda(), vl.tensor(y).cuda()) for x, y in host]
    tb = [(torch.from_numpy(x).to(dev.tdev), torch.from_numpy(y).to(dev.tdev)) for x, y in host]
    vopt = vl.optim.AdamW(vm.parameters(), lr=3e-4, weight_decay=0.1)
    topt = torch.optim.AdamW(tm.parameters(), lr=3e-4, weight_decay=0.1)
    it = {"v": 0, "t": 0}

    def vloss():
        x, y = vb[it["v"] % 4]
        it["v"] += 1
        return vm(x, y)[1]

    def tloss():
        x, y = tb[it["t"] % 4]
        it["t"] += 1
        return torch.nn.functional.cross_entropy(tm(x).reshape(-1, V), y.reshape(-1))
    return train_step(vopt, vloss, dev.vsync), train_step(topt, tloss, dev.tsync)


def mlp_steps(dev, cfg, seed=0):
    import torch

    import varlens as vl
    w, b = cfg["width"], cfg["batch"]
    vl.manual_seed(seed)
    vm, tm = varlens_mlp(w), torch_mlp(w)
    copy_weights(vm, tm)
    vm.to("cuda")
    tm.to(dev.tdev)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, w)).astype(np.float32)
    y = rng.integers(0, w, b)
    vx, vy = vl.tensor(x).cuda(), vl.tensor(y).cuda()
    tx, ty = torch.from_numpy(x).to(dev.tdev), torch.from_numpy(y).to(dev.tdev)
    vopt = vl.optim.SGD(vm.parameters(), lr=0.01, momentum=0.9)
    topt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)

    return (train_step(vopt, lambda: vl.nn.functional.cross_entropy(vm(vx), vy), dev.vsync),
            train_step(topt, lambda: torch.nn.functional.cross_entropy(tm(tx), ty), dev.tsync))


def matmul_steps(dev, n, seed=0):
    import torch

    import varlens as vl
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    va, vb = vl.tensor(a).cuda(), vl.tensor(b).cuda()
    ta, tb = torch.from_numpy(a).to(dev.tdev), torch.from_numpy(b).to(dev.tdev)

    def vstep():
        c = va @ vb
        dev.vsync()
        return c

    def tstep():
        c = ta @ tb
        dev.tsync()
        return c
    return vstep, tstep


def first_losses_agree(name, vstep, tstep):
    """One step of each from the same weights and batch: the losses must agree (else the timing
    compares two different computations)."""
    lv, lt = float(vstep().detach().cpu()), float(tstep().detach().cpu())
    if not np.isclose(lv, lt, rtol=2e-3, atol=1e-5):
        raise SystemExit(f"bench_gpu: {name}: the first losses differ (varlens {lv:.6g}, PyTorch {lt:.6g}): "
                         "the two models do not compute the same thing")
    return lv, lt


def peak_memory(dev, cfg):
    """Peak allocated bytes of one GPT training step in each library (after a warm-up step)."""
    import torch

    import varlens as vl
    out = {}
    for lib in ("varlens", "torch"):
        vstep, tstep = gpt_steps(dev, cfg)
        step = vstep if lib == "varlens" else tstep
        step()                                # allocates the gradients and AdamW's state
        if lib == "varlens":
            vl.cuda.reset_peak_memory_stats()
            step()
            out[lib] = vl.cuda.max_memory_allocated()
        elif dev.tdev == "cuda":
            torch.cuda.reset_peak_memory_stats()
            step()
            out[lib] = torch.cuda.max_memory_allocated()
        else:
            out[lib] = 0                      # (--simulated without PyTorch CUDA: nothing to read)
        del vstep, tstep, step
        gc.collect()
    return out["varlens"], out["torch"]


def median_time(vstep, tstep, sizes):
    wall, _ = interleaved_blocks({"varlens": vstep, "torch": tstep}, sizes["steps"], block=sizes["block"],
                                 warm=sizes["warm"])
    return statistics.median(wall["varlens"]), statistics.median(wall["torch"])


# ----------------------------------------------------------------------- report

def verdict(key, ratio):
    _, target, at_most = TARGETS[key]
    if ratio is None or not np.isfinite(ratio):
        return "n/a", f"{'<=' if at_most else '>='} {target}"
    ok = ratio <= target if at_most else ratio >= target
    return ("meets" if ok else "misses"), f"{'<=' if at_most else '>='} {target}"


def run(sizes, dev, simulated):
    import torch
    rows = []
    g = sizes["gpt"]

    vstep, tstep = gpt_steps(dev, g)
    first_losses_agree("GPT", vstep, tstep)
    tv, tt = median_time(vstep, tstep, sizes)
    rows.append(("gpt", f"(a) GPT step ({g['n_layer']} layers, d {g['n_embd']}, {g['n_head']} heads, "
                        f"context {g['block_size']}, batch {g['batch']}, AdamW), ms",
                 tv * 1e3, tt * 1e3, tv / tt))
    del vstep, tstep
    gc.collect()

    m = sizes["mlp"]
    vstep, tstep = mlp_steps(dev, m)
    first_losses_agree("MLP", vstep, tstep)
    tv, tt = median_time(vstep, tstep, sizes)
    rows.append(("mlp", f"(b) MLP {m['width']}-{m['width']}-{m['width']} step (batch {m['batch']}, SGD), "
                        "samples/s", m["batch"] / tv, m["batch"] / tt, tt / tv))
    del vstep, tstep
    gc.collect()

    n = sizes["matmul"]
    vstep, tstep = matmul_steps(dev, n)
    tv, tt = median_time(vstep, tstep, sizes)
    fl = 2.0 * n ** 3 / 1e12
    rows.append(("matmul", f"(c) matmul float32 {n}x{n} @ {n}x{n}, TFLOP/s", fl / tv, fl / tt, tt / tv))
    del vstep, tstep
    gc.collect()

    # last: varlens counts its peak with a CuPy memory hook, a Python call per allocation, which
    # stays installed once started and must not be live while the steps above are timed
    mv, mt = peak_memory(dev, g)
    mem_ratio = mv / mt if mv and mt else None
    rows.append(("memory", "(d) peak GPU memory of step (a), MiB", mv / 2**20, mt / 2**20, mem_ratio))

    now = datetime.datetime.now(datetime.timezone.utc)
    cupy_v = "simulated" if simulated else f"CuPy {dev.lib.__version__}"
    lines = ["## varlens on CUDA against PyTorch CUDA eager (bench_gpu.py)", ""]
    if simulated:
        lines += ["**Simulated smoke check (`--simulated`): tiny sizes, varlens on the simulated device, "
                  f"PyTorch on its {dev.tdev.upper()}. These figures measure nothing.**", ""]
    lines += [f"Measured {now:%Y-%m-%d %H:%M} UTC on {dev.gpu_name()}; host {machine()}; {cupy_v}, "
              f"PyTorch {torch.__version__} (device {dev.tdev}), varlens {_version()}; "
              f"`python benchmarks/bench_gpu.py` (median of {max(sizes['steps'] // sizes['block'], 1)} "
              f"interleaved blocks of {sizes['block']} steps).", "",
              "| workload | varlens | PyTorch | ratio | target | |", "|---|---|---|---|---|---|"]
    for key, name, v, t, r in rows:
        word, tgt = verdict(key, r)
        word = "(simulated)" if simulated else word
        rs = "n/a" if r is None else f"{r:.2f}"
        lines.append(f"| {name} | {v:.4g} | {t:.4g} | {rs} ({TARGETS[key][0]}) | {tgt} | {word} |")
    if mem_ratio is None:
        lines += ["", "(d): n/a: a peak of 0 bytes was read (varlens.cuda.max_memory_allocated or "
                  "torch.cuda.max_memory_allocated counts nothing on this device)."]
    return "\n".join(lines) + "\n", now


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("varlens")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulated", action="store_true",
                    help="tiny sizes on the simulated CUDA device (a smoke check; measures nothing)")
    ap.add_argument("--write", action="store_true", help="write the table to benchmarks/gpu_results/")
    ap.add_argument("--steps", type=int, help="timed steps per library and workload")
    a = ap.parse_args(argv)
    from varlens.core import array as B
    if a.simulated:
        if a.write:
            ap.error("--write records measurements: not with --simulated")
        prev = B._cuda[0]
        lib = B.simulate_cuda()
        sizes = dict(SIMULATED)
    else:
        lib = B.cuda_namespace(required=False)
        if lib is None or getattr(lib, "simulated", False):
            why = "the simulator was chosen (VARLENS_SIMULATED_CUDA)" if lib is not None else \
                f"CuPy {B._cupy_problem[0]}"
            print(f"bench_gpu: no CUDA GPU with CuPy here ({why}); nothing measured. Run it on a machine "
                  "with an NVIDIA GPU (`make test-gpu` installs CuPy), or `--simulated` for a smoke check.")
            return 0
        sizes = dict(FULL)
        import torch
        if not torch.cuda.is_available():
            print(f"bench_gpu: CuPy sees a GPU but this PyTorch ({torch.__version__}) has no CUDA: the "
                  "ratios need PyTorch CUDA. Install a CUDA build of torch into this environment "
                  "(see benchmarks/gpu_results/README.md); nothing measured.")
            return 2
    if a.steps:
        sizes["steps"] = a.steps
    dev = Devices(lib, a.simulated)
    try:
        text, now = run(sizes, dev, a.simulated)
    finally:
        if a.simulated:
            B._cuda[0] = prev       # leave the device choice as found (the test runs this in-process)
    print(text)
    if a.write:
        RESULTS_DIR.mkdir(exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", dev.gpu_name().split(" (")[0]).strip("-").lower()
        path = RESULTS_DIR / f"bench_gpu-{now:%Y-%m-%d}-{slug}.md"
        path.write_text(text)
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
