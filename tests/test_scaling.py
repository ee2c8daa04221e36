"""Scaling-law fit (seed 003 §8.7): recovers a planted power law and reports honest errors."""
import numpy as np
import pytest

from varlens.text.scaling import fit_power_law, non_embedding_params, plot_scaling, power_law


def test_exact_power_law_is_recovered():
    N = np.array([1e3, 3e3, 1e4, 3e4, 1e5])
    L = power_law(N, 8e13, 0.076)
    f = fit_power_law(N, L, n_boot=200)
    assert f["alpha"] == pytest.approx(0.076, rel=1e-10)
    assert f["N_c"] == pytest.approx(8e13, rel=1e-8)
    assert f["alpha_se"] < 1e-10


def test_noisy_fit_errors_cover_the_truth_at_the_nominal_rate():
    """Over 120 noisy data sets, alpha +/- 2 OLS standard errors covers the true alpha about
    95% of the time, and the bootstrap spread is of the same size as the OLS error."""
    rng = np.random.default_rng(0)
    N = np.geomspace(1e3, 1e6, 8)
    hits, ratio = 0, []
    for k in range(120):
        L = power_law(N, 1e9, 0.3) * np.exp(rng.normal(0, 0.03, len(N)))
        f = fit_power_law(N, L, n_boot=100, seed=k)
        hits += abs(f["alpha"] - 0.3) < 2 * f["alpha_se"]
        ratio.append(f["alpha_boot_sd"] / f["alpha_se"])
    assert 0.87 <= hits / 120 <= 0.995
    assert 0.5 < np.median(ratio) < 1.2


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="at least 3"):
        fit_power_law([1, 2], [1, 2])
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([1, 2, 0], [1, 2, 3])
    with pytest.raises(ValueError, match="same length"):
        fit_power_law([1, 2, 3], [1, 2])


def test_non_embedding_count_and_plot(tmp_path):
    from varlens.models.gpt import GPT, GPTConfig
    m = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=8))
    d = 8
    # per block: 2 LayerNorms (2d each), qkv (3d^2 + 3d), proj (d^2 + d), MLP (8d^2 + 5d); final LN 2d
    assert non_embedding_params(m) == (4 * d + 3 * d * d + 3 * d + d * d + d + 8 * d * d + 5 * d) + 2 * d
    res = [{"N": n, "val_loss": float(power_law(n, 1e6, 0.2))} for n in (1e3, 1e4, 1e5)]
    p = tmp_path / "s.png"
    plot_scaling(res, fit_power_law([r["N"] for r in res], [r["val_loss"] for r in res], n_boot=50), str(p))
    assert p.stat().st_size > 5000
