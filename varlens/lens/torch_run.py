"""``varlens lens --torch FILE.py:FACTORY``: the variance lens on a user's own PyTorch model.

The factory is a function without arguments that returns a ``torch.nn.Module``, or a pair
``(module, example_input)`` (a tensor, or a tuple of tensors passed as positional arguments).
Without an example input the command makes one: ``--input-shape B,...`` draws standard normal
floats, and with ``--vocab V`` integer tokens in [0, V) (for a language model).  Each of
``--steps`` passes draws a fresh batch of the same kind (the example input is reused), runs the
forward pass, a loss (``--loss``: cross-entropy against random labels for outputs with a class
axis, else half the mean square) and its backward pass, and, with ``--lr`` > 0, an SGD step.

torch is imported here only (this module is loaded for ``--torch`` alone).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys


def load_factory(spec):
    """The callable named by ``spec``: 'path/to/file.py:NAME' or 'package.module:NAME'."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"--torch: expected FILE.py:FACTORY or module.path:FACTORY, got {spec!r}")
    where, name = spec.rsplit(":", 1)
    if not name.isidentifier():
        raise ValueError(f"--torch: {name!r} (after the colon) is not a Python name")
    if where.endswith(".py") or os.sep in where or "/" in where:
        if not os.path.isfile(where):
            raise FileNotFoundError(f"--torch: no file {where!r}")
        mod_name = "_varlens_lens_user_" + os.path.splitext(os.path.basename(where))[0]
        sp = importlib.util.spec_from_file_location(mod_name, where)
        mod = importlib.util.module_from_spec(sp)
        sys.modules[mod_name] = mod
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))   # the file's own imports
        try:
            sp.loader.exec_module(mod)
        finally:
            sys.path.pop(0)
    else:
        mod = importlib.import_module(where)
    fn = getattr(mod, name, None)
    if fn is None or not callable(fn):
        raise AttributeError(f"--torch: {where!r} has no callable {name!r}")
    return fn


