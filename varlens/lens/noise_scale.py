"""The gradient noise scale B_simple = tr(Sigma)/|G|^2 (McCandlish et al. 2018), from two batch sizes.

For a batch of size B the squared norm of the mean gradient has expectation
``E|G_B|^2 = |G|^2 + tr(Sigma)/B`` (Sigma: per-example gradient covariance,
G: the true gradient).  Two batch sizes b < B give two equations, solved by
their unbiased estimators

    |G|^2  ~  (B |G_B|^2 - b |G_b|^2) / (B - b)
    tr(Sigma) ~ (|G_b|^2 - |G_B|^2) / (1/b - 1/B)

and B_simple = tr(Sigma)/|G|^2, the batch size above which a larger batch buys
little (seed 000 Costume 3: "both rules eventually break down once the batch
size exceeds the Gradient Noise Scale").
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

FAR_ABOVE = 10      # B_simple this many times the larger batch: extrapolated too far to trust


@dataclasses.dataclass
class NoiseScale:
    b_small: int
    b_big: int
    g2: float           # estimate of |G|^2
    trace: float        # estimate of tr(Sigma)
    b_simple: float     # trace / g2
    b_simple_se: float  # delta-method standard error
    n_batches: int

    def recommend(self, base_batch=None, base_lr=None):
        """Recommended batch size and what the linear and square-root rules say about the lr.

        Returns a dict: the recommended batch (B_simple rounded to a power of two, at least 1),
        and, when ``base_batch``/``base_lr`` are given, the learning rate at the recommended batch
        under the linear rule (eta proportional to B), the square-root rule (eta proportional to
        sqrt(B)), and McCandlish et al.'s eta_opt(B) = eta_max/(1 + B_noise/B), which follows the
        linear rule for B << B_noise and saturates above it.
        """
        bs = max(self.b_simple, 1.0) if math.isfinite(self.b_simple) else float("nan")
        rec = int(2 ** round(math.log2(bs))) if math.isfinite(bs) else None
        out = {"b_simple": self.b_simple, "b_simple_se": self.b_simple_se, "recommended_batch": rec}
        if base_batch is not None and base_lr is not None and rec is not None:
            out["linear_rule_lr"] = base_lr * rec / base_batch
            out["sqrt_rule_lr"] = base_lr * math.sqrt(rec / base_batch)
            eta_max = base_lr * (1 + self.b_simple / base_batch)      # calibrated on the base point
            out["mccandlish_lr"] = eta_max / (1 + self.b_simple / rec)
            out["note"] = ("linear and sqrt rules hold only below B_noise; beyond it the lr is capped by "
                           "curvature (eta_opt saturates at eta_max)")
        out["assumption"] = ("the recommended batch takes B_noise = B_simple, which holds when the Hessian is "
                             "close to a multiple of the identity (McCandlish et al. 2018, sec. 2.2); with "
                             "ill-conditioned curvature B_noise is smaller")
        out["warnings"] = self.warnings
        return out

    @property
    def warnings(self):
        """When not to trust the estimate: its pieces went negative, or it is far outside the measured range."""
        out = []
        if not self.g2 > 0:
            out.append(f"|G|^2 estimated as {self.g2:.3g} <= 0: at batch sizes {self.b_small} and {self.b_big} "
                       "the mean gradient is buried in noise, so B_simple is infinite or negative; measure "
                       "with a larger b_big or more batches")
        if not self.trace > 0:
            out.append(f"tr(Sigma) estimated as {self.trace:.3g} <= 0 (sampling noise): B_simple is meaningless; "
                       "use more batches")
        if self.g2 > 0 and self.trace > 0 and self.b_simple > FAR_ABOVE * self.b_big:
            out.append(f"B_simple = {self.b_simple:.3g} is more than {FAR_ABOVE}x the larger batch used "
                       f"({self.b_big}): the estimate extrapolates far beyond the measured range (the two "
                       "squared norms barely differ); measure again with b_big nearer to it")
        if math.isfinite(self.b_simple) and self.b_simple > 0 and self.b_simple_se > 0.5 * self.b_simple:
            out.append(f"the standard error ({self.b_simple_se:.3g}) is more than half of B_simple: "
                       "use more batches")
        return out

    def as_dict(self):
        d = dataclasses.asdict(self)
        d["warnings"] = self.warnings
        return d


def estimate(grad_fn, n_examples, b_small=8, b_big=128, n_batches=64, seed=0, rng=None):
    """Estimate B_simple from ``grad_fn(indices) -> flat gradient array`` (the mean over the batch).

    ``n_batches`` batches of each size are drawn (uniformly with replacement); the per-batch
    squared norms give the two means and their standard errors.  ``n_examples=None`` means
    ``grad_fn`` draws fresh examples itself (an infinite population) and gets the batch size.
    """
    if not (isinstance(b_small, int) and isinstance(b_big, int) and 0 < b_small < b_big):
        raise ValueError(f"estimate: need integers 0 < b_small < b_big, got b_small={b_small!r}, b_big={b_big!r}")
    if n_batches < 2:
        raise ValueError(f"estimate: n_batches must be >= 2 (for a standard error), got {n_batches}")
    g = rng if rng is not None else np.random.default_rng(seed)
    sq = {}
    for b in (b_small, b_big):
        vals = np.empty(n_batches)
        for k in range(n_batches):
            arg = b if n_examples is None else g.integers(0, n_examples, b)
            v = np.asarray(grad_fn(arg), dtype=np.float64).ravel()
            vals[k] = v @ v
        sq[b] = vals
    return from_squared_norms(sq[b_small], sq[b_big], b_small, b_big)


def from_squared_norms(sq_small, sq_big, b_small, b_big, paired=False):
    """B_simple from squared norms |G_b|^2 of mean gradients over batches of size ``b_small``
    and |G_B|^2 over batches of size ``b_big`` (one value per batch, at least two of each).
    The standard error treats the two means as independent, or, with ``paired=True`` (the
    k-th values come from the same step, as in data-parallel training), uses their sample
    covariance."""
    sq_small, sq_big = np.asarray(sq_small, dtype=np.float64), np.asarray(sq_big, dtype=np.float64)
    if not 0 < b_small < b_big:
        raise ValueError(f"from_squared_norms: need 0 < b_small < b_big, got b_small={b_small!r}, b_big={b_big!r}")
    if sq_small.size < 2 or sq_big.size < 2:
        raise ValueError(f"from_squared_norms: need at least 2 values of each (for a standard error), got "
                         f"{sq_small.size} and {sq_big.size}")
    n_batches = int(min(sq_small.size, sq_big.size))
    ms, mb = sq_small.mean(), sq_big.mean()
    vs, vb = sq_small.var(ddof=1) / sq_small.size, sq_big.var(ddof=1) / sq_big.size
    g2 = (b_big * mb - b_small * ms) / (b_big - b_small)
    tr = (ms - mb) / (1.0 / b_small - 1.0 / b_big)
    bsimple = tr / g2 if g2 > 0 else float("inf")
    # delta method: both estimates are linear in (ms, mb), independent unless paired
    a_g = np.array([-b_small, b_big]) / (b_big - b_small)
    a_t = np.array([1.0, -1.0]) / (1.0 / b_small - 1.0 / b_big)
    cov = np.diag([vs, vb])
    if paired:
        if sq_small.size != sq_big.size:
            raise ValueError(f"from_squared_norms: paired=True needs as many small as big values, got "
                             f"{sq_small.size} and {sq_big.size}")
        cov = np.cov(np.stack([sq_small, sq_big])) / sq_small.size
    grad = a_t / g2 - tr * a_g / g2 ** 2 if g2 > 0 else np.zeros(2)
    se = float(math.sqrt(max(grad @ cov @ grad, 0.0)))
    return NoiseScale(b_small, b_big, float(g2), float(tr), float(bsimple), se, n_batches)


def estimate_module(model, loss_fn, X, y, b_small=8, b_big=128, n_batches=32, seed=0):
    """B_simple of a varlens model at its current parameters on data (X, y) (Tensors or arrays)."""
    import varlens as vl
    Xa = X.detach().cpu().numpy() if isinstance(X, vl.Tensor) else np.asarray(X)
    ya = y.detach().cpu().numpy() if isinstance(y, vl.Tensor) else np.asarray(y)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("estimate_module: the model has no parameter that requires grad")
    dev = params[0].device if params[0].device.type != "cpu" else None   # a model on CUDA

    def batch(a):
        t = vl.tensor(a)
        return t if dev is None else t.to(dev)

    def grad_fn(idx):
        for p in params:
            p.grad = None
        loss = loss_fn(model(batch(Xa[idx])), batch(ya[idx]))
        loss.backward()
        # (on a device each flattened gradient is copied to the host for the estimator)
        return np.concatenate([(p.grad.cpu().numpy() if p.grad is not None else np.zeros(p.shape)).ravel()
                               for p in params])
    out = estimate(grad_fn, len(Xa), b_small, b_big, n_batches, seed)
    for p in params:
        p.grad = None
    return out


def linear_regression_closed_form(d, delta_sq, noise_var):
    """B_simple for loss (1/2)(x.w - y)^2, x ~ N(0, I_d), y = x.w* + N(0, s^2), at |w - w*|^2 = delta_sq.

    G = delta; E[g g^T] = (|delta|^2 + s^2) I + 2 delta delta^T (Isserlis), so
    tr(Sigma) = d(|delta|^2 + s^2) + |delta|^2 and B_simple = tr(Sigma)/|delta|^2.
    """
    return (d * (delta_sq + noise_var) + delta_sq) / delta_sq


def linear_regression_check(seed=0, d=10, noise_var=4.0, b_small=4, b_big=64, n_batches=3000):
    """Estimate B_simple on fresh Gaussian regression data and compare with the closed form.

    Returns a varlens.theory CheckResult (tolerance: 5 delta-method standard errors).
    """
    from varlens.theory.registry import close
    g = np.random.default_rng(seed)
    w_star = g.standard_normal(d)
    delta = g.standard_normal(d) * 0.5
    w = w_star + delta

    def grad_fn(b):
        X = g.standard_normal((b, d))
        y = X @ w_star + math.sqrt(noise_var) * g.standard_normal(b)
        return X.T @ (X @ w - y) / b
    est = estimate(grad_fn, None, b_small, b_big, n_batches, rng=g)
    truth = linear_regression_closed_form(d, float(delta @ delta), noise_var)
    return close(est.b_simple, truth, 5 * est.b_simple_se, 2 * n_batches * 0 + n_batches * (b_small + b_big),
                 note=f"|G|^2 est {est.g2:.3f} (true {float(delta @ delta):.3f})")
