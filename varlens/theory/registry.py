"""The claim registry behind ``varlens check``.

A claim is a function that takes no argument and returns a :class:`CheckResult`
(measured value, expected value, tolerance, number of Monte Carlo samples and
the verdict).  Each is registered with an id, the seed file and section it comes
from, and a one-line description.  Every claim draws from its own generator,
seeded from its id, so results are deterministic and independent of the order
in which claims run.  Tolerances come from the standard error of the estimate
(usually 5 standard errors), never from a fudge factor.

A claim that decides something names the wrong values it must reject: fixed ones in its
registration (``alternatives=``), or ones computed from the run's own data and attached to the
result (:func:`with_wrong`), in the units of the expected value.  ``run_claims`` reports the gap
from the expected value to the nearest of them and whether the tolerance is below it.
"""
from __future__ import annotations

import dataclasses
import math
import time
import zlib

import numpy as np


@dataclasses.dataclass
class CheckResult:
    measured: float
    expected: float
    tolerance: float
    n_samples: int
    passed: bool
    note: str = ""
    # wrong values computed by the run itself, in the units of ``expected`` (what the measured
    # statistic would be under the misprint or confusion): {label: value}
    alternatives: dict | None = None

    def as_tuple(self):
        return (self.measured, self.expected, self.tolerance, self.n_samples, self.passed)


@dataclasses.dataclass
class Claim:
    id: str
    seed: str           # seed file, e.g. "001"
    section: str        # e.g. "§1.2" or "L13"
    topic: str          # variance, init, dropout, norm, optim, batch, attention
    description: str
    func: object
    corrected: bool = False  # the notes are wrong as printed; the corrected value is tested
    # the nearest wrong values the claim is meant to tell apart from the right one (a misprint,
    # a quadrature error...): {label: value}, or a function returning that dict
    alternatives: object = None

    def run(self) -> CheckResult:
        return self.func()

    def wrong_values(self):
        alt = self.alternatives() if callable(self.alternatives) else self.alternatives
        return dict(alt or {})


REGISTRY: dict[str, Claim] = {}


def claim(id, seed, section, topic, description, corrected=False, alternatives=None):
    """Decorator: register ``func`` as a checkable claim.

    ``alternatives``: the wrong values the claim must be able to reject (``{label: value}`` or a
    function returning it).  ``varlens check`` prints the gap between the expected value and
    the nearest of them beside the tolerance; a claim decides only when its tolerance is
    smaller than that gap (a measurement at the wrong value would then fail).  Wrong values that
    depend on the run's data are attached to its result with :func:`with_wrong` instead."""
    def deco(func):
        if id in REGISTRY:
            raise ValueError(f"claim id {id!r} registered twice")
        REGISTRY[id] = Claim(id, seed, section, topic, description, func, corrected, alternatives)
        func.claim_id = id
        return func
    return deco


def rng_for(id_or_func) -> np.random.Generator:
    """The claim's own generator (seeded from its id)."""
    name = getattr(id_or_func, "claim_id", id_or_func)
    return np.random.default_rng(zlib.crc32(str(name).encode()))


# ---------------------------------------------------------------- result helpers
def close(measured, expected, tolerance, n_samples, note=""):
    """|measured - expected| <= tolerance."""
    m, e, t = float(measured), float(expected), float(tolerance)
    ok = bool(np.isfinite(m) and abs(m - e) <= t)
    return CheckResult(m, e, t, int(n_samples), ok, note)


def mc_mean(samples, expected, z=5.0, note=""):
    """Sample mean against ``expected``; tolerance z standard errors."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = x.size
    se = x.std(ddof=1) / math.sqrt(n)
    return close(x.mean(), expected, z * se, n, note)


def var_se(x):
    """Standard error of the unbiased sample variance: sqrt((m4 - s^4 (n-3)/(n-1)) / n)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    d = x - x.mean()
    s2 = d.var(ddof=1)
    m4 = np.mean(d ** 4)
    return math.sqrt(max(m4 - s2 * s2 * (n - 3) / (n - 1), 0.0) / n)


