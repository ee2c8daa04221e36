"""Attention maps and mean attention distance per layer (seed 003 §7.5.4) of a trained ViT.

    python -m varlens.examples.vit_attention RUN_FOLDER [--out docs/figures/transformers/vit_attention.png]

RUN_FOLDER is the folder of ``varlens train fashion-vit --out RUN_FOLDER``; the best-validation
weights of its newest checkpoint are loaded and eight test images are drawn.
"""
from __future__ import annotations

import argparse
import os

import numpy as np


def main(argv=None):
    from varlens.datasets import FASHION_CLASSES
    from varlens.vision.attention_maps import plot_attention
    from varlens.train import checkpoint as ckpt
    from varlens.train.recipes import build_run
    from varlens.train.trainer import latest_checkpoint
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--out", default="docs/figures/transformers/vit_attention.png")
    a = ap.parse_args(argv)
    path = latest_checkpoint(a.run) if os.path.isdir(a.run) else a.run
    s = ckpt.load(path)
    model, _, _, _, (_, _, te), _ = build_run(s["config"], standardizer_state=(s.get("extra") or {}).get("standardizer"))
    best = s["trainer"].get("best_state")
    model.load_state_dict(best if best is not None else s["model"])
    X, y = te.dataset.tensors if hasattr(te.dataset, "tensors") else te.dataset[:]
    X, y = np.asarray(X.numpy() if hasattr(X, "numpy") else X), np.asarray(y.numpy() if hasattr(y, "numpy") else y)
    pick = [int(np.flatnonzero(y == c)[0]) for c in range(8)]
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    mad = plot_attention(model, X[pick], a.out, labels=y[pick].tolist(), class_names=FASHION_CLASSES)
    print("mean attention distance (pixels), rows = layers, columns = heads:")
    print(np.array2string(mad, precision=2))
    print(a.out)


if __name__ == "__main__":
    main()
