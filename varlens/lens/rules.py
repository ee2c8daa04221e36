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
def linear_forward(x: Moments, weight, bias=None) -> Moments:
    """Linear/conv output moments from the actual weights (weight: (out, fan_in) after flattening).

    Input entries are taken as uncorrelated with common mean mu and variance v, so
    E[y_j] = mu r_j + b_j and E[y_j^2] = v |W_j|^2 + (mu r_j + b_j)^2, r_j = sum_i W_ji.
    """
    W = np.asarray(weight, dtype=np.float64)
    W = W.reshape(W.shape[0], -1)
    r = W.sum(axis=1)
    row_sq = (W * W).sum(axis=1)
    b = np.zeros(W.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    means = x.mean * r + b
    return Moments(float(means.mean()), float((x.var * row_sq + means * means).mean()))


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


def norm_forward(x_var_per_group, gamma=None, beta=None, eps=1e-5) -> Moments:
    """Batch/layer norm output: unit variance then gamma^2 and beta (seed 001 §2.2).

    ``x_var_per_group``: the variance each normalisation group sees (its nu), which sets the
    factor nu/(nu+eps).
    """
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
