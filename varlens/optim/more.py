"""More of PyTorch's optimisers: NAdam, RAdam, Adamax, ASGD and Rprop.

Each follows PyTorch's single-tensor update (its argument names, defaults, state keys and
order of floating-point operations), so float64 trajectories agree with ``torch.optim`` to
rounding (tests/test_optim_more.py runs 50 steps of each, with a save/load half-way).  As
in the rest of varlens.optim the updates run in place on the raw arrays, outside the graph,
and bump each parameter's version counter.

The methods, with g the gradient at step t (after ``maximize`` flips its sign and coupled
``weight_decay`` adds ``wd * p``), m and v Adam's running averages (seed 004 §B.1.4):

* NAdam (Dozat 2016): Adam whose momentum looks one step ahead.  The momentum coefficient
  itself warms up, ``mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay))``, and the step
  combines the current gradient and the running mean with the products of the mu's:
  ``p -= lr (1 - mu_t) / (1 - prod_{i<=t} mu_i) * g / d + lr mu_{t+1} / (1 - prod_{i<=t+1} mu_i) * m / d``
  with ``d = sqrt(v / (1 - beta2^t)) + eps``.  PyTorch keeps the product ``mu_product`` in a
  float32 scalar; varlens does too, so the step sizes agree bit for bit.
* RAdam (Liu et al. 2019): Adam whose adaptive denominator is switched on only once the
  variance of the running average v is tractable.  With ``rho_inf = 2/(1 - beta2) - 1`` and
  ``rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)``: while ``rho_t <= 5`` the step is plain
  momentum SGD with bias-corrected m; afterwards it is Adam's step times the rectifier
  ``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``.
* Adamax (Kingma & Ba 2015, §7.1): Adam with the L2 norm of the second moment replaced by
  an infinity norm, ``u <- max(beta2 u, |g| + eps)``, ``p -= lr / (1 - beta1^t) * m / u``.
* ASGD (Polyak & Juditsky 1992, as PyTorch): SGD with a decaying step
  ``eta_t = lr / (1 + lambd lr t)^alpha`` and a weight decay ``p *= 1 - lambd eta``; it keeps a
  running average ``ax`` of the iterates (the average starts once ``t > t0``), stored in
  ``optimizer.state[p]['ax']``.  ``eta`` and ``mu`` are float32 scalars, as in PyTorch.
* Rprop (Riedmiller & Braun 1993): only the sign of g is used.  Each weight has its own step
  size, multiplied by ``etaplus`` when g kept its sign, by ``etaminus`` when it flipped (and
  that step then skipped), clipped to ``step_sizes``; ``p -= sign(g) * step_size``.
* Adafactor (Shazeer & Stern 2018, as PyTorch): RMS scaling with a factored second moment.
  For a matrix gradient only the running means of g^2 over rows (R) and columns (C) are
  kept and ``V = R C / mean(R)`` (a rank-one estimate); vectors keep the full V.  The
  averaging weight is ``t^beta2_decay``, the step ``max(eps2, RMS(p)) min(lr, 1/sqrt(t))``
  times ``g / sqrt(V)`` clipped to RMS at most ``d``; weight decay is decoupled, ``p *= 1 - lr wd``.
* Muon (Jordan et al. 2024): for 2-D weights, heavy-ball momentum (Nesterov by default)
  whose direction is replaced by the nearest semi-orthogonal matrix ``U V^T`` (from the SVD
  ``U S V^T`` of the momentum), computed by five Newton-Schulz iterations
  ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``.  PyTorch runs that iteration in bfloat16;
  varlens emulates it (float32 products rounded to bfloat16 after every operation), which
  gives PyTorch's update exactly for small matrices and to one bfloat16 unit in the last
  place when the summation order of a larger product differs.

``foreach``, ``capturable`` and ``fused`` are accepted and ignored (one NumPy code path);
``differentiable=True`` is refused, as in the other varlens optimisers.
"""
from __future__ import annotations

import math

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.optim.optimizer import (Optimizer, _check_adam_group, _check_range, _lerp_,
                                     _no_differentiable, _zeros_state)
from varlens.core.tensor import Tensor

