"""varlens.theory: every registered claim of the notes passes, and the checks can fail.

The tolerance machinery is tested against wrong values (so a passing claim means
something), the CLI's exit code and JSON are checked, and the noise-scale estimator
is validated against closed forms.
"""
import json
import math

import numpy as np
import pytest

from varlens import nn
from varlens.theory import REGISTRY, run_claims
from varlens.theory import registry as R


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# The info./stats. claims are registered for `varlens check` but run, one test each, in
# tests/test_info.py and tests/test_stats.py; running them here again would only cost time.
OWN = [cid for cid in REGISTRY if not cid.startswith(("info.", "stats."))]


@pytest.fixture(scope="module")
def all_rows():
    return run_claims(ids=OWN)


def test_every_claim_passes(all_rows):
    failed = [(r["id"], r["measured"], r["expected"], r["tolerance"], r["error"]) for r in all_rows if not r["passed"]]
    assert not failed, failed
    assert len(all_rows) == len(OWN) >= 50


def test_info_and_stats_claims_are_registered_for_varlens_check():
    from varlens import info, stats
    ids = set(REGISTRY)
    assert {f"info.{c[0]}" for c in info.CLAIMS} <= ids
    assert {f"stats.{c[0]}" for c in stats.CLAIMS} <= ids


def test_claims_are_documented_and_cover_the_topics():
    topics = {c.topic for c in REGISTRY.values()}
    assert {"variance", "init", "dropout", "norm", "optim", "batch", "attention"} <= topics
    for c in REGISTRY.values():
        assert c.seed in {"000", "001", "002", "003", "004"}, c.id
        assert c.section and len(c.description) > 20, c.id
    corrected = {c.id for c in REGISTRY.values() if c.corrected}
    # the notes' printed errors that are tested in corrected form (inventory E12, E15, E17, E23)
    assert {"init.he_std_not_2_over_sqrt_n", "optim.l2_step_equivalence", "optim.critical_damping",
            "optim.ema_weights"} <= corrected
    for cid in corrected:
        assert any(w in REGISTRY[cid].description for w in ("print", "false", "wrong")), cid


def test_every_claim_that_decides_something_can_reject_its_nearest_wrong_value(all_rows):
    """Corrected and Monte Carlo claims name a wrong value (the notes' misprint, a classic confusion)
    and their tolerance is below the gap to it; the rule itself is tested with fake claims in
    tests/test_theory_gaps.py."""
    from test_theory_gaps import gap_problems
    assert not gap_problems(all_rows)
    named = [r for r in all_rows if r["wrong_values"]]
    assert len(named) >= 50
    # the others are exact identities whose description says why no wrong value applies
    for r in all_rows:
        if not r["wrong_values"]:
            assert r["n_samples"] == 0 and "No wrong value" in r["description"], r["id"]


def test_claims_are_deterministic():
    a = run_claims(ids={"relu.variance", "init.he_preserves_depth"})
    b = run_claims(ids={"relu.variance", "init.he_preserves_depth"})
    assert [r["measured"] for r in a] == [r["measured"] for r in b]


def test_tolerances_reject_wrong_values():
    g = np.random.default_rng(3)
    h = np.maximum(g.standard_normal(1_000_000), 0.0)
    assert R.mc_var(h, 0.5 - 1 / (2 * math.pi)).passed
    # seed 001 L261 conflates Var[h] with E[h^2] = 1/2: the check must tell them apart
    assert not R.mc_var(h, 0.5).passed
    assert not R.mc_mean(h, 0.5).passed
    assert R.mc_mean(h, 1 / math.sqrt(2 * math.pi)).passed
    r = R.close(1.0, 1.2, 0.1, 10)
    assert not r.passed and r.as_tuple() == (1.0, 1.2, 0.1, 10, False)


def test_clustered_standard_error_accounts_for_shared_weights():
    g = np.random.default_rng(4)
    # 100 clusters, each with its own scale: the pooled variance is still 1 + 0.25 but the
    # naive iid standard error would be far too small
    clusters = [g.standard_normal(500) * math.sqrt(1 + 0.5 * g.choice([-1, 1])) for _ in range(100)]
    r = R.mc_var_clustered(clusters, 1.0, center=False)
    naive = R.mc_var(np.concatenate(clusters), 1.0)
    assert r.tolerance > 3 * naive.tolerance
    assert r.passed
    assert not R.mc_var_clustered(clusters, 1.5, center=False).passed


