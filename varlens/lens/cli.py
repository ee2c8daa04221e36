"""``varlens lens``: predicted vs measured second moments of a built-in model, as a table, JSON or PNG.

Examples::

    varlens lens --model mlp --depth 30 --width 256 --act relu --init he
    varlens lens --model mlp --depth 30 --init he,xavier --plot depth.png --json lens.json
    varlens lens --model attention --width 64 --heads 4 --plot attention.png
    varlens lens --noise-scale                      # gradient noise scale of a linear-regression task
    varlens lens --recipe digits-mlp --steps 5      # a training recipe's model at initialisation
    varlens lens --checkpoint runs/digits-mlp       # a saved model (newest checkpoint of a run)
    varlens lens --torch docs/examples/lens_torch/resnet.py:make_model   # a PyTorch model (torch_run.py)
"""
from __future__ import annotations

import json
import sys


def add_arguments(p):
    p.add_argument("--model", default="mlp", choices=["mlp", "attention"],
                   help="built-in model: a plain MLP (default) or one attention block")
    p.add_argument("--depth", type=int, default=30, help="number of Linear layers (mlp)")
    p.add_argument("--width", type=int, default=256, help="width of every layer (mlp) or model dim (attention)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (attention)")
    p.add_argument("--act", default="relu", choices=["relu", "tanh", "sigmoid", "gelu", "identity"])
    p.add_argument("--init", default="he",
                   help="he | xavier | lecun | glorot_standard | variance_preserving, or several joined "
                        "by commas (one curve each)")
    p.add_argument("--sigma-w2", type=float, default=None,
                   help="mean-field init W ~ N(0, sigma_w2/fan_in) instead of --init")
    p.add_argument("--sigma-b2", type=float, default=0.0, help="bias variance for --sigma-w2")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="drop probability in the mean-field recursion printed with --sigma-w2")
    p.add_argument("--mean-field-only", action="store_true",
                   help="with --sigma-w2: print q*, chi_1, the phase and the depth scales, and build no network")
    p.add_argument("--batch", type=int, default=128, help="rows per step")
    p.add_argument("--steps", type=int, default=1,
                   help="batches; with --recipe/--checkpoint the recipe's optimiser steps after each one "
                        "and the moments are shown per step (see --no-update)")
    p.add_argument("--no-update", action="store_true",
                   help="with --steps: pool the passes without optimiser steps (the old behaviour)")
    p.add_argument("--history", metavar="JSON", help="with --recipe --steps N: write the per-step lens history")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="write the JSON report (schema: docs/lens.md); '-' for stdout")
    p.add_argument("--plot", metavar="PNG", help="write a PNG plot (depth profile, or attention per head)")
    p.add_argument("--rows", type=int, default=40, help="at most this many table rows per direction")
    p.add_argument("--recipe", metavar="NAME", help="lens on a training recipe's model (varlens train NAME) "
                   "at initialisation, on its training batches and loss")
    p.add_argument("--checkpoint", metavar="PATH", help="lens on a saved model: a checkpoint file or a run "
                   "directory (its newest checkpoint), with its recipe's data and loss")
    from varlens.lens.torch_run import add_arguments as add_torch_arguments   # --torch FILE.py:FACTORY ...
    add_torch_arguments(p)
    p.add_argument("--noise-scale", action="store_true",
                   help="estimate the gradient noise scale B_simple on a linear-regression task instead")


def _check(args):
    for name in ("depth", "width", "batch", "steps", "heads"):
        v = getattr(args, name)
        if v < 1:
            raise SystemExit(f"varlens lens: --{name} must be >= 1, got {v}")


def run(args) -> int:
    _check(args)
    from varlens.theory.cli import _run_one_blas_thread
    return _run_one_blas_thread(_run, args=args)


