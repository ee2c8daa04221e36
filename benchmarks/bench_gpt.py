"""GPT training step and generation speed, varlens against PyTorch eager in the same run.

Model: 2 layers, d_model 128, 4 heads, context 64, vocab 96 (a character vocabulary),
batch 32, AdamW (lr 3e-4), float32.  The PyTorch model (torch_gpt, benchmarks/_common.py)
mirrors varlens's GPT (varlens/models/gpt.py) layer for layer and starts from the same weights.
Peak memory of a training step: each library trains in a fresh subprocess (the same
model, batch and optimizer).  Three steps run first; they pay the one-time costs (varlens:
importing numba, about 50 MiB, and loading its cached compiled kernels, about 90 MiB, measured
2026-11-26; PyTorch: its own lazy initialisation; both: the AdamW state, made at the first
step).  Then, in each child alike: gc.collect(), glibc's malloc_trim(0) (freed heap pages go
back to the system, so the baseline is the memory in use, not what the allocator kept from
the warm-up), the high-water mark
VmHWM is reset (writing 5 to /proc/self/clear_refs), the baseline VmRSS is read, three more
steps run, and the row is VmHWM minus that baseline: the memory a warm training step adds
(saved activations, gradients, temporaries, allocator fragmentation).  The earlier definition,
VmHWM over the first three steps minus VmRSS before the first one (one-time costs included),
is printed below the table for comparison.

    python benchmarks/bench_gpt.py            # print the table
    python benchmarks/bench_gpt.py --write    # also refresh its section of RESULTS.md
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    # one thread for both libraries (as the other benchmarks): the machine is shared
    os.environ[_v] = os.environ.get("VARLENS_BENCH_THREADS", "1")

import numpy as np  # noqa: E402
from _common import machine, torch_gpt  # noqa: E402  (benchmarks/_common.py)

HERE = os.path.dirname(os.path.abspath(__file__))
SECTION = "## GPT training step and generation (bench_gpt.py)"
CFG = dict(vocab_size=96, block_size=64, n_layer=2, n_head=4, n_embd=128)
BATCH = 32


def torch_loss(tm, x, y):
    import torch.nn.functional as TF
    return TF.cross_entropy(tm(x).reshape(-1, CFG["vocab_size"]), y.reshape(-1))


def build():
    import torch

    import varlens as vl
    from varlens.models.gpt import GPT, GPTConfig
    vl.manual_seed(0)
    vm = GPT(GPTConfig(**CFG))
    tm = torch_gpt(CFG["vocab_size"], CFG["block_size"], CFG["n_layer"], CFG["n_head"], CFG["n_embd"])
    sd = {k: torch.from_numpy(v.numpy().copy()) for k, v in vm.state_dict().items()}
    tm.load_state_dict(sd)
    return vm, tm


def data(step):
    rng = np.random.default_rng(step)
    x = rng.integers(0, 96, (BATCH, 64))
    return x, np.roll(x, -1, axis=1)


def train_step(lib, vm, tm, pairs):
    """step(i): one AdamW training step of library ``lib`` on batch i (mod len(pairs)) of the
    NumPy (x, y) ``pairs``, written as a user writes it."""
    import torch

    import varlens as vl
    if lib == "varlens":
        opt = vl.optim.AdamW(vm.parameters(), lr=3e-4)
        batches = [(vl.tensor(a), vl.tensor(b)) for a, b in pairs]

        def step(i):
            x, y = batches[i % len(batches)]
            _, loss = vm(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
    else:
        opt = torch.optim.AdamW(tm.parameters(), lr=3e-4)
        batches = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in pairs]

        def step(i):
            x, y = batches[i % len(batches)]
            loss = torch_loss(tm, x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
    return step


def time_steps(lib, n):
    vm, tm = build()
    step = train_step(lib, vm, tm, [data(i) for i in range(4)])
    step(0)
    t0 = time.perf_counter()
    for i in range(n):
        step(i)
    return n / (time.perf_counter() - t0)


def gen_tokens_per_s(lib, n_tokens=64):
    import torch

    import varlens as vl
    vm, tm = build()
    start = np.array([[1, 2, 3, 4]])
    if lib == "varlens":
        t0 = time.perf_counter()
        vm.generate(vl.tensor(start), n_tokens, temperature=0)
        return n_tokens / (time.perf_counter() - t0)
    tm.eval()
    idx = torch.from_numpy(start)
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(n_tokens):  # PyTorch eager has no KV cache here: full prefix each token
            logits = tm(idx[:, -64:])[:, -1]
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], 1)
    return n_tokens / (time.perf_counter() - t0)


def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _malloc_trim():
    """glibc's malloc_trim(0): hand freed heap memory back to the system; False where unavailable."""
    import ctypes
    import ctypes.util
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
        return True
    except (OSError, AttributeError):
        return False


