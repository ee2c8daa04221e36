"""Scaling law at small scale (seed 003 §8.7): GPTs of several widths on the same characters
for the same number of steps; fit L(N) = (N_c / N)^alpha and plot it.

    python -m varlens.examples.scaling_gpt [--steps 500] [--out docs/figures/transformers]
"""
from __future__ import annotations

import argparse
import json
import os


def main(argv=None):
    from varlens.text.scaling import fit_power_law, plot_scaling, run_scaling
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--widths", default="16,24,32,48,64")
    ap.add_argument("--out", default="docs/figures/transformers")
    a = ap.parse_args(argv)
    res = run_scaling(widths=tuple(int(w) for w in a.widths.split(",")), steps=a.steps)
    fit = fit_power_law([r["N"] for r in res], [r["val_loss"] for r in res])
    os.makedirs(a.out, exist_ok=True)
    plot_scaling(res, fit, os.path.join(a.out, "scaling.png"))
    print(json.dumps({"runs": res, "fit": fit}, indent=1))


if __name__ == "__main__":
    main()
