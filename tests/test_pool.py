"""Pooling and nearest upsampling (varlens.ops.nn.conv): PyTorch parity of values and gradients
over random kernels/strides/paddings/dilations/ceil_mode (incl. windows that do not tile the
input), float64 finite-difference checks, ties and NaN, and errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import varlens as vl
from varlens.autograd import gradcheck, gradgradcheck

from conftest import assert_close, to_torch
from varlens.ops.nn import pool as _nn_pool_mod
from varlens.ops.nn import upsample as _nn_upsample_mod


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
    out, idx = _nn_pool_mod.max_pool2d(x, c["k"], return_indices=True, **kw)
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
    out = _nn_pool_mod.avg_pool2d(x, c["k"], **kw)
    tx = to_torch(x)
    tout = TF.avg_pool2d(tx, c["k"], **kw)
    assert_close(out, tout, what="avg_pool2d")
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="avg_pool2d dx")


def test_max_pool_ties_and_nan_follow_torch():
    x = vl.tensor(np.array([[[[1.0, 1.0, 0.0], [1.0, 0.0, 2.0], [2.0, 2.0, 2.0]]]]), requires_grad=True)
    out = _nn_pool_mod.max_pool2d(x, 2, stride=1)
    out.sum().backward()
    tx = to_torch(x)
    TF.max_pool2d(tx, 2, stride=1).sum().backward()
    assert_close(x.grad, tx.grad, what="ties go to the first maximum")
    xn = np.arange(16.0).reshape(1, 1, 4, 4)
    xn[0, 0, 0, 1] = np.nan
    r = _nn_pool_mod.max_pool2d(vl.tensor(xn), 2)._data
    assert np.isnan(r[0, 0, 0, 0]) and not np.isnan(r[0, 0, 1, 1])


@pytest.mark.parametrize("k,H,W", [(2, 8, 8), (2, 7, 9), (3, 9, 7), ((2, 3), 6, 10), (1, 4, 5), ((3, 2), 11, 5)])
@pytest.mark.parametrize("values", ["random", "ties"])
def test_max_pool2d_tiled_fast_path_matches_torch(k, H, W, values):
    """kernel == stride without padding (the usual 2x2 pool, also windows that leave rows or
    columns over): values, indices and the gradient equal PyTorch's exactly, including windows
    with tied maxima (small integers: the gradient goes to the first maximum only)."""
    rng = np.random.default_rng(7)
    shape = (3, 2, H, W)
    a = rng.integers(-2, 3, size=shape).astype(np.float64) if values == "ties" else rng.standard_normal(shape)
    x = vl.tensor(a, requires_grad=True)
    out, idx = _nn_pool_mod.max_pool2d(x, k, return_indices=True)
    assert out._node.tiled
    tx = to_torch(x)
    tout, tidx = TF.max_pool2d(tx, k, return_indices=True)
    assert np.array_equal(out._data, tout.detach().numpy())
    assert np.array_equal(idx._data, tidx.numpy())
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert np.array_equal(x.grad._data, tx.grad.numpy())
    if values == "ties":  # every window passes its cotangent to exactly one input
        assert np.count_nonzero(x.grad._data) == np.count_nonzero(gy)


@pytest.mark.parametrize("k,s", [(2, 2), (3, 2)], ids=["tiled", "overlapping"])
def test_max_pool2d_nan_gradient_goes_where_torch_sends_it(k, s):
    """A window with NaN outputs NaN; PyTorch's CPU kernel routes its gradient to the window's
    last NaN (it takes an entry that is greater than the best so far or is NaN)."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 2, 8, 8))
    a[rng.random(a.shape) < 0.15] = np.nan
    a[0, 0, :2, :2] = [[np.nan, 1.0], [np.nan, 5.0]]
    x = vl.tensor(a, requires_grad=True)
    out, idx = _nn_pool_mod.max_pool2d(x, k, stride=s, return_indices=True)
    tx = to_torch(x)
    tout, tidx = TF.max_pool2d(tx, k, stride=s, return_indices=True)
    assert np.array_equal(np.isnan(out._data), np.isnan(tout.detach().numpy()))
    assert np.array_equal(idx._data, tidx.numpy())
    gy = rng.standard_normal(tuple(out.shape))
    out.backward(vl.tensor(gy))
    tout.backward(torch.from_numpy(gy))
    assert_close(x.grad, tx.grad, what="NaN routing")  # overlapping windows may add in another order