__all__ = ["NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "Adafactor", "Muon"]


def _betas(betas):
    return tuple(betas) if isinstance(betas, list) else betas


def _grad(p, maximize, wd=0.0, decoupled=False, lr=0.0):
    """The gradient the update uses: sign-flipped for maximize, plus coupled L2 decay (or the
    decoupled shrink of p, done here in place)."""
    g = p.grad._data
    if maximize:
        g = -g
    if wd != 0:
        if decoupled:
            p._data *= 1 - lr * wd
        else:
            g = g + wd * p._data
    return g


def _second_moment_(v, g, beta2):
    """v <- beta2 v + (1 - beta2) g^2 in place, rounded as PyTorch's addcmul ((value g) g)."""
    v *= beta2
    tmp = B.xp.multiply(g, 1 - beta2)
    tmp *= g
    v += tmp
    return v


class _AdamFamily(Optimizer):
    """Adam's variants here: the checks Adam's hyperparameters get, and zeroed state arrays
    named by ``_state_keys`` (after the step counter)."""

    _state_keys = ("exp_avg", "exp_avg_sq")

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_adam_group(type(self).__name__, group)

    def _init_param_state(self, st, w, group):
        _zeros_state(st, w, *self._state_keys)


class NAdam(_AdamFamily):
    """NAdam (PyTorch's defaults: lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False).  ``decoupled_weight_decay=True`` is
    NAdamW: the weights shrink by ``1 - lr wd`` before the step instead of adding ``wd p`` to g."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _no_differentiable("NAdam", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("NAdam", "momentum_decay", group["momentum_decay"], 0.0)

    def _init_param_state(self, st, w, group):
        st["mu_product"] = Tensor._make(B.xp.ones((), dtype=DT.float32))
        super()._init_param_state(st, w, group)

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, psi = group["weight_decay"], group["momentum_decay"]
            decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd, decoupled, lr)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
                prod = st["mu_product"]._data
                prod *= mu                          # float32 arithmetic, as PyTorch's state
                prod_t = float(prod)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                v = _second_moment_(st["exp_avg_sq"]._data, g, beta2)
                denom = xp.sqrt(v / (1 - beta2 ** t))
                denom += eps
                w = p._data
                w += (-lr * (1.0 - mu) / (1.0 - prod_t)) * (g / denom)
                w += ((-lr * mu_next) / (1.0 - prod_t * mu_next)) * (m / denom)
                p._version[0] += 1
        return loss


class RAdam(_AdamFamily):
    """RAdam (PyTorch's defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    decoupled_weight_decay=False); the adaptive term is used once ``rho_t > 5``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _no_differentiable("RAdam", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, decoupled, maximize = (group["weight_decay"], group["decoupled_weight_decay"],
                                       group["maximize"])
            rho_inf = 2 / (1 - beta2) - 1
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd, decoupled, lr)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                v = _second_moment_(st["exp_avg_sq"]._data, g, beta2)
                bc1 = 1 - beta1 ** t
                bc2 = 1 - beta2 ** t
                upd = m / bc1
                upd *= lr
                rho_t = rho_inf - 2 * t * (beta2 ** t) / bc2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    root = xp.sqrt(v)
                    root += eps
                    upd *= (bc2 ** 0.5) / root
                    upd *= rect
                p._data -= upd
                p._version[0] += 1
        return loss