def _run(args) -> int:
    import numpy as np

    import varlens as vl
    from varlens.lens import experiments as E
    from varlens.lens import report
    from varlens.lens.compare import summary

    if getattr(args, "torch", None):
        from varlens.lens.torch_run import run_cli
        return run_cli(args)
    if args.recipe or args.checkpoint:
        return _run_recipe(args)

    if args.noise_scale:
        from varlens.lens import noise_scale as ns
        g = np.random.default_rng(args.seed)
        d = 10
        w_star = g.standard_normal(d)
        w = w_star + 0.5 * g.standard_normal(d)

        def grad_fn(b):
            X = g.standard_normal((b, d))
            y = X @ w_star + 2.0 * g.standard_normal(b)
            return X.T @ (X @ w - y) / b
        est = ns.estimate(grad_fn, None, 4, 64, 2000, rng=g)
        truth = ns.linear_regression_closed_form(d, float((w - w_star) @ (w - w_star)), 4.0)
        rec = est.recommend(base_batch=32, base_lr=0.1)
        print(f"B_simple = {est.b_simple:.2f} +- {est.b_simple_se:.2f} (closed form {truth:.2f}); "
              f"|G|^2 = {est.g2:.4g}, tr(Sigma) = {est.trace:.4g}")
        print(f"recommended batch {rec['recommended_batch']}; from batch 32 at lr 0.1: linear rule lr "
              f"{rec['linear_rule_lr']:.3g}, sqrt rule lr {rec['sqrt_rule_lr']:.3g}, McCandlish eta_opt "
              f"{rec['mccandlish_lr']:.3g}. {rec['note']}")
        print(f"assumption: {rec['assumption']}")
        for w in est.warnings:
            print(f"warning: {w}")
        if args.json:
            doc = {"schema": "varlens.noise_scale/1", "estimate": est.as_dict(), "closed_form": truth,
                   "recommendation": rec}
            _emit(args.json, doc)
        return 0

    if args.model == "attention":
        res = E.attention_scaling(d=args.width, heads=args.heads, batch=args.batch if args.batch < 128 else 16,
                                  seed=args.seed)
        print(f"attention block, d = {res['d']}, d_head = {res['d_head']}, sequence {res['seq_len']} "
              f"(uniform softmax entropy {res['max_entropy']:.3f} nats)")
        print(f"{'scale':16s} {'head':>4s} {'logit var':>10s} {'predicted':>10s} {'entropy':>8s} {'saturated':>9s}")
        for label, per in res["by_scale"].items():
            for h, st in enumerate(per):
                print(f"{label:16s} {h:4d} {st['logit_var']:10.4g} {st['logit_var_predicted']:10.4g} "
                      f"{st['entropy']:8.3f} {st['frac_saturated']:9.3f}")
        if args.plot:
            report.plot_attention(res, args.plot)
            print(f"wrote {args.plot}")
        if args.json:
            _emit(args.json, report._clean({"schema": "varlens.lens.attention/1", **res}))
        return 0

    inits = [s.strip() for s in args.init.split(",") if s.strip()]
    if args.sigma_w2 is not None:
        _print_mean_field(args)
        if args.mean_field_only:
            return 0
        inits = [f"sigma_w2={args.sigma_w2}"]
    rng = np.random.default_rng(args.seed)
    x = vl.tensor(rng.standard_normal((args.batch, args.width)).astype(np.float32))
    curves, docs, bad = {}, {}, False
    for init in inits:
        if init.startswith("sigma_w2="):
            model = E.build_mlp(args.depth, args.width, args.act, sigma_w2=args.sigma_w2, sigma_b2=args.sigma_b2,
                                seed=args.seed)
        else:
            try:
                model = E.build_mlp(args.depth, args.width, args.act, init, seed=args.seed)
            except ValueError as e:
                print(f"varlens lens: {e}", file=sys.stderr)
                return 2
        lens, rows = E.lens_run(model, x, steps=args.steps)
        curves[init] = rows
        summ = summary(rows)
        print(f"\n== mlp depth {args.depth} width {args.width} act {args.act} init {init} "
              f"({args.steps} step(s), batch {args.batch}) ==")
        print(report.table([r for r in rows if r.direction == "forward"], max_rows=args.rows))
        print(report.table([r for r in rows if r.direction == "backward"], max_rows=args.rows).split("\n", 2)[-1])
        print(report.summary_text(summ))
        docs[init] = report.to_json(lens, rows, meta={"model": "mlp", "depth": args.depth, "width": args.width,
                                                      "act": args.act, "init": init, "batch": args.batch,
                                                      "steps": args.steps, "seed": args.seed})
        bad = bad or any(s["verdict"] != "stable" for s in summ.values())
    if args.plot:
        report.plot_depth(curves, args.plot, title=f"{args.depth}-layer {args.act} MLP, width {args.width}",
                          type_filter={"Linear"})
        print(f"wrote {args.plot}")
    if args.json:
        _emit(args.json, docs[inits[0]] if len(docs) == 1 else {"schema": "varlens.lens.multi/1", "runs": docs})
    return 0


