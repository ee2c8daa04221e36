"""``varlens train RECIPE [options]``: train a named recipe, writing a run folder.

The run folder (``--out``, default runs/RECIPE) gets config.json, metrics.jsonl (one JSON
record per epoch), curves.png (loss and accuracy), checkpoints/step-*.npz and
summary.json with the test accuracy.  ``--resume`` continues the newest checkpoint there
(or the one named), exactly where it stopped.

Never losing work (docs/serialization.md): a run folder that already holds files is refused
unless ``--resume`` (continue it) or ``--overwrite`` (replace its checkpoints) is given; a
full disk or a file-size limit ends with the last good checkpoint named and how to resume
from it; temporary files of interrupted checkpoint writes are removed at the next start; a
corrupt newest checkpoint is skipped (with a message) in favour of the newest valid one.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
import types

EXAMPLES = """\
examples:
  varlens train                          the main job: digits-mlp (an MLP on 8x8 digits, ~10 s)
  varlens train fashion-mlp              Fashion-MNIST (run `make data` first)
  varlens train digits-mlp --lr 3e-3 --epochs 20 --optimizer sgd --out runs/try1
  varlens train fashion-mlp --resume     continue runs/fashion-mlp after an interruption
  varlens eval runs/digits-mlp           evaluate the newest checkpoint of a run
