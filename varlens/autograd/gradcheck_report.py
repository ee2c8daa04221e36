"""Gradient checking for learners, in the style of CS231n's assignments.

``check_gradients(f, inputs, params)`` compares backward's gradient with the centred finite
difference (f(x + h e_k) - f(x - h e_k)) / 2h, entry by entry, for every input and parameter
that requires grad, and reports per tensor the relative error

    rel_error = max_k |a_k - n_k| / max(|a_k| + |n_k|, 1e-3 max_j |n_j|, 1e-8)

(the middle term keeps entries whose true gradient is nearly 0, where the difference quotient's
own error dominates, from reading as wrong)

with the worst entries and their indices.  It warns when run in float32 (the centred
difference's rounding error is about u |f| / h with u = 6e-8, so relative errors near 1e-3
are the floor there, not a bug) and, when the check fails, says what kind of mistake the
mismatch looks like: a constant factor (a forgotten 1/N or 2), a flipped sign, a transposed
gradient, or, for an elementwise function, a backward that differentiates a different
function than the forward computes (a GELU whose backward uses the other approximation is
the classic case).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from varlens.autograd.gradcheck import _scalarize
from varlens.core.grad_mode import no_grad
from varlens.core.tensor import Tensor

# CS231n's reading of the relative error in float64
_GOOD, _BAD = 1e-7, 1e-4


@dataclasses.dataclass
class TensorCheck:
    """The check of one input or parameter."""
    name: str
    shape: tuple
    rel_error: float
    worst: list            # [(index tuple, analytic, numeric, rel error)], worst first
    checked: int           # entries checked (all of them, or num_checks sampled)
    ok: bool


@dataclasses.dataclass
class LearnerReport:
    """What ``check_gradients`` found: per-tensor checks, warnings and a diagnosis."""
    checks: list
    dtype: str
    eps: float
    floor: float
    warnings: list
    diagnosis: list

    @property
    def ok(self):
        return all(c.ok for c in self.checks)

    def __bool__(self):
        return self.ok

    def __str__(self):
        lines = [f"gradient check ({self.dtype}, h = {self.eps:g}; relative errors below {self.floor:.0e} are "
                 f"the floor of the finite difference): {'PASSED' if self.ok else 'FAILED'}"]
        for c in self.checks:
            lines.append(f"  {c.name:24s} {str(c.shape):14s} rel error {c.rel_error:.2e}  "
                         f"{'ok' if c.ok else 'WRONG'}  ({c.checked} entries)")
            if not c.ok:
                for idx, a, n, r in c.worst[:3]:
                    lines.append(f"      at {idx}: analytic {a:+.6e}  numeric {n:+.6e}  (rel {r:.1e})")
        lines += [f"  warning: {w}" for w in self.warnings]
        lines += [f"  diagnosis: {d}" for d in self.diagnosis]
        return "\n".join(lines)


def _rel(a, n):
    scale = 1e-3 * float(np.max(np.abs(n))) if n.size else 0.0
    return np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), max(scale, 1e-8))


def _scalar(out, weights):
    total = _scalarize(out, weights)
    if isinstance(total, float):
        raise TypeError("check_gradients: f must return a floating Tensor (or a tuple of them)")
    return total


def check_gradients(f, inputs=(), params=None, eps=None, num_checks=None, seed=0, print_report=False):
    """Check ``f``'s backward against finite differences, tensor by tensor, entry by entry.

    ``f(*inputs)`` returns a Tensor (a non-scalar output is reduced with fixed random weights);
    checked are the inputs that require grad and the ``params`` (mapping name -> Tensor, e.g.
    ``dict(model.named_parameters())``, or a list).  ``num_checks``: check that many random
    entries per tensor instead of all of them (CS231n's grad_check_sparse).  ``eps`` defaults
    to 1e-6 in float64 and 1e-3 in float32.  Returns a :class:`LearnerReport` (truthy iff
    every tensor passed); ``print_report=True`` prints it.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    targets = [(f"inputs[{i}]", x) for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if params is not None:
        items = params.items() if hasattr(params, "items") else enumerate(params)
        targets += [(str(k) if hasattr(params, "items") else f"params[{k}]", p) for k, p in items]
    if not targets:
        raise ValueError("check_gradients: nothing to check: no input requires grad and no params were given")
    dtypes = {np.dtype(t._data.dtype) for _, t in targets}
    dtype = np.float32 if np.dtype(np.float32) in dtypes else np.float64
    if eps is None:
        eps = 1e-6 if dtype == np.float64 else 1e-3
    unit = float(np.finfo(dtype).eps)
    floor = max(10 * unit / eps, 1e-10) if dtype == np.float64 else 10 * unit / eps
    rng = np.random.default_rng(seed)
    with no_grad():
        out0 = f(*inputs)
    outs = out0 if isinstance(out0, (tuple, list)) else (out0,)
    weights = [None if (isinstance(o, Tensor) and o._data.size == 1) else
               (Tensor._make(rng.standard_normal(o.shape).astype(o._data.dtype)) if isinstance(o, Tensor) else None)
               for o in outs]
    for _, t in targets:
        t.grad = None
    _scalar(f(*inputs), weights).backward()
    analytic = [(t.grad._data.astype(np.float64) if t.grad is not None else np.zeros(t.shape)) for _, t in targets]
    for _, t in targets:
        t.grad = None

    def value():
        with no_grad():
            return float(_scalar(f(*inputs), weights).item())

    checks, numerics = [], []
    for (name, t), a in zip(targets, analytic):
        flat = t._data.reshape(-1)
        n = flat.size
        ks = np.arange(n) if num_checks is None or num_checks >= n else rng.choice(n, num_checks, replace=False)
        num = np.full(n, np.nan)
        for k in ks:
            old = flat[k].copy()
            flat[k] = old + eps
            fp = value()
            flat[k] = old - eps
            fm = value()
            flat[k] = old
            num[k] = (fp - fm) / (2 * eps)
        af = a.reshape(-1)
        rel = _rel(af[ks], num[ks])
        order = np.argsort(-rel)
        worst = [(tuple(int(i) for i in np.unravel_index(ks[j], t.shape)), float(af[ks[j]]), float(num[ks[j]]),
                  float(rel[j])) for j in order[:5]]
        err = float(rel.max()) if rel.size else 0.0
        tol = _BAD if dtype == np.float64 else max(1e-2, 10 * floor)
        checks.append(TensorCheck(name, tuple(t.shape), err, worst, len(ks), bool(err <= tol)))
        numerics.append((t, af[ks], num[ks], ks))
    warnings = []
    if dtype == np.float32:
        warnings.append(f"float32: the finite difference's rounding error is about u|f|/h = {unit:.1e}/{eps:g} "
                        f"relative, so errors near {floor:.0e} are expected even for a correct backward; "
                        "call .double() on the inputs and parameters for a check that can see small mistakes")
    diagnosis = []
    if not all(c.ok for c in checks):
        diagnosis = _diagnose(f, inputs, targets, checks, numerics, weights)
    report = LearnerReport(checks, np.dtype(dtype).name, eps, floor, warnings, diagnosis)
    if print_report:
        print(report)
    return report


def _diagnose(f, inputs, targets, checks, numerics, weights):
    """Name the kind of mistake a failed check looks like."""
    out = []
    for c, (t, a, n, ks) in zip(checks, numerics):
        if c.ok:
            continue
        nn2 = float(n @ n)
        if nn2 > 0:
            k = float(a @ n) / nn2
            resid = np.linalg.norm(a - k * n) / max(np.linalg.norm(a), 1e-300)
            if resid < 1e-4 and abs(k - 1) > 1e-3:
                if abs(k + 1) < 1e-3:
                    out.append(f"{c.name}: the analytic gradient is the numeric one with its sign flipped "
                               "(a gradient ascent step, or a minus sign lost in the chain rule)")
                else:
                    hint = {2.0: " (a factor 2 from d(x^2)/dx counted twice?)",
                            0.5: " (a factor 2 of d(x^2)/dx = 2x missing?)"}.get(round(k, 3), "")
                    if not hint and len(t.shape) and abs(k - round(k)) < 1e-3 and round(k) > 1:
                        hint = f" (a mean over {round(k)} items taken as a sum, a 1/N missing?)"
                    elif not hint and k < 1 and abs(1 / k - round(1 / k)) < 1e-3:
                        hint = f" (divided by {round(1 / k)} once too often?)"
                    out.append(f"{c.name}: the analytic gradient is {k:.4g} times the numeric one{hint}")
                continue
        if t.ndim == 2 and t.shape[0] == t.shape[1] and len(ks) == t.numel():
            A, N = a.reshape(t.shape), n.reshape(t.shape)
            if np.allclose(A.T, N, rtol=1e-4, atol=1e-8):
                out.append(f"{c.name}: the analytic gradient is the transpose of the numeric one "
                           "(dL/dW written as x^T g instead of g^T x, or the other way round)")
                continue
        alt = _elementwise_diagnosis(f, inputs, t, c.name, weights)
        if alt:
            out.append(alt)
    if not out:
        out.append("no simple pattern (factor, sign, transpose, another function's derivative) explains the "
                   "mismatch: check the backward's formula entry by entry against the worst entries above")
    return out


def _known_functions():
    from scipy.special import erf
    s2 = math.sqrt(2.0)
    c = math.sqrt(2.0 / math.pi)

    def sig(x):
        return 0.5 * (1 + np.tanh(0.5 * x))

    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))

    def dgelu_tanh(x):
        u = c * (x + 0.044715 * x ** 3)
        th = np.tanh(u)
        return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * 0.044715 * x * x)
    return {
        "GELU (exact, with erf)": (lambda x: 0.5 * x * (1 + erf(x / s2)),
                                   lambda x: 0.5 * (1 + erf(x / s2)) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)),
        "GELU (tanh approximation)": (gelu_tanh, dgelu_tanh),
        "ReLU": (lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(float)),
        "leaky ReLU (slope 0.01)": (lambda x: np.where(x > 0, x, 0.01 * x), lambda x: np.where(x > 0, 1.0, 0.01)),
        "sigmoid": (sig, lambda x: sig(x) * (1 - sig(x))),
        "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
        "SiLU": (lambda x: x * sig(x), lambda x: sig(x) * (1 + x * (1 - sig(x)))),
        "softplus": (lambda x: np.logaddexp(0, x), sig),
        "ELU": (lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
                lambda x: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0)))),
        "identity": (lambda x: x, lambda x: np.ones_like(x)),
        "square": (lambda x: x * x, lambda x: 2 * x),
        "exp": (np.exp, np.exp),
    }