def _print_mean_field(args):
    """The mean-field picture of the --sigma-w2/--sigma-b2/--act/--dropout network (Poole 2016, Schoenholz 2017)."""
    from varlens.lens import meanfield
    m = meanfield.summary(args.act, args.sigma_w2, args.sigma_b2, dropout=args.dropout)
    print(f"== mean field: act {m['act']}, sigma_w^2 {m['sigma_w2']:g}, sigma_b^2 {m['sigma_b2']:g}, "
          f"dropout {m['dropout']:g} ==")
    print(f"q*      = {m['q_star']:.6g}   (fixed point of the length map; 0: the signal dies, inf: it explodes)")
    print(f"chi_1   = {m['chi1']:.6g}   (slope of the correlation map at c = 1; per-layer gradient factor "
          f"{m['backward_factor']:.6g})")
    print(f"phase   = {m['phase']}")
    print(f"xi_q    = {m['xi_q']:.6g}   xi_c = {m['xi_c']:.6g}   (depth scales)")
    print(f"trainable depth ~ 6 xi_c = {m['trainable_depth']:.6g} layers")
    if args.json and args.mean_field_only:
        from varlens.lens import report
        _emit(args.json, report._clean({"schema": "varlens.lens.meanfield/1", **m}))


def _run_recipe(args):
    """The lens on a recipe's model (fresh) or a checkpoint's, over its first training batches."""
    import os

    from varlens.lens import report
    from varlens.lens.compare import compare, summary
    from varlens.lens.probes import Lens
    from varlens.train import recipes
    state, st = None, None
    if args.checkpoint:
        from varlens.commands.eval import load_run_checkpoint, restore_weights
        from varlens.train import checkpoint as ckpt
        path = args.checkpoint
        if not os.path.exists(path):
            print(f"varlens lens: --checkpoint {path!r} does not exist", file=sys.stderr)
            return 2
        try:   # checked before anything is built: a valid file, a valid stored config
            path, s, cfg = load_run_checkpoint(path, "varlens lens")
        except (ckpt.CheckpointError, FileNotFoundError, ValueError) as e:
            print(f"varlens lens: {e}", file=sys.stderr)
            return 2
        st = (s.get("extra") or {}).get("standardizer")
        state = s["model"]
        label = f"checkpoint {path}"
    else:
        try:
            cfg = recipes.get_recipe(args.recipe)
        except Exception as e:  # unknown recipe: the recipes module names the valid ones
            print(f"varlens lens: {e}", file=sys.stderr)
            return 2
        label = f"recipe {args.recipe} at initialisation"
    model, opt, _, loss_fn, (train, _, _), _ = recipes.build_run(cfg, standardizer_state=st)
    if state is not None:
        try:
            restore_weights(model, state, path)
        except ckpt.CheckpointError as e:
            print(f"varlens lens: {e}", file=sys.stderr)
            return 2
    model.train()
    # --steps N trains: the recipe's optimiser takes a step after each pass and a LensHistory keeps
    # one point per step (so the moments' evolution is shown); --no-update pools N passes instead.
    history = None
    if args.steps > 1 and not args.no_update:
        from varlens.lens.history import LensHistory
        history = LensHistory(model, every=1)
        lens = history.lens
    else:
        lens = Lens(model, weight_every=1)
    rows = None
    try:
        for i, (xb, yb) in enumerate(train):
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            last = i + 1 >= args.steps
            if history is None:
                lens.step()
            else:
                if last:
                    rows = compare(lens)        # the last step's own rows, before its update
                opt.step()
                history.step(i)
            if last:
                break
    finally:
        if history is not None:
            history.detach()
        else:
            lens.detach()
    if rows is None:
        rows = compare(lens)
    n_batches = args.steps if history is not None else lens.steps_sampled
    print(f"== {label}: {n_batches} batch(es) of {cfg.get('batch_size')}"
          f"{', training (one optimiser step per batch)' if history is not None else ''} ==")
    if history is not None:
        keys = history.keys("forward")[:8]
        print("E[x²] per step (forward), first layers:")
        print("step   " + " ".join(f"{k[:12]:>12s}" for k in keys))
        for p in history.points:
            vals = {r["key"]: r["measured"] for r in p["rows"] if r["direction"] == "forward"}
            print(f"{p['step']:<6d} " + " ".join(f"{vals.get(k, float('nan')):12.4g}" for k in keys))
        if args.history:
            history.save(args.history)
            print(f"wrote {args.history}")
    print(report.table([r for r in rows if r.direction == "forward"], max_rows=args.rows))
    print(report.table([r for r in rows if r.direction == "backward"], max_rows=args.rows).split("\n", 2)[-1])
    print(report.summary_text(summary(rows)))
    if args.plot:
        report.plot_depth({label: rows}, args.plot, title=label)
        print(f"wrote {args.plot}")
    if args.json:
        _emit(args.json, report.to_json(lens, rows, meta={"source": label, "recipe": cfg.get("recipe"),
                                                          "steps": args.steps}))
    return 0


def _emit(path, doc):
    if path == "-":
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {path}")
