"""The Tensor API: construction, dtypes and promotion, factories and generators, repr,
conversion, and the non-differentiable ops (comparisons, argmax, one_hot) against PyTorch."""
import numpy as np
import pytest
import torch

import varlens as vl
from conftest import assert_close


def test_tensor_basics():
    x = vl.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3) and x.ndim == 2 and x.dtype == vl.float32 and x.numel() == 6
    assert x.size(1) == 3 and len(x) == 2 and x.dim() == 2
    assert isinstance(x.numpy(), np.ndarray)
    assert vl.tensor(3.5).item() == 3.5
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        x.item()
    d = x.detach()
    assert d.numpy() is x.numpy()  # detach shares the array
    assert not x.requires_grad
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
    with pytest.raises(RuntimeError, match="detach"):
        x.numpy()
    assert x.grad is None


def test_tensor_copies_its_input():
    a = np.ones(3, dtype=np.float64)
    x = vl.tensor(a)
    a[0] = 5
    assert x.numpy()[0] == 1.0 and x.dtype == vl.float64
    y = vl.from_numpy(a)
    assert y.numpy() is a or np.shares_memory(y.numpy(), a)


@pytest.mark.parametrize("data,dtype", [([1.0, 2.0], "float32"), ([1, 2], "int64"), ([True], "bool"),
                                        (2.5, "float32"), (3, "int64")])
def test_default_dtypes_match_torch(data, dtype):
    assert vl.tensor(data).dtype == np.dtype(dtype)
    assert str(torch.tensor(data).dtype) == f"torch.{dtype}"


def _t(a):
    return vl.tensor(a) if not isinstance(a, (int, float)) else a


def _tt(a):
    return torch.tensor(a) if not isinstance(a, (int, float)) else a


PROMO = [
    (np.array([1, 2]), 2.5), (np.array([1, 2]), np.array([3, 4])),
    (np.array([1.0, 2.0], np.float32), np.array([3, 4])),
    (np.array([1.0, 2.0], np.float32), np.array(2.0)),
    (np.array([1.0, 2.0], np.float32), np.array([2.0, 1.0])),
    (np.array([True, False]), 1.5), (np.array([True, False]), 3),
    (np.array([1, 2], np.int32), np.array([1, 2])),
    (np.array([1.0, 2.0], np.float32), np.array([True, False])),
    (np.array(2), np.array([1.5, 2.5], np.float32)),
]


@pytest.mark.parametrize("case", range(len(PROMO)))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "maximum"])
def test_binary_dtype_promotion_matches_torch(case, op):
    a, b = PROMO[case]
    if op == "maximum" and isinstance(b, (int, float)):
        return  # torch.maximum takes tensors only
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "truediv": lambda x, y: x / y}.get(op)
    if op == "sub" and (a.dtype == bool or getattr(b, "dtype", None) == bool):
        return  # torch refuses bool subtraction
    if op == "maximum":
        r, rt = vl.maximum(_t(a), _t(b)), torch.maximum(_tt(a), _tt(b))
    else:
        r, rt = f(_t(a), _t(b)), f(_tt(a), _tt(b))
    assert str(rt.dtype) == f"torch.{r.dtype}", f"{a.dtype} {op} {b!r}"
    np.testing.assert_allclose(r.numpy(), rt.numpy(), rtol=1e-6)
    if not isinstance(b, (int, float)):  # reflected order
        r2 = f(_t(b), _t(a)) if op != "maximum" else vl.maximum(_t(b), _t(a))
        rt2 = f(_tt(b), _tt(a)) if op != "maximum" else torch.maximum(_tt(b), _tt(a))
        assert str(rt2.dtype) == f"torch.{r2.dtype}"


def test_numpy_scalars_are_weak_like_python_numbers():
    x = vl.ones(2)
    assert (x * np.float64(2.0)).dtype == vl.float32
    assert (np.float64(2.0) * x).dtype == vl.float32
    assert isinstance(np.ones(2) * x, vl.Tensor)


