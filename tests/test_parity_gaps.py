"""PyTorch parity for API gaps closed together: set/get_default_device, as_strided, scatter's
older reduce argument, nanquantile, narrow_copy, the top-level loss aliases (values, float64
gradients against torch, finite-difference gradcheck, and bad inputs naming the argument)."""
import numpy as np
import pytest

import varlens as V
from varlens.autograd import gradcheck

torch = pytest.importorskip("torch")


def _pair(a, rg=True):
    return V.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg)


def test_default_device():
    assert str(V.get_default_device()) == str(torch.get_default_device()) == "cpu"
    V.set_default_device("cpu")
    V.set_default_device(V.device("cpu"))
    V.set_default_device(None)
    assert str(V.get_default_device()) == "cpu"
    if not V.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            V.set_default_device("cuda")
    with pytest.raises(TypeError, match="device"):
        V.set_default_device(3)


@pytest.mark.parametrize("case", [
    ((3, 4), None, (2, 2), (1, 2), 1),
    ((3, 4), "t", (3, 3), (1, 1), None),          # over the transposed tensor's storage
    ((3, 4), "slice", (2,), (1,), None),          # a slice starts at its own offset
    ((6,), None, (4, 3), (1, 1), 0),              # overlapping windows: gradients accumulate
    ((2, 3), None, (0, 3), (3, 1), 0),            # empty
])
def test_as_strided_values_and_grads(case):
    shape, how, size, stride, off = case
    a = np.random.default_rng(0).standard_normal(shape)
    x, tx = _pair(a)

    def view(t):
        return t.t() if how == "t" else (t[1:] if how == "slice" else t)
    if how is None:   # a root tensor: as_strided of it reads exactly its elements
        y, ty = x.as_strided(size, stride, off), tx.as_strided(size, stride, off)
    else:
        y, ty = view(x).as_strided(size, stride), view(tx).as_strided(size, stride)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    w = np.random.default_rng(1).standard_normal(size)
    (y * V.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    if how is None and 0 not in size:
        assert gradcheck(lambda t: V.as_strided(t, size, stride, off), (V.tensor(a, requires_grad=True),))


def test_as_strided_bad_inputs():
    x = V.arange(12.).reshape(3, 4)
    with pytest.raises(RuntimeError, match="setStorage: sizes .* out of bounds"):
        x.as_strided((5, 5), (4, 1))
    with pytest.raises(RuntimeError, match="setStorage"):
        x.as_strided((2,), (1,), 11)
    with pytest.raises(RuntimeError, match="stride"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(RuntimeError, match="stride"):
        x.as_strided((2,), (-1,))
    with pytest.raises(TypeError, match="input"):
        V.as_strided([1.0, 2.0], (1,), (1,))
    with pytest.raises(RuntimeError, match="read-only"):
        x.as_strided((2,), (1,)).add_(1)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("scalar", [False, True])
def test_scatter_reduce_argument(reduce, scalar):
    a = np.arange(1.0, 7.0).reshape(2, 3)
    s = np.array([[10.0, 20.0, 30.0, 40.0]])
    idx = np.array([[1, 0, 1]])
    x, tx = V.tensor(a), torch.tensor(a)
    src, tsrc = (2.5, 2.5) if scalar else (V.tensor(s), torch.tensor(s))
    with _nowarn():   # torch warns that the reduce argument is deprecated
        r = tx.scatter(0, torch.tensor(idx), tsrc, reduce=reduce)
    np.testing.assert_allclose(x.scatter(0, V.tensor(idx), src, reduce=reduce).numpy(), r.numpy())
    x.scatter_(0, V.tensor(idx), src, reduce=reduce)
    tx.scatter_(0, torch.tensor(idx), tsrc, reduce=reduce)
    np.testing.assert_allclose(x.numpy(), tx.numpy())
    with pytest.raises(RuntimeError, match="reduce"):
        x.scatter(0, V.tensor(idx), src, reduce="mean")


def test_scatter_add_reduce_gradcheck():
    idx = V.tensor([[1, 0, 1], [0, 0, 1]])
    x = V.tensor(np.random.default_rng(2).standard_normal((2, 3)), requires_grad=True)
    s = V.tensor(np.random.default_rng(3).standard_normal((2, 3)), requires_grad=True)
    assert gradcheck(lambda a, b: V.scatter(a, 0, idx, b, reduce="add"), (x, s))


class _nowarn:
    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *a):
        self._w.__exit__(*a)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "nearest", "midpoint"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (0, True), (-1, True)])