def _parse_shape(text):
    try:
        shape = tuple(int(s) for s in str(text).replace("x", ",").split(",") if s.strip())
    except ValueError:
        raise ValueError(f"--input-shape: expected integers joined by commas (e.g. 128,784), got {text!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"--input-shape: every size must be >= 1, got {text!r}")
    return shape


def build(factory, input_shape=None, vocab=None, seed=0):
    """(model, make_input) from a factory; ``make_input(step)`` returns the positional inputs."""
    import torch
    from varlens.lens.torch_adapter import is_torch_module
    torch.manual_seed(seed)
    made = factory()
    example = None
    if isinstance(made, tuple) and len(made) == 2 and is_torch_module(made[0]):
        made, example = made
    if not is_torch_module(made):
        raise TypeError(f"--torch: the factory must return a torch.nn.Module or (module, example_input), "
                        f"got {type(made).__module__}.{type(made).__qualname__}")
    model = made
    if example is not None:
        ex = example if isinstance(example, tuple) else (example,)
        return model, lambda step: ex
    if input_shape is None:
        raise ValueError("--torch: the factory returned no example input; give --input-shape B,... "
                         "(and --vocab V for integer tokens)")
    shape = _parse_shape(input_shape) if isinstance(input_shape, str) else tuple(input_shape)
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    g = torch.Generator(device="cpu").manual_seed(seed + 1)

    def make_input(step):
        if vocab:
            return (torch.randint(0, int(vocab), shape, generator=g).to(dev),)
        return (torch.randn(shape, generator=g).to(dev),)
    return model, make_input


def loss_of(out, kind="auto", generator=None):
    """A scalar loss of the model's output for the backward pass (see the module docstring)."""
    import torch
    import torch.nn.functional as F
    y = out[0] if isinstance(out, (tuple, list)) else out
    if kind == "auto":
        kind = "ce" if y.dim() >= 2 and y.shape[-1] > 1 else "mse"
    if kind == "ce":
        logits = y.reshape(-1, y.shape[-1])
        target = torch.randint(0, y.shape[-1], (logits.shape[0],), generator=generator).to(y.device)
        return F.cross_entropy(logits.float(), target)
    if kind == "mse":
        return 0.5 * y.float().square().mean()
    raise ValueError(f"--loss: expected auto, ce or mse, got {kind!r}")


def run_lens(model, make_input, steps=1, loss="auto", lr=0.0, seed=0, **lens_kw):
    """Attach a Lens, run ``steps`` forward/backward passes (and SGD steps with ``lr``), detach."""
    import torch
    from varlens.lens import Lens
    g = torch.Generator(device="cpu").manual_seed(seed + 2)
    opt = torch.optim.SGD(model.parameters(), lr=lr) if lr > 0 else None
    lens = Lens(model, **lens_kw)
    try:
        for step in range(steps):
            out = model(*make_input(step))
            loss_of(out, loss, g).backward()
            lens.step()
            if opt is not None:
                opt.step()
            model.zero_grad(set_to_none=True)
    finally:
        lens.detach()
    return lens


def add_arguments(p):
    """The --torch options of ``varlens lens``."""
    p.add_argument("--torch", metavar="FILE.py:FACTORY",
                   help="lens on a PyTorch model made by FACTORY() in a file or module (module.path:FACTORY); "
                        "the factory returns the model or (model, example_input)")
    p.add_argument("--input-shape", metavar="B,...", help="with --torch: shape of random inputs (standard normal, "
                   "or integer tokens with --vocab)")
    p.add_argument("--vocab", type=int, default=None, help="with --torch: random integer tokens in [0, VOCAB)")
    p.add_argument("--loss", default="auto", choices=["auto", "ce", "mse"],
                   help="with --torch: loss for the backward pass (auto: cross-entropy against random labels "
                        "when the output has a class axis, else half the mean square)")
    p.add_argument("--lr", type=float, default=0.0, help="with --torch: SGD learning rate between steps (0: none)")
    p.add_argument("--level", default="module", choices=["module", "op", "all"],
                   help="with --torch: rows of module calls (default), of ops, or both")


def run_cli(args):
    """``varlens lens --torch ...``: print the table and verdicts; --json/--plot as for varlens models."""
    from varlens.lens import report
    from varlens.lens.compare import compare, summary
    try:
        factory = load_factory(args.torch)
        model, make_input = build(factory, args.input_shape, args.vocab, args.seed)
    except (ValueError, TypeError, FileNotFoundError, AttributeError, ImportError) as e:
        print(f"varlens lens: {e}", file=sys.stderr)
        return 2
    if args.vocab is not None and args.vocab < 1:
        print(f"varlens lens: --vocab must be >= 1, got {args.vocab}", file=sys.stderr)
        return 2
    lens = run_lens(model, make_input, steps=args.steps, loss=args.loss, lr=args.lr, seed=args.seed)
    rows = compare(lens, level=args.level)
    label = f"torch {args.torch}"
    print(f"== {label} ({type(model).__name__}): {lens.steps_sampled} step(s) ==")
    print(report.table([r for r in rows if r.direction == "forward"], max_rows=args.rows))
    back = [r for r in rows if r.direction == "backward"]
    if back:
        print(report.table(back, max_rows=args.rows).split("\n", 2)[-1])
    print(report.summary_text(summary(rows)))
    if args.plot:
        report.plot_depth({label: rows}, args.plot, title=label)
        print(f"wrote {args.plot}")
    if args.json:
        from varlens.lens.cli import _emit
        _emit(args.json, report.to_json(lens, rows, meta={"source": label, "framework": "torch",
                                                          "model": type(model).__name__, "steps": args.steps,
                                                          "input_shape": args.input_shape, "vocab": args.vocab,
                                                          "loss": args.loss, "lr": args.lr, "seed": args.seed}))
    return 0
