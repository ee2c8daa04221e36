"""PyTorch API compatibility: formatting, torch.backends/amp, keyword aliases, einsum with
'...' and repeated subscripts, legacy constructors, torch.autograd.functional, gradcheck's
return value, NumPy interop and torch-like errors for bad input.  Every check compares
with torch 2.x run on the same inputs."""
import io
import warnings

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.autograd.functional as VF
import torch.autograd.functional as TF
from varlens.autograd import gradcheck, gradgradcheck

R = np.random.default_rng(0)


def _same(a, b, tol=1e-10):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, tol)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


# ------------------------------------------------------------------ 1. __format__
@pytest.mark.parametrize("spec", ["", ".4f", ">8.2f", "e", "g", "+.1f"])
@pytest.mark.parametrize("value,dtype", [(3.5, "float32"), (1 / 3, "float32"), (2.5, "float64"), (3, "int64"),
                                         (True, "bool")])
def test_format_0d_matches_torch(spec, value, dtype):
    t, tt = vl.tensor(value, dtype=getattr(vl, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
    try:
        want = format(tt, spec)
    except (ValueError, TypeError) as e:
        with pytest.raises(type(e)):
            format(t, spec)
        return
    assert format(t, spec) == want


def test_format_non_0d():
    t = vl.tensor([1.5, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TypeError):
        f"{t:.2f}"
    loss = vl.tensor([0.123456]).sum()
    assert f"loss {loss:.4f}" == "loss 0.1235" and "{:>8.2f}".format(vl.tensor(3.0)) == "    3.00"


# ------------------------------------------------------------------ 2. backends, amp
def test_backends_switches():
    b = vl.backends
    b.cudnn.deterministic = True
    b.cudnn.benchmark = False
    assert b.cudnn.deterministic is True and b.cudnn.benchmark is False
    assert b.cudnn.is_available() is torch.backends.cudnn.is_available() is False
    assert b.cudnn.version() is None and b.mps.is_available() is False and b.mps.is_built() is False
    b.cuda.matmul.allow_tf32 = True
    assert b.cuda.matmul.allow_tf32 is True
    b.cuda.matmul.allow_tf32 = False
    assert isinstance(b.mkldnn.is_available(), bool) and isinstance(b.openmp.is_available(), bool)
    assert b.opt_einsum.enabled is False
    with b.cudnn.flags(enabled=False):
        assert b.cudnn.enabled is False
    assert b.cudnn.enabled is True
    with pytest.raises(AttributeError, match="no attribute"):
        b.cudnn.not_a_switch


def test_autocast_and_gradscaler_pass_through():
    torch.manual_seed(0)
    w0 = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    out = {}
    for lib, name in ((vl, "vl"), (torch, "t")):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", enabled=True)
        for _ in range(3):
            opt.zero_grad()
            with lib.autocast("cpu", dtype=lib.float16, enabled=False):
                loss = (lib.tensor(x) @ w).pow(2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
        out[name] = w.detach().numpy()
        assert scaler.get_scale() == 65536.0
    np.testing.assert_allclose(out["vl"], out["t"], rtol=1e-5, atol=1e-6)

    @vl.autocast("cuda")
    def f(a):
        return a * 2
    assert f(vl.ones(2)).tolist() == [2.0, 2.0]
    with vl.amp.autocast("cpu"):
        assert vl.ones(2).dtype == vl.float32
    with pytest.raises(ValueError, match="device_type"):
        vl.autocast("gpu0")


def test_gradscaler_skips_step_on_inf_and_backs_off():
    w = vl.tensor([1.0], requires_grad=True)
    opt = vl.optim.SGD([w], lr=1.0)
    s = vl.amp.GradScaler("cpu", init_scale=8.0)
    (w * float("inf")).sum().backward()
    s.step(opt)
    s.update()
    assert w.item() == 1.0 and s.get_scale() == 4.0


def test_inference_mode_flag_and_top_level_dropout():
    assert vl.is_inference_mode_enabled() is False
    with vl.inference_mode():
        assert vl.is_inference_mode_enabled() is True and not vl.is_grad_enabled()
    assert vl.is_inference_mode_enabled() is False
    x = vl.ones(1000)
    assert vl.dropout(x, 0.5, False).tolist() == x.tolist()
    y = vl.dropout(x, 0.5, True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 300 < (y == 0).sum() < 700


# ------------------------------------------------------------------ 3. keyword aliases
def test_numpy_and_torch_keyword_aliases():
    a = R.standard_normal((2, 3)).astype(np.float32)
    x, xt = vl.tensor(a), torch.tensor(a)
    pairs = [
        (lambda L, t: t.sum(axis=0), None), (lambda L, t: t.mean(axis=1), None),
        (lambda L, t: L.cat([t, t], axis=1), None), (lambda L, t: t.sum(1, keepdims=True), None),
        (lambda L, t: L.argmax(t, axis=1), None), (lambda L, t: t.max(axis=0).values, None),
        (lambda L, t: L.stack([t, t], axis=0), None), (lambda L, t: L.zeros(size=(2, 2)), None),
        (lambda L, t: L.ones(size=(3,)), None), (lambda L, t: L.full(size=(2,), fill_value=3.0), None),
        (lambda L, t: t.reshape(shape=(3, 2)), None), (lambda L, t: t.view(size=(6,)), None),
        (lambda L, t: L.reshape(input=t, shape=(6,)), None), (lambda L, t: t.permute(dims=(1, 0)), None),
        (lambda L, t: L.permute(t, dims=(1, 0)), None), (lambda L, t: t.expand(size=(2, 2, 3)), None),
        (lambda L, t: L.flip(t, dims=(0,)), None), (lambda L, t: L.roll(t, 1, dims=0), None),
        (lambda L, t: L.pow(t, exponent=2), None), (lambda L, t: t.pow(exponent=3), None),
        (lambda L, t: L.matmul(input=t, other=t.t()), None), (lambda L, t: L.add(input=t, other=t, alpha=2), None),
        (lambda L, t: t.add(other=t), None), (lambda L, t: L.where(condition=t > 0, input=t, other=t * 0), None),
        (lambda L, t: t.where(condition=t > 0, other=t * 0), None), (lambda L, t: L.ones_like(input=t), None),
        (lambda L, t: L.sum(input=t, dim=0), None), (lambda L, t: t.std(axis=1), None),
        (lambda L, t: L.softmax(t, axis=1), None),
    ]
    for f, _ in pairs:
        _same(f(vl, x), f(torch, xt), 1e-6)
    assert vl.randn(size=(2, 5)).shape == (2, 5) and vl.rand(size=(4,)).shape == (4,)
    assert vl.randint(0, 5, size=(3,)).shape == (3,)


def test_alias_errors_are_clear():
    x = vl.ones(2, 3)
    with pytest.raises(TypeError, match="'dim' must be an int"):
        x.sum(dim=1.0)
    with pytest.raises(TypeError, match="both"):
        x.sum(axis=0, dim=0)


# ------------------------------------------------------------------ 4. einsum
EINSUM = [("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
          ("ii", [(3, 3)]), ("ii->i", [(3, 3)]), ("bii->b", [(2, 3, 3)]), ("...ii->...i", [(2, 3, 3)]),
          ("...i,...i->...", [(2, 3, 4), (3, 4)]), ("i...->...", [(2, 3, 4)]), ("iij,jk->ik", [(3, 3, 2), (2, 4)]),
          ("ab,bc->ac", [(2, 3), (3, 4)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)])]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum_ellipsis_and_diagonals_match_torch(eq, shapes):
    arrs = [R.standard_normal(s) for s in shapes]
    tv = [vl.tensor(a, requires_grad=True) for a in arrs]
    tt = [torch.tensor(a, requires_grad=True) for a in arrs]
    o, ot = vl.einsum(eq, *tv), torch.einsum(eq, *tt)
    w = R.standard_normal(tuple(ot.shape))
    (o * vl.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    _same(o, ot)
    for a, b in zip(tv, tt):
        _same(a.grad, b.grad)
    assert gradcheck(lambda *x: vl.einsum(eq, *x), tv) is True
    assert gradgradcheck(lambda *x: vl.einsum(eq, *x), tv) is True


def test_einsum_bad_input():
    with pytest.raises(RuntimeError, match="names 2 operands"):
        vl.einsum("ij,jk->ik", vl.ones(2, 2))
    with pytest.raises(RuntimeError, match="subscript 'j' has size"):
        vl.einsum("ij,jk->ik", vl.ones(2, 3), vl.ones(4, 2))
    with pytest.raises(RuntimeError, match="does not appear"):
        vl.einsum("ij->z", vl.ones(2, 3))
    with pytest.raises(RuntimeError, match="name 2 dims"):
        vl.einsum("ij->i", vl.ones(2, 3, 4))


# ------------------------------------------------------------------ 5. creation / random / legacy
def test_randint_forms_and_errors():
    vl.manual_seed(0)
    r = vl.randint(5, (2, 2))
    assert r.shape == (2, 2) and r.dtype == vl.int64 and (r.numpy() >= 0).all() and (r.numpy() < 5).all()
    assert vl.randint(high=3, size=(4,)).shape == (4,) and vl.randint(2, 4, (50,)).numpy().min() >= 2
    with pytest.raises(RuntimeError, match="low=5 >= high=2"):
        vl.randint(5, 2, (3,))
    with pytest.raises(TypeError, match="size must be given"):
        vl.randint(5)


def test_normal_forms_shapes_and_moments():
    for m, s in [((3,), (3,)), ((3, 1), (3,)), ((2, 2), None), (None, (2, 2))]:
        mv = vl.zeros(*m) if m else 0.0
        sv = vl.ones(*s) if s else 1.0
        mt = torch.zeros(*m) if m else 0.0
        st = torch.ones(*s) if s else 1.0
        assert vl.normal(mv, sv).shape == torch.normal(mt, st).shape
    vl.manual_seed(1)
    x = vl.normal(vl.full((20000,), 2.0), vl.full((20000,), 3.0)).numpy()
    assert abs(x.mean() - 2.0) < 0.1 and abs(x.std() - 3.0) < 0.1 and x.dtype == np.float32
    assert vl.normal(vl.zeros(2, dtype=vl.float64), 1.0).dtype == vl.float64
    with pytest.raises(RuntimeError, match="std >= 0.0, but found std -1"):
        vl.normal(0.0, -1.0, size=(2,))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        vl.normal(vl.zeros(2), -1.0)
    with pytest.raises(TypeError, match="size must be given"):
        vl.normal(0.0, 1.0)


def test_arange_errors():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        vl.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        vl.arange(5, 0, 1)
    assert vl.arange(5, 0, -2).tolist() == torch.arange(5, 0, -2).tolist()


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor",
                                  "ByteTensor", "HalfTensor"])
def test_legacy_constructors(name):
    V, T = getattr(vl, name), getattr(torch, name)
    a, b = V([1, 0, 2]), T([1, 0, 2])
    assert a.tolist() == b.tolist() and str(a.dtype) == str(b.dtype).replace("torch.", "")
    assert V(2, 3).shape == T(2, 3).shape and V().shape == T().shape
    assert isinstance(a, V) and not isinstance(vl.ones(1, dtype=vl.int8), V)


def test_tensor_constructor_sizes():
    assert vl.Tensor(2, 3).shape == torch.Tensor(2, 3).shape == (2, 3)
    assert vl.Tensor([1, 2]).dtype == vl.float32 and vl.Tensor(3).shape == (3,)


def test_variable():
    from varlens.autograd import Variable
    a = vl.ones(2)
    b = Variable(a, requires_grad=True)
    assert b.requires_grad and not a.requires_grad and isinstance(b, Variable) and b.is_leaf
    b.data[0] = 5.0
    assert a.tolist() == [5.0, 1.0]  # shares the data, as torch
    assert not Variable(vl.ones(2)).requires_grad


# ------------------------------------------------------------------ autograd.functional
def _f(L):
    return lambda x: (x ** 3).sum() * x[0] + L.sin(x).sum()


def _g(L):
    return lambda x, W: L.tanh(W @ x)


def test_autograd_functional_matches_torch():
    a, b = R.standard_normal(3), R.standard_normal((2, 3))
    v3, v2 = R.standard_normal(3), R.standard_normal(2)
    X, T = vl.tensor, torch.tensor
    _same(VF.jacobian(_g(vl), (X(a), X(b))), TF.jacobian(_g(torch), (T(a), T(b))))
    _same(VF.jacobian(lambda x: x ** 2, X(a)), TF.jacobian(lambda x: x ** 2, T(a)))
    _same(VF.jacobian(lambda x: (x * 2, x.sum()), X(a)), TF.jacobian(lambda x: (x * 2, x.sum()), T(a)))
    _same(VF.hessian(_f(vl), X(a)), TF.hessian(_f(torch), T(a)))
    h = lambda L: (lambda x, W: (W @ x).pow(2).sum())  # noqa: E731
    _same(VF.hessian(h(vl), (X(a), X(b))), TF.hessian(h(torch), (T(a), T(b))))
    _same(VF.vjp(_g(vl), (X(a), X(b)), X(v2)), TF.vjp(_g(torch), (T(a), T(b)), T(v2)))
    _same(VF.vjp(_f(vl), X(a)), TF.vjp(_f(torch), T(a)))
    j = lambda L: (lambda x: L.tanh(x) * x.sum())  # noqa: E731
    _same(VF.jvp(j(vl), X(a), X(v3)), TF.jvp(j(torch), T(a), T(v3)))
    _same(VF.hvp(_f(vl), X(a), X(v3)), TF.hvp(_f(torch), T(a), T(v3)))
    _same(VF.vhp(_f(vl), X(a), X(v3)), TF.vhp(_f(torch), T(a), T(v3)))
    _same(VF.jacobian(lambda x, y: x * 2, (X(a), X(a))), TF.jacobian(lambda x, y: x * 2, (T(a), T(a))))
    assert vl.autograd.functional is VF


def test_autograd_functional_create_graph_strict_and_errors():
    a = R.standard_normal(3)
    x, xt = vl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    VF.jacobian(lambda t: t ** 3, x, create_graph=True).sum().backward()
    TF.jacobian(lambda t: t ** 3, xt, create_graph=True).sum().backward()
    _same(x.grad, xt.grad)
    J = VF.jacobian(lambda t: t ** 2, vl.tensor(a))
    assert not J.requires_grad
    # the Hessian from autograd.functional passes a finite-difference check of its own
    assert gradcheck(lambda t: VF.hessian(_f(vl), t, create_graph=True), [vl.tensor(a, requires_grad=True)])
    with pytest.raises(RuntimeError, match="independent of input 1"):
        VF.jacobian(lambda p, q: p * 2, (vl.tensor(a), vl.tensor(a)), strict=True)
    with pytest.raises(RuntimeError, match="single element"):
        VF.vjp(lambda t: t * 2, vl.tensor(a))
    with pytest.raises(RuntimeError, match="single-element"):
        VF.hessian(lambda t: t * 2, vl.tensor(a))
    with pytest.raises(TypeError, match="inputs must be a Tensor"):
        VF.jacobian(lambda t: t, [1.0, 2.0])


def test_gradcheck_returns_bool_like_torch():
    x = vl.tensor([0.5, -1.5, 2.0], dtype=vl.float64, requires_grad=True)
    assert vl.autograd.gradcheck(lambda t: (t ** 2).sum(), (x,)) is True
    assert vl.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,)) is True
    assert torch.autograd.gradcheck(lambda t: (t ** 2).sum(), (torch.tensor([0.5], dtype=torch.float64,
                                                                             requires_grad=True),)) is True
    bad = vl.autograd.Function

    class Wrong(bad):
        def forward(self, a):
            return a * a

        def backward(self, g):
            return g * 3.0

    assert vl.autograd.gradcheck(Wrong.apply, [x], raise_exception=False) is False
    rep = vl.autograd.gradcheck(Wrong.apply, [x], raise_exception=False, return_report=True)
    assert not rep and rep.worst_abs_error > 0.1
    with pytest.raises(RuntimeError, match="gradcheck FAILED"):
        vl.autograd.gradcheck(Wrong.apply, [x])
    assert vl.autograd.gradcheck(lambda t: t * 2, (x,), nondet_tol=0.0, fast_mode=True) is True
    with pytest.raises(TypeError, match="unexpected keyword"):
        vl.autograd.gradcheck(lambda t: t * 2, (x,), bogus=1)
    go = vl.tensor([1.0, 0.0, 2.0], dtype=vl.float64)
    assert vl.autograd.gradgradcheck(lambda t: t ** 3, (x,), (go,)) is True


# ------------------------------------------------------------------ Tensor conversions and views
def test_view_dtype_matches_torch():
    for src, dst in [("float32", "int32"), ("float32", "float16"), ("float16", "float32"), ("int64", "float64"),
                     ("float32", "uint8")]:
        a = np.arange(8, dtype=np.float64).reshape(2, 4)
        v = vl.tensor(a, dtype=getattr(vl, src)).view(getattr(vl, dst))
        t = torch.tensor(a, dtype=getattr(torch, src)).view(getattr(torch, dst))
        assert tuple(v.shape) == tuple(t.shape) and v.numpy().tobytes() == t.numpy().tobytes()
    with pytest.raises(RuntimeError, match="divisible by 2"):
        vl.ones(3).view(vl.int64)


def test_view_non_contiguous_and_contiguous():
    x = vl.ones(2, 3).t()
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        x.view(6)
    assert x.reshape(6).shape == (6,) and x.contiguous().view(6).shape == (6,)
    assert x.contiguous().is_contiguous() and not x.is_contiguous()
    assert vl.ones(4, 3)[:, :2].view(4, 2).shape == (4, 2)  # a view that needs no copy still works
    a = vl.tensor(R.standard_normal((2, 3)), requires_grad=True)
    a.t().contiguous().view(6).sum().backward()
    assert a.grad.tolist() == [[1.0] * 3] * 2


def test_view_of_a_non_contiguous_tensor_is_one_reshape_sharing_memory():
    """A non-contiguous input's view is made by one NumPy reshape that refuses to copy: the result
    shares the input's memory, matches torch's values and gradient (gradcheck in float64), and an
    impossible view or a wrong size raises torch's RuntimeError."""
    a = R.standard_normal((2, 3, 4))
    for shape in [(4, 3, 2), (2, 2, 3, 2), (1, 4, 3, 2), (4, 3, 1, -1)]:
        x = vl.tensor(a, dtype=vl.float64, requires_grad=True)
        t = torch.tensor(a, requires_grad=True)
        xv, tv = x.permute(2, 1, 0).view(*shape), t.permute(2, 1, 0).view(*shape)
        assert np.shares_memory(xv.detach().numpy(), x.detach().numpy())
        np.testing.assert_array_equal(xv.detach().numpy(), tv.detach().numpy())
        w = R.standard_normal(tuple(tv.shape))
        (xv * vl.tensor(w)).sum().backward()
        (tv * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=0, atol=1e-12)
        gradcheck(lambda u: u.permute(2, 1, 0).view(*shape) * 2.0, (x,))
    y = vl.tensor(a).permute(2, 1, 0)
    y.view(2, 2, 3, 2)[0, 0, 0, 0] = 7.0          # a write through the view reaches the input
    assert y[0, 0, 0].item() == 7.0 and y[0, 1, 0].item() != 7.0
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        vl.tensor(a).permute(2, 1, 0).view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        vl.tensor(a).permute(2, 1, 0).view(4, -1)        # (torch: the same error)
    with pytest.raises(RuntimeError, match=r"shape '\[5, -1\]' is invalid for input of size 24"):
        vl.tensor(a).permute(2, 1, 0).view(5, -1)


def test_numpy_interop():
    t = vl.tensor([1.0, 2.0])
    assert isinstance(np.asarray(t), np.ndarray)
    e = np.exp(t)
    assert isinstance(e, vl.Tensor) and isinstance(np.exp(torch.tensor([1.0, 2.0])), torch.Tensor)
    np.testing.assert_allclose(e.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    w = vl.tensor([1.0, 2.0], requires_grad=True)
    r = np.ones(2) * w
    assert isinstance(r, vl.Tensor) and r.requires_grad  # ndarray * Tensor defers to the Tensor
    assert isinstance(np.float64(2.0) + t, vl.Tensor)
    for f in (np.array, np.asarray, np.exp):
        with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
            f(w)
        with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
            f(torch.ones(2, requires_grad=True))


def test_item_size_and_info():
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        vl.tensor([1, 2]).item()
    s = vl.zeros(2, 3, 4).shape
    assert type(s[1:]) is vl.Size and s[1:] == (3, 4) and isinstance(s[0], int)
    assert type(s + (1,)) is vl.Size and type((1,) + s) is vl.Size and (1,) + s == (1, 2, 3, 4)
    for dt in ("float32", "float64", "float16"):
        a, b = vl.finfo(getattr(vl, dt)), torch.finfo(getattr(torch, dt))
        for k in ("eps", "max", "min", "tiny", "bits", "resolution", "smallest_normal"):
            assert getattr(a, k) == getattr(b, k) and type(getattr(a, k)) is type(getattr(b, k))
    assert vl.finfo().eps == torch.finfo().eps
    for dt in ("int8", "int32", "int64", "uint8"):
        a, b = vl.iinfo(getattr(vl, dt)), torch.iinfo(getattr(torch, dt))
        assert (a.min, a.max, a.bits) == (b.min, b.max, b.bits) and type(a.max) is int


# ------------------------------------------------------------------ 6. bad input
def _err(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None, ""


def test_bad_input_errors_like_torch():
    cases = {
        "setitem": lambda L: L.zeros(3).__setitem__(slice(1, None), L.tensor([1.0, 2.0, 3.0])),
        "ragged": lambda L: L.tensor([[1, 2], [3]]),
        "arange0": lambda L: L.arange(0, 5, 0),
        "randint": lambda L: L.randint(5, 2, (3,)),
        "normal": lambda L: L.normal(0.0, -1.0, size=(2,)),
        "cat_not_list": lambda L: L.cat(L.ones(2), L.ones(2)),
        "stack_elem": lambda L: L.stack([L.ones(2), [1.0, 2.0]]),
        "squeeze": lambda L: L.ones(2, 3).squeeze(5),
        "sum_float_dim": lambda L: L.ones(2, 3).sum(dim=1.0),
        "view": lambda L: L.ones(2, 3).t().view(6),
        "item": lambda L: L.tensor([1, 2]).item(),
    }
    for name, f in cases.items():
        ev, mv = _err(lambda: f(vl))
        et, mt = _err(lambda: f(torch))
        assert et is not None and ev is et, f"{name}: varlens {ev} {mv!r} vs torch {et} {mt!r}"
    assert "expected sequence of length 2 at dim 1 (got 1)" in _err(lambda: vl.tensor([[1, 2], [3]]))[1]
    assert "(3,) cannot be broadcast" in _err(cases["setitem"].__get__(None) if False else lambda: cases["setitem"](vl))[1]
    assert "must be a tuple or list of Tensors, not Tensor" in _err(lambda: cases["cat_not_list"](vl))[1]
    assert "expected Tensor as element 1" in _err(lambda: cases["stack_elem"](vl))[1]
    assert "[-2, 1], but got 5" in _err(lambda: cases["squeeze"](vl))[1]
    w = vl.zeros(3, requires_grad=True) * 1  # the recorded path of setitem
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        w[1:] = vl.tensor([1.0, 2.0, 3.0])


def test_cat_stack_dtype_promotion_matches_torch():
    for d1, d2 in [("float32", "int64"), ("uint8", "int8"), ("bool", "int32"), ("float16", "float64"),
                   ("int64", "float16"), ("bool", "float32")]:
        a, b = vl.ones(2, dtype=getattr(vl, d1)), vl.ones(2, dtype=getattr(vl, d2))
        at, bt = torch.ones(2, dtype=getattr(torch, d1)), torch.ones(2, dtype=getattr(torch, d2))
        assert str(vl.cat([a, b]).dtype) == str(torch.cat([at, bt]).dtype).replace("torch.", "")
        assert str(vl.stack([a, b]).dtype) == str(torch.stack([at, bt]).dtype).replace("torch.", "")
    x = vl.tensor([1.0, 2.0], requires_grad=True)
    y = vl.cat([x, vl.tensor([3])])
    y.sum().backward()
    assert y.dtype == vl.float32 and x.grad.tolist() == [1.0, 1.0]


def test_no_numpy_warning_from_new_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f"{vl.tensor(2.0):.3f}"
        vl.einsum("ii", vl.eye(3))
        vl.normal(vl.zeros(2), vl.ones(2))
        io.StringIO().write(repr(vl.finfo(vl.float32)))


# ------------------------------------------------------------------ 7. in-place ops on views write through
INPLACE_VIEW = {
    "slice_mul_": lambda L, y: y[1:].mul_(3),
    "slice_zero_": lambda L, y: y[:2].zero_(),
    "slice_of_slice": lambda L, y: y[1:][1:].mul_(5),
    "add_tensor_": lambda L, y: y[1:3].add_(y[0:2] * 1),
    "setitem_on_view": lambda L, y: y[1:].__setitem__(0, 7.0),
    "strided_exp_": lambda L, y: y[::2].exp_(),
    "iadd": lambda L, y: y[2:].__iadd__(1.0),
    "reshape_column": lambda L, y: y.reshape(2, 2)[:, 0].zero_(),
    "view_t_row": lambda L, y: y.view(2, 2).t()[1].mul_(3),
    "two_updates": lambda L, y: (y[1:].mul_(2), y[:3].add_(1)),
    "unsqueeze_slice": lambda L, y: y.unsqueeze(0)[0, 1:].mul_(2),
    "narrow": lambda L, y: L.narrow(y, 0, 1, 2).mul_(3),
    "view_after_base_changed": lambda L, y: _stale(L, y),
    "view_of_view_after_base_changed": lambda L, y: _stale2(L, y),
    "no_grad_write_after_base_changed": lambda L, y: _stale3(L, y),
}


def _stale(L, y):
    v = y[1:]
    y.mul_(2)
    v.add_(1)


def _stale2(L, y):
    v = y.view(2, 2)[1]
    y[0:2].mul_(3)
    v.mul_(2)


def _stale3(L, y):
    v = y[1:]
    y.mul_(2)
    with L.no_grad():
        v.add_(1)


@pytest.mark.parametrize("name", list(INPLACE_VIEW))
def test_inplace_on_view_of_nonleaf_writes_through_like_torch(name):
    f = INPLACE_VIEW[name]
    res = {}
    for L in (vl, torch):
        w = L.tensor([1.0, 2.0, 3.0, 4.0], dtype=L.float64, requires_grad=True)
        y = w * 2
        f(L, y)
        (y * L.tensor([1.0, -2.0, 3.0, 0.5], dtype=L.float64)).sum().backward()
        res[L.__name__] = (y.detach().numpy().copy(), w.grad.numpy().copy())
    np.testing.assert_allclose(res["varlens"][0], res["torch"][0], rtol=1e-12)
    np.testing.assert_allclose(res["varlens"][1], res["torch"][1], rtol=1e-12)

    def g(w):
        y = w * 2
        f(vl, y)
        return y
    if "no_grad" not in name:  # (a write under no_grad is outside the function's derivative)
        assert gradcheck(g, [vl.tensor([1.0, 2.0, 3.0, 4.0], dtype=vl.float64, requires_grad=True)])


def test_inplace_view_of_plain_buffer_and_of_leaf():
    for L in (vl, torch):
        w = L.tensor([1.0, 2.0], requires_grad=True)
        buf = L.zeros(3)
        buf[1:].add_(w * 3)
        assert buf.requires_grad and buf.tolist() == [0.0, 3.0, 6.0]
        buf.sum().backward()
        assert w.grad.tolist() == [3.0, 3.0]
        with pytest.raises(RuntimeError, match="view of a leaf"):
            w[1:].mul_(2)
    with vl.no_grad():  # outside autograd the NumPy view writes through directly
        p = vl.ones(3, requires_grad=True)
        p[1:].mul_(2)
    assert p.tolist() == [1.0, 2.0, 2.0]


def test_set_printoptions():
    x = vl.tensor([1 / 3, 2.0])
    try:
        vl.set_printoptions(precision=2)
        assert "0.33" in repr(x) and "0.3333" not in repr(x)
        vl.set_printoptions(threshold=5, edgeitems=1)
        assert "..." in repr(vl.arange(10))
        with pytest.raises(ValueError, match="profile"):
            vl.set_printoptions(profile="long")
    finally:
        vl.set_printoptions(profile="default")
    assert "0.3333" in repr(x) and "..." not in repr(vl.arange(10))


REPR_CASES = [[-0.1, 0.25, 3.0], [1.0, 2.5], [1.0, 2.0], 3.5, 1 / 3, [0.0, 0.0], [1e-5, 1.0], [1e9, 1.0],
              [float("nan"), 1.5, float("inf")], [-1.0, -2.5], [123456.7], 0.0, [1e-3, 5.0], [100.0, 2000.0]]


@pytest.mark.parametrize("case", range(len(REPR_CASES) + 6))
def test_repr_matches_torch(case):
    rng = np.random.default_rng(case)
    extra = [rng.standard_normal((3, 4)), rng.standard_normal((2, 3, 4)), rng.standard_normal(2000),
             rng.standard_normal((50, 50)), rng.standard_normal((4, 12)) * 100, np.arange(2000.0)]
    a = (REPR_CASES + extra)[case]
    for dt in ("float32", "float64"):
        got = repr(vl.tensor(a, dtype=getattr(vl, dt))).replace("varlens.", "torch.")
        assert got == repr(torch.tensor(a, dtype=getattr(torch, dt)))
    for a in ([1, 2, 30], [[True, False], [False, True]], np.arange(2000), np.arange(24).reshape(2, 3, 4),
              np.zeros(0), np.zeros((2, 0))):
        assert repr(vl.tensor(a)).replace("varlens.", "torch.") == repr(torch.tensor(a))
    w, wt = vl.tensor([0.5, 1.0], requires_grad=True), torch.tensor([0.5, 1.0], requires_grad=True)
    assert repr(w) == repr(wt) and repr(w * 2) == repr(wt * 2)


def test_repr_sci_mode_option():
    try:
        for kw in ({"sci_mode": True}, {"precision": 2}, {"sci_mode": False}):
            vl.set_printoptions(**kw)
            torch.set_printoptions(**kw)
            for a in ([1 / 3, 2.0], [1e-5, 1.0], [1.0, 2.0]):
                assert repr(vl.tensor(a)) == repr(torch.tensor(a))
    finally:
        vl.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_out_keyword_like_torch():
    for L in (vl, torch):
        o = L.empty(2)
        assert L.add(L.ones(2), 1, out=o) is o and o.tolist() == [2.0, 2.0]
        o = L.empty(0)
        L.matmul(L.ones(2, 3), L.ones(3, 2), out=o)
        assert o.tolist() == [[3.0, 3.0], [3.0, 3.0]]  # resized to the result
        v, i = L.empty(2), L.empty(2, dtype=L.long)
        L.max(L.tensor([[1.0, 3.0], [4.0, 2.0]]), 1, out=(v, i))
        assert v.tolist() == [3.0, 4.0] and i.tolist() == [1, 0]
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            L.add(L.ones(2), 1.5, out=L.empty(2, dtype=L.long))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            L.mul(L.ones(2, requires_grad=True), 2, out=L.empty(2))
    assert vl.conv2d is vl.nn.functional.conv2d


def test_apply_map_storage_offset_like_torch():
    for L in (vl, torch):
        x = L.tensor([1.0, -2.0, 3.0])
        assert x.apply_(lambda v: v * 10 + 1) is x and x.tolist() == [11.0, -19.0, 31.0]
        y = L.tensor([[1, 2], [3, 4]])
        y.map_(L.tensor([10, 20]), lambda a, b: a * b)
        assert y.tolist() == [[10, 40], [30, 80]]
        z = L.arange(12).reshape(3, 4)
        assert z.storage_offset() == 0 and z[1:].storage_offset() == 4 and z[1, 2:].storage_offset() == 6
        assert z.t()[1].storage_offset() == 1
        with pytest.raises(RuntimeError):
            L.ones(2, requires_grad=True).apply_(lambda v: v)