class Adamax(_AdamFamily):
    """Adamax (PyTorch's defaults: lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)."""

    _state_keys = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _no_differentiable("Adamax", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, maximize = group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                u = st["exp_inf"]._data
                u *= beta2
                a = xp.abs(g)
                a += eps
                xp.maximum(u, a, out=u)
                clr = lr / (1 - beta1 ** t)
                p._data += (-clr) * (m / u)
                p._version[0] += 1
        return loss


class ASGD(Optimizer):
    """Averaged SGD (PyTorch's defaults: lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6,
    weight_decay=0).  The averaged weights are ``optimizer.state[p]['ax']``."""

    _nonnegative = ("weight_decay", "lambd", "alpha")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _no_differentiable("ASGD", differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("ASGD", "t0", group["t0"])

    def _init_param_state(self, st, w, group):
        st["eta"] = Tensor._make(B.xp.asarray(group["lr"], dtype=DT.float32))
        st["mu"] = Tensor._make(B.xp.ones((), dtype=DT.float32))
        _zeros_state(st, w, "ax")

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        f32 = DT.float32
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            wd, maximize = group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd)
                eta = float(st["eta"]._data)
                mu = float(st["mu"]._data)
                w = p._data
                w *= 1 - lambd * eta
                w += (-eta) * g
                ax = st["ax"]._data
                if mu != 1:
                    ax += (w - ax) * mu
                else:
                    ax[...] = w
                # PyTorch rounds both to float32 even after a load made the state float64
                st["eta"]._data[...] = f32.type(lr / ((1 + lambd * lr * t) ** alpha))
                st["mu"]._data[...] = f32.type(1 / max(1, t - t0))
                p._version[0] += 1
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation (PyTorch's defaults: lr=1e-2, etas=(0.5, 1.2),
    step_sizes=(1e-6, 50)); ``lr`` is the starting step size of every weight."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _no_differentiable("Rprop", differentiable)
        defaults = dict(lr=lr, etas=_betas(etas), step_sizes=_betas(step_sizes), foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        etas, sizes = group["etas"], group["step_sizes"]
        if not isinstance(etas, (tuple, list)) or len(etas) != 2:
            raise ValueError(f"Rprop: etas must be a pair (etaminus, etaplus), got {etas!r}")
        _check_range("Rprop", "etas[0] (etaminus)", etas[0], 0.0, 1.0, lo_open=True, hi_open=True)
        _check_range("Rprop", "etas[1] (etaplus)", etas[1], 1.0, lo_open=True)
        if not isinstance(sizes, (tuple, list)) or len(sizes) != 2:
            raise ValueError(f"Rprop: step_sizes must be a pair (min, max), got {sizes!r}")
        _check_range("Rprop", "step_sizes[0] (min)", sizes[0], 0.0)
        _check_range("Rprop", "step_sizes[1] (max)", sizes[1], sizes[0],
                     what=" (step_sizes[0])")

    def _init_param_state(self, st, w, group):
        _zeros_state(st, w, "prev")
        st["step_size"] = Tensor._make(B.xp.full_like(w, group["lr"]))

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        for group in self.param_groups:
            (etaminus, etaplus), (smin, smax) = group["etas"], group["step_sizes"]
            maximize = group["maximize"]
            for p, st, _ in self._params_with_grad(group):
                g = _grad(p, maximize)
                prev = st["prev"]._data
                size = st["step_size"]._data
                s = xp.sign(g * prev)
                factor = xp.where(s > 0, etaplus, xp.where(s < 0, etaminus, 1.0)).astype(
                    size.dtype, copy=False)
                size *= factor
                xp.clip(size, smin, smax, out=size)
                g = xp.where(s < 0, 0.0, g).astype(g.dtype, copy=False)   # a flipped sign skips
                p._data -= xp.sign(g) * size
                prev[...] = g
                p._version[0] += 1
        return loss


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
            st["row_var"] = Tensor._make(B.xp.zeros(w.shape[:-1] + (1,), dtype=w.dtype))
            st["col_var"] = Tensor._make(B.xp.zeros(w.shape[:-2] + (1, w.shape[-1]), dtype=w.dtype))
        else:
            _zeros_state(st, w, "variance")

    def step(self, closure=None):
        loss = self._closure(closure)
        xp = B.xp
        for group in self.param_groups:
            lr, decay, (eps1, eps2) = group["lr"], group["beta2_decay"], group["eps"]
            clip, wd, maximize = group["d"], group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                w = p._data
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


_NS_COEFFS = (3.4445, -4.775, 2.0315)


def _bf16(x):
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32: the
    top 16 bits of the float32 pattern after adding half of the dropped part."""
    xp = B.xp
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
    xp = B.xp
    a, b, c = (xp.float32(v) for v in coeffs)
    X = _bf16(G)
    if X.shape[0] > X.shape[1]:
        X = X.T
    norm = _bf16(xp.sqrt((X * X).sum(dtype=xp.float32)))
    X = _bf16(X / xp.maximum(norm, _bf16(xp.float32(eps))))
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
        xp = B.xp
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
