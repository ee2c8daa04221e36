"""A claim of `varlens check` decides only if its tolerance is below the gap to the nearest wrong
value it must reject; that gap is computed and printed.

`gap_problems` is the rule, applied to every claim in tests/test_theory.py (which runs them once) and
to the info/stats claims with a scalar view here; the fake claims below show that it fails when it
should (a wrong value equal to the expected one, a Monte Carlo claim naming none, a tolerance wider
than the gap)."""
import subprocess
import sys

import pytest

from varlens.theory import REGISTRY, run_claims
from varlens.theory import registry as R

PRINTED = ("print", "notes'", "inventory E")   # how a label says it is the notes' own (wrong) value


def gap_problems(rows):
    """Every reason a row cannot decide against a named wrong value, as (id, reason) pairs.

    A corrected claim (the notes print a wrong value) or a Monte Carlo one (samples > 0) must name
    at least one wrong value; a corrected one must name the notes' printed value; the tolerance
    must be below the gap from the expected value to the nearest wrong value, and the measured
    value must not be within tolerance of that wrong value (so a measurement there would fail)."""
    out = []
    for r in rows:
        wrong = r["wrong_values"]
        if (r["corrected"] or r["n_samples"] > 0) and not wrong:
            out.append((r["id"], "corrected or Monte Carlo, but names no wrong value"))
            continue
        if r["corrected"] and not any(w in label for label in wrong for w in PRINTED):
            out.append((r["id"], f"corrected, but none of {list(wrong)} is the notes' printed value"))
        if not wrong:
            continue
        gap = min(abs(v - r["expected"]) for v in wrong.values())
        if not (r["tolerance"] < gap):
            out.append((r["id"], f"tolerance {r['tolerance']:.3g} not below the gap {gap:.3g}"))
        nearest = min(wrong.values(), key=lambda v: abs(v - r["expected"]))
        if not abs(r["measured"] - nearest) > r["tolerance"]:
            out.append((r["id"], f"measured {r['measured']:.6g} is within tolerance of the wrong value {nearest:.6g}"))
        if r["gap"] != pytest.approx(gap) or r["decisive"] is not True:
            out.append((r["id"], f"row reports gap {r['gap']} decisive {r['decisive']}"))
    return out


def _fake(monkeypatch, cid, func, corrected=False, alternatives=None):
    monkeypatch.setitem(REGISTRY, cid, R.Claim(cid, "000", "L1", "variance", "a fake claim for the gap rule",
                                               func, corrected, alternatives))
    return run_claims(ids={cid})


def test_the_rule_fails_a_wrong_value_equal_to_the_expected_one(monkeypatch):
    rows = _fake(monkeypatch, "zz.alt_equals_expected", lambda: R.close(1.0, 1.0, 0.1, 100),
                 alternatives={"the expected value itself": 1.0})
    assert rows[0]["gap"] == 0 and rows[0]["decisive"] is False
    assert any("not below the gap" in why for _, why in gap_problems(rows))


def test_the_rule_fails_a_monte_carlo_claim_that_names_nothing(monkeypatch):
    rows = _fake(monkeypatch, "zz.mc_no_alt", lambda: R.mc_mean([0.9, 1.1, 1.0, 1.0], 1.0))
    assert rows[0]["gap"] is None and rows[0]["decisive"] is None
    assert gap_problems(rows) == [("zz.mc_no_alt", "corrected or Monte Carlo, but names no wrong value")]


