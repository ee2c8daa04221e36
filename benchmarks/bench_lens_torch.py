"""Cost of the variance lens on a PyTorch training step (targets: < 10% sampling every step,
< 2% every 10 steps, nothing detached, on the 784-512-512-10 MLP).

One step = zero_grad, forward (Linear/ReLU stack), CrossEntropyLoss, backward, (lens.step()),
SGD (momentum 0.9) step, float32, PyTorch eager on the CPU.  Variants, each on its own copy of
the same model, interleaved block by block (10 consecutive steps of each variant in a shuffled
order, repeated; the median block time / 10 is reported, robust to the load spikes of a shared
machine):

* PyTorch, no lens
* Lens(model) sampling every step (module and op records, activation and gradient statistics
  every step; weights, headroom and per-unit moments on one sampled step in 10, the default)
* Lens(model, ops=False): module records only
* Lens(model, every=10)
* a lens attached then detached

    python benchmarks/bench_lens_torch.py            # print the table
    python benchmarks/bench_lens_torch.py --write    # also write its section of RESULTS.md
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):   # before BLAS loads
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from varlens.lens import Lens  # noqa: E402
from _common import interleaved_blocks, machine, write_section  # noqa: E402  (benchmarks/_common.py)

SECTION = "## Variance lens on a PyTorch model: overhead (bench_lens_torch.py)"


def build(sizes, seed=0):
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_step(model, x, y, lens=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        crit(model(x), y).backward()
        if lens is not None:
            lens.step()
        opt.step()
    return step


def run(sizes, batch, steps, threads=1):
    torch.set_num_threads(threads)
    g = np.random.default_rng(0)
    x = torch.from_numpy(g.standard_normal((batch, sizes[0])).astype(np.float32))
    y = torch.from_numpy(g.integers(0, sizes[-1], batch))
    variants = {}
    variants["no lens"] = make_step(build(sizes), x, y)
    m = build(sizes)
    variants["lens, every step"] = make_step(m, x, y, Lens(m))
    m = build(sizes)
    variants["lens, every step, modules only"] = make_step(m, x, y, Lens(m, ops=False))
    m = build(sizes)
    variants["lens, every 10 steps"] = make_step(m, x, y, Lens(m, every=10))
    m = build(sizes)
    Lens(m).detach()
    variants["lens detached"] = make_step(m, x, y)
    # blocks of 10 consecutive steps hold one detail (weights) step
    times, cpu = interleaved_blocks(variants, steps, block=10, warm=10)
    return ({k: statistics.median(v) for k, v in times.items()}, {k: statistics.median(v) for k, v in cpu.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--steps", type=int, default=300, help="interleaved steps per variant")
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [SECTION, "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {machine()}; load average "
             f"{load:.1f} at the start; PyTorch {torch.__version__} (1 thread), NumPy {np.__version__}; float32; "
             "one step = zero_grad, forward, CrossEntropyLoss, backward, (lens.step()), SGD(momentum=0.9) step; "
             f"{args.steps} steps of each variant in interleaved blocks of 10, median block time / 10. "
             "Command: `python benchmarks/bench_lens_torch.py --write`.", "",
             "| MLP | clock | no lens (ms) | lens every step (ms) | overhead | modules only | every 10 steps | "
             "detached |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for sizes, batch in (((784, 512, 512, 10), 128), ((64, 32, 10), 32)):
        wall, cpu = run(sizes, batch, args.steps if batch > 32 else args.steps * 3)
        for clock, med in (("CPU time", cpu), ("wall", wall)):
            base = med["no lens"]

            def pct(k):
                return f"{(med[k] / base - 1) * 100:+.1f}%"
            row = (f"| {'-'.join(map(str, sizes))}, batch {batch} | {clock} | {base * 1e3:.2f} | "
                   f"{med['lens, every step'] * 1e3:.2f} | {pct('lens, every step')} | "
                   f"{pct('lens, every step, modules only')} | {pct('lens, every 10 steps')} | "
                   f"{pct('lens detached')} |")
            print(row, flush=True)
            lines.append(row)
    lines += ["", "CPU time is the process's own (time.process_time; torch runs one thread), which a crowded "
              "machine inflates less than the wall clock: the wall figures include the time the process waited "
              "for a core. Targets (784-512-512-10): under 10% sampling every step, under 2% every 10 steps, "
              "nothing detached. "
              "Per sampled step the lens reads the input batch, 5 module outputs (shared with the 5 op records "
              "that made them) and their 5 gradients, each once, in place: one compiled call per tensor reads a CPU "
              "float32 tensor at its address and returns its summary (varlens/lens/torch_kernels.py, on the row "
              "kernel of varlens/lens/kernels.py), an output as soon as its layer has made it, a gradient in its "
              "hook as soon as the backward pass has made it; the rest is Python "
              "bookkeeping (queueing the layer calls, the gradient hooks, record updates), which is what dominates "
              "the tiny 64-32-10 MLP. A Sequential of Linear/ReLU needs neither a TorchFunctionMode nor module "
              "hooks: on a sampled step the lens's forward stands in for Sequential.forward, queues the layer calls "
              "and records them at the end of the forward, replaying the last pass's plan (the first pass takes the "
              "general path; detail steps, one sampled step in 10, replay too and add their extra reads: weights, "
              "per-unit and per-feature moments, headroom; each activation and gradient is read once, in one "
              "compiled call that also gives its column sums and headroom counts, shared by the op and module "
              "records and the next layer). Between sampled steps nothing of the lens is on the model (lens.step() puts "
              "its forward on before a sampled step and takes it off after), like a detached lens (differences "
              "there are noise)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    sys.exit(main())
