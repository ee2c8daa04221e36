"""Helpers shared by the benchmark scripts: the machine's name and RESULTS.md sections."""
from __future__ import annotations

import os
import pathlib
import platform
import re
import subprocess

RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")


def machine():
    """CPU model and core count, as recorded beside every figure."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")),
                    platform.processor() or "unknown CPU")
    except OSError:
        name = platform.processor() or "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def write_section(section, text, path=RESULTS):
    """Replace the section headed ``section`` in RESULTS.md by ``text`` (or append it)."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(re.escape(section) + r".*?(?=\n## |\Z)", re.S)
    if pattern.search(old):
        new = pattern.sub(lambda m: text.rstrip() + "\n", old)
    else:
        new = old.rstrip() + "\n\n" + text.rstrip() + "\n"
    path.write_text(new)


def interleaved_blocks(variants, steps, block=10, warm=3, seed=1):
    """Time each variant (a no-argument step function) in blocks of ``block`` consecutive steps,
    the variants' order shuffled every round so none always follows the same neighbour; one
    untimed step before each block warms that variant's caches.  Returns per variant the lists of
    wall-clock and process-CPU seconds per step, one entry per block."""
    import time

    import numpy as np
    wall = {k: [] for k in variants}
    cpu = {k: [] for k in variants}
    for fn in variants.values():
        for _ in range(warm):
            fn()
    order = list(variants)
    rng = np.random.default_rng(seed)
    for _ in range(max(steps // block, 1)):
        rng.shuffle(order)
        for k in order:
            fn = variants[k]
            fn()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(block):
                fn()
            wall[k].append((time.perf_counter() - t0) / block)
            cpu[k].append((time.process_time() - c0) / block)
    return wall, cpu


def torch_gpt(V, T, n_layer, n_head, d):
    """PyTorch's twin of varlens/models/gpt.py (learned positions, pre-LN blocks, tanh-GELU MLP,
    tied output weights) with the same parameter names, so a varlens state dict loads as is;
    ``forward(idx)`` gives the logits."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF

    class Attn(tnn.Module):
        def __init__(s):
            super().__init__()
            s.c_attn, s.c_proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)

        def forward(s, x):
            B, L, C = x.shape
            q, k, v = s.c_attn(x).split(C, 2)
            q, k, v = (t.view(B, L, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
            return s.c_proj(y.transpose(1, 2).reshape(B, L, C))

    class Block(tnn.Module):
        def __init__(s):
            super().__init__()
            s.ln_1, s.attn, s.ln_2 = tnn.LayerNorm(d), Attn(), tnn.LayerNorm(d)
            s.mlp = tnn.Module()
            s.mlp.c_fc, s.mlp.c_proj = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)

        def forward(s, x):
            x = x + s.attn(s.ln_1(x))
            return x + s.mlp.c_proj(TF.gelu(s.mlp.c_fc(s.ln_2(x)), approximate="tanh"))

    class TGPT(tnn.Module):
        def __init__(s):
            super().__init__()
            s.wte, s.wpe = tnn.Embedding(V, d), tnn.Embedding(T, d)
            s.h = tnn.ModuleList([Block() for _ in range(n_layer)])
            s.ln_f = tnn.LayerNorm(d)
            s.lm_head = tnn.Linear(d, V, bias=False)
            s.lm_head.weight = s.wte.weight

        def forward(s, idx):
            x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in s.h:
                x = b(x)
            return s.lm_head(s.ln_f(x))
    return TGPT()
