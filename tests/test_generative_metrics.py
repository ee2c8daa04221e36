"""Sample-based distances used to score generative models (varlens.generative.metrics)."""
import numpy as np
import pytest
from scipy import stats

from varlens.generative.metrics import (energy_distance, feature_frechet_distance, frechet_distance, mmd_rbf,
                                        mode_coverage, ring_centers)


def test_energy_distance_matches_scipy_in_one_dimension():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0, 1, 300), rng.normal(0.5, 2, 400)
    # scipy returns the square root of 2E|X-Y| - E|X-X'| - E|Y-Y'|
    assert energy_distance(x[:, None], y[:, None]) == pytest.approx(stats.energy_distance(x, y) ** 2, rel=1e-10)
    assert energy_distance(np.array([[0.0], [0.0]]), np.array([[3.0], [3.0]])) == pytest.approx(6.0)


def test_mmd_separates_and_is_near_zero_for_equal_laws():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((500, 2)), rng.standard_normal((500, 2))
    c = rng.standard_normal((500, 2)) + np.array([0.5, 0])
    same, diff = mmd_rbf(a, b), mmd_rbf(a, c)
    assert abs(same) < 0.01 and diff > 0.05
    # by hand for 2 + 2 points and one bandwidth
    x, y = np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])
    k = lambda u, v: np.exp(-(u - v) ** 2 / 2)  # noqa: E731
    ref = k(0, 1) * 2 / 2 + k(0, 3) * 2 / 2 - 2 * (k(0, 0) + k(0, 3) + k(1, 0) + k(1, 3)) / 4
    assert mmd_rbf(x, y, bandwidths=(1.0,)) == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="same number of features"):
        mmd_rbf(a, np.zeros((5, 3)))


def test_frechet_distance_closed_forms():
    # 1-D Gaussians: (m1 - m2)^2 + (s1 - s2)^2; diagonal covariances add up per dim
    assert frechet_distance([1.0], [[4.0]], [0.0], [[1.0]]) == pytest.approx(1 + 1, rel=1e-10)
    assert frechet_distance([0, 0], np.diag([4.0, 9.0]), [1, 1], np.diag([1.0, 1.0])) == \
        pytest.approx(2 + 1 + 4, rel=1e-10)
    rng = np.random.default_rng(2)
    A = rng.standard_normal((3, 3))
    C = A @ A.T + np.eye(3)
    assert frechet_distance(np.zeros(3), C, np.zeros(3), C) == pytest.approx(0, abs=1e-8)
    f = rng.standard_normal((4000, 3))
    assert feature_frechet_distance(f, f * 2 + 1) == pytest.approx(3 + 3, rel=0.05)
    with pytest.raises(ValueError, match="shapes"):
        frechet_distance(np.zeros(2), np.eye(3), np.zeros(2), np.eye(3))


def test_mode_coverage_counts():
    c = ring_centers(8, 2.0)
    assert np.allclose(np.linalg.norm(c, axis=1), 2.0)
    pts = np.concatenate([np.repeat(c[:3], 100, 0), np.zeros((50, 2))])  # 3 modes + 50 misses
    r = mode_coverage(pts, c, 0.3)
    assert r["covered"] == 3 and list(r["counts"][:3]) == [100, 100, 100] and r["counts"][3:].sum() == 0
    assert r["high_quality"] == pytest.approx(300 / 350)


def test_recipes_run_end_to_end_on_tiny_budgets(tmp_path):
    import json
    import os
    from varlens.generative.experiments import diffusion_2d, gan_ring, main
    r = diffusion_2d("ring", steps=10, T=20, batch_size=64, hidden=(16,), n_eval=100, ddim_steps=5,
                     out=str(tmp_path / "d"))
    saved = json.load(open(tmp_path / "d" / "metrics.json"))
    assert saved["ddim_energy"] == pytest.approx(r["ddim_energy"]) and saved["floor_energy"] >= 0
    assert os.path.getsize(tmp_path / "d" / "samples.png") > 1000 and 0 <= r["ddim_modes"] <= 8
    h = gan_ring(["baseline"], steps=10, batch_size=32, out=str(tmp_path / "g"), log_every=5)
    assert [x["step"] for x in h["baseline"]] == [5, 10]
    assert os.path.exists(tmp_path / "g" / "samples.png")
    assert main(["no-such-recipe"]) == 2