def mc_var(samples, expected, z=5.0, note=""):
    """Sample variance against ``expected``; tolerance z standard errors (fourth-moment formula)."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    return close(x.var(ddof=1), expected, z * var_se(x), x.size, note)


def mc_ratio_of_means(num, den, expected, z=5.0, note=""):
    """mean(num)/mean(den) against ``expected`` with a delta-method standard error."""
    a = np.asarray(num, dtype=np.float64).ravel()
    b = np.asarray(den, dtype=np.float64).ravel()
    n = a.size
    ma, mb = a.mean(), b.mean()
    r = ma / mb
    cov = np.cov(a, b)
    var_r = (cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / (mb * mb * n)
    return close(r, expected, z * math.sqrt(max(var_r, 0.0)), n, note)


def exact(measured, expected, tolerance=1e-12, note=""):
    """A deterministic identity: no samples, rounding-level tolerance."""
    return close(measured, expected, tolerance, 0, note)


def nearest_wrong(expected, alternatives):
    """(gap, label): the distance from ``expected`` to the nearest of ``alternatives``
    ({label: value}), or (None, None) when there is none."""
    gap, nearest = None, None
    for label, value in (alternatives or {}).items():
        d = abs(float(value) - float(expected))
        if gap is None or d < gap:
            gap, nearest = d, label
    return gap, nearest


def with_wrong(result, alternatives):
    """Attach wrong values (``{label: value}``, in the units of ``result.expected``) to a result."""
    result.alternatives = {**(result.alternatives or {}), **alternatives}
    return result


def all_of(results, note=""):
    """Several sub-checks reported as one.

    Shown: the worst failing sub-check if one fails; otherwise, among the sub-checks that name
    wrong values, the least decisive one (smallest gap/tolerance), so that the row's tolerance
    being below its gap means every such sub-check's is; otherwise the worst
    |measured-expected|/tolerance."""
    def badness(r):
        return abs(r.measured - r.expected) / (r.tolerance or 1e-300)

    def margin(r):
        gap, _ = nearest_wrong(r.expected, r.alternatives)
        if r.tolerance > 0:
            return gap / r.tolerance
        return math.inf if gap > 0 else 0.0      # tolerance 0: decisive unless the gap is 0 too
    failing = [r for r in results if not r.passed]
    named = [r for r in results if r.alternatives]
    if failing:
        shown = max(failing, key=badness)
    elif named:
        shown = min(named, key=margin)
    else:
        shown = max(results, key=badness)
    ok = all(r.passed for r in results)
    return CheckResult(shown.measured, shown.expected, shown.tolerance,
                       sum(r.n_samples for r in results), ok, note or shown.note,
                       dict(shown.alternatives) if shown.alternatives else None)


def run_claims(ids=None, pattern=None):
    """Run the registered claims (all, a list of ids, or those whose id contains ``pattern``).

    Returns a list of dicts (id, seed, section, topic, description, measured, expected,
    tolerance, n_samples, passed, seconds, error, and the wrong values it must reject: wrong_values,
    gap = distance from expected to the nearest of them, nearest_wrong = its label, decisive =
    tolerance < gap, or None when the claim names none).
    """
    from varlens import theory  # noqa: F401  (imports every topic module, filling REGISTRY)
    rows = []
    for cid, c in REGISTRY.items():
        if ids is not None and cid not in ids:
            continue
        if pattern is not None and pattern not in cid:
            continue
        t0 = time.perf_counter()
        err = ""
        try:
            r = c.run()
        except Exception as e:  # a claim that crashes is a failure, reported, not a traceback
            r = CheckResult(float("nan"), float("nan"), float("nan"), 0, False)
            err = f"{type(e).__name__}: {e}"
        wrong = {**c.wrong_values(), **(r.alternatives or {})}
        gap, nearest = nearest_wrong(r.expected, wrong) if not err else (None, None)
        rows.append({"id": cid, "seed": c.seed, "section": c.section, "topic": c.topic,
                     "description": c.description, "corrected": c.corrected,
                     "measured": r.measured, "expected": r.expected, "tolerance": r.tolerance,
                     "n_samples": r.n_samples, "passed": bool(r.passed), "note": r.note,
                     "gap": gap, "nearest_wrong": nearest, "wrong_values": wrong,
                     "decisive": None if gap is None else bool(r.tolerance < gap),
                     "seconds": time.perf_counter() - t0, "error": err})
    return rows


def mc_var_clustered(clusters, expected, z=5.0, center=True, note=""):
    """Variance of samples that come in correlated clusters (e.g. one weight draw per row).

    Rows are independent clusters; entries inside a row may be dependent (they share
    weights).  The estimate is E[x^2] - E[x]^2 over everything (or E[x^2] when
    ``center=False``: a known zero mean); the standard error is the delta method
    on the per-cluster means of x and x^2, so the dependence inside a cluster is
    accounted for.
    """
    c = np.asarray(clusters, dtype=np.float64)
    c = c.reshape(c.shape[0], -1)
    k = c.shape[0]
    m1 = c.mean(axis=1)
    m2 = (c * c).mean(axis=1)
    M1, M2 = m1.mean(), m2.mean()
    if not center:
        return close(M2, expected, z * m2.std(ddof=1) / math.sqrt(k), c.size, note)
    est = M2 - M1 * M1
    cov = np.cov(m1, m2)
    gvec = np.array([-2 * M1, 1.0])
    se = math.sqrt(max(gvec @ cov @ gvec, 0.0) / k)
    return close(est, expected, z * se, c.size, note)
