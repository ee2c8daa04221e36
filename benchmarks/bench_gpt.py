"""GPT training step and generation speed, varlens against PyTorch eager in the same run.

Model: 2 layers, d_model 128, 4 heads, context 64, vocab 96 (a character vocabulary),
batch 32, AdamW (lr 3e-4), float32.  The PyTorch model (torch_gpt, benchmarks/_common.py)
mirrors varlens's GPT (varlens/models/gpt.py) layer for layer and starts from the same weights.
Peak memory: each library trains in a fresh subprocess; we report the peak resident set
size (VmHWM) minus the resident size just before the first step.

    python benchmarks/bench_gpt.py            # print the table
    python benchmarks/bench_gpt.py --write    # also refresh its section of RESULTS.md
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
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


def time_steps(lib, n):
    import torch

    import varlens as vl
    vm, tm = build()
    if lib == "varlens":
        opt = vl.optim.AdamW(vm.parameters(), lr=3e-4)
        batches = [(vl.tensor(a), vl.tensor(b)) for a, b in (data(i) for i in range(4))]

        def step(i):
            x, y = batches[i % 4]
            _, loss = vm(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
    else:
        opt = torch.optim.AdamW(tm.parameters(), lr=3e-4)
        batches = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in (data(i) for i in range(4))]

        def step(i):
            x, y = batches[i % 4]
            loss = torch_loss(tm, x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
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


def peak_memory_child(lib):
    """Run in a subprocess: MiB of peak RSS above the RSS before training."""
    import torch

    import varlens as vl
    vm, tm = build()
    x, y = data(0)
    if lib == "varlens":
        opt = vl.optim.AdamW(vm.parameters(), lr=3e-4)
        xv, yv = vl.tensor(x), vl.tensor(y)
        base = _status("VmRSS")
        for _ in range(3):
            _, loss = vm(xv, yv)
            opt.zero_grad()
            loss.backward()
            opt.step()
    else:
        opt = torch.optim.AdamW(tm.parameters(), lr=3e-4)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        base = _status("VmRSS")
        for _ in range(3):
            loss = torch_loss(tm, xt, yt)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(json.dumps({"peak_mib": _status("VmHWM") - base}))


def peak_memory(lib):
    out = subprocess.run([sys.executable, __file__, "--memory-child", lib], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]


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
    lines.append(f"| peak memory of a training step above baseline (MiB) | {mv:.0f} | {mt:.0f} | "
                 f"{mv / mt:.2f} (varlens/PyTorch; target <= 1.5) |")
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
