"""varlens.info: entropy, MI, KL, cross-entropy, continuous cross-entropy (seed 003 §2, §3.3).

Claim tests are named after the inventory items (notes-inventory-part1-background.md §14.5-14.6):
``test_claim[003-57]`` checks item 57.  Expected numbers come from the inventory or from
independent formulas/libraries (scipy, torch), never from the code under test."""
import importlib
import math

import numpy as np
import pytest
import torch
from scipy import stats

import varlens as vl
from varlens.info import CLAIMS, continuous

E = importlib.import_module("varlens.info.entropy")


@pytest.mark.parametrize("cid,desc,fn", CLAIMS, ids=[c[0] for c in CLAIMS])
def test_claim(cid, desc, fn):
    r = fn(seed=0)
    assert r["ok"], f"{cid} {desc}: measured {r['measured']} expected {r['expected']} ({r['detail']})"


def test_claims_cover_inventory_items_45_to_67_and_78_to_89():
    ids = {c[0] for c in CLAIMS}
    want = {f"003-{i}" for i in list(range(45, 68)) + list(range(78, 90))}
    assert want <= ids
    assert len(ids) == len(CLAIMS)


# ------------------------------------------------------------------ explicit inventory numbers
def test_item45_birthday_information():
    assert round(E.information(1 / 365), 4) == 8.5118
    assert round(E.information(364 / 365), 6) == 0.003958


def test_item48_binary_entropy_values():
    assert E.binary_entropy(0.5) == 1.0
    assert abs(E.binary_entropy(0.8) - 0.7219281) < 1e-7


def test_item51_example_2_3_1():
    assert E.entropy([0.5, 0.25, 0.25]) == 1.5


def test_item59_two_flip_entropy_anchor():
    assert abs(E.entropy([0.64, 0.16, 0.16, 0.04]) - 1.4438562) < 1e-7


def test_item82_to_86_corrected_student_t_table():
    rows = {r["nu"]: r for r in continuous.student_t_table()}
    # inventory [C] values (nats): untruncated / truncated to [-500, 500]
    assert abs(rows[2.1]["H(t,N)"] - 2.9412) < 5e-5 and abs(rows[2.1]["H(t,N) truncated"] - 2.6540) < 5e-5
    assert abs(rows[2.5]["H(t,N)"] - 2.2237) < 5e-5 and abs(rows[2.5]["H(t,N) truncated"] - 2.1915) < 5e-5
    assert abs(rows[8.0]["H(t,N)"] - 1.562780) < 1e-6
    assert abs(rows[2.1]["H(N,t)"] - 3.7260) < 5e-5 and abs(rows[2.5]["H(N,t)"] - 2.4343) < 5e-5
    assert abs(rows[8.0]["H(N,t)"] - 1.5722) < 5e-5
    assert rows[1.0]["H(t,N)"] == math.inf and abs(rows[1.0]["H(N,t)"] - 1.6782) < 5e-5
    # the printed entries that are wrong really are off
    for nu in (2.1, 2.5):
        assert abs(rows[nu]["H(t,N)"] - rows[nu]["notes_t_N"]) > 0.1
    # qualitative claim survives: H(t, N) < H(N, t) for nu = 2.1, 2.5
    assert rows[2.1]["H(t,N)"] < rows[2.1]["H(N,t)"] and rows[2.5]["H(t,N)"] < rows[2.5]["H(N,t)"]
    # bits = nats / ln 2 (inventory: 5.3755, 3.5120, 2.4211)
    assert abs(continuous.cross_entropy(stats.norm(0, math.sqrt(21)), stats.t(2.1), 2) - 5.3755) < 5e-4


# ------------------------------------------------------------------ units, inputs, errors
def test_units_bits_nats_and_tensor_inputs():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    h2 = E.entropy(p, 2)
    he = E.entropy(p, "e")
    assert abs(he - h2 * math.log(2)) < 1e-12
    assert abs(E.entropy(p, 10) - he / math.log(10)) < 1e-12
    assert abs(he - stats.entropy(p)) < 1e-12                      # scipy oracle
    assert E.entropy(vl.tensor(p, dtype=vl.float64), "e") == pytest.approx(he, abs=1e-12)
    assert E.entropy(torch.tensor(p), "e") == pytest.approx(he, abs=1e-12)
    q = np.array([0.25, 0.25, 0.25, 0.25])
    assert abs(E.kl_divergence(p, q, "e") - stats.entropy(p, q)) < 1e-12


def test_cross_entropy_matches_torch_soft_target():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=6)
    q = np.exp(logits) / np.exp(logits).sum()
    p = rng.dirichlet(np.ones(6))
    ref = torch.nn.functional.cross_entropy(torch.tensor(logits)[None], torch.tensor(p)[None]).item()
    assert abs(E.cross_entropy(p, q, "e") - ref) < 1e-12
    assert abs(E.perplexity(p, q) - math.exp(ref)) < 1e-9


