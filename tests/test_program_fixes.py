"""Focused PyTorch-parity tests for library fixes found by running the programs in
tests/programs/ (see tests/test_programs.py)."""
import numpy as np
import pytest
import torch

import varlens as vl


def _both(fn, *arrays, grad_out=None):
    """fn(lib, *tensors) on PyTorch and varlens from the same arrays: (outputs, grads) of each."""
    res = []
    for lib in (torch, vl):
        ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = fn(lib, *ts)
        g = lib.tensor(grad_out if grad_out is not None else np.ones(tuple(out.shape), np.float32))
        out.backward(g)
        res.append((out.detach().numpy(), [t.grad.numpy() if t.grad is not None else None for t in ts]))
    return res


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_minmax_with_infinite_input_and_ties(reduce, include_self):
    # a -inf (+inf) initial tensor, as a GAT edge softmax's segment max starts from: the values
    # and both gradients as PyTorch (they were NaN everywhere: a straight-through r + (e - e.detach()))
    rng = np.random.default_rng(0)
    src = rng.integers(-2, 3, (8, 3)).astype(np.float32)      # integers: ties among sharers
    idx = rng.integers(0, 4, (8, 3))
    base = rng.integers(-2, 3, (6, 3)).astype(np.float32)
    base[5] = -np.inf
    base[4] = np.inf
    g = rng.normal(size=(6, 3)).astype(np.float32)
    (ot, gt), (ov, gv) = _both(lambda lib, b, s: b.scatter_reduce(0, lib.tensor(idx), s, reduce=reduce,
                                                                    include_self=include_self),
                               base, src, grad_out=g)
    np.testing.assert_array_equal(ov, ot)
    for a, b in zip(gv, gt):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_scatter_reduce_amax_double_backward():
    x = vl.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    out = vl.full((2, 2), float("-inf")).scatter_reduce(0, vl.tensor([[0, 0], [0, 1]]), x * x, reduce="amax")
    g, = vl.autograd.grad(out[out.isfinite()].sum(), x, create_graph=True)
    gg, = vl.autograd.grad(g.sum(), x)
    xt = torch.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    ot = torch.full((2, 2), float("-inf")).scatter_reduce(0, torch.tensor([[0, 0], [0, 1]]), xt * xt, reduce="amax")
    gt, = torch.autograd.grad(ot[ot.isfinite()].sum(), xt, create_graph=True)
    ggt, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy())
    np.testing.assert_allclose(gg.numpy(), ggt.numpy())


def test_autograd_grad_runs_only_the_nodes_up_to_its_inputs():
    # an inner loop p <- p - lr * grad(loss(p), p) without create_graph (FOMAML, evaluation
    # after adaptation): each grad is w.r.t. a non-leaf made after the previous grad freed its
    # graph; PyTorch stops at the inputs, varlens went on into the freed graph and refused
    ws = []
    for lib in (torch, vl):
        lib.manual_seed(0)
        w = lib.tensor(np.arange(3, dtype=np.float32) / 3, requires_grad=True)
        x = lib.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
        p = w
        for _ in range(3):
            g, = lib.autograd.grad(((x @ p - 1) ** 2).mean(), [p])
            assert g.grad_fn is None and not g.requires_grad
            p = p - 0.1 * g
        # the chain back to w is intact: its own backward still runs
        (p.sum()).backward()
        ws.append((p.detach().numpy(), w.grad.numpy()))
    np.testing.assert_allclose(ws[1][0], ws[0][0], rtol=1e-6)
    np.testing.assert_allclose(ws[1][1], ws[0][1])


def test_autograd_grad_wrt_intermediate_leaves_earlier_graph_unfreed():
    for lib in (torch, vl):
        w = lib.ones(3, requires_grad=True)
        h = (w * 2).exp()
        loss = (h * h).sum()
        g, = lib.autograd.grad(loss, [h])            # runs only Mul(h, h)
        np.testing.assert_allclose(g.numpy(), 2 * np.exp(2) * np.ones(3), rtol=1e-6)
        h.sum().backward()                           # h's own graph was not run, nor freed
        np.testing.assert_allclose(w.grad.numpy(), 2 * np.exp(2) * np.ones(3), rtol=1e-6)


def test_torch_func_is_an_attribute_after_import_torch():
    # programs write `import torch` and then torch.func.functional_call(...)
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import varlens as torch; print(torch.func.functional_call.__name__)"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "functional_call", out.stderr


def test_torch_vmap_top_level_alias():
    x = vl.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    w = vl.tensor(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    np.testing.assert_allclose(vl.vmap(lambda r: (r * w).sum())(x).numpy(), (x @ w).numpy())
