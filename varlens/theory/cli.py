"""``varlens check``: run the notes' closed-form claims and print a pass/fail table."""
from __future__ import annotations

import json
import sys


def add_arguments(p):
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.add_argument("-k", "--only", default=None, metavar="TEXT",
                   help="run only claims whose id contains TEXT (e.g. dropout, init.he)")
    p.add_argument("--list", action="store_true", help="list the claims (id, source, description) and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="also print each claim's description")


def _run_one_blas_thread(fn, **kw):
    """Run with NumPy's BLAS on one thread: the claims use many small matrix products, which
    multithreaded OpenBLAS slows down badly on a busy machine."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return fn(**kw)
    with threadpool_limits(limits=1, user_api="blas"):
        return fn(**kw)


def _fmt(x):
    if x != x:  # nan
        return "nan"
    ax = abs(x)
    if ax != 0 and (ax < 1e-3 or ax >= 1e5):
        return f"{x:.3e}"
    return f"{x:.5g}"


def run(args) -> int:
    from varlens.theory import REGISTRY, run_claims
    if args.list:
        for cid, c in REGISTRY.items():
            if args.only and args.only not in cid:
                continue
            flag = " [corrected]" if c.corrected else ""
            print(f"{cid:40s} seed {c.seed} {c.section}{flag}\n    {c.description}")
        return 0
    rows = _run_one_blas_thread(run_claims, pattern=args.only)
    if not rows:
        print(f"varlens check: no claim id contains {args.only!r} (see `varlens check --list`)", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"claims": rows, "passed": sum(r["passed"] for r in rows), "total": len(rows),
                          "decisive": sum(r["decisive"] is True for r in rows)},
                         indent=1, default=float))
    else:
        hdr = (f"{'claim':38s} {'seed':4s} {'section':22s} {'measured':>11s} {'expected':>11s} {'tolerance':>10s} "
               f"{'gap':>10s} {'samples':>9s}  result")
        print(hdr)
        print("-" * len(hdr))
        for r in rows:
            sec = r["section"] if len(r["section"]) <= 22 else r["section"][:21] + "…"
            res = "PASS" if r["passed"] else "FAIL"
            if r["corrected"]:
                res += " (corrected)"
            if r["decisive"] is False:
                res += " (tolerance >= gap: cannot decide)"
            gap = "-" if r["gap"] is None else _fmt(r["gap"])
            print(f"{r['id']:38s} {r['seed']:4s} {sec:22s} {_fmt(r['measured']):>11s} {_fmt(r['expected']):>11s} "
                  f"{_fmt(r['tolerance']):>10s} {gap:>10s} {r['n_samples']:>9d}  {res}")
            if args.verbose and r["nearest_wrong"]:
                value = _fmt(r["wrong_values"][r["nearest_wrong"]])
                print(f"    gap: to the nearest wrong value, {r['nearest_wrong']} = {value}")
            if r["error"]:
                print(f"    error: {r['error']}")
            if args.verbose:
                print(f"    {r['description']}" + (f"  [{r['note']}]" if r["note"] else ""))
        n_ok = sum(r["passed"] for r in rows)
        secs = sum(r["seconds"] for r in rows)
        n_dec = sum(r["decisive"] is True for r in rows)
        n_undec = sum(r["decisive"] is False for r in rows)
        n_none = sum(r["decisive"] is None for r in rows)
        print(f"\n{n_ok}/{len(rows)} claims pass ({secs:.1f} s); {n_dec} decide against a named wrong value "
              f"(tolerance below the gap)" + (f", {n_undec} CANNOT decide (tolerance >= gap)" if n_undec else "")
              + f", {n_none} name none (gap '-'; `--list` says why).")
        print("Tolerances are 5 standard errors of the Monte Carlo estimate (0 samples: an exact identity, "
              "rounding tolerance). 'gap' is the distance from the expected value to the nearest wrong value "
              "the claim must reject (a misprint of the notes, a classic confusion, a quadrature error); "
              "-v names it.")
    return 0 if all(r["passed"] and r["decisive"] is not False for r in rows) else 1