"""

# option name -> (config key, type, help)
OVERRIDES = {
    "--dataset": ("dataset", str, "dataset: {DATASETS}"),
    "--model": ("model", str, "model: {MODELS} (linear = softmax regression)"),
    "--hidden": ("hidden", None, "hidden layer widths, comma-separated (e.g. 256,128)"),
    "--init": ("init", str, "weight init: pytorch, he, xavier, lecun"),
    "--dropout": ("dropout", float, "dropout probability after each hidden activation"),
    "--optimizer": ("optimizer", str, "optimizer: {OPTIMIZERS}"),
    "--lr": ("lr", float, "learning rate"),
    "--momentum": ("momentum", float, "SGD momentum"),
    "--weight-decay": ("weight_decay", float, "weight decay"),
    "--scheduler": ("scheduler", str, "lr schedule (per epoch): {SCHEDULERS}"),
    "--batch-size": ("batch_size", int, "training batch size"),
    "--epochs": ("epochs", int, "number of epochs"),
    "--early-stopping": ("early_stopping", int, "patience in epochs on the validation loss (0: off)"),
    "--grad-clip": ("grad_clip", float, "clip the global gradient norm to this value"),
    "--augment": ("augment", str, "training-data augmentation (images): none, crop, flip, crop-flip"),
    "--label-smoothing": ("label_smoothing", float, "cross-entropy label smoothing in [0, 1]"),
    "--accumulate": ("accumulate", int, "gradient accumulation: optimizer step every N batches"),
    "--seed": ("seed", int, "random seed (data split, init, shuffling, dropout)"),
    "--data-root": ("data_root", str, "directory holding the Fashion-MNIST IDX files"),
}


def _suggest_unknown_options(parser):
    """Make a misspelt option fail with the closest valid ones and the full list."""
    original = parser.parse_known_args

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = original(args, namespace)
        bad = [a.split("=")[0] for a in extras if a.startswith("-")]
        if bad:
            valid = sorted(o for a in self._actions for o in a.option_strings if o.startswith("--"))
            close = difflib.get_close_matches(bad[0], valid, n=3, cutoff=0.5)
            hint = f" Did you mean {' or '.join(close)}?" if close else ""
            self.error(f"unknown option {bad[0]}.{hint}\nValid options: {' '.join(valid)}")
        return ns, extras

    parser.parse_known_args = types.MethodType(parse_known_args, parser)


def add_arguments(parser):
    from varlens.train import recipes as R
    from varlens.train.recipes import RECIPES
    names = {k: ", ".join(getattr(R, k)) for k in ("DATASETS", "MODELS", "OPTIMIZERS", "SCHEDULERS")}
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    recipes = "\n".join(f"  {k:<12} {v['description']}" for k, v in RECIPES.items())
    parser.description = ("Train a model from a named recipe; any recipe setting can be overridden.\n\n"
                          f"recipes:\n{recipes}")
    parser.epilog = EXAMPLES
    parser.add_argument("recipe", nargs="?", default="digits-mlp",
                        help="recipe name (default: digits-mlp)")
    for opt, (key, typ, help_) in OVERRIDES.items():
        parser.add_argument(opt, dest=key, type=typ or str, default=None, help=help_.format(**names))
    parser.add_argument("--out", default=None, help="run folder (default: runs/RECIPE)")
    parser.add_argument("--resume", nargs="?", const="latest", default=None, metavar="CHECKPOINT",
                        help="continue from the newest valid checkpoint in --out (or from CHECKPOINT)")
    parser.add_argument("--overwrite", action="store_true",
                        help="start afresh in a run folder that already holds a run, deleting its checkpoints "
                             "(without it, such a folder is refused)")
    parser.add_argument("--checkpoint-every", type=int, default=None, metavar="STEPS",
                        help="also checkpoint every STEPS optimizer steps (default: every epoch)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="BLAS threads for NumPy's matrix products (default 1: small models run "
                             "fastest single-threaded, and busy-waiting threads slow a shared machine)")
    parser.add_argument("--device", default=None, metavar="DEVICE",
                        help="train on this device: cpu (default) or cuda (needs CuPy and an NVIDIA GPU); "
                             "not stored in the run's config, so --resume may continue on the other device "
                             "(random draws such as dropout's then come from that device's generator)")
    parser.add_argument("--quiet", action="store_true", help="print only the final result")
    parser.add_argument("--tensorboard", nargs="?", const="", default=None, metavar="DIR",
                        help="write TensorBoard event files (default DIR: RUN_FOLDER/tensorboard)")
    parser.add_argument("--lens", nargs="?", type=int, const=10, default=None, metavar="N",
                        help="variance lens over training: one point every N steps (default 10), written to "
                             "the run folder (lens_history.json and PNGs) and to TensorBoard when on")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    _suggest_unknown_options(parser)


def config_from_args(args):
    from varlens.train.recipes import get_recipe
    cfg = get_recipe(args.recipe)
    for key, typ, _ in OVERRIDES.values():
        v = getattr(args, key, None)
        if v is None:
            continue
        if key == "hidden":
            try:
                v = [int(h) for h in v.split(",") if h.strip()]
            except ValueError:
                raise ValueError(f"--hidden must be comma-separated ints like 256,128, got {v!r}") from None
        if key == "early_stopping" and v == 0:
            v = None
        cfg[key] = v
    return cfg


def train(cfg, out, resume=None, checkpoint_every=None, quiet=False, progress=None, overwrite=False,
          tensorboard=None, lens_every=None, device=None):
    """Build and fit the run described by ``cfg``; returns (trainer, test metrics).

    ``out`` must be empty or absent unless ``resume`` or ``overwrite`` (see run_folder.prepare);
    an OSError while writing (full disk) raises run_folder.WriteFailedError naming the last
    good checkpoint."""
    from varlens.commands import run_folder
    from varlens.train.recipes import build_run
    from varlens.commands.stored_config import validate_config
    from varlens.train.trainer import Trainer
    from varlens.train import distributed as tdist
    validate_config(cfg)
    resume = tdist.on_main_then_shared(run_folder.prepare, out, resume, overwrite, quiet)  # mpiexec: rank 0 decides
    model, opt, sched, loss_fn, (train_dl, val_dl, test_dl), st = build_run(cfg, device=device)
    model, train_dl = tdist.wrap(model, train_dl, int(cfg["seed"]) + 1)  # DDP + DistributedSampler when N > 1
    trainer = Trainer(model, opt, loss_fn, scheduler=sched, grad_clip=cfg.get("grad_clip"),
                      accumulate=int(cfg.get("accumulate") or 1), early_stopping=cfg.get("early_stopping"),
                      restore_best=val_dl is not None, out_dir=out, checkpoint_every=checkpoint_every,
                      progress=progress, quiet=quiet, config=cfg, device=device,
                      extra_state={"standardizer": st.state_dict()},
                      callbacks=_observers(out, tensorboard, lens_every))
    if tdist.is_main():
        with run_folder.writes_checked(out, cfg):
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
    if resume and not quiet:
        print(f"resuming from {resume}", flush=True)
    t0 = time.perf_counter()
    with run_folder.writes_checked(out, cfg):
        trainer.fit(train_dl, val_dl, cfg["epochs"], resume=resume)
    elapsed = time.perf_counter() - t0
    test = trainer.evaluate(test_dl) if test_dl is not None else {}
    summary = {"recipe": cfg.get("recipe"), "epochs_run": trainer.epoch, "steps": trainer.step,
               "train_time_s": round(elapsed, 2), "test_loss": test.get("loss"),
               "test_acc": test.get("accuracy"), "stop_reason": trainer.stop_reason,
               "checkpoint": trainer.last_checkpoint}
    if tdist.is_main():
        with run_folder.writes_checked(out, cfg):
            with open(os.path.join(out, "summary.json"), "w") as f:
                json.dump(summary, f, indent=1)
    return trainer, summary


def _observers(out, tensorboard, lens_every):
    """Trainer callbacks for --tensorboard [DIR] and --lens [N] (on rank 0 only under mpiexec)."""
    from varlens.train import distributed as tdist
    cbs = []
    if not tdist.is_main():
        return cbs
    if tensorboard is not None:
        from varlens.train.tensorboard import TensorBoardLogger
        cbs.append(TensorBoardLogger(tensorboard or os.path.join(out, "tensorboard")))
    if lens_every is not None:
        if lens_every < 1:
            raise ValueError(f"--lens must be a positive number of steps, got {lens_every}")
        from varlens.lens.history import LensCallback
        cbs.append(LensCallback(every=lens_every, out_dir=out))
    return cbs


def blas_threads(n):
    """A context limiting NumPy's BLAS to ``n`` threads (threadpoolctl, a scikit-learn dependency)."""
    import contextlib
    if n is None or n < 1:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def run(args):
    from varlens.commands.run_folder import WriteFailedError
    from varlens.train.checkpoint import CheckpointError
    from varlens.train.recipes import RECIPES
    if args.recipe not in RECIPES:
        from varlens.train.recipes import unknown
        print(f"varlens train: error: {unknown('recipe', args.recipe, list(RECIPES))}", file=sys.stderr)
        return 2
    from varlens.train import distributed as tdist
    tdist.init_from_launcher()  # under mpiexec -n N: join the group; only rank 0 prints
    main = tdist.is_main()
    args.quiet = args.quiet or not main
    try:
        cfg = config_from_args(args)
        if getattr(args, "device", None) is not None:
            from varlens.core.array import namespace_of_device
            try:
                namespace_of_device(args.device)     # no CUDA, or a bad name: a clear message
            except (RuntimeError, TypeError) as e:
                raise ValueError(f"--device {args.device}: {e}") from None
        out = args.out or os.path.join("runs", args.recipe)
        if not args.quiet:
            print(f"recipe {cfg['recipe']}: {cfg['description']}\nrun folder: {out}", flush=True)
        with blas_threads(args.threads):
            trainer, s = train(cfg, out, resume=args.resume, checkpoint_every=args.checkpoint_every,
                               quiet=args.quiet, progress=False if args.no_progress else None,
                               overwrite=getattr(args, "overwrite", False),
                               tensorboard=getattr(args, "tensorboard", None), lens_every=getattr(args, "lens", None),
                               device=getattr(args, "device", None))
    except (ValueError, FileNotFoundError, CheckpointError) as e:
        print(f"varlens train: error: {e}", file=sys.stderr)
        return 2
    except (WriteFailedError, FloatingPointError) as e:   # full disk; NaN loss or gradients
        print(f"varlens train: error: {e}", file=sys.stderr)
        return 1
    if not main:
        return 0
    if s["test_acc"] is not None:
        print(f"test accuracy {100 * s['test_acc']:.2f}%  (test loss {s['test_loss']:.4f}, "
              f"{s['epochs_run']} epochs, {s['train_time_s']:.1f} s)")
    print(f"wrote {out}/: curves.png, metrics.jsonl, summary.json, checkpoints/ (last: "
          f"{os.path.basename(s['checkpoint'] or '-')})")
    return 0
