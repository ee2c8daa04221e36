"""Adafactor, as torch.optim.Adafactor (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

Adafactor (Shazeer & Stern 2018, as PyTorch): RMS scaling with a factored second moment.
For a matrix gradient only the running means of g^2 over rows (R) and columns (C) are
kept and ``V = R C / mean(R)`` (a rank-one estimate); vectors keep the full V.  The
averaging weight is ``t^beta2_decay``, the step ``max(eps2, RMS(p)) min(lr, 1/sqrt(t))``
times ``g / sqrt(V)`` clipped to RMS at most ``d``; weight decay is decoupled, ``p *= 1 - lr wd``.
"""
from __future__ import annotations

from varlens.core.tensor import Tensor
from varlens.optim._single_tensor import _betas
from varlens.optim.optimizer import Optimizer, _check_range, _lerp_, _xp, _zeros_state


class Adafactor(Optimizer):
    """Adafactor (PyTorch's defaults: lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0); ``eps[0]=None`` means the machine epsilon of the parameter's dtype."""

    _state_like_params = False          # the factored row/column averages are smaller than p

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=_betas(eps), d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("Adafactor", "beta2_decay", group["beta2_decay"], hi=0.0)
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise ValueError(f"Adafactor: eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None:
            _check_range("Adafactor", "eps[0] (epsilon1)", eps[0], 0.0)
        _check_range("Adafactor", "eps[1] (epsilon2)", eps[1], 0.0)
        _check_range("Adafactor", "d (clipping threshold)", group["d"], 1.0)
        _check_range("Adafactor", "weight_decay", group["weight_decay"], 0.0)

    def _init_param_state(self, st, w, group):
        if w.ndim > 1:
            xp = _xp(w)
            st["row_var"] = Tensor._make(xp.zeros(w.shape[:-1] + (1,), dtype=w.dtype))
            st["col_var"] = Tensor._make(xp.zeros(w.shape[:-2] + (1, w.shape[-1]), dtype=w.dtype))
        else:
            _zeros_state(st, w, "variance")

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, decay, (eps1, eps2) = group["lr"], group["beta2_decay"], group["eps"]
            clip, wd, maximize = group["d"], group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                w = p._data
                xp = _xp(w)    # alpha and the clipping read two norms on the host, as PyTorch's
                e1 = float(xp.finfo(w.dtype).eps) if eps1 is None else eps1
                g = p.grad._data
                if maximize:
                    g = -g
                weight = t ** decay                       # 1 - beta2_t
                rho = min(lr, 1 / t ** 0.5)
                alpha = max(eps2, float(xp.sqrt((w * w).sum())) / w.size ** 0.5) * rho
                if wd != 0:
                    w *= 1 - lr * wd
                if g.ndim > 1:
                    sq = g * g
                    # row and column means of g^2 (as the squared norm over the axis / its length)
                    row = xp.sqrt(sq.sum(axis=-1, keepdims=True)) ** 2 / g.shape[-1]
                    col = xp.sqrt(sq.sum(axis=-2, keepdims=True)) ** 2 / g.shape[-2]
                    R = _lerp_(st["row_var"]._data, row, weight)
                    C = _lerp_(st["col_var"]._data, col, weight)
                    V = R @ C
                    V /= xp.maximum(R.mean(axis=-2, keepdims=True), e1)
                else:
                    V = _lerp_(st["variance"]._data, g * g, weight).copy()
                upd = 1 / xp.sqrt(xp.maximum(V, e1 * e1))
                upd *= g
                denom = max(1.0, float(xp.sqrt((upd * upd).sum())) / (upd.size ** 0.5 * clip))
                w += (-alpha / denom) * upd
                p._version[0] += 1
        return loss