def test_gradient_flows_back_in_the_input_dtype():
    x = vl.ones(2, requires_grad=True)  # float32
    y = vl.ones(2, dtype=vl.float64, requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.dtype == vl.float32 and y.grad.dtype == vl.float64
    z = vl.ones(3, requires_grad=True)
    (z * vl.tensor([1, 2, 3])).sum().backward()
    assert z.grad.dtype == vl.float32
    np.testing.assert_allclose(z.grad.numpy(), [1, 2, 3])


def test_factories():
    assert vl.zeros(2, 3).shape == (2, 3) and vl.zeros((2, 3)).dtype == vl.float32
    assert float(vl.ones([4]).sum()) == 4.0
    f = vl.full((2, 2), 7)
    assert f.dtype == vl.int64 and int(f[0, 0]) == 7
    assert vl.full((2,), 0.5).dtype == vl.float32
    assert vl.arange(5).dtype == vl.int64 and vl.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert vl.arange(0, 1, 0.25).dtype == vl.float32 and len(vl.arange(0, 1, 0.25)) == 4
    np.testing.assert_array_equal(vl.eye(3).numpy(), np.eye(3))
    x = vl.randn(3, 2, dtype=vl.float64)
    for like in (vl.zeros_like, vl.ones_like, vl.randn_like, vl.rand_like):
        y = like(x)
        assert y.shape == x.shape and y.dtype == vl.float64
    assert vl.full_like(x, 2.0).numpy().sum() == 12.0
    r = vl.rand(1000)
    assert 0 <= float(r.min()) and float(r.max()) < 1
    z = vl.zeros(2, requires_grad=True)
    assert z.requires_grad
    with pytest.raises(RuntimeError, match="non-negative"):
        vl.zeros(-1)
    with pytest.raises(TypeError, match="integers"):
        vl.zeros(2.5)


def test_randn_statistics():
    x = vl.randn(20000, generator=vl.Generator().manual_seed(5)).numpy()
    assert abs(x.mean()) < 0.03 and abs(x.std() - 1) < 0.03


def test_manual_seed_and_generators_reproduce():
    vl.manual_seed(123)
    a = vl.randn(5).numpy().copy()
    b = vl.rand(3).numpy().copy()
    vl.manual_seed(123)
    np.testing.assert_array_equal(vl.randn(5).numpy(), a)
    np.testing.assert_array_equal(vl.rand(3).numpy(), b)
    g1, g2 = vl.Generator().manual_seed(7), vl.Generator().manual_seed(7)
    vl.manual_seed(0)
    x1 = vl.randn(4, generator=g1).numpy()
    vl.randn(10)  # the global stream does not disturb explicit generators
    x2 = vl.randn(4, generator=g2).numpy()
    np.testing.assert_array_equal(x1, x2)
    assert not np.array_equal(vl.randn(4, generator=g1).numpy(), x1)
    state = g1.get_state()
    y1 = vl.randint(0, 10, (6,), generator=g1).numpy()
    g1.set_state(state)
    np.testing.assert_array_equal(vl.randint(0, 10, (6,), generator=g1).numpy(), y1)
    with pytest.raises(TypeError, match="seed must be an int"):
        vl.Generator().manual_seed(1.5)


def test_repr_is_readable():
    assert repr(vl.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(vl.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(vl.tensor([1.0], dtype=vl.float64)) == "tensor([1.], dtype=varlens.float64)"
    assert repr(vl.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(vl.tensor([1.0], requires_grad=True) * 2) == "tensor([2.], grad_fn=<MulBackward0>)"
    assert "size=(0, 3)" in repr(vl.zeros(0, 3))
    for dt in ("int64", "bool", "int32"):  # an empty tensor names its non-default dtype, as torch
        assert repr(vl.zeros(0, dtype=getattr(vl, dt))) == \
            repr(torch.zeros(0, dtype=getattr(torch, dt))).replace("torch.", "varlens.")
    assert repr(vl.zeros(2).shape) == "varlens.Size([2])"


def test_to_and_casts():
    x = vl.tensor([1.5, -2.5])
    assert x.double().dtype == vl.float64 and x.long().dtype == vl.int64
    assert x.to(vl.float64).dtype == vl.float64 and x.to("cpu") is x
    assert x.to("float64").dtype == vl.float64
    with pytest.raises(RuntimeError, match="cuda"):
        x.to("cuda")


def test_setitem_without_grad():
    x = vl.zeros(3, 2)
    x[0] = 1.0
    x[1:, 1] = vl.tensor([5.0, 6.0])
    x[vl.tensor([2])] += 1
    np.testing.assert_array_equal(x.numpy(), [[1, 1], [0, 5], [1, 7]])


def test_setitem_records_gradient_of_value():
    v = vl.tensor([2.0, 3.0], requires_grad=True)
    buf = vl.zeros(4)
    buf[1:3] = v
    (buf * vl.tensor([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [10.0, 100.0])


def test_comparisons_argmax_one_hot_match_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    va, vb, ta, tb = vl.tensor(a), vl.tensor(b), torch.tensor(a), torch.tensor(b)
    for f in (lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x < y, lambda x, y: x <= y,
              lambda x, y: x == y, lambda x, y: x != y, lambda x, y: x > 0.1):
        assert_close(f(va, vb), f(ta, tb))
    for d in (None, 0, 1, -1):
        assert_close(va.argmax(d), ta.argmax(d) if d is not None else ta.argmax())
        assert_close(va.argmin(d), ta.argmin(d) if d is not None else ta.argmin())
    assert_close(va.argmax(1, keepdim=True), ta.argmax(1, keepdim=True))
    idx = np.array([0, 2, 1, 2])
    assert_close(vl.one_hot(vl.tensor(idx), 4), torch.nn.functional.one_hot(torch.tensor(idx), 4))
    assert_close(vl.one_hot(vl.tensor(idx)), torch.nn.functional.one_hot(torch.tensor(idx)))
    with pytest.raises(RuntimeError, match="one_hot.*integer"):
        vl.one_hot(vl.tensor([0.5]), 2)
    with pytest.raises(RuntimeError, match=r"one_hot: class values must be in \[0, 2\)"):
        vl.one_hot(vl.tensor([3]), 2)


def test_max_with_dim_returns_values_and_indices():
    x = vl.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    v, i = x.max(1)
    assert v.tolist() == [5.0, 7.0] and i.tolist() == [1, 0]
    v, i = vl.min(x, 0, keepdim=True)
    assert v.shape == (1, 3) and i.tolist() == [[0, 1, 0]]


def test_split_chunk_shapes_match_torch():
    x, xt = vl.zeros(7, 2), torch.zeros(7, 2)
    assert [tuple(p.shape) for p in x.split(3)] == [tuple(p.shape) for p in xt.split(3)]
    assert [tuple(p.shape) for p in x.chunk(3)] == [tuple(p.shape) for p in xt.chunk(3)]
    assert [tuple(p.shape) for p in x.split([2, 5])] == [(2, 2), (5, 2)]
    with pytest.raises(RuntimeError, match="sum to 6.*size 7"):
        x.split([2, 4])


def test_bad_index_and_dim_errors():
    x = vl.zeros(2, 3)
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        x[5]
    with pytest.raises(IndexError, match="sum: dim 2 is out of range"):
        x.sum(2)
    with pytest.raises(RuntimeError, match="gather: index must be an int64"):
        vl.gather(x, 0, vl.zeros(2, 3))
    with pytest.raises(RuntimeError, match="masked_fill: mask must be a bool"):
        x.masked_fill(vl.zeros(2, 3), 1.0)
    with pytest.raises(RuntimeError, match="where: condition must be a bool"):
        vl.where(vl.zeros(2, 3), x, x)


def test_copy_into_buffer_keeps_dtype_and_gradient():
    w = vl.tensor([1.0, 2.0], dtype=vl.float64, requires_grad=True)
    buf = vl.zeros(2)  # float32
    buf.copy_(w * 3)
    assert buf.dtype == vl.float32 and buf.requires_grad
    buf.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 3.0])
    plain = vl.zeros(2, 2)
    plain.copy_(vl.tensor([1.0, 2.0]))  # broadcast, no graph
    np.testing.assert_array_equal(plain.numpy(), [[1, 2], [1, 2]])
    with pytest.raises(RuntimeError, match=r"copy_: source of shape \(3,\)"):
        plain.copy_(vl.ones(3))


def test_tensor_from_list_of_tensors_keeps_torch_dtypes():
    for parts in ([1.0, 2.0], [[1, 2], [3, 4]]):
        v = vl.tensor([vl.tensor(p) for p in parts])
        t = torch.tensor([torch.tensor(p) for p in parts]) if not isinstance(parts[0], list) else \
            torch.stack([torch.tensor(p) for p in parts])
        assert_close(v, t)
        assert str(t.dtype) == f"torch.{v.dtype}"
    assert vl.tensor([vl.tensor(1.0, dtype=vl.float64)]).dtype == vl.float64
