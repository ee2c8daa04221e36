"""Batch-size scaling of the learning rate (seed 000): the linear and square-root rules."""
import math

import numpy as np
import pytest

from varlens.optim import scale_lr
from varlens.optim.scaling import linear_scaling, sqrt_scaling, update_noise_std


def test_rules():
    assert scale_lr(0.1, 256, 1024, "linear") == pytest.approx(0.4)
    assert scale_lr(0.1, 256, 1024, "sqrt") == pytest.approx(0.2)
    assert scale_lr(0.1, 256, 64) == pytest.approx(0.025)          # linear by default
    assert linear_scaling(1e-3, 32, 96) == pytest.approx(3e-3)
    assert sqrt_scaling(1e-3, 32, 128) == pytest.approx(2e-3)
    assert scale_lr(0.1, 256, 8192, "linear", max_lr=1.0) == 1.0    # the curvature cap


def test_sqrt_rule_keeps_update_noise_fixed_and_linear_rule_does_not():
    """Minibatch means of B i.i.d. per-example gradients have variance sigma^2 / B (measured by
    Monte Carlo here), so eta proportional to sqrt(B) keeps the update's noise constant."""
    rng = np.random.default_rng(0)
    sigma, lr0, b0 = 2.0, 0.1, 8
    measured = {}
    for B in (8, 32, 128):
        per_example = rng.normal(0.5, sigma, size=(4000, B))
        noise = per_example.mean(axis=1).std()
        assert noise == pytest.approx(sigma / math.sqrt(B), rel=0.05)
        measured[B] = noise
        assert update_noise_std(lr0, sigma, B) == pytest.approx(lr0 * sigma / math.sqrt(B))
    for B in (32, 128):
        sq = scale_lr(lr0, b0, B, "sqrt") * measured[B]
        lin = scale_lr(lr0, b0, B, "linear") * measured[B]
        assert sq == pytest.approx(lr0 * measured[b0], rel=0.07)
        assert lin > 1.8 * lr0 * measured[b0]                      # grows like sqrt(B / b0)


@pytest.mark.parametrize("args,match", [
    ((0.1, 256, 512, "cubic"), "rule must be one of"),
    ((-0.1, 256, 512), "lr must be a positive number"),
    ((0.1, 0, 512), "base_batch must be a positive integer, got 0"),
    ((0.1, 256, 2.5), "new_batch must be a positive integer"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        scale_lr(*args)
