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


def load_run_checkpoint(path, purpose):
    """(checkpoint path, loaded state, config) of a checkpoint file or run folder, checked before
    anything is built: a run folder gives its newest valid checkpoint (corrupt newer ones are
    skipped with a warning); the state must hold a model and a valid recipe config
    (varlens.commands.stored_config).  Raises CheckpointError / FileNotFoundError / ValueError."""
    from varlens.commands.run_folder import newest_valid
    from varlens.commands.stored_config import StoredConfigError, validate_config
    from varlens.train import checkpoint as ckpt
    if os.path.isdir(path):
        path = newest_valid(path, purpose)
    try:
        s = ckpt.load(path)
    except ckpt.CheckpointNotFoundError:
        raise
    except ckpt.CheckpointError as e:
        run_dir = os.path.dirname(os.path.dirname(os.path.abspath(path)))
        alt, _ = ckpt.newest_valid_checkpoint(run_dir)
        raise ckpt.CheckpointError(f"{e}" + (f"; the newest valid checkpoint of that run is {alt}" if alt else "")) \
            from None
    if not isinstance(s, dict) or not isinstance(s.get("model"), dict):
        raise ckpt.CheckpointError(f"{path!r} is not a training checkpoint (no 'model' state dict)")
    cfg = s.get("config")
    if not isinstance(cfg, dict) or "dataset" not in cfg:
        raise ckpt.CheckpointError(f"{path!r} holds no recipe config, so its data and model cannot be rebuilt")
    try:
        validate_config(cfg)
    except StoredConfigError as e:
        raise ckpt.CheckpointError(f"{path!r}: the stored recipe {e}") from None
    for key in ("trainer", "extra"):
        if s.get(key) is not None and not isinstance(s[key], dict):
            raise ckpt.CheckpointError(f"{path!r}: its {key!r} entry is not a dict")
    return path, s, cfg


def restore_weights(model, state, path):
    """Load ``state`` into ``model``, refusing weights that do not fit it or are not finite."""
    import numpy as np

    from varlens.train import checkpoint as ckpt
    bad = [k for k, v in state.items() if not hasattr(v, "numpy") and not isinstance(v, np.ndarray)]
    if bad:
        raise ckpt.CheckpointError(f"{path!r}: model entries {bad[:3]} are not tensors")
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError) as e:
        raise ckpt.CheckpointError(f"{path!r}: the stored weights do not fit the model its config describes: "
                                   f"{str(e)[:300]}") from None
    nonfinite = [k for k, v in model.state_dict().items()
                 if v.dtype.kind in "fc" and not np.isfinite(v.detach().numpy()).all()]
    if nonfinite:
        raise ckpt.CheckpointError(f"{path!r}: the weights hold NaN or Inf values ({', '.join(nonfinite[:5])}"
                                   f"{', ...' if len(nonfinite) > 5 else ''}); the run diverged before this "
                                   "checkpoint, evaluate an earlier one")


def evaluate_checkpoint(path, split="test", weights="best"):
    from varlens.train.recipes import build_run
    from varlens.train import checkpoint as ckpt
    from varlens.train.trainer import Trainer
    path, s, cfg = load_run_checkpoint(path, "eval")
    st = (s.get("extra") or {}).get("standardizer")
    model, opt, sched, loss_fn, (tr, va, te), _ = build_run(cfg, standardizer_state=st)
    state = (s.get("trainer") or {}).get("best_state") if weights == "best" else None
    state = state if isinstance(state, dict) else s["model"]
    restore_weights(model, state, path)
    loader = {"train": tr, "val": va, "test": te}[split]
    if loader is None:
        raise ValueError(f"this recipe has no {split} split")
    m = Trainer(model, opt, loss_fn, quiet=True).evaluate(loader)
    if not (isinstance(m["loss"], float) and m["loss"] == m["loss"] and abs(m["loss"]) != float("inf")):
        raise ckpt.CheckpointError(f"{path!r}: the {split} loss is {m['loss']} (not finite)")
    return path, cfg, m


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