def test_chi_square_rejects_the_wrong_binomial():
    from varlens.theory.dropout import _chi2_gof
    from scipy import stats
    g = np.random.default_rng(5)
    M, p, n = 50, 0.3, 20000
    K = (g.random((n, M)) >= p).sum(1)
    counts = np.bincount(K, minlength=M + 1)
    assert _chi2_gof(counts, stats.binom.pmf(np.arange(M + 1), M, 1 - p), n).passed
    # keep probability mistaken for p (the two dropout conventions, inventory D13)
    assert not _chi2_gof(counts, stats.binom.pmf(np.arange(M + 1), M, p), n).passed


def test_a_failing_claim_fails_the_command(monkeypatch, capsys):
    from varlens.cli import main
    monkeypatch.setitem(REGISTRY, "zz.always_fails",
                        R.Claim("zz.always_fails", "000", "L1", "variance", "a deliberately false claim",
                                lambda: R.close(1.0, 2.0, 0.1, 1)))
    assert main(["check", "-k", "zz."]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "zz.always_fails" in out
    assert main(["check", "-k", "relu.mean"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_check_json_and_list(capsys):
    from varlens.cli import main
    assert main(["check", "--json", "-k", "dropout.poisson"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 2 and doc["passed"] == 2
    row = doc["claims"][0]
    for key in ("id", "seed", "section", "measured", "expected", "tolerance", "n_samples", "passed", "description"):
        assert key in row
    assert main(["check", "--list", "-k", "init."]) == 0
    assert "init.variance_preserving_factor" in capsys.readouterr().out
    assert main(["check", "-k", "no-such-claim"]) == 2


def test_crashing_claim_is_reported_not_raised(monkeypatch):
    def boom():
        raise RuntimeError("kaput")
    monkeypatch.setitem(REGISTRY, "zz.crash", R.Claim("zz.crash", "000", "L1", "variance", "crashes on purpose", boom))
    rows = run_claims(ids={"zz.crash"})
    assert not rows[0]["passed"] and "kaput" in rows[0]["error"]


# ------------------------------------------------------------------ gradient noise scale
def test_noise_scale_matches_linear_regression_closed_form():
    from varlens.lens.noise_scale import linear_regression_check
    for seed in (0, 7):
        r = linear_regression_check(seed=seed)
        assert r.passed, r
        assert r.tolerance < 0.25 * r.expected      # informative, not a wide-open interval


def test_noise_scale_on_a_varlens_model_matches_finite_data_truth():
    """Finite data, sampling with replacement: E|G_B|^2 = |G|^2 + tr(Sigma)/B exactly, so
    B_simple is known from the per-example gradients."""
    from varlens.lens.noise_scale import estimate_module
    g = np.random.default_rng(11)
    n, d = 256, 6
    X = g.standard_normal((n, d))
    y = X @ g.standard_normal(d) + 0.7 * g.standard_normal(n)
    model = nn.Linear(d, 1).double()
    w = model.weight.detach().numpy().ravel()
    b = float(model.bias.detach().numpy()[0])
    r = X @ w + b - y
    per = np.concatenate([(r[:, None] * X), r[:, None]], axis=1)     # d/d(w, b) of (1/2) r^2
    G = per.mean(0)
    truth = per.var(0).sum() / (G @ G)
    loss = lambda out, t: 0.5 * ((out.reshape(-1) - t) ** 2).mean()  # noqa: E731
    est = estimate_module(model, loss, X, y, b_small=4, b_big=64, n_batches=400, seed=2)
    assert abs(est.b_simple - truth) <= 5 * est.b_simple_se, (est, truth)
    assert est.b_simple_se < 0.3 * truth
    assert all(p.grad is None for p in model.parameters())
    rec = est.recommend(base_batch=8, base_lr=0.1)
    B = rec["recommended_batch"]
    assert B == 2 ** round(math.log2(est.b_simple))
    assert rec["linear_rule_lr"] == pytest.approx(0.1 * B / 8)
    assert rec["sqrt_rule_lr"] == pytest.approx(0.1 * math.sqrt(B / 8))
    assert rec["mccandlish_lr"] < rec["linear_rule_lr"] or B <= 8


def test_noise_scale_rejects_bad_batches():
    from varlens.lens.noise_scale import estimate
    with pytest.raises(ValueError, match="b_small"):
        estimate(lambda i: np.zeros(2), 10, b_small=8, b_big=8)
    with pytest.raises(ValueError, match="n_batches"):
        estimate(lambda i: np.zeros(2), 10, n_batches=1)