def test_max_pool2d_tiled_gradcheck_double_backward_and_integers():
    rng = np.random.default_rng(9)
    x = vl.tensor(rng.standard_normal((2, 3, 6, 7)), requires_grad=True)
    assert gradcheck(lambda x: _nn_pool_mod.max_pool2d(x, 2), (x,))
    assert gradgradcheck(lambda x: _nn_pool_mod.max_pool2d(x, (3, 2)) ** 2, (x,))
    xt = vl.tensor(rng.standard_normal((2, 3, 6, 7)), requires_grad=True)  # create_graph through the fast path
    (g,) = vl.autograd.grad(_nn_pool_mod.max_pool2d(xt, 2).pow(2).sum(), [xt], create_graph=True)
    txt = to_torch(xt)
    (tg,) = torch.autograd.grad(TF.max_pool2d(txt, 2).pow(2).sum(), [txt], create_graph=True)
    assert_close(g, tg, what="first derivative with create_graph")
    g.sum().backward()
    tg.sum().backward()
    assert_close(xt.grad, txt.grad, what="second derivative")
    xi = rng.integers(-50, 50, size=(2, 2, 6, 6))
    ref = xi.reshape(2, 2, 3, 2, 3, 2).max(axis=(3, 5))
    assert np.array_equal(_nn_pool_mod.max_pool2d(vl.tensor(xi), 2)._data, ref)


@pytest.mark.parametrize("H,W,out", [(8, 8, 1), (7, 9, (3, 4)), (5, 6, (5, 2)), (6, 6, (3, 3)), (7, 5, (None, 2)), (4, 4, (6, 5))])
def test_adaptive_avg_pool2d_matches_torch(H, W, out):
    rng = np.random.default_rng(2)
    x = vl.tensor(rng.standard_normal((2, 3, H, W)), requires_grad=True)
    o = _nn_pool_mod.adaptive_avg_pool2d(x, out)
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
    o = _nn_upsample_mod.interpolate(x, **kw)
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
    assert gradcheck(lambda x: _nn_pool_mod.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), (x,))
    assert gradcheck(lambda x: _nn_pool_mod.avg_pool2d(x, (3, 2), stride=(2, 3), padding=(1, 1), count_include_pad=False), (x,))
    assert gradcheck(lambda x: _nn_pool_mod.adaptive_avg_pool2d(x, (3, 4)), (x,))
    assert gradcheck(lambda x: _nn_upsample_mod.interpolate(x, scale_factor=2), (x,))
    assert gradcheck(lambda x: _nn_upsample_mod.interpolate(x, size=(5, 9)), (x,))
    # second derivatives: the backwards are linear in the cotangent and recorded as ops
    assert gradgradcheck(lambda x: _nn_pool_mod.max_pool2d(x, 2, stride=1) ** 2, (x,))
    assert gradgradcheck(lambda x: _nn_pool_mod.avg_pool2d(x, 3, stride=2, padding=1) ** 2, (x,))
    assert gradgradcheck(lambda x: _nn_upsample_mod.interpolate(x, scale_factor=2) ** 2, (x,))


def test_pooling_has_no_parameters_and_halves_the_map():
    """Seed 003 §5.2.4: a 2x2 window with stride 2 gives (h/2) x (w/2), with 0 learnable parameters."""
    x = vl.randn(3, 4, 10, 8)
    assert tuple(_nn_pool_mod.max_pool2d(x, 2).shape) == (3, 4, 5, 4)
    assert tuple(_nn_pool_mod.avg_pool2d(x, 2).shape) == (3, 4, 5, 4)
    # local invariance: changing a non-maximal entry leaves the max-pooled output unchanged
    a = np.zeros((1, 1, 2, 2), dtype=np.float32)
    a[0, 0, 0, 0] = 5.0
    b = a.copy()
    b[0, 0, 1, 1] = 1.0
    assert _nn_pool_mod.max_pool2d(vl.tensor(a), 2).item() == _nn_pool_mod.max_pool2d(vl.tensor(b), 2).item() == 5.0


@pytest.mark.parametrize("call,match", [
    (lambda x: _nn_pool_mod.max_pool2d(x, 2, padding=2), "at most half of kernel_size"),
    (lambda x: _nn_pool_mod.max_pool2d(x, 0), "kernel_size must be >= 1"),
    (lambda x: _nn_pool_mod.avg_pool2d(x, 9), "too small for kernel_size"),
    (lambda x: _nn_pool_mod.avg_pool2d(x, 2, divisor_override=0), "divisor_override"),
    (lambda x: _nn_upsample_mod.interpolate(x, scale_factor=2, mode="bilinear"), "only mode='nearest'"),
    (lambda x: _nn_upsample_mod.interpolate(x), "exactly one of size and scale_factor"),
    (lambda x: _nn_pool_mod.adaptive_avg_pool2d(x, (1, 2, 3)), "output_size"),
])
def test_pool_errors(call, match):
    with pytest.raises((ValueError, RuntimeError, NotImplementedError), match=match):
        call(vl.randn(1, 2, 5, 5))


