"""The claims of seed 003 §2-§3 checked by ``varlens.info.claims`` and ``varlens.stats.claims``
(and seed 001 §1.3-1.5, 003 §4.5 in the latter), registered so that ``varlens check`` runs
them beside the lens claims.  Ids are ``info.<inventory id>`` and ``stats.<inventory id>``.

Those checks return a dict (ok, measured, expected, detail) in which measured/expected may be
tuples or tables; a scalar is shown as the measured/expected value, anything else as NaN with
the values in the note.  The verdict is the check's own (its tolerance is inside it), so the
tolerance column reads NaN.
"""
from __future__ import annotations

import math
import numbers

from varlens.theory.registry import CheckResult, claim


def _scalar(x):
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    try:                                   # NumPy scalars
        if getattr(x, "shape", None) == ():
            return float(x)
    except (TypeError, ValueError):
        pass
    return math.nan


def _wrap(func):
    def run():
        r = func(seed=0)
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
            claim(f"{prefix}.{cid}", cid.split("-")[0], _section(prefix, cid), prefix,
                  f"{desc} [inventory {cid}, varlens.{prefix}.claims]",
                  corrected=corrected)(_wrap(func))


_register()
