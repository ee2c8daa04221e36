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
