"""The claims of seed 003 §2-§3 checked by ``varlens.info.claims`` and ``varlens.stats.claims``
(and seed 001 §1.3-1.5, 003 §4.5 in the latter), registered so that ``varlens check`` runs
them beside the lens claims.  Ids are ``info.<inventory id>`` and ``stats.<inventory id>``.

Those checks return a dict (ok, measured, expected, detail) in which measured/expected may be
tuples or tables; a scalar is shown as the measured/expected value, anything else as NaN with
the values in the note.  The verdict is the check's own (its tolerance is inside it), so the
tolerance column reads NaN.

The claims whose notes print a wrong value (inventory part 1 §13.1: E6, E8, E9), and the Bessel
claim, get a scalar view (:data:`SCALAR_VIEWS`): one component of the check's measured and
expected values, the tolerance that check applies to it (enforced again here), and the wrong
value it must reject, so that ``varlens check`` prints its gap.
"""
from __future__ import annotations

import math
import numbers

from varlens.theory.registry import CheckResult, claim

# id -> (pick: the component of measured/expected shown, tolerance(expected), samples, {wrong label: value(expected)}).
# Each tolerance is the one the check in varlens.info.claims / varlens.stats.claims applies to that component.
SCALAR_VIEWS = {
    # E9: 003 L1051-1053 print 2.5738 / 2.0782 / 1.5625; the check's tolerance is 5e-5 nats
    "info.003-82": (lambda v: v[0], lambda e: 5e-5, 0, {"the notes' 2.5738 (inventory E9)": lambda e: 2.5738}),
    "info.003-84": (lambda v: v[0], lambda e: 5e-5, 0, {"the notes' 2.0782 (inventory E9)": lambda e: 2.0782}),
    "info.003-86": (lambda v: v[0], lambda e: 5e-5, 0, {"the notes' 1.5625 (inventory E9)": lambda e: 1.5625}),
    # E6: 003 L851's spurious /2; shown at t = 1, Monte Carlo over 400,000 draws, np.allclose(rtol=0.01)
    "stats.003-70": (lambda v: v[2], lambda e: 0.01 * abs(e) + 1e-8, 400_000,
                     {"the notes' extra /2 (inventory E6)": lambda e: e / 2}),
    # E8: 003 L993 prints 190; the integer MLE is exact
    "stats.003-77": (lambda v: v[1][0], lambda e: 0.0, 0, {"the notes' 190 (inventory E8)": lambda e: 190}),
    # Bessel: E[S^2_naive] = (n-1)/n at n = 5 over 200,000 samples; the check's 5 sqrt(2(n-1)/n^2/reps)
    "stats.003-73": (lambda v: v[0], lambda e: 5 * math.sqrt(2 * 4 / 25 / 200_000), 200_000,
                     {"naive S^2 taken as unbiased (n for n-1)": lambda e: 1.0,
                      "(n-1)/n applied twice": lambda e: 0.64}),
    # Monte Carlo checks of a variance or mean formula: the classic confusions.  Where the check's own
    # tolerance uses a measured standard error that it does not return, the view uses the closed-form
    # one (Gaussian data): 5 sqrt(Var(D^2)/reps) for an MSE estimated as mean(D^2).
    "stats.003-95": (lambda v: v[0], lambda e: 5 * math.sqrt(2 / 64 / 100_000), 100_000,     # n = 8: Var(Xbar^2) = 2/n^2
                     {"sigma^2/(n-1)": lambda e: 1 / 7, "sigma^2/sqrt(n)": lambda e: 1 / math.sqrt(8)}),
    "stats.003-96": (lambda v: v[0], lambda e: 5 * math.sqrt(1.25 / 200_000), 200_000,       # n = 5: Var(D^2) = 1.5 - 0.25
                     {"2 sigma^4/n (n for n-1)": lambda e: 2 / 5}),
    "stats.003-97": (lambda v: v[2], lambda e: 5 * math.sqrt(0.3584 / 200_000), 200_000,     # n = 5: 305/625 - 0.36^2
                     {"bias^2 left out (Var only, 2(n-1)/n^2)": lambda e: 8 / 25,
                      "the unbiased S^2's 2/(n-1)": lambda e: 0.5}),
    # averaging N = 16 independent errors, np.allclose(rtol=0.05)
    "stats.003-114": (lambda v: v[3], lambda e: 0.05 * abs(e) + 1e-8, 40_000,
                      {"sigma^2/sqrt(N)": lambda e: 1 / 4, "no benefit, sigma^2": lambda e: 1.0}),
    # kept dropout units, p = drop probability: 5 standard errors of the mean count
    "stats.001-6.7-binomial": (lambda v: v[0], lambda e: 5 * math.sqrt(200 * 0.3 * 0.7 / 5000), 5000,
                               {"M p (p read as the keep probability)": lambda e: 200 * 0.3}),
    "stats.001-6.7-thinning": (lambda v: v[0], lambda e: 5 * math.sqrt(e / 5000), 5000,
                               {"lambda p (p read as the keep probability)": lambda e: 12.0 * 0.6}),
}
NO_VIEW = ("no wrong value named: the check applies its own tolerance inside and returns no single value "
           "to set against one (an exact identity, a table, a limit or an ordering)")


def _scalar(x):
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    try:                                   # NumPy scalars
        if getattr(x, "shape", None) == ():
            return float(x)
    except (TypeError, ValueError):
        pass
    return math.nan


def _wrap(func, view=None):
    def run():
        r = func(seed=0)
        if view is not None:
            pick, tol, n, wrong = view
            m, e = float(pick(r["measured"])), float(pick(r["expected"]))
            t = tol(e)
            return CheckResult(m, e, t, n, bool(r["ok"]) and abs(m - e) <= t, str(r.get("detail", ""))[:400],
                               {label: float(f(e)) for label, f in wrong.items()})
        m, e = _scalar(r["measured"]), _scalar(r["expected"])
        note = str(r.get("detail", ""))
        if m != m or e != e:
            note = (note + "; " if note else "") + f"measured {r['measured']!r}, expected {r['expected']!r}"
        return CheckResult(m, e, math.nan, 0, bool(r["ok"]), note[:400])
    return run


def _section(prefix, cid):
    head = cid.split("-")[1].split(".")[0]
    if cid.startswith("001"):
        return "§1.3-1.5"
    n = int(head)
    if prefix == "info":
        return "§2" if n <= 67 else "§3.3"
    if n in (10, 114):
        return "§4.5"
    if n == 12:
        return "§3.4, §4.1" if "L" in cid else "§3.3"
    return "§3"


def _register():
    from varlens.info.claims import CLAIMS as info_claims
    from varlens.stats.claims import CLAIMS as stats_claims
    for prefix, claims in (("info", info_claims), ("stats", stats_claims)):
        for cid, desc, func in claims:
            corrected = any(w in desc for w in ("wrong", "notes'"))
            rid = f"{prefix}.{cid}"
            view = SCALAR_VIEWS.get(rid)
            claim(rid, cid.split("-")[0], _section(prefix, cid), prefix,
                  f"{desc} [inventory {cid}, varlens.{prefix}.claims]" + ("" if view else f" ({NO_VIEW})"),
                  corrected=corrected)(_wrap(func, view))


_register()