def test_nanquantile(interpolation, dim, keepdim):
    a = np.random.default_rng(4).standard_normal((4, 7))
    a[0, [1, 3]] = np.nan
    a[2, :] = np.nan
    a[3, 5] = np.nan
    for q in (0.37, [0.0, 0.25, 0.5, 1.0]):
        x, tx = _pair(a)
        tq = torch.tensor(q, dtype=torch.float64) if isinstance(q, list) else q
        vq = V.tensor(q, dtype=V.float64) if isinstance(q, list) else q
        kw = {} if dim is None else {"dim": dim}
        y = V.nanquantile(x, vq, keepdim=keepdim, interpolation=interpolation, **kw)
        ty = torch.nanquantile(tx, tq, keepdim=keepdim, interpolation=interpolation, **kw)
        assert tuple(y.shape) == tuple(ty.shape)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), equal_nan=True)
        w = np.random.default_rng(5).standard_normal(tuple(ty.shape))
        (V.nan_to_num(y) * V.tensor(w)).sum().backward()
        (torch.nan_to_num(ty) * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(V.tensor(a).nanquantile(0.5, 1).numpy(), torch.tensor(a).nanquantile(0.5, 1).numpy(),
                               equal_nan=True)


def test_nanquantile_gradcheck_and_bad_inputs():
    a = np.random.default_rng(6).standard_normal((3, 5))
    a[1, 2] = np.nan
    x = V.tensor(a, requires_grad=True)
    assert gradcheck(lambda t: V.nan_to_num(V.nanquantile(t, 0.3, dim=1)), (x,))
    with pytest.raises(ValueError, match="q"):
        V.nanquantile(x, 1.5)
    with pytest.raises(ValueError, match="interpolation"):
        V.nanquantile(x, 0.5, interpolation="cubic")
    with pytest.raises(TypeError, match="input"):
        V.nanquantile([1.0, 2.0], 0.5)


def test_narrow_copy():
    a = np.random.default_rng(7).standard_normal((3, 5))
    x, tx = _pair(a)
    y, ty = V.narrow_copy(x, 1, 1, 3), torch.narrow_copy(tx, 1, 1, 3)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    assert y._data.flags.c_contiguous and y._data.base is None or y._data.flags.owndata
    np.testing.assert_allclose(x.narrow_copy(0, 1, 2).detach().numpy(), tx.narrow_copy(0, 1, 2).detach().numpy())
    assert gradcheck(lambda t: V.narrow_copy(t, 1, 1, 3), (V.tensor(a, requires_grad=True),))
    with pytest.raises(TypeError, match="input"):
        V.narrow_copy([1.0], 0, 0, 1)
    with pytest.raises((RuntimeError, IndexError)):
        V.narrow_copy(x, 1, 4, 3)


def test_top_level_losses():
    """torch.NAME_loss: torch's native signatures (reduction an int code, default 0: none)."""
    r = np.random.default_rng(8)
    a, b = r.standard_normal((4, 3)), r.standard_normal((4, 3))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    cases = [("cosine_embedding_loss", (a, b, y), ()), ("margin_ranking_loss", (a[:, 0], b[:, 0], y), ()),
             ("hinge_embedding_loss", (a, np.sign(b)), ()), ("triplet_margin_loss", (a, b, a[::-1].copy()), ()),
             ("poisson_nll_loss", (a, np.abs(b)), (True, False, 1e-8))]
    for name, args, extra in cases:
        vf, tf = getattr(V, name), getattr(torch, name)
        for red in ((None, 0, 1, 2) if name != "poisson_nll_loss" else (0, 1, 2)):
            more = extra if red is None else extra + ((red,) if name == "poisson_nll_loss" else ())
            kw = {} if red is None or name == "poisson_nll_loss" else {"reduction": red}
            vs = [V.tensor(t, requires_grad=True) for t in args]
            ts = [torch.tensor(t, requires_grad=True) for t in args]
            v, t = vf(*vs, *more, **kw), tf(*ts, *more, **kw)
            assert tuple(v.shape) == tuple(t.shape), (name, red)
            np.testing.assert_allclose(v.detach().numpy(), t.detach().numpy(), rtol=1e-10)
            v.sum().backward()
            t.sum().backward()
            np.testing.assert_allclose(vs[0].grad.numpy(), ts[0].grad.numpy(), rtol=1e-10, atol=1e-12)
        with pytest.raises(TypeError, match="reduction"):
            vf(*[V.tensor(t) for t in args], *extra, **({"reduction": "mean"}))
    with pytest.raises(TypeError, match="input1"):
        V.cosine_embedding_loss([1.0], V.ones(1), V.ones(1))
    x = V.tensor(a, requires_grad=True)
    assert gradcheck(lambda t: V.cosine_embedding_loss(t, V.tensor(b), V.tensor(y), 0.1, 1), (x,))


@pytest.mark.parametrize("kw", [{}, {"spacing": 2.0}, {"edge_order": 2}, {"dim": 0}, {"dim": [1]},
                                {"spacing": [0.5, 3.0]}, {"spacing": [2.0], "dim": 1, "edge_order": 2},
                                "coords", "coords2"])
def test_gradient(kw):
    a = np.random.default_rng(9).standard_normal((4, 5))
    x, tx = _pair(a)
    if kw in ("coords", "coords2"):
        c0, c1 = np.array([0.0, 0.5, 2.0, 2.2]), np.array([-1.0, 0.0, 0.3, 1.0, 3.0])
        kw = {"spacing": (V.tensor(c0), V.tensor(c1)), "edge_order": 1 if kw == "coords" else 2}
        tkw = dict(kw, spacing=(torch.tensor(c0), torch.tensor(c1)))
    else:
        tkw = kw
    v, t = V.gradient(x, **kw), torch.gradient(tx, **tkw)
    assert isinstance(v, tuple) and len(v) == len(t)
    w = np.random.default_rng(10).standard_normal(a.shape)
    for vi, ti in zip(v, t):
        np.testing.assert_allclose(vi.detach().numpy(), ti.detach().numpy(), rtol=1e-12, atol=1e-12)
    sum((vi * V.tensor(w)).sum() for vi in v).backward()
    sum((ti * torch.tensor(w)).sum() for ti in t).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda z: V.gradient(z, **kw), (V.tensor(a, requires_grad=True),))