# ---- the compiled max pool (float32 host arrays: ops/kernels/pooling.py) against PyTorch and
# against the NumPy strided-view path it replaces
def _pool_both_paths(monkeypatch, a, k, **kw):
    """(values, indices, dL/dx) of max_pool2d on float32 ``a``, compiled and NumPy paths."""
    res = []
    for numba_on in (True, False):
        if not numba_on:
            monkeypatch.setattr(_nn_pool_mod, "_numba_on", lambda: None)
        x = vl.tensor(a, requires_grad=True)
        out, idx = _nn_pool_mod.max_pool2d(x, k, return_indices=True, **kw)
        assert (out._node.kidx is not None) == numba_on
        gy = np.random.default_rng(3).standard_normal(tuple(out.shape)).astype(np.float32)
        out.backward(vl.tensor(gy))
        res.append((out._data, idx._data, x.grad._data, gy))
    monkeypatch.undo()
    return res


@pytest.mark.parametrize("c", _pool_cases(16, 5) + [dict(k=(2, 2), s=(2, 2), p=(0, 0), d=(1, 1), H=H, W=W, ceil=cm)
                                                    for H, W, cm in [(8, 8, False), (7, 9, False), (7, 9, True)]],
                         ids=lambda c: f"k{c['k']}s{c['s']}p{c['p']}d{c['d']}c{int(c['ceil'])}H{c['H']}W{c['W']}")
@pytest.mark.parametrize("values", ["random", "ties", "nan"])
def test_max_pool2d_compiled_float32_matches_torch_and_numpy_path(monkeypatch, c, values):
    """The compiled kernels give PyTorch's maxima, indices and gradient exactly in float32
    (ties to the first maximum, NaN windows to their last NaN), and the NumPy path's."""
    rng = np.random.default_rng(11)
    shape = (2, 3, c["H"], c["W"])
    if values == "ties":
        a = rng.integers(-2, 3, size=shape).astype(np.float32)
    else:
        a = rng.standard_normal(shape).astype(np.float32)
        if values == "nan":
            a[rng.random(shape) < 0.1] = np.nan
    kw = dict(stride=c["s"], padding=c["p"], dilation=c["d"], ceil_mode=c["ceil"])
    (o1, i1, g1, gy), (o0, i0, g0, _) = _pool_both_paths(monkeypatch, a, c["k"], **kw)
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    tout, tidx = TF.max_pool2d(tx, c["k"], return_indices=True, **kw)
    tout.backward(torch.from_numpy(gy))
    for o, i in ((o1, i1), (o0, i0)):
        np.testing.assert_array_equal(o, tout.detach().numpy())
        np.testing.assert_array_equal(i, tidx.numpy())
    overlapping = any(ki * di > si for ki, si, di in zip(c["k"], c["s"], c["d"]))
    if overlapping:  # shared winners add their cotangents, in another order than PyTorch's
        np.testing.assert_allclose(g1, tx.grad.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g1, g0, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(g1, tx.grad.numpy())
        np.testing.assert_array_equal(g1, g0)


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1)])
def test_max_pool2d_compiled_double_backward_matches_torch(k, s, p):
    """create_graph through the compiled path: the Tensor cotangent takes the routing rebuilt
    from the kernel's winner positions."""
    rng = np.random.default_rng(12)
    xt = vl.tensor(rng.standard_normal((2, 3, 7, 8)).astype(np.float32), requires_grad=True)
    out = _nn_pool_mod.max_pool2d(xt, k, stride=s, padding=p)
    assert out._node.kidx is not None
    (g,) = vl.autograd.grad(out.pow(2).sum(), [xt], create_graph=True)
    txt = torch.from_numpy(xt._data.copy()).requires_grad_(True)
    (tg,) = torch.autograd.grad(TF.max_pool2d(txt, k, stride=s, padding=p).pow(2).sum(), [txt], create_graph=True)
    np.testing.assert_allclose(g._data, tg.detach().numpy(), rtol=1e-6)
    g.sum().backward()
    tg.sum().backward()
    np.testing.assert_allclose(xt.grad._data, txt.grad.numpy(), rtol=1e-6)
