"""Pooling and nearest upsampling (varlens.ops.conv): PyTorch parity of values and gradients
over random kernels/strides/paddings/dilations/ceil_mode (incl. windows that do not tile the
input), float64 finite-difference checks, ties and NaN, and errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import varlens as vl
from varlens.autograd import gradcheck, gradgradcheck
from varlens.ops import conv as C

from conftest import assert_close, to_torch


def _pool_cases(n, seed, dilation=True):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        k = tuple(int(v) for v in rng.integers(1, 5, size=2))
        s = tuple(int(v) for v in rng.integers(1, 4, size=2))
        p = tuple(int(rng.integers(0, ki // 2 + 1)) for ki in k)
        d = tuple(int(v) for v in rng.integers(1, 3, size=2)) if dilation else (1, 1)
        H, W = (int(v) for v in rng.integers(4, 12, size=2))
        if H + 2 * p[0] < d[0] * (k[0] - 1) + 1 or W + 2 * p[1] < d[1] * (k[1] - 1) + 1:
            continue
        out.append(dict(k=k, s=s, p=p, d=d, H=H, W=W, ceil=bool(rng.integers(0, 2))))
    return out


@pytest.mark.parametrize("c", _pool_cases(20, 1), ids=lambda c: f"k{c['k']}s{c['s']}p{c['p']}d{c['d']}c{int(c['ceil'])}H{c['H']}W{c['W']}")
def test_max_pool2d_matches_torch(c):
    rng = np.random.default_rng(0)
    x = vl.tensor(rng.standard_normal((2, 3, c["H"], c["W"])), requires_grad=True)
    kw = dict(stride=c["s"], padding=c["p"], dilation=c["d"], ceil_mode=c["ceil"])
    out, idx = C.max_pool2d(x, c["k"], return_indices=True, **kw)
    tx = to_torch(x)
    tout, tidx = TF.max_pool2d(tx, c["k"], return_indices=True, **kw)
    assert_close(out, tout, what="max_pool2d")
    assert np.array_equal(idx._data, tidx.numpy())
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="max_pool2d dx")


@pytest.mark.parametrize("c", _pool_cases(20, 2, dilation=False), ids=lambda c: f"k{c['k']}s{c['s']}p{c['p']}c{int(c['ceil'])}H{c['H']}W{c['W']}")
@pytest.mark.parametrize("include_pad,div", [(True, None), (False, None), (True, 3)])
def test_avg_pool2d_matches_torch(c, include_pad, div):
    rng = np.random.default_rng(1)
    x = vl.tensor(rng.standard_normal((2, 2, c["H"], c["W"])), requires_grad=True)
    kw = dict(stride=c["s"], padding=c["p"], ceil_mode=c["ceil"], count_include_pad=include_pad,
              divisor_override=div)
    out = C.avg_pool2d(x, c["k"], **kw)
    tx = to_torch(x)
    tout = TF.avg_pool2d(tx, c["k"], **kw)
    assert_close(out, tout, what="avg_pool2d")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="avg_pool2d dx")


def test_max_pool_ties_and_nan_follow_torch():
    x = vl.tensor(np.array([[[[1.0, 1.0, 0.0], [1.0, 0.0, 2.0], [2.0, 2.0, 2.0]]]]), requires_grad=True)
    out = C.max_pool2d(x, 2, stride=1)
    out.sum().backward()
    tx = to_torch(x)
    TF.max_pool2d(tx, 2, stride=1).sum().backward()
    assert_close(x.grad, tx.grad, what="ties go to the first maximum")
    xn = np.arange(16.0).reshape(1, 1, 4, 4)
    xn[0, 0, 0, 1] = np.nan
    r = C.max_pool2d(vl.tensor(xn), 2)._data
    assert np.isnan(r[0, 0, 0, 0]) and not np.isnan(r[0, 0, 1, 1])


@pytest.mark.parametrize("H,W,out", [(8, 8, 1), (7, 9, (3, 4)), (5, 6, (5, 2)), (6, 6, (3, 3)), (7, 5, (None, 2)), (4, 4, (6, 5))])
def test_adaptive_avg_pool2d_matches_torch(H, W, out):
    rng = np.random.default_rng(2)
    x = vl.tensor(rng.standard_normal((2, 3, H, W)), requires_grad=True)
    o = C.adaptive_avg_pool2d(x, out)
    tx = to_torch(x)
    to = TF.adaptive_avg_pool2d(tx, out)
    assert_close(o, to, what="adaptive")
    gy = rng.standard_normal(tuple(o.shape))
    o.backward(vl.tensor(gy))
    to.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="adaptive dx")


@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=(3, 1)), dict(scale_factor=1.5),
                                dict(size=(7, 5)), dict(size=(12, 8)), dict(scale_factor=0.5)])
def test_interpolate_nearest_matches_torch(kw):
    rng = np.random.default_rng(3)
    x = vl.tensor(rng.standard_normal((2, 2, 6, 4)), requires_grad=True)
    o = C.interpolate(x, **kw)
    tx = to_torch(x)
    to = TF.interpolate(tx, mode="nearest", **kw)
    assert_close(o, to, what="nearest")
    gy = rng.standard_normal(tuple(o.shape))
    o.backward(vl.tensor(gy))
    to.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="nearest dx")


def test_gradcheck_pooling_and_upsample():
    rng = np.random.default_rng(4)
    x = vl.tensor(rng.standard_normal((2, 2, 7, 6)), requires_grad=True)
    assert gradcheck(lambda x: C.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), (x,))
    assert gradcheck(lambda x: C.avg_pool2d(x, (3, 2), stride=(2, 3), padding=(1, 1), count_include_pad=False), (x,))
    assert gradcheck(lambda x: C.adaptive_avg_pool2d(x, (3, 4)), (x,))
    assert gradcheck(lambda x: C.interpolate(x, scale_factor=2), (x,))
    assert gradcheck(lambda x: C.interpolate(x, size=(5, 9)), (x,))
    # second derivatives: the backwards are linear in the cotangent and recorded as ops
    assert gradgradcheck(lambda x: C.max_pool2d(x, 2, stride=1) ** 2, (x,))
    assert gradgradcheck(lambda x: C.avg_pool2d(x, 3, stride=2, padding=1) ** 2, (x,))
    assert gradgradcheck(lambda x: C.interpolate(x, scale_factor=2) ** 2, (x,))


def test_pooling_has_no_parameters_and_halves_the_map():
    """Seed 003 §5.2.4: a 2x2 window with stride 2 gives (h/2) x (w/2), with 0 learnable parameters."""
    x = vl.randn(3, 4, 10, 8)
    assert tuple(C.max_pool2d(x, 2).shape) == (3, 4, 5, 4)
    assert tuple(C.avg_pool2d(x, 2).shape) == (3, 4, 5, 4)
    # local invariance: changing a non-maximal entry leaves the max-pooled output unchanged
    a = np.zeros((1, 1, 2, 2), dtype=np.float32)
    a[0, 0, 0, 0] = 5.0
    b = a.copy()
    b[0, 0, 1, 1] = 1.0
    assert C.max_pool2d(vl.tensor(a), 2).item() == C.max_pool2d(vl.tensor(b), 2).item() == 5.0


@pytest.mark.parametrize("call,match", [
    (lambda x: C.max_pool2d(x, 2, padding=2), "at most half of kernel_size"),
    (lambda x: C.max_pool2d(x, 0), "kernel_size must be >= 1"),
    (lambda x: C.avg_pool2d(x, 9), "too small for kernel_size"),
    (lambda x: C.avg_pool2d(x, 2, divisor_override=0), "divisor_override"),
    (lambda x: C.interpolate(x, scale_factor=2, mode="bilinear"), "only mode='nearest'"),
    (lambda x: C.interpolate(x), "exactly one of size and scale_factor"),
    (lambda x: C.adaptive_avg_pool2d(x, (1, 2, 3)), "output_size"),
])
def test_pool_errors(call, match):
    with pytest.raises((ValueError, RuntimeError, NotImplementedError), match=match):
        call(vl.randn(1, 2, 5, 5))
