"""Muon, as torch.optim.Muon (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

Muon (Jordan et al. 2024): for 2-D weights, heavy-ball momentum (Nesterov by default)
whose direction is replaced by the nearest semi-orthogonal matrix ``U V^T`` (from the SVD
``U S V^T`` of the momentum), computed by five Newton-Schulz iterations
``X <- a X + (b A + c A^2) X`` with ``A = X X^T``.  PyTorch runs that iteration in bfloat16;
varlens emulates it (float32 products rounded to bfloat16 after every operation), which
gives PyTorch's update exactly for small matrices and to one bfloat16 unit in the last
place when the summation order of a larger product differs.
"""
from __future__ import annotations

import math

from varlens.core import array as B
from varlens.optim.optimizer import Optimizer, _lerp_, _xp, _zeros_state


_NS_COEFFS = (3.4445, -4.775, 2.0315)


def _bf16(x):
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32: the
    top 16 bits of the float32 pattern after adding half of the dropped part."""
    xp = _xp(x)
    bits = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32).astype(xp.uint64)
    bits += ((bits >> 16) & 1) + 0x7FFF
    return (bits & 0xFFFF0000).astype(xp.uint32).view(xp.float32)


def _orthogonalize(G, coeffs, steps, eps):
    """Newton-Schulz iteration towards the orthogonal factor U V^T of G = U S V^T.

    With X = G / |G|_F (so every singular value is <= 1) each step applies the odd
    polynomial ``a s + b s^3 + c s^5`` to the singular values (``X <- a X + (b A + c A^2) X``
    with ``A = X X^T``), which pushes them all towards 1 (roughly into [0.7, 1.2] for the
    default coefficients).  Works on the short side: a tall G is transposed first.

    As PyTorch, in bfloat16: every result is rounded to bfloat16, products accumulate in
    float32 (``_bf16`` emulates the rounding, as NumPy has no bfloat16 type).
    """
    xp = _xp(G)
    a, b, c = (xp.float32(v) for v in coeffs)
    X = _bf16(G)
    if X.shape[0] > X.shape[1]:
        X = X.T
    norm = _bf16(xp.sqrt((X * X).sum(dtype=xp.float32)))
    eps_b = _bf16(B.xp.float32(eps)).reshape(-1)[0]     # a host scalar, usable beside device arrays
    X = _bf16(X / xp.maximum(norm, eps_b))
    for _ in range(steps):
        A = _bf16(X @ X.T)
        X = _bf16(a * X + _bf16(b * A + c * (A @ A)) @ X)
    return X.T if G.shape[0] > G.shape[1] else X


class Muon(Optimizer):
    """Muon for 2-D parameters (PyTorch's defaults: lr=1e-3, weight_decay=0.1, momentum=0.95,
    nesterov=True, ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5,
    adjust_lr_fn=None).  ``adjust_lr_fn``: None/"original" scales lr by sqrt(max(1, rows/cols)),
    "match_rms_adamw" by 0.2 sqrt(max(rows, cols))."""

    _counts_steps = False               # PyTorch's Muon keeps only the momentum buffer
    _nonnegative = ("momentum", "weight_decay", "eps")

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=_NS_COEFFS, eps=1e-7, ns_steps=5, adjust_lr_fn=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        fn = group["adjust_lr_fn"]
        if fn not in (None, "original", "match_rms_adamw"):
            raise ValueError("Muon: adjust_lr_fn must be None, 'original' or 'match_rms_adamw', "
                             f"got {fn!r}")
        steps = group["ns_steps"]
        if not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps < 100:
            raise ValueError(f"Muon: ns_steps must be an integer in [0, 100), got {steps!r}")
        co = group["ns_coefficients"]
        if not isinstance(co, (tuple, list)) or len(co) != 3:
            raise ValueError(f"Muon: ns_coefficients must be 3 numbers (a, b, c), got {co!r}")
        for i, p in enumerate(group["params"]):
            if p._data.ndim != 2:
                raise ValueError(f"Muon: only 2-D parameters are supported, but params[{i}] has "
                                 f"shape {tuple(p._data.shape)}; optimise the others with AdamW")

    def _init_param_state(self, st, w, group):
        _zeros_state(st, w, "momentum_buffer")

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, wd, mu = group["lr"], group["weight_decay"], group["momentum"]
            fn = group["adjust_lr_fn"]
            for p, st, _ in self._params_with_grad(group):
                w = p._data
                g = p.grad._data
                buf = _lerp_(st["momentum_buffer"]._data, g, 1 - mu)
                d = _lerp_(g.copy(), buf, mu) if group["nesterov"] else buf
                O = _orthogonalize(d, group["ns_coefficients"], group["ns_steps"], group["eps"])
                rows, cols = w.shape
                if fn is None or fn == "original":
                    ratio = math.sqrt(max(1, rows / cols))
                else:
                    ratio = 0.2 * math.sqrt(max(rows, cols))
                w *= 1 - lr * wd
                w -= (lr * ratio) * O.astype(w.dtype, copy=False)
                p._version[0] += 1
        return loss
