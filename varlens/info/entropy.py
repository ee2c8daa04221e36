"""Entropy, conditional entropy, mutual information, KL divergence and cross-entropy.

Seed 003 §2 (information theory) and §3.3.1-§3.3.2 (cross-entropy, KL).

Units.  Every function takes ``base``: ``2`` (bits, the notes' ``log = log2`` of 003 §2)
or ``"e"`` (nats, what framework losses such as ``torch.nn.functional.cross_entropy``
return).  Any other positive number different from 1 also works (``base=10`` gives
hartleys).  The default is bits, the notes' convention; PyTorch has no entropy function
with a base argument, so there is no PyTorch default to follow here.

Inputs.  Discrete distributions are probability tables: NumPy arrays, lists or varlens
tensors of non-negative entries summing to 1.  A joint table ``pxy[x, y]`` has X along
axis 0 and Y along axis 1.  Tables are converted to float64 NumPy arrays; results are
Python floats.

Edge cases (003 Remark 2.4.3 and Example 3.3.6): a term with ``p = 0`` contributes 0
(``0 * log 0 = 0``); KL(P||Q) and H(P, Q) are ``+inf`` when Q puts zero mass where P has
positive mass.

Sample (plug-in) estimators live at the bottom of the file; their biases are stated in
their docstrings.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = [
    "information", "entropy", "binary_entropy", "joint_entropy", "conditional_entropy",
    "mutual_information", "kl_divergence", "cross_entropy", "perplexity",
    "marginals", "log_in_base",
    "entropy_from_samples", "mutual_information_from_samples", "cross_entropy_from_samples",
    "empirical_distribution",
]

_TOL = 1e-8


# ----------------------------------------------------------------------------- helpers
def _log_base(base) -> float:
    """ln(base): divide natural logs by this to change unit."""
    if isinstance(base, str):
        if base in ("e", "nats", "nat"):
            return 1.0
        if base in ("bits", "bit", "2"):
            return math.log(2.0)
        raise ValueError(f"base: expected 2, 'e' or a positive number other than 1, got {base!r}")
    try:
        b = float(base)
    except (TypeError, ValueError):
        raise ValueError(f"base: expected 2, 'e' or a positive number other than 1, got {base!r}") from None
    if not (b > 0 and b != 1 and math.isfinite(b)):
        raise ValueError(f"base: expected 2, 'e' or a positive number other than 1, got {base!r}")
    return math.log(b)


def log_in_base(x, base=2):
    """log_base(x) elementwise (log(0) = -inf)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=np.float64)) / _log_base(base)


def _to_array(p, name):
    if hasattr(p, "_data") and hasattr(p, "detach"):   # a varlens (or torch-like) tensor
        p = p.detach()
        p = p._data if hasattr(p, "_data") else p.numpy()
    elif hasattr(p, "detach") and hasattr(p, "numpy"):  # torch tensor
        p = p.detach().numpy()
    try:
        a = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected an array-like of probabilities, got {type(p).__name__}") from None
    return a


def _as_prob(p, name, ndim=None):
    """Validate a probability table: finite, non-negative, sums to 1."""
    a = _to_array(p, name)
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D probability table, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name}: expected a non-empty probability table, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected finite probabilities, got non-finite entries")
    if np.any(a < 0):
        raise ValueError(f"{name}: expected non-negative probabilities, got minimum {a.min():g}")
    s = a.sum()
    if abs(s - 1.0) > 1e-6:
        raise ValueError(f"{name}: expected probabilities summing to 1, got sum {s:.10g}")
    return a


def _plogq(p, q):
    """Elementwise -p log q in nats with 0 log anything = 0 and p>0, q=0 -> +inf."""
    out = np.zeros(np.broadcast_shapes(p.shape, q.shape))
    pb, qb = np.broadcast_arrays(p, q)
    pos = pb > 0
    with np.errstate(divide="ignore"):
        out[pos] = -pb[pos] * np.log(qb[pos])
    return out


# ----------------------------------------------------------------------------- discrete tables
def information(prob, base=2):
    """Shannon information (surprisal) I(A) = -log P(A) of an event of probability ``prob``
    (003 Def 2.1.3).  Returns a float (or array for array input); ``inf`` for prob 0."""
    a = _to_array(prob, "prob")
    if np.any((a < 0) | (a > 1)) or not np.all(np.isfinite(a)):
        raise ValueError(f"prob: expected probabilities in [0, 1], got {prob!r}")
    with np.errstate(divide="ignore"):
        r = -np.log(a) / _log_base(base)
    return float(r) if r.ndim == 0 else r