def test_the_rule_fails_a_tolerance_wider_than_the_gap_and_a_corrected_claim_without_the_misprint(monkeypatch):
    # d vs d + 1 with 60,000 samples at d = 64: the tolerance (about 2) cannot tell them apart
    def weak():
        g = R.rng_for("zz.weak")
        return R.mc_var((g.standard_normal((60_000, 64)) * g.standard_normal((60_000, 64))).sum(1), 64.0)
    rows = _fake(monkeypatch, "zz.weak", weak, corrected=True, alternatives={"d + 1": 65.0})
    problems = " | ".join(why for cid, why in gap_problems(rows) if cid == "zz.weak")
    assert "not below the gap" in problems and "within tolerance" in problems and "printed value" in problems
    assert rows[0]["tolerance"] > 1 and rows[0]["decisive"] is False
    # and a corrected claim must name the notes' printed value, not just any wrong value
    rows = _fake(monkeypatch, "zz.corr", lambda: R.exact(0.0, 0.0), corrected=True, alternatives={"other": 1.0})
    assert any("printed" in why for _, why in gap_problems(rows))
    # the command refuses a claim that cannot decide
    from varlens.cli import main
    assert main(["check", "-k", "zz.weak"]) == 1


def test_all_of_shows_the_least_decisive_sub_check():
    a = R.with_wrong(R.close(1.0, 1.0, 0.1, 10), {"far": 2.0})        # gap/tol = 10
    b = R.with_wrong(R.close(5.0, 5.0, 0.4, 10), {"near": 5.6})       # gap/tol = 1.5
    c = R.close(3.0, 3.0, 0.01, 10)                                    # names nothing
    r = R.all_of([a, b, c])
    assert r.passed and r.expected == 5.0 and r.tolerance == 0.4 and r.alternatives == {"near": 5.6}
    assert R.nearest_wrong(r.expected, r.alternatives) == (pytest.approx(0.6), "near")
    # an exact sub-check (tolerance 0) whose wrong value equals its expected one is the least decisive
    z = R.with_wrong(R.exact(0.0, 0.0, 0.0), {"same": 0.0})
    assert R.all_of([a, z]).alternatives == {"same": 0.0}
    # a failing sub-check is still the one shown
    bad = R.close(0.0, 3.0, 0.01, 10)
    r = R.all_of([a, b, bad])
    assert not r.passed and r.expected == 3.0


def test_named_claims_can_reject_their_nearest_wrong_value():
    rows = {r["id"]: r for r in run_claims(ids={"attention.dot_product_variance", "relu.mean"})}
    assert not gap_problems(rows.values())
    # d versus d + 1: the tolerance leaves the misprint outside
    r = rows["attention.dot_product_variance"]
    assert r["corrected"] and abs(9.0 - r["measured"]) > r["tolerance"]


def test_info_and_stats_scalar_views_decide():
    from varlens.theory.info_stats import SCALAR_VIEWS
    rows = run_claims(ids=set(SCALAR_VIEWS))
    assert len(rows) == len(SCALAR_VIEWS)
    assert all(r["passed"] for r in rows), [(r["id"], r["measured"], r["expected"], r["error"]) for r in rows]
    assert not gap_problems(rows)
    # every info/stats claim the notes print wrongly has a view (inventory E6, E8, E9)
    corrected = {cid for cid, c in REGISTRY.items() if c.corrected and cid.startswith(("info.", "stats."))}
    assert corrected and corrected <= set(SCALAR_VIEWS)
    # a view enforces its tolerance: the notes' 190 as the measured value fails
    from varlens.theory.info_stats import _wrap
    bad = _wrap(lambda seed=0: {"ok": True, "measured": ((99, 98.79), (190, 190.73)),
                                "expected": ((99, 98.79), (191, 190.73))}, SCALAR_VIEWS["stats.003-77"])()
    assert not bad.passed and bad.alternatives == {"the notes' 190 (inventory E8)": 190.0}


def test_check_prints_the_gap_column_and_the_decisive_count(capsys):
    from varlens.cli import main
    assert main(["check", "-v", "-k", "relu.mean"]) == 0
    out = capsys.readouterr().out
    assert " gap " in out.splitlines()[0] + " " and "cannot decide" not in out
    assert "1 decide against a named wrong value" in out and "0 name none" in out
    assert "80-node Gauss-Hermite quadrature across the kink = 0.401" in out


def test_check_command_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "varlens", "check", "-k", "optim.critical"], capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0 and "PASS (corrected)" in out.stdout and "1 decide" in out.stdout