@pytest.mark.parametrize("bad,msg", [([0.5, 0.6], "summing to 1"), ([1.2, -0.2], "non-negative"),
                                     ([np.nan, 1.0], "finite"), ([], "non-empty")])
def test_bad_distributions_raise_naming_argument(bad, msg):
    with pytest.raises(ValueError, match=msg) as e:
        E.entropy(bad)
    assert "p:" in str(e.value)


def test_bad_base_and_shapes_raise():
    with pytest.raises(ValueError, match="base"):
        E.entropy([0.5, 0.5], base=1)
    with pytest.raises(ValueError, match="q: expected the same shape"):
        E.kl_divergence([0.5, 0.5], [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="pxy: expected a 2-D"):
        E.conditional_entropy([0.5, 0.5])
    with pytest.raises(ValueError, match="method"):
        E.mutual_information(np.full((2, 2), 0.25), method="bogus")


def test_kl_edge_cases_zero_log_zero_and_infinity():
    assert E.kl_divergence([0.0, 1.0], [0.5, 0.5]) == 1.0
    assert E.kl_divergence([0.5, 0.5], [0.0, 1.0]) == math.inf
    assert E.cross_entropy([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert E.cross_entropy([1.0, 0.0], [1.0, 0.0]) == 0.0
    assert E.entropy([1.0, 0.0, 0.0]) == 0.0


# ------------------------------------------------------------------ plug-in estimators
def test_plugin_entropy_bias_is_minus_k_minus_1_over_2n():
    """Miller-Madow: E[H_plugin] - H = -(K-1)/(2n) nats + O(1/n^2); the correction removes it."""
    rng = np.random.default_rng(0)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    K, n, reps = 4, 100, 4000
    H = E.entropy(p, "e")
    x = rng.choice(K, size=(reps, n), p=p)
    plug = np.array([E.entropy_from_samples(r, "e") for r in x])
    mm = np.array([E.entropy_from_samples(r, "e", correction="miller-madow") for r in x])
    se = plug.std() / math.sqrt(reps)
    assert abs((plug.mean() - H) - (-(K - 1) / (2 * n))) < 4 * se + 2e-3
    assert abs(mm.mean() - H) < abs(plug.mean() - H) / 3


def test_plugin_mi_bias_independent():
    rng = np.random.default_rng(0)
    n, reps = 200, 600
    vals = [E.mutual_information_from_samples(rng.integers(0, 3, n), rng.integers(0, 4, n), "e") for _ in range(reps)]
    expected = (3 - 1) * (4 - 1) / (2 * n)
    assert abs(np.mean(vals) - expected) < 0.25 * expected
    assert min(vals) >= 0


def test_cross_entropy_from_samples_is_unbiased():
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.5, 0.3])
    ests = [E.cross_entropy_from_samples(rng.choice(3, 50, p=p), q) for _ in range(2000)]
    assert abs(np.mean(ests) - E.cross_entropy(p, q)) < 4 * np.std(ests) / math.sqrt(2000)
    with pytest.raises(ValueError, match="x: expected integer outcomes"):
        E.cross_entropy_from_samples([0, 3], q)


def test_empirical_distribution_of_text():
    vals, p = E.empirical_distribution("abca")
    assert list(vals) == ["a", "b", "c"] and np.allclose(p, [0.5, 0.25, 0.25])
    assert E.entropy_from_samples("abca") == 1.5
    assert E.entropy_from_samples(b"abca") == 1.5


# ------------------------------------------------------------------ continuous distributions
@pytest.mark.parametrize("dist", [stats.norm(1, 2), stats.uniform(-1, 3), stats.expon(scale=2.5),
                                  stats.laplace(0, 0.7), stats.t(3.5), stats.t(1.0, scale=2)])
def test_differential_entropy_closed_forms_match_scipy(dist):
    assert abs(continuous.differential_entropy(dist, "e") - float(dist.entropy())) < 1e-9


def test_continuous_cross_entropy_and_kl_between_normals():
    p, q = stats.norm(0.5, 1.5), stats.norm(-1.0, 0.8)
    closed_kl = math.log(0.8 / 1.5) + (1.5 ** 2 + 1.5 ** 2) / (2 * 0.8 ** 2) - 0.5
    assert abs(continuous.kl_divergence(p, q, "e") - closed_kl) < 1e-10
    # the numerical path (q not normal) against the closed form with q normal
    numeric = continuous.cross_entropy(p, stats.laplace(0, 1), "e")
    lap = 0.5 * math.log(1) + math.log(2) + stats.foldnorm(0.5 / 1.5, scale=1.5).mean()
    assert abs(numeric - lap) < 1e-7
    assert continuous.cross_entropy(p, p, "e") == pytest.approx(continuous.differential_entropy(p, "e"), abs=1e-12)


def test_continuous_bad_input():
    with pytest.raises(TypeError, match="p: expected a frozen scipy.stats"):
        continuous.cross_entropy(3.0, stats.norm())
    with pytest.raises(ValueError, match="limits"):
        continuous.cross_entropy(stats.norm(), stats.norm(), limits=(1, -1))
