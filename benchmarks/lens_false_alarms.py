"""False alarms and detection of the variance lens's verdicts (docs/lens.md, "Calibrated verdicts").

False alarms: healthy, He-initialised networks of each family of varlens.lens.testbeds (MLP, an
MLP written with F.relu, CNN, ResNet, pre-LN Transformer), plus a residual CNN
(varlens.models.resnet.ResNet) and a pre-LN GPT (varlens.models.gpt.GPT) as built by the
library, one forward/backward each under a Lens; the figure is the fraction of rows (module
view, forward and backward) with a warning verdict (drift, exploding, vanishing, non-finite).

Detection: a Linear that multiplies its output by 1.25 (E[y^2] by 1.5625), at a layer drawn
per seed in a 10-layer ReLU MLP of width 256; the figure is the number of seeds in which that
layer's verdict is 'drift'.  The same nets without the fault give the per-layer false-alarm
rate at that spot.

    python benchmarks/lens_false_alarms.py                 # the table (about a minute)
    python benchmarks/lens_false_alarms.py --seeds 5 --detect-seeds 50
    python benchmarks/lens_false_alarms.py --tables        # also the full tables of the ResNet and GPT
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

import varlens as vl  # noqa: E402
from varlens.lens import testbeds as T  # noqa: E402
from varlens.lens.compare import compare, flagged, summary  # noqa: E402
from varlens.lens.probes import Lens  # noqa: E402
from varlens.lens.report import summary_text, table  # noqa: E402
from varlens.models.gpt import GPT, GPTConfig  # noqa: E402
from varlens.models.resnet import ResNet  # noqa: E402
from _common import machine  # noqa: E402  (benchmarks/_common.py)

FAMILIES = {
    "mlp (Linear/ReLU modules)": ("mlp", dict(width=256, depth=10, batch=64)),
    "mlp with F.relu": ("functional", dict(width=256, depth=10, batch=64)),
    "cnn (3x3 conv, padding 1)": ("cnn", dict(width=32, depth=6, batch=32)),
    "resnet (conv-BN blocks)": ("resnet", dict(width=16, depth=4, batch=32)),
    "pre-LN transformer": ("transformer", dict(width=64, depth=4, batch=16)),
}


def resnet_model(seed):
    vl.manual_seed(seed)
    net = ResNet(num_classes=10, in_channels=3, image_size=16, blocks=2, widths=(16, 32))
    x = vl.tensor(np.random.default_rng(seed).standard_normal((32, 3, 16, 16)).astype(np.float32))
    return net, x


def gpt_rows(seed, tables=False):
    vl.manual_seed(seed)
    gpt = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=4, n_head=4, n_embd=64))
    idx = vl.tensor(np.random.default_rng(seed).integers(0, 64, (16, 32)))
    lens = Lens(gpt)
    try:
        _, loss = gpt(idx, idx)
        loss.backward()
        lens.step()
    finally:
        lens.detach()
    return lens, compare(lens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--detect-seeds", type=int, default=20)
    ap.add_argument("--tables", action="store_true")
    args = ap.parse_args()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {machine()}; NumPy {np.__version__}")
    print()
    print("| network (healthy, He-initialised) | seeds | rows | flagged | fraction |")
    print("|---|---:|---:|---:|---:|")
    t0 = time.time()
    seeds = tuple(range(args.seeds))
    for label, (fam, kw) in FAMILIES.items():
        nf, n = T.false_alarm_rate(fam, seeds=seeds, **kw)
        print(f"| {label}, {kw} | {len(seeds)} | {n} | {nf} | {nf / n:.1%} |", flush=True)
    nf = n = 0
    for s in seeds:
        net, x = resnet_model(s)
        lens, rows = T.run(net, x)
        nf, n = nf + len(flagged(rows)), n + len(rows)
    print(f"| varlens.models.resnet.ResNet(widths=(16, 32), blocks=2), 16x16 | {len(seeds)} | {n} | {nf} | "
          f"{nf / n:.1%} |", flush=True)
    nf = n = 0
    for s in seeds:
        _, rows = gpt_rows(s)
        nf, n = nf + len(flagged(rows)), n + len(rows)
    print(f"| varlens.models.gpt.GPT(n_layer=4, n_embd=64), cross-entropy | {len(seeds)} | {n} | {nf} | "
          f"{nf / n:.1%} |", flush=True)
    print()
    caught = []
    clean = []
    for s in range(args.detect_seeds):
        ok, at, row = T.detects(s, width=256, depth=10, factor=1.25, batch=32)
        caught.append(ok)
        ok0, _, _ = T.detects(s, width=256, depth=10, factor=1.0, batch=32)
        clean.append(ok0)
    print(f"detection: Linear x 1.25 in a 10-layer ReLU MLP of width 256 (batch 32), layer drawn per seed: "
          f"flagged 'drift' in {sum(caught)}/{len(caught)} seeds; the same layer unscaled: flagged in "
          f"{sum(clean)}/{len(clean)}")
    print(f"({time.time() - t0:.0f} s)")
    if args.tables:
        net, x = resnet_model(0)
        lens, rows = T.run(net, x)
        print("\nResNet (varlens.models.resnet), seed 0\n")
        print(table(rows))
        print(summary_text(summary(rows, lens)))
        lens, rows = gpt_rows(0)
        print("\nGPT (varlens.models.gpt), seed 0\n")
        print(table(rows))
        print(summary_text(summary(rows, lens)))


if __name__ == "__main__":
    sys.exit(main())
