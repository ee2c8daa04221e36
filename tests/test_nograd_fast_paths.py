"""The no_grad fast paths (issue 19: generation speed) give what the recorded paths give.

Function.apply under no_grad, topk without a graph, multinomial's one-draw path and Linear's
few-rows GEMM each take a shorter route; these tests hold each to the general route and to
PyTorch.
"""
import numpy as np
import pytest
import torch

import varlens as vl


def test_apply_under_no_grad_records_nothing_and_matches():
    x = vl.randn(3, 4, requires_grad=True)
    y = vl.exp(x) * 2.0 + x
    with vl.no_grad():
        z = vl.exp(x) * 2.0 + x
    assert z.grad_fn is None and not z.requires_grad
    np.testing.assert_array_equal(z.numpy(), y.detach().numpy())


def test_apply_under_no_grad_keeps_the_shape_error():
    with vl.no_grad(), pytest.raises(RuntimeError, match="cannot be broadcast"):
        vl.randn(2, 3) + vl.randn(4, 5)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [-1, 0])
def test_topk_without_graph_matches_recorded_and_torch(largest, dim):
    a = np.array([[1.0, 3.0, 3.0, -2.0, 0.5, 3.0, 2.0],
                  [0.0, -1.0, 4.0, 4.0, 1.0, 2.0, -3.0]], dtype=np.float32)
    k = 2 if dim == 0 else 4
    x = vl.tensor(a, requires_grad=True)
    v_rec, i_rec = vl.topk(x, k, dim=dim, largest=largest)
    assert v_rec.grad_fn is not None
    with vl.no_grad():
        v, i = vl.topk(x, k, dim=dim, largest=largest)
    assert v.grad_fn is None and i.dtype == vl.int64
    np.testing.assert_array_equal(v.numpy(), v_rec.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), i_rec.numpy())
    tv, _ = torch.topk(torch.tensor(a), k, dim=dim, largest=largest)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    with vl.no_grad(), pytest.raises(RuntimeError, match="topk: k"):
        vl.topk(x, 99, dim=dim)


def test_multinomial_one_draw_matches_the_sorted_draw():
    w = vl.tensor([[0.1, 0.0, 0.5, 0.4], [1.0, 2.0, 0.0, 3.0]])
    vl.manual_seed(7)
    one = vl.multinomial(w, 1)
    vl.manual_seed(7)
    two = vl.multinomial(w, 2)
    assert one.shape == (2, 1) and one.dtype == vl.int64
    np.testing.assert_array_equal(one.numpy()[:, 0], two.numpy()[:, 0])   # same keys, first pick
    assert (w.numpy()[np.arange(2), one.numpy()[:, 0]] > 0).all()
    for bad in ([[0.5, float("nan")]], [[0.5, -0.1]], [[0.5, float("inf")]], [[0.5, -float("inf")]]):
        with pytest.raises(RuntimeError, match="inf, nan or element < 0"):
            vl.multinomial(vl.tensor(bad), 1)
    with pytest.raises(RuntimeError, match="positive sum"):
        vl.multinomial(vl.tensor([[0.0, 0.0]]), 1)


@pytest.mark.parametrize("shape,inp,out", [((1, 5, 16), 16, 48), ((12, 32), 32, 16), ((3, 40), 40, 8)])
def test_linear_few_rows_matches_torch(shape, inp, out):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out, inp)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)
    y = vl.nn.functional.linear(vl.tensor(x), vl.tensor(w), vl.tensor(b))
    ty = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    assert y.shape == tuple(ty.shape) and y.numpy().flags.c_contiguous
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-5, atol=1e-5)
    y0 = vl.nn.functional.linear(vl.tensor(x), vl.tensor(w))
    np.testing.assert_allclose(y0.numpy(), ty.numpy() - b, rtol=1e-5, atol=1e-5)
