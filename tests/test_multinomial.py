"""varlens.multinomial: the distribution of the draws (chi-square against the weights), the
without-replacement rules, shapes and errors as torch.multinomial."""
import numpy as np
import pytest
import torch
from scipy import stats

import varlens as vl


def test_with_replacement_matches_the_weights():
    w = np.array([0.1, 0.0, 2.0, 0.9], dtype=np.float32)  # unnormalised, with a zero
    g = vl.Generator().manual_seed(0)
    draws = vl.multinomial(vl.tensor(w), 20000, replacement=True, generator=g).numpy()
    assert draws.shape == (20000,) and draws.dtype == np.int64
    counts = np.bincount(draws, minlength=4)
    assert counts[1] == 0
    expected = 20000 * w.astype(np.float64) / w.astype(np.float64).sum()
    keep = expected > 0
    assert stats.chisquare(counts[keep], expected[keep]).pvalue > 1e-3


def test_without_replacement_first_draw_follows_weights_and_rows_are_distinct():
    w = np.tile(np.array([1.0, 2.0, 3.0, 4.0]), (4000, 1))
    g = vl.Generator().manual_seed(1)
    d = vl.tensor(w).multinomial(3, generator=g).numpy()
    assert d.shape == (4000, 3)
    assert all(len(set(r)) == 3 for r in d[:200])
    first = np.bincount(d[:, 0], minlength=4)
    assert stats.chisquare(first, 4000 * w[0] / w[0].sum()).pvalue > 1e-3
    # P(second = j | first = i) = w_j / (sum - w_i): check pairs (first=3, second=2)
    sel = d[d[:, 0] == 3]
    p = (sel[:, 1] == 2).mean()
    assert abs(p - 3 / 6) < 0.05


def test_shapes_like_torch_and_errors():
    w = torch.rand(3, 5)
    assert tuple(vl.multinomial(vl.tensor(w.numpy()), 2).shape) == tuple(torch.multinomial(w, 2).shape)
    with pytest.raises(RuntimeError, match="element < 0"):
        vl.multinomial(vl.tensor(np.array([0.5, -0.1])), 1)
    with pytest.raises(RuntimeError, match="without replacement"):
        vl.multinomial(vl.tensor(np.array([0.5, 0.5])), 3)
    with pytest.raises(RuntimeError, match="not enough"):
        vl.multinomial(vl.tensor(np.array([1.0, 0.0, 0.0])), 2)
    with pytest.raises(RuntimeError, match="num_samples"):
        vl.multinomial(vl.tensor(np.array([1.0])), 0)
    with pytest.raises(RuntimeError, match="floating-point"):
        vl.multinomial(vl.tensor(np.array([1, 2])), 1)


def test_seeded_draws_repeat():
    w = vl.tensor(np.array([0.2, 0.3, 0.5]))
    a = vl.multinomial(w, 10, True, generator=vl.Generator().manual_seed(5)).numpy()
    b = vl.multinomial(w, 10, True, generator=vl.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(a, b)
