"""Propagation rules: the expected second moment of each tensor from the moments of its inputs.

Everything here is a pure function of scalars (means, second moments) and of the
layer's actual parameter statistics; nothing touches a tensor graph.  A tensor's
state is a :class:`Moments` (pooled mean ``m`` and second moment ``q = E[x^2]``
over all its elements); pre-activations are taken as Gaussian N(m, q - m^2).

Forward rules (seed 000's variance lens, seed 001 §1.2/§2.2/§3.3, seed 002, seed 003 §4.3):

* Linear / conv, y = W x + b, input entries with mean mu and variance v:
  E[y_j^2] = v sum_i W_ji^2 + (mu sum_i W_ji + b_j)^2, averaged over output units j.
  With zero-mean i.i.d. weights this is fan_in sigma_W^2 E[x^2] + sigma_b^2.
* activation phi: E[phi(z)^2] for z ~ N(m, s^2): closed forms for ReLU (q/2 at m = 0) and
  identity, Gaussian quadrature (split at the kink z = 0) otherwise.
* dropout (inverted, drop probability p): mean kept, E[y^2] = E[x^2]/(1-p).
* batch/layer norm: unit variance then affine: E[y^2] = mean(gamma^2 + beta^2) (times nu/(nu+eps)).
* residual addition of independent branches: second moments add (plus 2 E[a]E[b]).
* attention logits q.k/scale: E[s^2] = d E[q^2] E[k^2]/scale^2 (unit with scale = sqrt(d) and unit q, k).

Backward rules (the cotangent's second moment, the chi-style recursion):

* Linear: E[gx^2] = fan_out-averaged sum_j W_ji^2 E[gy^2] = (|W|_F^2 / fan_in) E[gy^2];
  convolution: |W|_F^2 / (in_channels prod(stride)) E[gy^2] (each input is in k^d/s^d windows).
* activation: E[gz^2] = E[phi'(z)^2] E[gy^2] (cotangent independent of z: mean-field).
* dropout: E[gx^2] = E[gy^2]/(1-p).
* norm layers: E[gx^2] = mean(gamma^2)/Var[x] E[gy^2] (to O(1/N)).
* weight gradient of a Linear over a batch of N rows: E[gW^2] = N E[gy^2] E[x^2].
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import erf as _erf
from scipy.special import ndtr as _ndtr
from scipy.stats import norm as _norm

_Z, _W = hermegauss(80)
_W = _W / _W.sum()


@dataclasses.dataclass(frozen=True)
class Moments:
    """Pooled first and second moment of a tensor (q = E[x^2], not the variance)."""
    mean: float
    q: float

    @property
    def var(self):
        return max(self.q - self.mean * self.mean, 0.0)


_LX, _LW = np.polynomial.legendre.leggauss(96)


def _gauss_expect(f, m, v):
    """E[f(z)] for z ~ N(m, v).

    Gauss-Legendre quadrature against the normal density on [m - 12 s, m + 12 s], split at
    z = 0 where the activations have their kink (ReLU, ELU, leaky ReLU): Gauss-Hermite
    alone converges slowly on a kink (0.5% error on E[ReLU(z)] with 80 nodes).
    """
    s = math.sqrt(max(v, 0.0))
    if s == 0.0:
        return float(f(np.array([m]))[0])
    lo, hi = m - 12 * s, m + 12 * s
    cuts = (lo, 0.0, hi) if lo < 0.0 < hi else (lo, hi)
    total = 0.0
    for a, b in zip(cuts[:-1], cuts[1:]):
        x = 0.5 * (b - a) * _LX + 0.5 * (a + b)
        w = 0.5 * (b - a) * _LW * np.exp(-0.5 * ((x - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
        total += float(np.dot(w, f(x)))
    return total


def gauss_expect_skewed(f, m, v, skew):
    """E[f(z)] for z with mean m, variance v and skewness ``skew``, by the first Gram-Charlier
    correction of the normal density: p(z) = phi(u) (1 + skew/6 He3(u)), u = (z - m)/s.  A sum of
    a Gaussian and a rectified signal (a ReLU after a residual addition) is skewed; this term
    carries the third moment into E[ReLU(z)^2] and E[ReLU'(z)^2]."""
    s = math.sqrt(max(v, 0.0))
    if s == 0.0 or not skew:
        return _gauss_expect(f, m, v)

    def g(z):
        u = (z - m) / s
        return f(z) * (1.0 + skew / 6.0 * (u ** 3 - 3 * u))
    return _gauss_expect(g, m, v)


class Activation:
    """An elementwise nonlinearity with its value and derivative (NumPy functions)."""

    def __init__(self, name, f, df, mean=None, second=None, dsecond=None, saturating=False, sat_level=None):
        self.name, self.f, self.df = name, f, df
        self._mean, self._second, self._dsecond = mean, second, dsecond
        self.saturating = saturating
        self.sat_level = sat_level   # |y| above which the unit counts as saturated

    def mean(self, m, v):
        return self._mean(m, v) if self._mean else _gauss_expect(self.f, m, v)

    def second_moment(self, m, v):
        """E[phi(z)^2] for z ~ N(m, v)."""
        return self._second(m, v) if self._second else _gauss_expect(lambda z: self.f(z) ** 2, m, v)

    def deriv_second_moment(self, m, v):
        """E[phi'(z)^2] for z ~ N(m, v): the backward factor."""
        return self._dsecond(m, v) if self._dsecond else _gauss_expect(lambda z: self.df(z) ** 2, m, v)


def _relu_mean(m, v):
    s = math.sqrt(v)
    if s == 0:
        return max(m, 0.0)
    a = m / s
    return m * _norm.cdf(a) + s * _norm.pdf(a)


def _relu_second(m, v):
    """E[ReLU(z)^2] = (m^2 + s^2) Phi(m/s) + m s phi(m/s); q/2 at m = 0 (seed 001 §1.2)."""
    s = math.sqrt(v)
    if s == 0:
        return max(m, 0.0) ** 2
    a = m / s
    return (m * m + v) * _norm.cdf(a) + m * s * _norm.pdf(a)


def _relu_dsecond(m, v):
    s = math.sqrt(v)
    return float(m > 0) if s == 0 else float(_norm.cdf(m / s))


def relu_moments_array(m, v):
    """(E[ReLU(z)], E[ReLU(z)^2], P(z > 0)) for arrays of means m and variances v (the closed forms
    of _relu_mean/_relu_second/_relu_dsecond, vectorised over channels)."""
    m = np.asarray(m, dtype=np.float64)
    s = np.sqrt(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(s > 0, m / np.where(s > 0, s, 1.0), np.where(m > 0, np.inf, -np.inf))
    cdf, pdf = _ndtr(a), np.exp(-0.5 * np.where(np.isfinite(a), a, 0.0) ** 2) / math.sqrt(2 * math.pi)
    pdf = np.where(np.isfinite(a), pdf, 0.0)
    return m * cdf + s * pdf, (m * m + s * s) * cdf + m * s * pdf, cdf


def _sigmoid(z):
    return 0.5 * (1 + np.tanh(0.5 * z))


def _gelu(z):
    return 0.5 * z * (1 + _erf(z / math.sqrt(2)))


def _dgelu(z):
    return 0.5 * (1 + _erf(z / math.sqrt(2))) + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


ACTIVATIONS = {
    "identity": Activation("identity", lambda z: z, lambda z: np.ones_like(z),
                           mean=lambda m, v: m, second=lambda m, v: m * m + v, dsecond=lambda m, v: 1.0),
    "relu": Activation("relu", lambda z: np.maximum(z, 0), lambda z: (z > 0).astype(float),
                       mean=_relu_mean, second=_relu_second, dsecond=_relu_dsecond),
    "tanh": Activation("tanh", np.tanh, lambda z: 1 - np.tanh(z) ** 2, saturating=True, sat_level=0.99),
    "sigmoid": Activation("sigmoid", _sigmoid, lambda z: _sigmoid(z) * (1 - _sigmoid(z)), saturating=True,
                          sat_level=0.99),
    "gelu": Activation("gelu", _gelu, _dgelu),
    "silu": Activation("silu", lambda z: z * _sigmoid(z), lambda z: _sigmoid(z) * (1 + z * (1 - _sigmoid(z)))),
    "elu": Activation("elu", lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0))),
                      lambda z: np.where(z > 0, 1.0, np.exp(np.minimum(z, 0)))),
    "softplus": Activation("softplus", lambda z: np.logaddexp(0, z), _sigmoid),
}