def test_gradient_ints_and_bad_inputs():
    v, t = V.gradient(V.tensor([1, 4, 9, 16]), spacing=2), torch.gradient(torch.tensor([1, 4, 9, 16]), spacing=2)
    assert v[0].dtype == V.float32 and t[0].dtype == torch.float32
    np.testing.assert_allclose(v[0].numpy(), t[0].numpy())
    x = V.ones(3, 3)
    with pytest.raises(RuntimeError, match="edge_order"):
        V.gradient(x, edge_order=3)
    with pytest.raises(RuntimeError, match="edge_order"):
        V.gradient(V.ones(2), edge_order=2)
    with pytest.raises(RuntimeError, match="spacing"):
        V.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="spacing"):
        V.gradient(x, spacing=(V.tensor([0.0, 1.0]), V.tensor([0.0, 1.0, 2.0])))
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        V.gradient(x, dim=2)
    with pytest.raises(TypeError, match="input"):
        V.gradient([1.0, 2.0, 3.0])


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_gradient(include_self):
    """d prod / d e = the product of the group's other members, zeros included (one zero: the
    zero gets the others' product; two or more: everything 0)."""
    a = np.array([[1.0, 2.0, 0.0, 4.0, 1.5], [0.0, 3.0, 5.0, 2.0, -1.0]])
    s = np.array([[2.0, 0.0, 3.0, 1.0], [0.0, 0.0, 2.0, 5.0]])
    idx = np.array([[0, 1, 1, 3], [2, 2, 0, 3]])
    x, tx = _pair(a)
    y, ty = _pair(s)
    r = V.scatter_reduce(x, 1, V.tensor(idx), y, "prod", include_self=include_self)
    tr = torch.scatter_reduce(tx, 1, torch.tensor(idx), ty, "prod", include_self=include_self)
    np.testing.assert_allclose(r.detach().numpy(), tr.detach().numpy())
    w = np.random.default_rng(11).standard_normal(a.shape)
    (r * V.tensor(w)).sum().backward()
    (tr * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    r2 = np.random.default_rng(12)
    xa, sa = r2.uniform(0.5, 2, (3, 4)), r2.uniform(-2, 2, (3, 5))
    ix = V.tensor(r2.integers(0, 4, (3, 5)))
    assert gradcheck(lambda p, q: V.scatter_reduce(p, 1, ix, q, "prod", include_self=include_self),
                     (V.tensor(xa, requires_grad=True), V.tensor(sa, requires_grad=True)))
