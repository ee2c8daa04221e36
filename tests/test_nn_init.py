"""Initialisers: sample variances match their formulas (tolerance from the sample size),
gains and bounds match PyTorch, layer defaults are PyTorch's."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn
from varlens.nn import init


def var_ok(a, var, mean=0.0):
    """Sample mean and variance within 5 standard errors of the target (for n i.i.d. draws,
    SE(mean) = sqrt(var/n), SE(var) ~ var * sqrt(2/(n-1)) for normal, a bit less for uniform)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    n = a.size
    assert abs(a.mean() - mean) < 5 * math.sqrt(var / n), f"mean {a.mean()} vs {mean}"
    assert abs(a.var(ddof=1) - var) < 5 * var * math.sqrt(2 / (n - 1)), f"var {a.var(ddof=1)} vs {var}"


def W(*shape):
    return nn.Parameter(vl.empty(*shape, dtype=vl.float64))


def test_calculate_gain_matches_pytorch():
    for nl, p in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                  ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert init.calculate_gain(nl, p) == pytest.approx(torch.nn.init.calculate_gain(nl, p))
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


@pytest.mark.parametrize("shape", [(200, 300), (64, 32, 3, 3)])
def test_variance_formulas(shape):
    rf = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    fi, fo = shape[1] * rf, shape[0] * rf
    cases = [
        (init.lecun_normal_, {}, 1 / fi),                                       # seed 000
        (init.lecun_uniform_, {}, 1 / fi),
        (init.xavier_normal_, {}, 2 / (fi + fo)),                               # seed 002
        (init.xavier_uniform_, {"gain": 2.0}, 4 * 2 / (fi + fo)),
        (init.kaiming_normal_, {"nonlinearity": "relu"}, 2 / fi),               # seeds 001 §3.3, 003 §4.3.1
        (init.kaiming_normal_, {"nonlinearity": "relu", "mode": "fan_out"}, 2 / fo),
        (init.kaiming_uniform_, {"a": 0.3}, 2 / (1 + 0.09) / fi),
        (init.kaiming_uniform_, {"a": math.sqrt(5)}, 1 / (3 * fi)),             # Linear's default
        (init.variance_preserving_relu_, {}, 1 / (fi * (0.5 - 1 / (2 * math.pi)))),  # seed 003 Ex. 4.3.1
        (init.normal_, {"mean": 1.0, "std": 0.5}, 0.25),
        (init.uniform_, {"a": -2.0, "b": 4.0}, 36 / 12),
    ]
    for fn, kw, var in cases:
        w = fn(W(*shape), **kw)
        mean = kw.get("mean", 1.0 if fn is init.uniform_ else 0.0)
        var_ok(w._data, var, mean)


def test_uniform_bounds_match_pytorch():
    for fn, tfn, kw in [(init.kaiming_uniform_, torch.nn.init.kaiming_uniform_, {"a": math.sqrt(5)}),
                        (init.xavier_uniform_, torch.nn.init.xavier_uniform_, {}),
                        (init.kaiming_uniform_, torch.nn.init.kaiming_uniform_, {"nonlinearity": "relu"})]:
        w = fn(W(50, 40), **kw)._data
        tw = tfn(torch.empty(50, 40, dtype=torch.float64), **kw).numpy()
        # same support: the largest |entry| of a big sample sits just under the bound
        assert abs(np.abs(w).max() - np.abs(tw).max()) < 0.02 * np.abs(tw).max()


def test_variance_preserving_relu_keeps_variance_not_second_moment():
    """seed 003 §4.3.1 / Exercise 4.3.1: for a = ReLU(x W^T) with x ~ N(0, 1) i.i.d. and n inputs,
    He's sigma_W^2 = 2/n keeps the second moment E[a^2] = Var[x]; sigma_W^2 = 1/(n (1/2 - 1/(2 pi)))
    keeps the variance Var[a] = Var[x] instead."""
    g = vl.Generator().manual_seed(0)
    n = 400
    x = vl.tensor(np.random.default_rng(100).standard_normal((2000, n)))  # not the stream of g
    w = init.variance_preserving_relu_(W(n, n), generator=g)
    a = vl.relu(x @ w.detach().T)._data
    assert abs(a.var() - 1.0) < 0.05
    he = init.kaiming_normal_(W(n, n), nonlinearity="relu", generator=g)
    a_he = vl.relu(x @ he.detach().T)._data
    assert abs((a_he ** 2).mean() - 1.0) < 0.05
    assert abs(a_he.var() - (1 - 1 / math.pi)) < 0.05                 # He: variance 2 (1/2 - 1/(2 pi))


def test_generator_reproducible_and_fill_functions():
    a = init.normal_(W(3, 4), generator=vl.Generator().manual_seed(7))._data.copy()
    b = init.normal_(W(3, 4), generator=vl.Generator().manual_seed(7))._data
    np.testing.assert_array_equal(a, b)
    assert np.all(init.zeros_(W(2, 2))._data == 0) and np.all(init.ones_(W(2, 2))._data == 1)
    assert np.all(init.constant_(W(2, 2), 0.3)._data == 0.3)
    np.testing.assert_array_equal(init.eye_(W(2, 3))._data, np.eye(2, 3))
    d = init.dirac_(W(4, 2, 3, 3))._data
    assert d[0, 0, 1, 1] == 1 and d[1, 1, 1, 1] == 1 and d.sum() == 2
    t = init.trunc_normal_(W(5000), std=1.0, a=-0.5, b=1.0)._data
    assert t.min() >= -0.5 and t.max() <= 1.0
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.kaiming_normal_(W(5))
    with pytest.raises(ValueError, match="fan_in"):
        init.kaiming_normal_(W(5, 5), mode="fan_avg")
    # init does not record on the tape
    w = W(3, 3)
    init.normal_(w)
    assert w.is_leaf and w.grad_fn is None


def test_orthogonal():
    for shape in [(5, 5), (3, 7), (7, 3)]:
        q = init.orthogonal_(W(*shape), gain=2.0)._data
        if shape[0] <= shape[1]:
            np.testing.assert_allclose(q @ q.T, 4 * np.eye(shape[0]), atol=1e-10)
        else:
            np.testing.assert_allclose(q.T @ q, 4 * np.eye(shape[1]), atol=1e-10)


def test_layer_defaults_are_pytorch():
    lin = nn.Linear(64, 200)
    bound = 1 / math.sqrt(64)
    assert np.abs(lin.weight._data).max() <= bound and np.abs(lin.bias._data).max() <= bound
    var_ok(lin.weight._data, bound ** 2 / 3)                  # kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), ..)
    e = nn.Embedding(300, 40)
    var_ok(e.weight._data, 1.0)                               # N(0, 1)
    bn = nn.BatchNorm1d(4)
    assert np.all(bn.weight._data == 1) and np.all(bn.bias._data == 0)
    assert np.all(bn.running_var._data == 1) and np.all(bn.running_mean._data == 0)
    # picking another initialisation for every Linear of a model
    net = nn.Sequential(nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 100))

    def he(m):
        if isinstance(m, nn.Linear):
            init.kaiming_normal_(m.weight, nonlinearity="relu")
            init.zeros_(m.bias)
    net.apply(he)
    var_ok(np.concatenate([net[0].weight._data.ravel(), net[2].weight._data.ravel()]), 2 / 100)
    assert np.all(net[2].bias._data == 0)
