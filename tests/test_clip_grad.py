"""Gradient clipping (varlens.nn.utils) against PyTorch, and parameter/vector conversion."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.nn import utils as vu


def _pair(scale=1.0, dtype=np.float64, none_last=True):
    rng = np.random.default_rng(0)
    arrs = [scale * rng.normal(size=s).astype(dtype) for s in [(3, 4), (5,), (2, 2, 2)]]
    vps, tps = [], []
    for a in arrs + [np.ones(2, dtype)]:
        vps.append(vl.tensor(a.copy(), requires_grad=True))
        tps.append(torch.tensor(a.copy(), requires_grad=True))
    grads = [scale * rng.normal(size=a.shape).astype(dtype) for a in arrs]
    for v, t, g in zip(vps, tps, grads):
        v.grad = vl.tensor(g.copy())
        t.grad = torch.tensor(g.copy())
    return vps, tps                                    # the last parameter has no gradient


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, 0.5, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    vps, tps = _pair()
    tn = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type=float(norm_type))
    vn = vu.clip_grad_norm_(vps, max_norm, norm_type=norm_type)
    assert isinstance(vn, vl.Tensor) and vn.shape == ()
    np.testing.assert_allclose(vn._data, tn.numpy(), rtol=1e-13)
    for v, t in zip(vps[:3], tps[:3]):
        np.testing.assert_allclose(v.grad._data, t.grad.numpy(), rtol=1e-13)
    assert vps[3].grad is None
    if max_norm < float(tn):                           # clipped: the new norm is max_norm
        new = vu.get_total_norm([p.grad for p in vps[:3]], norm_type)
        assert float(new) == pytest.approx(max_norm * float(tn) / (float(tn) + 1e-6), rel=1e-12)


def test_clip_grad_norm_float32_and_single_tensor():
    vps, tps = _pair(scale=10.0, dtype=np.float32)
    tn = torch.nn.utils.clip_grad_norm_(tps[0], 1.0)
    vn = vu.clip_grad_norm_(vps[0], 1.0)
    assert vn.dtype == vl.float32
    np.testing.assert_allclose(vn._data, tn.numpy(), rtol=1e-6)
    np.testing.assert_allclose(vps[0].grad._data, tps[0].grad.numpy(), rtol=1e-6)


def test_clip_grad_norm_nonfinite():
    vps, _ = _pair()
    vps[0].grad._data[0, 0] = np.inf
    with pytest.raises(RuntimeError, match="non-finite"):
        vu.clip_grad_norm_(vps, 1.0, error_if_nonfinite=True)
    assert math.isinf(float(vu.clip_grad_norm_(vps, 1.0)))


def test_clip_grad_norm_no_grads():
    p = vl.tensor([1.0], requires_grad=True)
    assert float(vu.clip_grad_norm_([p], 1.0)) == 0.0


@pytest.mark.parametrize("clip", [0.1, 0.7, 5.0])
def test_clip_grad_value_matches_torch(clip):
    vps, tps = _pair()
    torch.nn.utils.clip_grad_value_(tps, clip)
    assert vu.clip_grad_value_(vps, clip) is None
    for v, t in zip(vps[:3], tps[:3]):
        np.testing.assert_array_equal(v.grad._data, t.grad.numpy())
        assert np.abs(v.grad._data).max() <= clip


def test_bad_clip_arguments():
    vps, _ = _pair()
    with pytest.raises(ValueError, match="max_norm must be >= 0, got -1"):
        vu.clip_grad_norm_(vps, -1)
    with pytest.raises(TypeError, match="norm_type"):
        vu.clip_grad_norm_(vps, 1.0, norm_type="fro")
    with pytest.raises(TypeError, match=r"parameters\[0\] must be a Tensor, got list"):
        vu.clip_grad_norm_([[1.0]], 1.0)
    with pytest.raises(ValueError, match="clip_value must be >= 0"):
        vu.clip_grad_value_(vps, -0.5)


def test_parameters_to_vector_round_trip_and_grad():
    vps, tps = _pair()
    v = vu.parameters_to_vector(vps)
    t = torch.nn.utils.parameters_to_vector(tps)
    np.testing.assert_array_equal(v._data, t.detach().numpy())
    w = vl.tensor(np.arange(v.numel(), dtype=np.float64))
    for p in vps:
        p.grad = None
    (v * w).sum().backward()
    np.testing.assert_array_equal(vps[1].grad._data, np.arange(12.0, 17.0))
    vu.vector_to_parameters(w * 2, vps)
    np.testing.assert_array_equal(vps[0]._data, 2 * np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(vps[3]._data, [2 * 25.0, 2 * 26.0])
    with pytest.raises(ValueError, match="vec has 3 elements but the parameters hold 27"):
        vu.vector_to_parameters(vl.tensor([1.0, 2.0, 3.0]), vps)
