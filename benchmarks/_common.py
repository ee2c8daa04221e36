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