def _reset_hwm():
    """Reset VmHWM to the current VmRSS (Linux >= 4.0); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_memory_child(lib):
    """Run in a subprocess: MiB of peak RSS above baseline, by both definitions (module docstring)."""
    import gc
    vm, tm = build()
    step = train_step(lib, vm, tm, [data(0)])
    base = _status("VmRSS")
    for i in range(3):    # the earlier definition's window (and the warm-up of the new one)
        step(i)
    first = _status("VmHWM") - base
    gc.collect()
    trimmed = _malloc_trim()
    reset = _reset_hwm()
    base = _status("VmRSS")
    for i in range(3):
        step(i)
    warm = _status("VmHWM") - base
    print(json.dumps({"peak_mib": warm, "first_steps_mib": first, "trimmed": trimmed, "reset": reset}))


def peak_memory(lib):
    out = subprocess.run([sys.executable, __file__, "--memory-child", lib], capture_output=True,
                         text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if not r["reset"]:
        raise RuntimeError("bench_gpt: /proc/self/clear_refs refused the reset of VmHWM, so a warm "
                           "step's peak cannot be separated from the warm-up's (needs Linux >= 4.0)")
    return r


def _load():
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-child")
    a = ap.parse_args()
    if a.memory_child:
        peak_memory_child(a.memory_child)
        return
    import torch
    load0 = _load()
    rates = {"varlens": [], "torch": []}
    for _ in range(a.rounds):  # interleave rounds: the machine is shared
        for lib in rates:
            rates[lib].append(time_steps(lib, a.steps))
    v, t = statistics.median(rates["varlens"]), statistics.median(rates["torch"])
    gv, gt = gen_tokens_per_s("varlens"), gen_tokens_per_s("torch")
    mv, mt = peak_memory("varlens"), peak_memory("torch")
    rows = [
        ("training steps/s (batch 32 x 64 tokens)", v, t),
        ("generation tokens/s (greedy, batch 1)", gv, gt),
    ]
    lines = [SECTION, "",
             f"Measured {datetime.date.today()} on {machine()}, PyTorch {torch.__version__}, "
             f"`python benchmarks/bench_gpt.py --write` (median of {a.rounds} interleaved rounds of {a.steps} steps); "
             f"load average before / after: {load0} / {_load()} (the machine is shared: 2 cores).",
             "", "| workload | varlens | PyTorch | ratio |", "|---|---|---|---|"]
    for name, x, y in rows:
        lines.append(f"| {name} | {x:.2f} | {y:.2f} | {x / y:.2f} |")
    pv, pt = mv["peak_mib"], mt["peak_mib"]
    lines.append(f"| peak memory of a warm training step above baseline (MiB) | {pv:.0f} | {pt:.0f} | "
                 f"{pv / pt:.2f} (varlens/PyTorch; target <= 1.5) |")
    fv, ft = mv["first_steps_mib"], mt["first_steps_mib"]
    lines += ["", "Memory: each library in a fresh process, after three warm-up steps, from a baseline taken "
              "after gc and malloc_trim with VmHWM reset (see the script's docstring)"
              + ("" if mv["trimmed"] and mt["trimmed"] else "; malloc_trim was not available") + ". "
              f"The earlier definition (VmHWM over the first three steps above VmRSS before the first, "
              f"which counts one-time costs: importing numba and loading its kernels, AdamW's state) "
              f"gives {fv:.0f} / {ft:.0f} MiB = {fv / ft:.2f}x in this run."]
    lines += ["", "Generation: varlens uses its key/value cache; the PyTorch loop re-runs the prefix "
              "(eager PyTorch has no built-in cache), so that row compares the two as a user would "
              "write them.", ""]
    text = "\n".join(lines)
    print(text)
    if a.write:
        path = os.path.join(HERE, "RESULTS.md")
        cur = open(path).read()
        pat = re.compile(re.escape(SECTION) + r".*?(?=\n## |\Z)", re.S)
        cur = pat.sub(text.rstrip() + "\n", cur) if pat.search(cur) else cur.rstrip() + "\n\n" + text
        with open(path, "w") as f:
            f.write(cur)


if __name__ == "__main__":
    main()