def leaky_relu(slope=0.01):
    """Leaky ReLU: E[phi(z)^2] = q (1 + slope^2)/2 at zero mean."""
    return Activation(f"leaky_relu({slope})", lambda z: np.where(z > 0, z, slope * z),
                      lambda z: np.where(z > 0, 1.0, slope))


def activation(name):
    """The Activation called ``name`` (relu, tanh, sigmoid, gelu, silu, elu, softplus, identity)."""
    if isinstance(name, Activation):
        return name
    key = str(name).lower()
    if key.startswith("leaky_relu"):
        return leaky_relu()
    if key not in ACTIVATIONS:
        raise ValueError(f"activation: unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[key]


# ----------------------------------------------------------------- forward rules
def _feature_split(x: Moments, feature_means):
    """(per-feature means or None, the variance left within features)."""
    if feature_means is None:
        return None, x.var
    fm = np.asarray(feature_means, dtype=np.float64).reshape(-1)
    return fm, max(x.q - float((fm * fm).mean()), 0.0)


def linear_forward(x: Moments, weight, bias=None, feature_means=None) -> Moments:
    """Linear/conv output moments from the actual weights (weight: (out, fan_in) after flattening).

    Input entries are taken as uncorrelated with common mean mu and variance v, so
    E[y_j] = mu r_j + b_j and E[y_j^2] = v |W_j|^2 + (mu r_j + b_j)^2, r_j = sum_i W_ji.
    With ``feature_means`` (the measured mean of each input feature mu_i), E[y_j] = W_j . mu + b_j
    and v is the variance within features, q - mean(mu_i^2).
    """
    return Moments(*_linear_parts(x, weight, bias, feature_means, pooled=True))


def _linear_parts(x, weight, bias, feature_means, pooled):
    W = np.asarray(weight, dtype=np.float64)
    W = W.reshape(W.shape[0], -1)
    row_sq = (W * W).sum(axis=1)
    b = np.zeros(W.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    fm, v = _feature_split(x, feature_means)
    if fm is not None and fm.size == W.shape[1]:
        means = W @ fm + b
    else:
        means = x.mean * W.sum(axis=1) + b
        v = x.var
    q = v * row_sq + means * means
    if pooled:
        return float(means.mean()), float(q.mean())
    return q


def linear_forward_units(x: Moments, weight, bias=None, feature_means=None):
    """Per output unit j: predicted E[y_j^2] = v |W_j|^2 + E[y_j]^2 (an array)."""
    return _linear_parts(x, weight, bias, feature_means, pooled=False)


def linear_forward_iid(q_in, fan_in, sigma_w2, sigma_b2=0.0) -> float:
    """The textbook form: E[y^2] = fan_in sigma_W^2 E[x^2] + sigma_b^2 (seed 001 L246, seed 003 (4.3.2))."""
    return fan_in * sigma_w2 * q_in + sigma_b2


def activation_forward(x: Moments, act) -> Moments:
    a = activation(act)
    return Moments(a.mean(x.mean, x.var), a.second_moment(x.mean, x.var))


def dropout_forward(x: Moments, p) -> Moments:
    """Inverted dropout with drop probability p (seed 001 §1.1-1.2): mean kept, E[y^2] = E[x^2]/(1-p)."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout_forward: p must be in [0, 1), got {p}")
    return Moments(x.mean, x.q / (1 - p))


def norm_forward(x_var_per_group, gamma=None, beta=None, eps=1e-5, shrink=None) -> Moments:
    """Batch/layer norm output: unit variance then gamma^2 and beta (seed 001 §2.2).

    ``x_var_per_group``: the variance each normalisation group sees (its nu), which sets the
    factor nu/(nu+eps); ``shrink``: that factor averaged over the groups, when measured.
    """
    if shrink is None:                  # else the measured mean over groups of nu/(nu + eps)
        shrink = x_var_per_group / (x_var_per_group + eps) if x_var_per_group > 0 else 0.0
    g2 = 1.0 if gamma is None else float(np.mean(np.asarray(gamma, dtype=np.float64) ** 2))
    b = np.zeros(1) if beta is None else np.asarray(beta, dtype=np.float64).ravel()
    if gamma is not None and beta is not None:
        gg = np.asarray(gamma, dtype=np.float64).ravel()
        q = float(np.mean(gg * gg * shrink + b * b))
    else:
        q = g2 * shrink + float(np.mean(b * b))
    return Moments(float(b.mean()), q)


def residual_forward(a: Moments, b: Moments) -> Moments:
    """Sum of independent branches: E[(a+b)^2] = E[a^2] + E[b^2] + 2 E[a] E[b]."""
    return Moments(a.mean + b.mean, a.q + b.q + 2 * a.mean * b.mean)


def attention_logits(d, q_query, q_key, scale=None) -> float:
    """E[s^2] for s = q.k/scale with zero-mean independent entries: d E[q^2] E[k^2]/scale^2.

    scale=None means no scaling (d q_q q_k: grows with d); scale = sqrt(d) gives E[q^2] E[k^2].
    """
    s = 1.0 if scale is None else float(scale)
    return d * q_query * q_key / (s * s)


def softmax_entropy_bounds(n):
    """Entropy of a softmax row lies in [0, log n]; log n at zero logit variance (uniform)."""
    return 0.0, math.log(n)


# ----------------------------------------------------------------- backward rules
def linear_backward(gy_q, weight) -> float:
    """E[gx^2] for gx = W^T gy: (|W|_F^2/fan_in) E[gy^2] (fan_out sigma_W^2 E[gy^2] for i.i.d. weights)."""
    W = np.asarray(weight, dtype=np.float64)
    W = W.reshape(W.shape[0], -1)
    return float((W * W).sum() / W.shape[1]) * gy_q


def conv_backward(gy_q, weight, stride=1) -> float:
    """E[gx^2] for a convolution: each input element sits in prod(kernel)/prod(stride) windows,
    so E[gx^2] = |W|_F^2 / (in_channels prod(stride)) E[gy^2] (borders ignored)."""
    W = np.asarray(weight, dtype=np.float64)
    s = int(np.prod(stride)) if np.ndim(stride) else int(stride) ** (W.ndim - 2)
    return float((W * W).sum() / (W.shape[1] * s)) * gy_q


def linear_weight_grad(gy_q, x_q, n_rows) -> float:
    """E[gW^2] for gW = sum over n_rows of gy x^T, independent zero-mean terms: n_rows E[gy^2] E[x^2]."""
    return n_rows * gy_q * x_q


def activation_backward(gy_q, z: Moments, act) -> float:
    """E[gz^2] = E[phi'(z)^2] E[gy^2] (the chi recursion; 1/2 for ReLU at zero mean)."""
    return activation(act).deriv_second_moment(z.mean, z.var) * gy_q


def dropout_backward(gy_q, p) -> float:
    return gy_q / (1 - p)


def norm_backward(gy_q, x_var, gamma=None) -> float:
    """E[gx^2] ~ mean(gamma^2)/Var[x] E[gy^2] (normalisation divides by the input's std)."""
    g2 = 1.0 if gamma is None else float(np.mean(np.asarray(gamma, dtype=np.float64) ** 2))
    return g2 / x_var * gy_q if x_var > 0 else float("inf")


def residual_backward(gy_q) -> float:
    """Addition copies the cotangent to both branches unchanged."""
    return gy_q


# ----------------------------------------------------------------- rules for ops (op-level records)
def residual_forward_measured(a: Moments, b: Moments, cross, sign=1.0) -> Moments:
    """a + b (sign = -1: a - b) with the cross term E[a*b] MEASURED, not assumed zero:
    E[(a +- b)^2] = E[a^2] + E[b^2] +- 2 E[a b].  Correlated branches (a skip path and a branch
    that copies part of it) are then predicted correctly."""
    return Moments(a.mean + sign * b.mean, max(a.q + b.q + 2 * sign * cross, 0.0))


def product_forward(a: Moments, b: Moments) -> Moments:
    """a * b of independent factors: E[(ab)^2] = E[a^2] E[b^2], E[ab] = E[a] E[b]."""
    return Moments(a.mean * b.mean, a.q * b.q)


def gaussian_power_forward(x: Moments, k) -> Moments:
    """x^k (integer k >= 1) for Gaussian x, by quadrature."""
    f = (lambda z: z ** k)
    return Moments(_gauss_expect(f, x.mean, x.var), _gauss_expect(lambda z: z ** (2 * k), x.mean, x.var))


def matmul_forward(a: Moments, b: Moments, k) -> Moments:
    """Entries of A @ B with contraction length k and independent entries:
    E[(sum_i a_i b_i)^2] = k E[a^2] E[b^2] + k (k - 1) (E[a] E[b])^2."""
    mm = a.mean * b.mean
    return Moments(k * mm, k * a.q * b.q + k * (k - 1) * mm * mm)


_HZ, _HW = hermegauss(160)
_HW = _HW / _HW.sum()


def softmax_moments(row_var, n):
    """(E[p], E[p^2], E[p^3]) of one softmax probability over n i.i.d. N(m, v) logits (m cancels).

    Exact up to quadrature: with S = sum_j e^{z_j}, 1/S^k = int_0^inf t^{k-1} e^{-tS} dt / (k-1)!,
    and independence factorises E[e^{k z_1} e^{-tS}] = E[e^{kz} e^{-t e^z}] L(t)^{n-1} with
    L(t) = E[e^{-t e^z}] (the log-normal's Laplace transform).  The z-expectations are
    Gauss-Hermite quadrature, the t-integral a trapezoid rule in log t.  v = 0 gives 1/n^k."""
    v = max(float(row_var), 0.0)
    n = int(n)
    if n <= 1:
        return 1.0, 1.0, 1.0
    if v < 1e-12:
        return 1.0 / n, 1.0 / n ** 2, 1.0 / n ** 3
    sd = math.sqrt(v)
    ez = np.exp(sd * _HZ)                                      # e^z at the nodes
    lo = -math.log(n) - 10.0 * sd - 12.0
    hi = 10.0 * sd + 12.0
    u = np.linspace(lo, hi, 1200)
    t = np.exp(u)
    with np.errstate(under="ignore", over="ignore"):
        E = np.exp(-np.outer(t, ez))                           # (T, Z): e^{-t e^z}
        L = E @ _HW
        logLn = (n - 1) * np.log(np.maximum(L, 1e-300))
        out = []
        for k, fact in ((1, 1.0), (2, 1.0), (3, 2.0)):
            inner = E @ (_HW * ez ** k)                       # E[e^{kz} e^{-t e^z}]
            f = t ** k * inner * np.exp(logLn) / fact          # t^{k-1} dt = t^k du
            out.append(float(np.sum((f[1:] + f[:-1]) * np.diff(u)) / 2))
    return tuple(out)


def softmax_forward(row_var, n_valid) -> Moments:
    """Softmax over rows of logits with within-row variance ``row_var``.  ``n_valid``: the
    number of keys each row may attend to, as (values, counts) (a causal mask gives 1..n);
    masked entries are exact zeros, so E[p^2] averages n_j E[p^2 | n_j] over the row length."""
    vals, cnts = n_valid
    n = int(max(vals))
    tot = float(np.sum(cnts))
    m = q = 0.0
    for nv, c in zip(vals, cnts):
        _, p2, _ = softmax_moments(row_var, int(nv))
        q += c / tot * p2 * nv / n
        m += c / tot * 1.0 / n
    return Moments(float(m), float(q))


def softmax_backward(gq, row_var, n) -> float:
    """E[gz^2] for gz = p * (g - sum_j p_j g_j) with g independent of p and zero mean:
    E[g^2] (E[p^2] (1 + n E[p^2]) - 2 E[p^3])."""
    _, p2, p3 = softmax_moments(row_var, n)
    return gq * max(p2 * (1 + n * p2) - 2 * p3, 0.0)


def log_softmax_forward(row_var, n, mean_logit=0.0) -> Moments:
    """log p = z - logsumexp(z): with the sum over the others replaced by its mean,
    E[(log p)^2] by quadrature."""
    v = max(float(row_var), 0.0)
    f = (lambda z: z - np.logaddexp(z, math.log(max(n - 1, 1)) + v / 2))
    return Moments(_gauss_expect(f, 0.0, v), _gauss_expect(lambda z: f(z) ** 2, 0.0, v))


def attention_logits_moments(d, qm: Moments, km: Moments, scale) -> Moments:
    """s = scale * q.k over d dimensions, independent entries (the mean terms kept)."""
    r = matmul_forward(qm, km, d)
    return Moments(scale * r.mean, scale * scale * r.q)


def _valid_fraction(size, k, stride, pad_lo, pad_hi, dil, out_side):
    """Per tap: fraction of output positions (out_side=True) or of input positions where the
    tap reads (is read by) a real input element, not padding."""
    n_out = (size + pad_lo + pad_hi - dil * (k - 1) - 1) // stride + 1
    taps = np.arange(k)
    if out_side:
        o = np.arange(max(n_out, 0))[:, None]
        i = o * stride - pad_lo + taps[None, :] * dil
        valid = (i >= 0) & (i < size)
        return valid, n_out
    i = np.arange(size)[:, None]
    t = i + pad_lo - taps[None, :] * dil
    valid = (t >= 0) & (t % stride == 0) & (t // stride < n_out)
    return valid, n_out


def _conv_geometry(weight, in_shape, stride, pads, dilation):
    nd = weight.ndim - 2
    spatial = tuple(in_shape[-nd:])
    st = tuple(stride) if np.ndim(stride) else (int(stride),) * nd
    dl = tuple(dilation) if np.ndim(dilation) else (int(dilation),) * nd
    if len(st) < nd:
        st = st * nd
    if len(dl) < nd:
        dl = dl * nd
    pads = tuple(pads) if np.ndim(pads) else (int(pads),) * (2 * nd)
    if len(pads) == nd:
        pads = tuple(x for p in pads for x in (p, p))
    return nd, spatial, st[-nd:], dl[-nd:], pads[-2 * nd:]


def _profile_weights(profile, kshape, st, dl, pads):
    """Per tap: mean over output positions of the input's second-moment profile at the position
    the tap reads (0 on padding), divided by the profile's mean."""
    import itertools
    P = np.asarray(profile, dtype=np.float64)
    nd = P.ndim
    Pp = np.pad(P, [(pads[2 * d], pads[2 * d + 1]) for d in range(nd)])
    n_out = [(P.shape[d] + pads[2 * d] + pads[2 * d + 1] - dl[d] * (kshape[d] - 1) - 1) // st[d] + 1
             for d in range(nd)]
    out = np.zeros(kshape)
    pm = P.mean()
    if pm <= 0:
        return None
    for tap in itertools.product(*[range(k) for k in kshape]):
        sl = tuple(slice(tap[d] * dl[d], tap[d] * dl[d] + st[d] * (n_out[d] - 1) + 1, st[d]) for d in range(nd))
        out[tap] = Pp[sl].mean() / pm
    return out


def conv_forward(x: Moments, weight, bias, in_shape, stride=1, pads=0, dilation=1, units=False,
                 channel_means=None, profile=None):
    """Convolution output moments with zero padding counted exactly (the border effect).

    For i.i.d. input entries (mean mu, variance v) and output channel c at position o,
    E[y^2] = v sum_{taps valid at o} |W_c,tap|^2 + (mu sum_{taps valid at o} W_c,tap + b_c)^2;
    averaged over channels and positions.  Taps that fall on padding read zeros, so a border
    position sees fewer terms: with a 3x3 kernel and padding 1 on an 8x8 map, 16% of the taps
    fall on padding.  ``pads``: (before, after) per spatial dim, flattened.  ``units``: return the
    per-channel predictions (an array) instead of the pooled Moments.  ``channel_means``: the
    measured mean of each input channel (then v is the variance within channels).  ``profile``:
    the input's measured second moment per spatial position (averaged over samples and
    channels); with it each tap's weight is the mean profile it reads, so an input that is
    weaker near the borders (an earlier padded conv) is counted too."""
    W = np.asarray(weight, dtype=np.float64)
    nd, spatial, st, dl, pads = _conv_geometry(W, in_shape, stride, pads, dilation)
    co = W.shape[0]
    w2 = (W * W).sum(axis=1)          # (Co, k1, ..., knd)
    fm, v = _feature_split(x, channel_means)
    if fm is not None and fm.size == W.shape[1]:
        ws = np.tensordot(W, fm, axes=([1], [0]))
        mu = 1.0
    else:
        ws, mu, v = W.sum(axis=1), x.mean, x.var
    masks = []
    for d in range(nd):
        valid, _ = _valid_fraction(spatial[d], W.shape[2 + d], st[d], pads[2 * d], pads[2 * d + 1], dl[d], True)
        masks.append(valid.astype(np.float64))
    # variance part: sum over taps of |W_tap|^2 * fraction of positions where the tap is valid
    frac = masks[0].mean(axis=0)
    for m in masks[1:]:
        frac = np.multiply.outer(frac, m.mean(axis=0))
    if profile is not None and np.shape(profile) == spatial:
        pw = _profile_weights(profile, W.shape[2:], st, dl, pads)
        if pw is not None:
            frac = pw
    var_c = v * (w2.reshape(co, -1) * frac.reshape(1, -1)).sum(axis=1)
    # mean part: per position, r_c(o) = sum of W over the valid taps
    r = ws
    for d in range(nd):
        r = np.tensordot(r, masks[d], axes=([1], [1]))    # contracts tap axis d, appends positions
    r = r.reshape(co, -1)
    b = np.zeros(co) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    means = mu * r + b[:, None]
    if units:
        return var_c + (means * means).mean(axis=1)
    return Moments(float(means.mean()), float(var_c.mean()) + float((means * means).mean()))


def padding_fraction(weight_shape, in_shape, stride=1, pads=0, dilation=1):
    """Fraction of a convolution's taps (over output positions) that read padding."""
    W = np.zeros(weight_shape)
    nd, spatial, st, dl, pads = _conv_geometry(W, in_shape, stride, pads, dilation)
    frac = 1.0
    for d in range(nd):
        valid, _ = _valid_fraction(spatial[d], weight_shape[2 + d], st[d], pads[2 * d], pads[2 * d + 1], dl[d], True)
        frac *= valid.mean()
    return 1.0 - frac


def conv_backward_padded(gy_q, weight, in_shape, stride=1, pads=0, dilation=1, groups=1) -> float:
    """E[gx^2] of a convolution, borders and stride counted: input element i receives from
    each tap whose output position exists (t = i + pad - k dil divisible by the stride, inside
    the output), so E[gx^2] = E[gy^2] sum_{c, c', taps} W^2 f_in(tap) / C_in with f_in the
    fraction of input positions the tap reaches."""
    W = np.asarray(weight, dtype=np.float64)
    nd, spatial, st, dl, pads = _conv_geometry(W, in_shape, stride, pads, dilation)
    frac = None
    for d in range(nd):
        valid, _ = _valid_fraction(spatial[d], W.shape[2 + d], st[d], pads[2 * d], pads[2 * d + 1], dl[d], False)
        f = valid.mean(axis=0)
        frac = f if frac is None else np.multiply.outer(frac, f)
    w2 = (W * W).sum(axis=(0, 1))
    return gy_q * float((w2 * frac).sum()) / (W.shape[1] * groups)


def avg_pool_forward(x: Moments, window, kappa) -> Moments:
    """Mean of K = ``window`` entries with E[x^2] = q and the MEASURED ratio kappa = E[x_a x_b] / E[x^2]
    over pairs a != b inside a window: E[y^2] = q (1 + (K - 1) kappa) / K (1/K for independent
    zero-mean entries, q for identical ones)."""
    K = float(window)
    return Moments(x.mean, x.q * (1 + (K - 1) * kappa) / K)


def avg_pool_backward(gy_q, window, stride_area) -> float:
    """Each input gets gy/K from each of the K/S windows that hold it: E[gy^2] / (K S)."""
    return gy_q / (float(window) * float(stride_area))


def batchnorm_eval_forward(ch_mean, ch_q, running_mean, running_var, gamma, beta, eps) -> Moments:
    """Batch norm in eval mode is an affine map per channel, y = a_c x + b_c with
    a_c = gamma_c / sqrt(rv_c + eps), b_c = beta_c - a_c rm_c: E[y_c^2] = a^2 E[x_c^2] + 2 a b E[x_c] + b^2
    from the measured per-channel input moments (exact)."""
    C = len(running_mean)
    g = np.ones(C) if gamma is None else np.asarray(gamma, dtype=np.float64).reshape(-1)
    bt = np.zeros(C) if beta is None else np.asarray(beta, dtype=np.float64).reshape(-1)
    a = g / np.sqrt(np.asarray(running_var) + eps)
    b = bt - a * np.asarray(running_mean)
    q = a * a * ch_q + 2 * a * b * ch_mean + b * b
    return Moments(float((a * ch_mean + b).mean()), float(q.mean()))


def batchnorm_eval_backward(gy_q, running_var, gamma, eps) -> float:
    C = len(running_var)
    g = np.ones(C) if gamma is None else np.asarray(gamma, dtype=np.float64).reshape(-1)
    return gy_q * float(np.mean(g * g / (np.asarray(running_var) + eps)))


def embedding_forward(weight) -> Moments:
    """A looked-up row, tokens taken uniformly: the table's mean and mean square."""
    W = np.asarray(weight, dtype=np.float64)
    return Moments(float(W.mean()), float((W * W).mean()))


def unary_forward(f, x: Moments) -> Moments:
    """E[f(z)], E[f(z)^2] for z ~ N(m, v) by quadrature (GELU, SiLU, exp, ... any NumPy map)."""
    return Moments(_gauss_expect(f, x.mean, x.var), _gauss_expect(lambda z: f(z) ** 2, x.mean, x.var))


def unary_backward(gy_q, f, x: Moments, df=None) -> float:
    """E[f'(z)^2] E[gy^2]; f' by central differences when not given."""
    if df is None:
        def df(z):
            h = 1e-5 * (1 + np.abs(z))
            return (f(z + h) - f(z - h)) / (2 * h)
    return gy_q * _gauss_expect(lambda z: df(z) ** 2, x.mean, x.var)


UNARY = {"exp": np.exp, "sin": np.sin, "cos": np.cos, "abs": np.abs, "erf": _erf, "neg": np.negative,
         "tanh": np.tanh, "sigmoid": _sigmoid, "relu": ACTIVATIONS["relu"].f, "gelu": _gelu,
         "silu": ACTIVATIONS["silu"].f, "elu": ACTIVATIONS["elu"].f, "softplus": ACTIVATIONS["softplus"].f,
         "erfc": lambda z: 1 - _erf(z), "expm1": np.expm1}