def _elementwise_diagnosis(f, inputs, t, name, weights):
    """For f(x) elementwise in one input: which known function does the forward compute, and
    whose derivative does the backward apply?"""
    if len(inputs) != 1 or inputs[0] is not t or t._data.size < 2:
        return None
    x = t._data.astype(np.float64)
    with no_grad():
        y = f(t)
    if not isinstance(y, Tensor) or y.shape != t.shape:
        return None
    yv = y._data.astype(np.float64)
    # the backward's per-entry derivative: backward of sum(f(x))
    t.grad = None
    f(t).sum().backward()
    d_back = t.grad._data.astype(np.float64).reshape(-1)
    t.grad = None
    fwd_match = bwd_match = None
    for label, (fn, dfn) in _known_functions().items():
        if fwd_match is None and np.allclose(fn(x), yv, rtol=1e-5, atol=1e-7):
            fwd_match = label
        if bwd_match is None and np.allclose(dfn(x).reshape(-1), d_back, rtol=1e-5, atol=1e-7):
            bwd_match = label
    if bwd_match and bwd_match != fwd_match:
        fwd = f"the forward computes {fwd_match}" if fwd_match else "the forward computes something else"
        return (f"{name}: the backward applies the derivative of {bwd_match}, but {fwd}: backward and forward "
                "implement different functions")
    if fwd_match and not bwd_match:
        return (f"{name}: the forward computes {fwd_match}, but the backward is not its derivative "
                "(nor that of any function this check knows)")
    return None
