"""Gradients of basic slices (x[a:b], split / chunk / unbind pieces): the engine writes them into
one buffer of the input's shape (core/engine.py, _slice_sum) instead of adding a zero array per
slice.  Checked against PyTorch and float64 finite differences, for leaves and graph nodes,
pieces left unused, overlapping reads, an existing .grad, retain_graph, and the device path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import varlens as vl

CASES = {
    "split_all": lambda M, x: M.cat([p * (i + 1) for i, p in enumerate(x.split(2, dim=1))], 1),
    "split_some": lambda M, x: M.cat([p * 2 for p in x.split(2, dim=1)[:2]], 1),
    "split_sizes": lambda M, x: M.cat([p.sin() for p in x.split([1, 3, 2], dim=1)], 1),
    "overlap": lambda M, x: x[:, 1:3] * x[:, 2:4],
    "unbind": lambda M, x: M.stack([p * (i + 2) for i, p in enumerate(x.unbind(1))], 1),
    "slice_and_whole": lambda M, x: M.stack(list(x.unbind(0)), 0) * x,
    "node_base": lambda M, x: (x * 3)[1:].sum(0) + (x * 3)[:2].sum(0),
    "node_base_shared": lambda M, x: (lambda y: M.cat(list(y.chunk(3, dim=-1)), -1) + y[..., :1] + y)(x.exp()),
    "ints_and_slices": lambda M, x: x[0] * x[1] + x[:, 0:1] + x[-1],
    "qkv_views": lambda M, x: (lambda q, k, v: (q.view(3, 1, 2).transpose(0, 1) + k.view(3, 1, 2).transpose(0, 1)
                                               * v.view(3, 1, 2).transpose(0, 1)).transpose(0, 1).contiguous()
                               .view(3, 2))(*x.split(2, dim=1)),
}


def _grad(M, f, a, g):
    x = M.from_numpy(a.copy()).requires_grad_()
    y = f(M, x)
    y.backward(M.from_numpy(g(tuple(y.shape))))
    return x.grad.detach().numpy().copy() if M is torch else x.grad.numpy().copy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_slice_gradient_matches_torch(name):
    a = np.random.default_rng(0).standard_normal((3, 6))
    g = lambda s: np.random.default_rng(1).standard_normal(s)   # noqa: E731
    np.testing.assert_allclose(_grad(vl, CASES[name], a, g), _grad(torch, CASES[name], a, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["split_all", "overlap", "node_base_shared", "ints_and_slices"])
def test_slice_gradient_finite_differences(name):
    x = vl.from_numpy(np.random.default_rng(2).standard_normal((3, 6))).requires_grad_()
    assert vl.autograd.gradcheck(lambda t: CASES[name](vl, t), (x,), eps=1e-6, atol=1e-6)


def test_slices_add_into_existing_grad_and_retain_graph():
    x = vl.ones(3, 6, requires_grad=True)
    q, k, v = x.split(2, 1)
    loss = (q + 2 * k + 3 * v).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    want = np.repeat(np.array([2.0, 4.0, 6.0]), 2)[None].repeat(3, 0)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_slices_of_a_leaf_with_a_hook_and_of_a_parameter():
    seen = []
    x = vl.ones(2, 4, requires_grad=True)
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    a, b = x.chunk(2, 1)
    (a * 2 + b * 5).sum().backward()
    w = vl.nn.Parameter(vl.ones(2, 4))
    a, b = w.chunk(2, 1)
    (a * 2 + b * 5).sum().backward()
    want = np.array([[2.0, 2, 5, 5]] * 2)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    np.testing.assert_array_equal(w.grad.numpy(), want)
    assert sum(s.sum() for s in seen) == want.sum()


def test_slice_gradients_on_the_device(sim_cuda):
    a = np.random.default_rng(3).standard_normal((3, 6))
    x = vl.from_numpy(a).requires_grad_()
    y = x.to("cuda")
    (CASES["node_base_shared"](vl, y) * 2).sum().backward()
    t = torch.from_numpy(a).requires_grad_()
    (CASES["node_base_shared"](torch, t) * 2).sum().backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_a_leaf_keeps_a_reshaped_fresh_gradient_but_copies_one_held_elsewhere():
    """The engine lets a leaf keep a backward's result that is a reshape of a fresh array (no
    copy) only when nothing else refers to that array."""
    from varlens.core.function import Function

    class Fresh(Function):
        def forward(self, x):
            return x.copy()

        def backward(self, g):
            return (g.reshape(-1) * 2).reshape(g.shape)

    class Kept(Fresh):
        def backward(self, g):
            self.buf = (g.reshape(-1) * 2)   # still held by the node after backward
            return self.buf.reshape(g.shape)

    for cls, shared in ((Fresh, False), (Kept, True)):
        x = vl.ones(3, 4, requires_grad=True)
        y = cls.apply(x)
        y.backward(vl.ones(3, 4))
        np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.0))
        if shared:
            y._node.buf[:] = 7.0
            np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.0))
        else:
            assert not x.grad._data.flags.owndata   # kept as it came, without a copy


@pytest.mark.parametrize("key", [(0, slice(None), [1, 3]), (slice(None), 1, [0, 2]),
                                 (1, [0, 2], slice(None), [1, 3]), (Ellipsis, 2, [0, 3]),
                                 (None, 0, slice(None), [2, 1])])
def test_ints_mixed_with_index_arrays_follow_torch(key):
    """PyTorch applies a key's integers before its index arrays (x[0, :, [1, 3]] is
    x[0][:, [1, 3]], shape (3, 2)); NumPy would move the array dims to the front."""
    a = np.random.default_rng(0).normal(size=(2, 3, 4, 5))
    t = torch.tensor(a, requires_grad=True)
    v = vl.tensor(a, requires_grad=True)
    rt, rv = t[key], v[key]
    assert tuple(rv.shape) == tuple(rt.shape)
    np.testing.assert_array_equal(rv.detach().numpy(), rt.detach().numpy())
    g = np.random.default_rng(1).normal(size=tuple(rt.shape))
    rt.backward(torch.tensor(g))
    rv.backward(vl.tensor(g))
    np.testing.assert_allclose(v.grad.numpy(), t.grad.numpy())
    assert vl.autograd.gradcheck(lambda x: x[key], (vl.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("key", [(0, slice(None), [1, 3]), (1, [0, 2], slice(None), [1, 3]),
                                 (Ellipsis, 2, [0, 3])])
def test_setitem_ints_mixed_with_index_arrays_follows_torch(key):
    """x[0, :, [1, 3]] = v takes v of PyTorch's shape (3, 2), with and without autograd."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=(2, 3, 4, 5))
    shape = tuple(torch.tensor(a)[key].shape)
    val = rng.normal(size=shape)
    t, v = torch.tensor(a), vl.tensor(a)
    t[key] = torch.tensor(val)
    v[key] = vl.tensor(val)
    np.testing.assert_array_equal(v.numpy(), t.numpy())

    def f(x, w):
        y = x * 1
        y[key] = w * 2
        return y * y
    assert vl.autograd.gradcheck(f, (vl.tensor(a, requires_grad=True), vl.tensor(val, requires_grad=True)))