def entropy(p, base=2):
    """H(P) = -sum_w P(w) log P(w) of a probability table of any shape (003 (2.2.1)).

    A table of several dimensions is treated as one joint distribution over all its cells
    (so ``entropy(pxy)`` is the joint entropy H(X, Y))."""
    a = _as_prob(p, "p")
    return float(_plogq(a, a).sum() / _log_base(base))


def binary_entropy(p, base=2):
    """Entropy of a Bernoulli(p) coin, -p log p - (1-p) log(1-p) (003 Example 2.2.4)."""
    a = _to_array(p, "p")
    if np.any((a < 0) | (a > 1)):
        raise ValueError(f"p: expected a probability in [0, 1], got {p!r}")
    r = (_plogq(a, a) + _plogq(1 - a, 1 - a)) / _log_base(base)
    return float(r) if r.ndim == 0 else r


def marginals(pxy):
    """(P_X, P_Y) of a 2-D joint table pxy[x, y]."""
    a = _as_prob(pxy, "pxy", ndim=2)
    return a.sum(axis=1), a.sum(axis=0)


def joint_entropy(pxy, base=2):
    """H(X, Y) of a 2-D joint table."""
    _as_prob(pxy, "pxy", ndim=2)
    return entropy(pxy, base)


def conditional_entropy(pxy, base=2):
    """H(X | Y) straight from its definition (003 §2.4):
    -sum_y P(y) sum_x P(x|y) log P(x|y), rows of ``pxy`` indexing X, columns Y.
    Columns with P(y) = 0 are skipped (they carry no weight)."""
    a = _as_prob(pxy, "pxy", ndim=2)
    py = a.sum(axis=0)
    total = 0.0
    for j in np.nonzero(py > 0)[0]:
        cond = a[:, j] / py[j]
        total += py[j] * _plogq(cond, cond).sum()
    return float(total / _log_base(base))


def mutual_information(pxy, base=2, method="kl"):
    """I(X; Y) of a 2-D joint table by one of the three formulas of 003 §2.4.1:

    * ``"conditional"``: H(X) - H(X|Y)  (the definition);
    * ``"joint"``:       H(X) + H(Y) - H(X, Y);
    * ``"kl"``:          KL(P_XY || P_X (x) P_Y)  (Lemma 2.4.6), the default because it has
      no cancellation between large terms.
    All three agree (tested)."""
    a = _as_prob(pxy, "pxy", ndim=2)
    px, py = a.sum(axis=1), a.sum(axis=0)
    if method == "conditional":
        return entropy(px, base) - conditional_entropy(a, base)
    if method == "joint":
        return entropy(px, base) + entropy(py, base) - entropy(a, base)
    if method == "kl":
        return kl_divergence(a, np.outer(px, py), base)
    raise ValueError(f"method: expected 'kl', 'conditional' or 'joint', got {method!r}")


def kl_divergence(p, q, base=2):
    """KL(P || Q) = sum_w P(w) log(P(w)/Q(w)) (003 §2.4.2).

    Terms with P(w) = 0 are dropped; if Q(w) = 0 < P(w) the result is ``inf``
    (003 Remark 2.4.3).  Not symmetric (Remark 2.4.5).  Equals H(P, Q) - H(P) (§3.3.2)."""
    a = _as_prob(p, "p")
    b = _as_prob(q, "q")
    if a.shape != b.shape:
        raise ValueError(f"q: expected the same shape as p {a.shape}, got {b.shape}")
    pos = a > 0
    if np.any(b[pos] == 0):
        return math.inf
    val = float(np.sum(a[pos] * (np.log(a[pos]) - np.log(b[pos]))))
    return max(val, 0.0) / _log_base(base)   # >= 0 by Gibbs' inequality; clip rounding


def cross_entropy(p, q, base=2):
    """H(P, Q) = -sum_w P(w) log Q(w) (003 §3.3.1): the expected code length of data drawn
    from P when coding with Q.  ``inf`` when Q(w) = 0 < P(w) (Example 3.3.6).

    For continuous distributions use :func:`varlens.info.continuous.cross_entropy`."""
    a = _as_prob(p, "p")
    b = _as_prob(q, "q")
    if a.shape != b.shape:
        raise ValueError(f"q: expected the same shape as p {a.shape}, got {b.shape}")
    return float(_plogq(a, b).sum() / _log_base(base))


