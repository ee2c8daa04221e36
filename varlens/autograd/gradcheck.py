"""Finite-difference gradient checks for users (gradcheck, gradgradcheck).

For a function f and a random unit direction v, the directional derivative
<grad f, v> computed by backward is compared with the central difference
(f(x + h v) - f(x - h v)) / 2h, in float64.  Several random directions per input
(plus each coordinate direction for small inputs) catch a wrong entry anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from varlens.core.engine import grad
from varlens.core.grad_mode import enable_grad, no_grad
from varlens.core.tensor import Tensor


@dataclass
class GradcheckReport:
    """The outcome of a gradient check: ok, and the worst mismatch found."""

    ok: bool
    worst_abs_error: float = 0.0
    worst_rel_error: float = 0.0
    where: str = ""
    details: list = field(default_factory=list)

    def __bool__(self):
        return self.ok

    def __str__(self):
        head = "gradcheck passed" if self.ok else "gradcheck FAILED"
        return (f"{head}: worst |analytic - numeric| = {self.worst_abs_error:.3e} "
                f"(relative {self.worst_rel_error:.3e}) at {self.where or '-'}")


def _scalarize(out, weights):
    """sum_k <out_k, w_k> over the floating outputs (a weight of None: the plain sum); 0.0 if none."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0.0
    for o, w in zip(outs, weights):
        if isinstance(o, Tensor) and o.dtype.kind == "f":
            term = (o * w).sum() if w is not None else o.sum()
            total = term if isinstance(total, float) else total + term
    return total


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, n_directions=4, raise_exception=True,
              seed=0, check_coordinates=True, *, return_report=False, report=False, **torch_options):
    """Compare backward's gradients of ``fn(*inputs)`` with central differences in float64.

    Inputs that require grad are checked.  Outputs may be any shape: they are
    reduced with fixed random weights to one scalar.  As torch.autograd.gradcheck:
    returns True on success; on failure raises RuntimeError (with the worst mismatch)
    or, with raise_exception=False, returns False.  ``return_report=True`` returns the
    GradcheckReport instead (truthy iff the check passed; ``str()`` gives the details).
    torch-only options (nondet_tol, check_undefined_grad, fast_mode, ...) are accepted and
    ignored, except that check_sparse_nnz/check_batched_grad/check_forward_ad=True raise.

    ``report=True`` is the learners' mode (varlens.autograd.gradcheck_report.check_gradients):
    entry-by-entry relative errors per input with the worst indices, a float32 warning with
    the expected error floor, and a diagnosis of a failed check; it prints and returns that report.
    """
    if report:
        from varlens.autograd.gradcheck_report import check_gradients
        return check_gradients(fn, inputs, print_report=True, seed=seed)
    for k, v in torch_options.items():
        if k not in _TORCH_OPTIONS:
            raise TypeError(f"gradcheck() got an unexpected keyword argument {k!r}")
        if k in ("check_batched_grad", "check_forward_ad", "check_sparse_nnz", "check_batched_forward_grad") and v:
            raise NotImplementedError(f"gradcheck: {k}=True is not supported by varlens")
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    rng = np.random.default_rng(seed)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x.dtype != np.float64:
            raise TypeError(f"gradcheck: inputs[{i}] has dtype {x.dtype}; finite differences need "
                            "float64 inputs (use .double())")
    with no_grad():
        out0 = fn(*inputs)
    outs = out0 if isinstance(out0, (tuple, list)) else (out0,)
    weights = [Tensor._make(rng.standard_normal(o.shape)) if isinstance(o, Tensor) else None for o in outs]

    def f_val():
        with no_grad():
            return float(_scalarize(fn(*inputs), weights).item())

    for x in inputs:
        if isinstance(x, Tensor):
            x.grad = None
    loss = _scalarize(fn(*inputs), weights)
    targets = [(i, x) for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not targets:
        raise ValueError("gradcheck: no input requires grad")
    if not isinstance(loss, Tensor) or not loss.requires_grad:
        analytic = {i: np.zeros_like(x._data) for i, x in targets}
    else:
        loss.backward()
        analytic = {i: (x.grad._data.copy() if x.grad is not None else np.zeros_like(x._data))
                    for i, x in targets}
    report = GradcheckReport(ok=True)
    for i, x in targets:
        dirs = [rng.standard_normal(x.shape) for _ in range(n_directions)]
        if check_coordinates and x._data.size <= 16:
            for k in range(x._data.size):
                e = np.zeros(x._data.size)
                e[k] = 1.0
                dirs.append(e.reshape(x.shape))
        for v in dirs:
            n = np.linalg.norm(v)
            if n == 0:
                continue
            v = v / n
            orig = x._data.copy()
            x._data = np.asarray(orig + eps * v)  # (0-d + 0-d is a NumPy scalar)
            fp = f_val()
            x._data = np.asarray(orig - eps * v)
            fm = f_val()
            x._data = orig
            numeric = (fp - fm) / (2 * eps)
            ana = float((analytic[i] * v).sum())
            err = abs(ana - numeric)
            rel = err / max(abs(numeric), 1e-12)
            if not err <= report.worst_abs_error:
                report.worst_abs_error, report.worst_rel_error = err, rel
                report.where = f"inputs[{i}] (shape {tuple(x.shape)})"
            if not err <= atol + rtol * abs(numeric):  # NaN counts as failure
                report.ok = False
                report.details.append((i, ana, numeric))
    for x in inputs:
        if isinstance(x, Tensor):
            x.grad = None
    if not report.ok and raise_exception:
        i, a, nmr = report.details[0]
        raise RuntimeError(f"{report}; e.g. inputs[{i}] along a random direction: analytic {a:.6e} "
                           f"vs numeric {nmr:.6e}")
    return report if return_report else report.ok


_TORCH_OPTIONS = {"nondet_tol", "check_undefined_grad", "check_grad_dtypes", "check_batched_grad",
                  "check_batched_forward_grad", "check_forward_ad", "check_backward_ad", "fast_mode",
                  "masked", "check_sparse_nnz"}


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-4, rtol=1e-3, n_directions=3,
                  raise_exception=True, seed=1, *, return_report=False, **torch_options):
    """Check second derivatives: gradcheck of the map x -> <d fn(x)/dx, w> for fixed random w.

    The first gradient is taken with create_graph=True, so this exercises the
    recorded backward (Hessian-vector products)."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    rng = np.random.default_rng(seed)
    targets = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    out0 = fn(*inputs)
    outs = out0 if isinstance(out0, (tuple, list)) else (out0,)
    w_out = [Tensor._make(rng.standard_normal(o.shape)) for o in outs]
    if grad_outputs is not None:  # torch's fixed output cotangents
        gos = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
        w_out = [g.detach() if isinstance(g, Tensor) else Tensor._make(np.asarray(g)) for g in gos]
    w_in = [Tensor._make(rng.standard_normal(x.shape)) for x in targets]

    def first_grad_dot(*xs):
        with enable_grad():
            return _first_grad_dot(*xs)

    def _first_grad_dot(*xs):
        loss = _scalarize(fn(*xs), w_out)
        gs = grad([loss], [x for x in xs if isinstance(x, Tensor) and x.requires_grad],
                  create_graph=True, allow_unused=True)
        total = None
        for gi, w in zip(gs, w_in):
            if gi is None:
                continue
            term = (gi * w).sum()
            total = term if total is None else total + term
        if total is None:
            return Tensor._make(np.zeros(()))
        return total

    return gradcheck(first_grad_dot, inputs, eps=eps, atol=atol, rtol=rtol, n_directions=n_directions,
                     raise_exception=raise_exception, seed=seed, check_coordinates=False,
                     return_report=return_report, **torch_options)
