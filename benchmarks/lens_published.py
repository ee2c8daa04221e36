"""Published signal-propagation results reproduced by the lens, with the spread over seeds.

    python benchmarks/lens_published.py [--seeds 5] [--write docs/lens_reproductions.md]

He et al. 2015 (ReLU, Xavier vs He), its training consequence, Glorot & Bengio 2010 (tanh, the
"standard" uniform init), Poole et al. 2016 / Schoenholz et al. 2017 (tanh order-to-chaos:
chi_1 against the measured per-layer gradient factor), Xiong et al. 2020 (post-LN vs pre-LN
weight gradients) and McCandlish et al. 2018 (B_simple on linear regression against its closed
form).  Each is run once per seed; the table gives mean ± standard deviation over the seeds.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from varlens.lens import experiments as E          # noqa: E402
from varlens.lens.noise_scale import linear_regression_check  # noqa: E402


def ms(values, fmt="{:.3g}"):
    a = np.asarray(values, dtype=np.float64)
    return f"{fmt.format(a.mean())} ± {fmt.format(a.std(ddof=1) if a.size > 1 else 0.0)}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--write", metavar="MD", help="write the markdown table to this file")
    a = p.parse_args(argv)
    seeds = list(range(a.seeds))
    rows, t0 = [], time.time()

    he = [E.he_2015(depth=30, width=256, batch=128, seed=s) for s in seeds]
    rows.append(("He et al. 2015: 30 ReLU layers of 256, E[x²] last/first pre-activation (log2)",
                 f"Xavier {ms([np.log2(r['xavier']['ratio']) for r in he])} (nominal −29; chained prediction "
                 f"{ms([np.log2(r['xavier']['predicted']) for r in he])}); He {ms([np.log2(r['he']['ratio']) for r in he])} "
                 "(nominal 0)"))
    tr = [E.he_2015_training(depth=30, width=64, batch=64, steps=60, lr=0.01, seed=s) for s in seeds]
    rows.append(("He et al. 2015: that net trained 60 SGD+momentum steps, final/initial loss",
                 f"Xavier {ms([c['xavier'][-1] / c['xavier'][0] for c in tr])} (stalls), "
                 f"He {ms([c['he'][-1] / c['he'][0] for c in tr])} (per seed: "
                 + ", ".join(f"{c['he'][-1] / c['he'][0]:.2f}" for c in tr) + ")"))
    gb = [E.glorot_bengio_2010(depth=5, width=256, batch=256, seed=s) for s in seeds]
    rows.append(("Glorot & Bengio 2010: tanh, U[−1/√n, 1/√n], 5 layers of 256",
                 f"back-propagated gradient factor per layer {ms([r['grad_factor'] for r in gb])}, "
                 f"weight-gradient spread {ms([r['weight_grad_spread'] for r in gb])}×"))
    oc = [E.tanh_order_chaos(sigma_w2s=(0.5, 0.9, 1.5, 2.5), depth=30, width=256, batch=32, seed=s) for s in seeds]
    per = {}
    for res in oc:
        for r in res:
            per.setdefault(r["sigma_w2"], ([], r["chi1"]))[0].append(r["measured_factor"])
    rows.append(("Poole/Schoenholz: tanh, σ_b = 0, 30 layers of 256: measured per-layer gradient factor vs χ₁",
                 "; ".join(f"σ_w² {s2}: {ms(v)} vs {chi:.3f}" for s2, (v, chi) in sorted(per.items()))))
    xi = [E.xiong_2020(depths=(2, 4, 8, 16), seeds=(s,)) for s in seeds]
    post = np.array([r["post_last"] for r in xi])
    pre = np.array([r["pre_last"] for r in xi])
    rows.append(("Xiong et al. 2020: last FFN weight-gradient norm, L = 2, 4, 8, 16",
                 "post-LN " + ", ".join(ms(post[:, i]) for i in range(4)) + " (flat); pre-LN "
                 + ", ".join(ms(pre[:, i]) for i in range(4)) + f" (∝ 1/√L: L=16/L=2 ratio "
                 f"{ms(pre[:, 3] / pre[:, 0])}, 1/√8 = {1 / np.sqrt(8):.3f})"))
    mc = [linear_regression_check(seed=1000 + s) for s in seeds]
    rows.append(("McCandlish et al. 2018: B_simple on linear regression (d = 10) vs closed form",
                 f"measured/closed form {ms([r.measured / r.expected for r in mc], '{:.3f}')}"))

    head = (f"Measured {datetime.date.today()} on {platform.machine()} ({os.cpu_count()} cores), "
            f"{len(seeds)} seeds, {time.time() - t0:.0f} s; command: python benchmarks/lens_published.py "
            f"--seeds {len(seeds)}")
    md = [head, "", "| result | mean ± sd over seeds |", "|---|---|"] + [f"| {r} | {v} |" for r, v in rows]
    text = "\n".join(md)
    print(text)
    if a.write:
        with open(a.write, "w") as f:
            f.write("# Published results reproduced by the lens\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
