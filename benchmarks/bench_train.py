"""End-to-end training throughput of the fashion-mlp recipe beside PyTorch 2.13, in one run.

    .venv/bin/python benchmarks/bench_train.py [--steps 300] [--quick] [--no-write]

Both sides train the same MLP (784-256-128-10, ReLU, dropout 0.1) with Adam (lr 1e-3,
weight decay 1e-4), batch 128, cross-entropy, on the z-scored Fashion-MNIST training
images (`make data`), for the same number of optimiser steps, with the data loading
inside the timed loop:

- varlens: the recipe's own pieces (varlens DataLoader over a TensorDataset, shuffled by
  a seeded generator, and the Trainer's train_epoch, which also computes accuracy);
- PyTorch: torch.utils.data.DataLoader over a TensorDataset (shuffle=True), and a plain
  loop (forward, loss, backward, step, accuracy);
- for information, PyTorch with batches cut by hand from a random permutation (no
  DataLoader), the fastest way to feed it.

Samples per second = steps x batch / time.  Timings are the best of several repeats,
interleaved so both sides see the same load; the clock is process CPU time and BLAS and
PyTorch run on one thread each (VARLENS_BENCH_THREADS to change it), because on a shared
2-core machine wall-clock time and extra threads measure the neighbours.  Ratios > 1 mean
varlens is faster.  The "training" section of benchmarks/RESULTS.md is rewritten.
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
    os.environ[_v] = THREADS  # before NumPy and PyTorch load their BLAS

import numpy as np  # noqa: E402
import torch  # noqa: E402

import varlens as vl  # noqa: E402
from _common import machine, write_section  # noqa: E402  (benchmarks/_common.py)

torch.set_num_threads(int(THREADS))
RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")
SECTION = "## training"
_clock = time.process_time
BATCH = 128


def load_data():
    from varlens.train.recipes import get_recipe, load_arrays
    (tr, _, _), _, _ = load_arrays(get_recipe("fashion-mlp"))
    return tr


def make_varlens(X, y, steps):
    from varlens import nn, optim
    from varlens.models import MLP
    from varlens.train.trainer import Trainer
    from varlens.utils.data import DataLoader, RandomSampler, TensorDataset
    vl.manual_seed(0)
    model = MLP(784, (256, 128), 10, dropout=0.1, init="he")
    opt = optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    ds = TensorDataset(vl.tensor(X), vl.tensor(y))
    sampler = RandomSampler(ds, num_samples=steps * BATCH, generator=vl.Generator().manual_seed(0))
    dl = DataLoader(ds, batch_size=BATCH, sampler=sampler)
    tr = Trainer(model, opt, nn.CrossEntropyLoss(), quiet=True)

    def run():
        tr.train_epoch(dl, 0)

    def load_only():
        for _ in dl:
            pass
    return run, load_only, model


def make_torch(X, y, steps, vl_model, loader=True):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(128, 10))
    with torch.no_grad():  # start from the same weights as varlens
        for (k, v), p in zip(vl_model.state_dict().items(), model.parameters()):
            p.copy_(torch.from_numpy(np.array(v.numpy())))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    g = torch.Generator().manual_seed(0)
    if loader:
        ds = torch.utils.data.TensorDataset(Xt, yt)
        sampler = torch.utils.data.RandomSampler(ds, num_samples=steps * BATCH, generator=g)
        dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, sampler=sampler)
    else:
        def dl_iter():
            reps = -(-steps * BATCH // len(Xt))
            perm = torch.cat([torch.randperm(len(Xt), generator=g) for _ in range(reps)])
            for s in range(steps):
                idx = perm[s * BATCH:(s + 1) * BATCH]
                yield Xt[idx], yt[idx]

    def run():
        model.train()
        correct = 0
        for xb, yb in (dl if loader else dl_iter()):
            out = model(xb)
            loss = loss_fn(out, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
            correct += int((out.argmax(1) == yb).sum())
    return run


def bench(steps, repeat):
    X, y = load_data()
    X = np.ascontiguousarray(X, dtype=np.float32)
    y = y.astype(np.int64)
    v_run, v_load, v_model = make_varlens(X, y, steps)
    runs = {"varlens": v_run, "torch DataLoader": make_torch(X, y, steps, v_model, loader=True),
            "torch, batches by hand": make_torch(X, y, steps, v_model, loader=False),
            "varlens DataLoader alone (no training)": v_load}
    best = {k: float("inf") for k in runs}
    wall = {k: float("inf") for k in runs}
    for name, fn in runs.items():  # warm-up
        fn()
    for _ in range(repeat):
        for name, fn in runs.items():
            w0, c0 = time.perf_counter(), _clock()
            fn()
            best[name] = min(best[name], _clock() - c0)
            wall[name] = min(wall[name], time.perf_counter() - w0)
    return {k: (steps * BATCH / best[k], steps * BATCH / wall[k]) for k in runs}


def render(res, steps, repeat):
    v = res["varlens"][0]
    lines = [SECTION, "",
             f"`benchmarks/bench_train.py` ({datetime.date.today().isoformat()}; {machine()}; "
             f"NumPy {np.__version__}, PyTorch {torch.__version__}; {THREADS} thread(s); "
             f"{steps} Adam steps of batch {BATCH}, best of {repeat}).",
             "",
             "fashion-mlp recipe (784-256-128-10 MLP, dropout 0.1, Adam), data loading included:",
             "",
             "| loop | samples/s (CPU time) | samples/s (wall) | varlens / this |",
             "|---|---:|---:|---:|"]
    for name, (cpu, wall) in res.items():
        ratio = "—" if name == "varlens" or "alone" in name else f"{v / cpu:.2f}"
        lines.append(f"| {name} | {cpu:,.0f} | {wall:,.0f} | {ratio} |")
    share = 100 * v / res["varlens DataLoader alone (no training)"][0]
    lines += ["", "The target is varlens / torch DataLoader >= 1: the varlens DataLoader cuts a batch out "
              "of a TensorDataset with one fancy index per tensor, where PyTorch's indexes sample by sample "
              "and collates.  The third row feeds PyTorch without a DataLoader, for comparison.  Data loading "
              f"(shuffled batches from the DataLoader alone) takes {share:.1f}% of the varlens training time."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="optimiser steps per timed run")
    ap.add_argument("--quick", action="store_true", help="50 steps, 2 repeats (smoke run)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args()
    steps, repeat = (50, 2) if args.quick else (args.steps, 3)
    text = render(bench(steps, repeat), steps, repeat)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
        print(f"wrote the training section of {RESULTS}")


if __name__ == "__main__":
    main()
