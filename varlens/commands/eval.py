"""``varlens eval CHECKPOINT``: rebuild the data and the model a checkpoint describes and evaluate.

CHECKPOINT is a checkpoint file or a run folder (its newest checkpoint is used).  By
default the weights with the best validation loss are evaluated (those the run reported
its test accuracy with); ``--weights last`` takes the weights as they were when saved.
"""
from __future__ import annotations

import os
import sys


def add_arguments(parser):
    parser.add_argument("checkpoint", help="a checkpoint (.ckpt) file or a run folder")
    parser.add_argument("--split", choices=("test", "val", "train"), default="test",
                        help="which split to evaluate (default: test)")
    parser.add_argument("--weights", choices=("best", "last"), default="best",
                        help="best-validation weights (default) or the weights at save time")


def evaluate_checkpoint(path, split="test", weights="best"):
    from varlens.train import checkpoint as ckpt
    from varlens.commands.recipes import build_run
    from varlens.train.trainer import Trainer, latest_checkpoint
    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise FileNotFoundError(f"no checkpoint in {os.path.join(path, 'checkpoints')}")
        path = found
    s = ckpt.load(path)
    cfg = s.get("config") or {}
    if "dataset" not in cfg:
        raise ckpt.CheckpointError(f"{path!r} holds no recipe config, so its data and model cannot be rebuilt")
    st = (s.get("extra") or {}).get("standardizer")
    model, opt, sched, loss_fn, (tr, va, te), _ = build_run(cfg, standardizer_state=st)
    state = s["trainer"].get("best_state") if weights == "best" else None
    model.load_state_dict(state if state is not None else s["model"])
    loader = {"train": tr, "val": va, "test": te}[split]
    if loader is None:
        raise ValueError(f"this recipe has no {split} split")
    return path, cfg, Trainer(model, opt, loss_fn, quiet=True).evaluate(loader)


def run(args):
    from varlens.train.checkpoint import CheckpointError
    from varlens.commands.train import blas_threads
    try:
        with blas_threads(1):
            path, cfg, m = evaluate_checkpoint(args.checkpoint, args.split, args.weights)
    except (CheckpointError, FileNotFoundError, ValueError) as e:
        print(f"varlens eval: error: {e}", file=sys.stderr)
        return 2
    acc = "" if m["accuracy"] is None else f"  accuracy {100 * m['accuracy']:.2f}%"
    print(f"{path} ({cfg.get('recipe')}, {args.weights} weights): {args.split} loss {m['loss']:.4f}{acc}")
    return 0
