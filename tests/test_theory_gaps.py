"""A claim of `varlens check` decides only if its tolerance is below the gap to the nearest wrong
value it must reject; that gap is computed and printed."""
import subprocess
import sys

from varlens.theory import REGISTRY, run_claims


def test_named_claims_can_reject_their_nearest_wrong_value():
    rows = {r["id"]: r for r in run_claims(ids={"attention.dot_product_variance", "relu.mean"})}
    for cid in ("attention.dot_product_variance", "relu.mean"):
        r = rows[cid]
        assert r["passed"] and r["gap"] is not None
        assert r["tolerance"] < r["gap"], (cid, r["tolerance"], r["gap"])
        assert r["decisive"] is True
    # d versus d + 1: the tolerance leaves the misprint outside
    r = rows["attention.dot_product_variance"]
    assert abs(9.0 - r["measured"]) > r["tolerance"]


def test_every_claim_with_alternatives_is_decisive():
    with_alt = [cid for cid, c in REGISTRY.items() if c.wrong_values()]
    assert len(with_alt) >= 2
    for r in run_claims(ids=set(with_alt)):
        assert r["decisive"], (r["id"], r["tolerance"], r["gap"])


def test_check_prints_the_gap_column():
    out = subprocess.run([sys.executable, "-m", "varlens", "check", "-k", "relu.mean"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0
    assert " gap " in out.stdout.splitlines()[0] + " " and "cannot decide" not in out.stdout