def perplexity(p=None, q=None, *, entropy_value=None, base=2):
    """Perplexity base**H (003 Remark 2.2.6): of P alone (``2**H(P)``), of coding P with a
    model Q (``2**H(P, Q)``), or of a given entropy/cross-entropy in units of ``base``.
    The value does not depend on the unit: 2**H_bits = e**H_nats."""
    if entropy_value is not None:
        if p is not None or q is not None:
            raise ValueError("perplexity: pass either distributions or entropy_value, not both")
        return float(math.exp(float(entropy_value) * _log_base(base)))
    if p is None:
        raise ValueError("perplexity: expected a distribution p (and optionally q) or entropy_value")
    h = entropy(p, "e") if q is None else cross_entropy(p, q, "e")
    return float(math.exp(h))


# ----------------------------------------------------------------------------- samples
def _samples(x, name):
    a = _to_array(x, name) if not isinstance(x, (bytes, bytearray, str)) else None
    if isinstance(x, str):
        a = np.array(list(x), dtype=object)
    elif isinstance(x, (bytes, bytearray)):
        a = np.frombuffer(bytes(x), dtype=np.uint8)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D sequence of samples, got shape {a.shape}")
    return a


def empirical_distribution(x):
    """(values, frequencies) of a 1-D sample: the plug-in distribution P_hat."""
    a = _samples(x, "x")
    vals, counts = np.unique(a, return_counts=True)
    return vals, counts / counts.sum()


def entropy_from_samples(x, base=2, correction=None):
    """Plug-in entropy H(P_hat) of a 1-D sample (numbers, a str, or bytes).

    Bias: the plug-in estimate is biased *low*.  For a distribution with K outcomes of
    positive probability and n samples, E[H(P_hat)] = H - (K - 1)/(2n) nats + O(1/n^2)
    (the Miller-Madow expansion; tested by simulation).  ``correction="miller-madow"``
    adds (K_hat - 1)/(2n) nats with K_hat the number of distinct values seen, which
    removes the 1/n term when every outcome is seen."""
    a = _samples(x, "x")
    _, counts = np.unique(a, return_counts=True)
    n = counts.sum()
    p = counts / n
    h = float(-(p * np.log(p)).sum())
    if correction in ("miller-madow", "miller_madow", "mm"):
        h += (len(counts) - 1) / (2.0 * n)
    elif correction is not None:
        raise ValueError(f"correction: expected None or 'miller-madow', got {correction!r}")
    return h / _log_base(base)


def mutual_information_from_samples(x, y, base=2):
    """Plug-in I(X; Y) from paired samples (the MI of the empirical joint table).

    Bias: biased *high*; for independent X, Y with Kx, Ky outcomes
    E[I_hat] = (Kx - 1)(Ky - 1)/(2n) nats + O(1/n^2), so a small positive value does not
    by itself show dependence."""
    a, b = _samples(x, "x"), _samples(y, "y")
    if len(a) != len(b):
        raise ValueError(f"y: expected as many samples as x ({len(a)}), got {len(b)}")
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1.0)
    return mutual_information(table / table.sum(), base)


def cross_entropy_from_samples(x, q, base=2):
    """Monte Carlo estimate of H(P, Q) = E_P[-log Q(X)] from samples x ~ P of integer
    outcomes 0..len(q)-1 under the model table q.

    Unbiased: it is a sample mean of -log q(x_i), so its bias is 0 and its variance is
    Var_P[log Q(X)]/n (infinite result if a sample has q = 0).  This is the per-symbol
    code length a model-driven arithmetic coder pays (003 Remark 2.5.7)."""
    a = _samples(x, "x")
    qa = _as_prob(q, "q", ndim=1)
    if a.dtype.kind not in "iu":
        if not np.all(a == np.round(a)):
            raise ValueError("x: expected integer outcomes 0..len(q)-1")
        a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= len(qa):
        raise ValueError(f"x: expected integer outcomes in [0, {len(qa) - 1}], got range "
                         f"[{a.min()}, {a.max()}]")
    with np.errstate(divide="ignore"):
        return float(-np.log(qa[a]).mean() / _log_base(base))
