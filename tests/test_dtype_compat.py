"""Result dtypes and dtype errors as PyTorch; remainder/fmod/norm/cross-entropy gradient gaps;
varlens.special.  Every expectation comes from torch (2.13) run on the same inputs."""
import warnings

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as vnn
import varlens.nn.functional as VF
from varlens.autograd import gradcheck
from tests.conftest import assert_close, to_torch

DT = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]
INT_DT = ["bool", "uint8", "int8", "int32", "int64"]


def _data(dt, divisor=False):
    if dt == "bool":
        return np.array([True, True, True]) if divisor else np.array([True, False, True])
    return np.array([2, 1, 3] if divisor else [5, 2, 3]).astype(dt)


def _pair(dt, divisor=False):
    a = _data(dt, divisor)
    return vl.tensor(a), torch.tensor(a)


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _same(vfn, tfn, what, rtol=1e-3):
    """Both raise, or both give the same dtype and (nearly) the same values."""
    r, e = _outcome(tfn)
    v, ve = _outcome(vfn)
    if e is not None:
        assert ve is not None, f"{what}: torch raises {type(e).__name__}({e}) but varlens returned {v}"
        assert isinstance(ve, (RuntimeError, TypeError, NotImplementedError, ValueError)), (what, ve)
        return
    assert ve is None, f"{what}: varlens raised {type(ve).__name__}: {ve}"
    assert str(v.dtype).split(".")[-1] == str(r.dtype).split(".")[-1], f"{what}: dtype {v.dtype} != {r.dtype}"
    np.testing.assert_allclose(v._data.astype(np.float64), r.double().numpy(), rtol=rtol, atol=1e-3,
                               err_msg=what)


UNARY = {
    "exp": (vl.exp, torch.exp), "log": (vl.log, torch.log), "log2": (vl.log2, torch.log2),
    "log10": (vl.log10, torch.log10), "log1p": (vl.log1p, torch.log1p), "expm1": (vl.expm1, torch.expm1),
    "sqrt": (vl.sqrt, torch.sqrt), "rsqrt": (vl.rsqrt, torch.rsqrt), "sin": (vl.sin, torch.sin),
    "cos": (vl.cos, torch.cos), "tan": (vl.tan, torch.tan), "atan": (vl.atan, torch.atan),
    "sinh": (vl.sinh, torch.sinh), "cosh": (vl.cosh, torch.cosh), "tanh": (vl.tanh, torch.tanh),
    "asinh": (vl.asinh, torch.asinh), "sigmoid": (vl.sigmoid, torch.sigmoid), "erf": (vl.erf, torch.erf),
    "erfc": (vl.erfc, torch.erfc), "lgamma": (vl.lgamma, torch.lgamma), "digamma": (vl.digamma, torch.digamma),
    "reciprocal": (vl.reciprocal, torch.reciprocal), "exp2": (vl.exp2, torch.exp2),
    "logsumexp": (lambda x: vl.logsumexp(x, 0), lambda x: torch.logsumexp(x, 0)),
    "div2": (lambda x: x / 2, lambda x: x / 2), "rdiv": (lambda x: 2 / x, lambda x: 2 / x),
    "pow.5": (lambda x: x ** 0.5, lambda x: x ** 0.5), "pow2": (lambda x: x ** 2, lambda x: x ** 2),
    "rpow2.5": (lambda x: 2.5 ** x, lambda x: 2.5 ** x), "square": (vl.square, torch.square),
    "floordiv2.5": (lambda x: x // 2.5, lambda x: x // 2.5), "mod2.5": (lambda x: x % 2.5, lambda x: x % 2.5),
    "floordiv2": (lambda x: x // 2, lambda x: x // 2), "mod2": (lambda x: x % 2, lambda x: x % 2),
    "fmod2": (lambda x: vl.fmod(x, 2), lambda x: torch.fmod(x, 2)),
    "fmod2.5": (lambda x: vl.fmod(x, 2.5), lambda x: torch.fmod(x, 2.5)),
    "clamp.5": (lambda x: x.clamp(min=0.5), lambda x: x.clamp(min=0.5)),
    "clamp_t": (lambda x: x.clamp(max=vl.tensor(2.5)), lambda x: x.clamp(max=torch.tensor(2.5))),
    "clamp1": (lambda x: x.clamp(min=1), lambda x: x.clamp(min=1)),
    "add1.5": (lambda x: x + 1.5, lambda x: x + 1.5), "mul2": (lambda x: x * 2, lambda x: x * 2),
    "sub1": (lambda x: x - 1, lambda x: x - 1), "neg": (lambda x: -x, lambda x: -x),
    "sum": (lambda x: x.sum(), lambda x: x.sum()), "prod": (lambda x: x.prod(), lambda x: x.prod()),
    "cumsum": (lambda x: x.cumsum(0), lambda x: x.cumsum(0)), "mean": (vl.mean, torch.mean),
    "std": (lambda x: x.std(), lambda x: x.std()), "var": (lambda x: x.var(), lambda x: x.var()),
    "norm": (lambda x: x.norm(), lambda x: x.norm()),
    "vector_norm": (vl.linalg.vector_norm, torch.linalg.vector_norm),
    "softmax": (lambda x: VF.softmax(x, 0), lambda x: torch.nn.functional.softmax(x, 0)),
    "log_softmax": (lambda x: VF.log_softmax(x, 0), lambda x: torch.nn.functional.log_softmax(x, 0)),
    "gelu": (VF.gelu, torch.nn.functional.gelu), "silu": (VF.silu, torch.nn.functional.silu),
    "softplus": (VF.softplus, torch.nn.functional.softplus), "elu": (VF.elu, torch.nn.functional.elu),
    "leaky_relu": (VF.leaky_relu, torch.nn.functional.leaky_relu),
    "rpow2": (lambda x: 2 ** x, lambda x: 2 ** x), "logit": (vl.logit, torch.logit),
    "cumprod": (lambda x: x.cumprod(0), lambda x: x.cumprod(0)), "sign": (vl.sign, torch.sign),
    "abs": (vl.abs, torch.abs), "atan2_f16": (lambda x: vl.atan2(x, vl.ones(3, dtype=vl.float16)),
                                              lambda x: torch.atan2(x, torch.ones(3, dtype=torch.float16))),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_result_dtype_matches_torch(name):
    vf, tf = UNARY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dt in DT:
            v, t = _pair(dt)
            _same(lambda: vf(v), lambda: tf(t), f"{name}({dt})")


def test_float_only_ops_on_ints_are_float32_not_truncated():
    # erf of an int tensor used to come back as int64 zeros
    r = vl.erf(vl.tensor([1, 2]))
    assert r.dtype == vl.float32
    assert_close(r, torch.erf(torch.tensor([1, 2])), rtol=1e-6)
    assert vl.sqrt(vl.tensor([200], dtype=vl.uint8)).dtype == vl.float32  # not float16
    assert vl.exp(vl.tensor([1], dtype=vl.int32)).dtype == vl.float32     # not float64


BINARY = {
    "add": lambda L, a, b: a + b, "mul": lambda L, a, b: a * b, "sub": lambda L, a, b: a - b,
    "div": lambda L, a, b: a / b, "floordiv": lambda L, a, b: a // b, "mod": lambda L, a, b: a % b,
    "pow": lambda L, a, b: a ** b, "fmod": lambda L, a, b: L.fmod(a, b),
    "remainder": lambda L, a, b: L.remainder(a, b), "maximum": lambda L, a, b: L.maximum(a, b),
    "div_trunc": lambda L, a, b: L.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda L, a, b: L.div(a, b, rounding_mode="floor"),
    "atan2": lambda L, a, b: L.atan2(a, b), "xlogy": lambda L, a, b: L.xlogy(a, b),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_promotion_grid_matches_torch(op):
    f = BINARY[op]
    for d1 in DT:
        for d2 in DT:
            va, ta = _pair(d1)
            vb, tb = _pair(d2, divisor=True)
            _same(lambda: f(vl, va, vb), lambda: f(torch, ta, tb), f"{op}({d1}, {d2})")


def test_python_scalars_follow_torch():
    i, f16 = vl.tensor([5, -7]), vl.tensor([1.5], dtype=vl.float16)
    assert (i * 2.5).dtype == vl.float32 and (i + 2).dtype == vl.int64
    assert (f16 * 3).dtype == vl.float16 and (f16 + 2.5).dtype == vl.float16
    assert vl.fmod(i, 2).dtype == vl.int64 and vl.fmod(i, 2).tolist() == torch.fmod(torch.tensor([5, -7]), 2).tolist()
    assert (i % 3).tolist() == (torch.tensor([5, -7]) % 3).tolist()
    assert (7 // vl.tensor([2, -2])).tolist() == (7 // torch.tensor([2, -2])).tolist()
    assert (7 % vl.tensor([2, -3])).tolist() == (7 % torch.tensor([2, -3])).tolist()
    assert vl.div(vl.tensor([-7, 7]), 2, rounding_mode="trunc").tolist() == [-3, 3]
    b = vl.tensor([True, False])
    assert (b ** 2).dtype == vl.int64 and vl.square(b).dtype == vl.int64 and (b + 1).dtype == vl.int64
    assert vl.tensor([3], dtype=vl.uint8).prod().dtype == vl.int64
    assert vl.tensor([3], dtype=vl.uint8).sum().dtype == vl.int64


def test_bool_subtraction_and_negation_raise_torch_messages():
    b, i = vl.tensor([True, False]), vl.tensor([1, 2])
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        -b
    for fn in (lambda: i - b, lambda: b - 1, lambda: i - True, lambda: 1 - b, lambda: vl.sub(i, b)):
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
            fn()
    with pytest.raises(RuntimeError, match="two bool tensors"):
        b - b


def test_integer_division_by_zero_and_negative_powers_raise():
    for fn in (lambda: vl.tensor([1]) // 0, lambda: vl.tensor([1]) % 0, lambda: vl.fmod(vl.tensor([1]), 0)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()
    with pytest.raises(RuntimeError, match="negative integer powers"):
        vl.tensor([1, 2]) ** -1
    # float division by zero stays IEEE (inf), as torch
    assert_close(vl.tensor([1.0]) // 0, torch.tensor([1.0]) // 0)


@pytest.mark.parametrize("fn,op", [(lambda x: x.std(), "std"), (lambda x: x.var(), "var"),
                                   (lambda x: x.norm(), "vector_norm"), (lambda x: x.mean(), "mean"),
                                   (lambda x: vl.linalg.norm(x), "vector_norm")])
def test_float_reductions_refuse_integers(fn, op):
    with pytest.raises(RuntimeError, match=f"{op}.*Long|{op}.*int64|std and var"):
        fn(vl.tensor([1, 2, 3]))


def test_softmax_and_activations_refuse_integers_naming_the_dtype():
    x = vl.tensor([1, 2])
    for fn, name in ((lambda: VF.softmax(x, 0), "softmax"), (lambda: VF.log_softmax(x, 0), "log_softmax"),
                     (lambda: VF.gelu(x), "gelu"), (lambda: VF.silu(x), "silu")):
        with pytest.raises(NotImplementedError, match=f"{name}.*'Long'"):
            fn()
    # an explicit dtype= converts first, as torch
    assert_close(VF.softmax(x, 0, dtype=vl.float64), torch.softmax(torch.tensor([1, 2]), 0, dtype=torch.float64))


def test_linear_dtype_mismatch_raises_like_torch():
    lin = vnn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got Long and Float"):
        lin(vl.ones(4, 3, dtype=vl.int64))
    with pytest.raises(RuntimeError, match="but got Double and Float"):
        lin(vl.ones(4, 3, dtype=vl.float64))
    with pytest.raises(RuntimeError, match="but got Float and Double"):
        vnn.Linear(3, 2).double()(vl.ones(4, 3))
    with pytest.raises(RuntimeError, match="but got Double and Float"):
        VF.linear(vl.ones(2, 5, 3, dtype=vl.float64), lin.weight)
    assert lin(vl.ones(4, 3)).dtype == vl.float32


def test_loss_dtype_errors():
    with pytest.raises(NotImplementedError, match="cross_entropy.*floating-point logits"):
        VF.cross_entropy(vl.ones(2, 3, dtype=vl.int64), vl.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        VF.binary_cross_entropy_with_logits(vl.ones(4), vl.ones(4, dtype=vl.int64))
    with pytest.raises(NotImplementedError, match="log_sigmoid"):
        VF.binary_cross_entropy_with_logits(vl.ones(4, dtype=vl.int64), vl.ones(4))


# ---------------------------------------------------------------- gradient gaps
@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1}, {"weight": [1.0, 2.0, 3.0]}])
def test_cross_entropy_all_targets_ignored_gives_zero_grad(kw):
    kw_v = {k: (vl.tensor(v) if k == "weight" else v) for k, v in kw.items()}
    kw_t = {k: (torch.tensor(v) if k == "weight" else v) for k, v in kw.items()}
    a = vl.randn(2, 3, requires_grad=True)
    at = to_torch(a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NumPy RuntimeWarning either
        loss = VF.cross_entropy(a, vl.tensor([-100, -100]), **kw_v)
        loss.backward()
    lt = torch.nn.functional.cross_entropy(at, torch.tensor([-100, -100]), **kw_t)
    lt.backward()
    assert np.isnan(loss.item()) and torch.isnan(lt)
    assert_close(a.grad, at.grad)
    s = VF.cross_entropy(a, vl.tensor([-100, -100]), reduction="sum")
    assert s.item() == 0.0
    # nll_loss the same way
    kw_v.pop("label_smoothing", None)
    kw_t.pop("label_smoothing", None)
    a.grad = None
    at.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = VF.nll_loss(a, vl.tensor([-100, -100]), **kw_v)
        n.backward()
    torch.nn.functional.nll_loss(at, torch.tensor([-100, -100]), **kw_t).backward()
    assert np.isnan(n.item())
    assert_close(a.grad, at.grad)


@pytest.mark.parametrize("fn", [lambda L, x: x.norm(), lambda L, x: L.linalg.vector_norm(x),
                                lambda L, x: L.linalg.norm(x), lambda L, x: L.linalg.vector_norm(x, dim=1),
                                lambda L, x: x.norm(dim=0, keepdim=True), lambda L, x: L.norm(x, p="fro")])
def test_norm_gradient_at_zero_is_zero(fn):
    x = vl.tensor(np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]]), requires_grad=True)
    xt = to_torch(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = fn(vl, x)
        y.sum().backward()
    yt = fn(torch, xt)
    yt.sum().backward()
    assert_close(y, yt)
    assert_close(x.grad, xt.grad)
    z = vl.zeros(3, requires_grad=True)
    fn(vl, z.reshape(1, 3)).sum().backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_norm2_gradcheck_and_second_derivative():
    x = vl.randn(3, 4, dtype=vl.float64, requires_grad=True)
    assert gradcheck(lambda t: t.norm(dim=1), (x,))
    assert gradcheck(lambda t: vl.linalg.vector_norm(t, dim=(0, 1), keepdim=True), (x,))
    xt = to_torch(x)
    g, = vl.autograd.grad(x.norm(), x, create_graph=True)
    gt, = torch.autograd.grad(xt.norm(), xt, create_graph=True)
    (g * g.detach()).sum().backward()
    (gt * gt.detach()).sum().backward()
    assert_close(x.grad, xt.grad)


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_fmod_gradients_match_torch(name):
    a = vl.tensor(np.array([5.3, -5.3, 7.1, -2.2]), requires_grad=True)
    b = vl.tensor(np.array([3.0, 3.0, -2.5, -0.7]), requires_grad=True)
    assert gradcheck(lambda x, y: getattr(vl, name)(x, y), (a, b))
    at, bt = to_torch(a), to_torch(b)
    y = getattr(vl, name)(a, b)
    yt = getattr(torch, name)(at, bt)
    w = np.array([1.0, -2.0, 0.5, 3.0])
    (y * vl.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    assert_close(y, yt)
    assert_close(a.grad, at.grad)
    assert_close(b.grad, bt.grad)
    # with a Python scalar: dL/dx = g (the probe case x % 3)
    x = vl.tensor([5.0, -5.0], requires_grad=True)
    r = x % 3 if name == "remainder" else vl.fmod(x, 3.0)
    assert r.requires_grad
    r.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_floor_divide_recorded_but_not_differentiable_as_torch():
    x = vl.tensor([5.0, -5.0], requires_grad=True)
    y = x // 2
    assert y.requires_grad and y.tolist() == [2.0, -3.0]
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        y.sum().backward()
    # div with a rounding mode has gradient 0 (as torch)
    for mode in ("floor", "trunc"):
        x = vl.tensor([5.5, -5.5], requires_grad=True)
        xt = to_torch(x)
        vl.div(x, 2, rounding_mode=mode).sum().backward()
        torch.div(xt, 2, rounding_mode=mode).sum().backward()
        assert_close(x.grad, xt.grad)
        assert_close(vl.div(x, 2, rounding_mode=mode), torch.div(xt, 2, rounding_mode=mode))


@pytest.mark.parametrize("name", ["log1p", "expm1", "exp2", "erfc"])
def test_accurate_primitives_values_and_gradients(name):
    x = vl.tensor(np.array([1e-10, -0.3, 0.7, 2.0, 5.0]), requires_grad=True)
    xt = to_torch(x)
    assert gradcheck(getattr(vl, name), (x,))
    y, yt = getattr(vl, name)(x), getattr(torch, name)(xt)
    y.sum().backward()
    yt.sum().backward()
    assert_close(y, yt, rtol=1e-12, atol=0)
    assert_close(x.grad, xt.grad, rtol=1e-12)


# ---------------------------------------------------------------- varlens.special
SPECIAL_DIFF = {
    "erf": [-1.2, 0.3, 2.0], "erfc": [-1.2, 0.3, 6.0], "erfinv": [-0.9, 0.1, 0.5], "expit": [-3.0, 0.2, 4.0],
    "logit": [0.1, 0.5, 0.8], "log1p": [1e-9, 0.5, 3.0], "expm1": [1e-9, -0.5, 2.0], "exp2": [-1.5, 0.0, 3.2],
    "gammaln": [0.5, 2.5, 7.0], "digamma": [0.5, 2.5, 7.0], "psi": [0.7, 1.5, 3.0], "i0": [-1.0, 0.5, 2.0],
    "i0e": [-1.0, 0.5, 2.0], "i1": [-1.0, 0.5, 2.0], "i1e": [-1.0, 0.5, 2.0], "ndtr": [-5.0, 0.3, 2.0],
    "ndtri": [1e-3, 0.3, 0.9], "log_ndtr": [-30.0, -1.0, 3.0], "sinc": [-1.3, 0.4, 2.2], "entr": [0.2, 1.0, 3.0],
    "erfcx": [-1.0, 0.5, 10.0],
}


@pytest.mark.parametrize("name", sorted(SPECIAL_DIFF))
def test_special_matches_torch_values_and_gradients(name):
    x = vl.tensor(np.array(SPECIAL_DIFF[name]), requires_grad=True)
    xt = to_torch(x)
    f, ft = getattr(vl.special, name), getattr(torch.special, name)
    assert gradcheck(f, (x,))
    y, yt = f(x), ft(xt)
    assert_close(y, yt, rtol=1e-10, atol=1e-300)
    y.sum().backward()
    yt.sum().backward()
    assert_close(x.grad, xt.grad, rtol=1e-8, atol=1e-300)
    vi = f(vl.tensor([1, 0])) if name not in ("ndtri", "logit", "entr") else f(vl.tensor([0, 1]))
    assert vi.dtype == vl.float32  # integer input: torch's default float dtype


def test_special_multi_argument_and_reductions():
    x = vl.tensor(np.array([[0.0, 1.5, 2.0], [3.0, 0.2, -0.5]]), requires_grad=True)
    xt = to_torch(x)
    y = vl.tensor(np.array([[0.5, -0.5, 2.0], [1.0, 0.0, 0.3]]), requires_grad=True)
    yt = to_torch(y)
    cases = [
        (lambda: vl.special.xlogy(x, y.abs() + 0.1), lambda: torch.special.xlogy(xt, yt.abs() + 0.1)),
        (lambda: vl.special.xlog1py(x, y), lambda: torch.special.xlog1py(xt, yt)),
        (lambda: vl.special.polygamma(1, x.abs() + 0.5), lambda: torch.special.polygamma(1, xt.abs() + 0.5)),
        (lambda: vl.special.multigammaln(x.abs() + 2, 2), lambda: torch.special.multigammaln(xt.abs() + 2, 2)),
        (lambda: vl.special.logsumexp(x, 1), lambda: torch.special.logsumexp(xt, 1)),
        (lambda: vl.special.softmax(x, 0), lambda: torch.special.softmax(xt, 0)),
        (lambda: vl.special.log_softmax(x, 1), lambda: torch.special.log_softmax(xt, 1)),
        (lambda: vl.special.round(x * 1.37, decimals=1), lambda: torch.special.round(xt * 1.37, decimals=1)),
    ]
    w = np.array([[1.0, -2.0, 0.5], [0.3, 1.1, -0.7]])
    for i, (fv, ft) in enumerate(cases):
        x.grad = y.grad = xt.grad = yt.grad = None
        a, b = fv(), ft()
        assert_close(a, b, rtol=1e-8, what=f"case {i}")
        a2 = a if a.ndim == 2 else a.unsqueeze(1)
        b2 = b if b.ndim == 2 else b.unsqueeze(1)
        (a2 * vl.tensor(w[:, :a2.shape[1]])).sum().backward()
        (b2 * torch.tensor(w[:, :b2.shape[1]])).sum().backward()
        assert_close(x.grad, xt.grad, rtol=1e-8, what=f"case {i} dx")
        if yt.grad is not None:
            assert_close(y.grad, yt.grad, rtol=1e-8, what=f"case {i} dy")
    xp_ = vl.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
    assert gradcheck(lambda t: vl.special.xlog1py(t, t), (xp_,))
    assert vl.special.xlogy(vl.tensor([0, 1]), 0).tolist() == torch.special.xlogy(torch.tensor([0, 1]), 0).tolist()


def test_special_bessel_j_and_entr_edges():
    x = vl.tensor(np.array([0.0, 0.5, 3.0, -2.0]), requires_grad=True)
    for name in ("bessel_j0", "bessel_j1"):
        y = getattr(vl.special, name)(x)
        assert not y.requires_grad  # no gradient in torch either
        assert_close(y, getattr(torch.special, name)(to_torch(x)), rtol=1e-12)
    e = vl.special.entr(vl.tensor([0.0, -1.0, 2.0]))
    assert_close(e, torch.special.entr(torch.tensor([0.0, -1.0, 2.0])))
    with pytest.raises(TypeError, match="input"):
        vl.special.expit([1.0, 2.0])


def test_integer_edge_cases_match_torch():
    x, e = [2, 1, -1, 0, 3], [-2, -3, -3, 2, 2]
    r = vl.tensor(x) ** vl.tensor(e)
    assert r.dtype == vl.int64 and r.tolist() == (torch.tensor(x) ** torch.tensor(e)).tolist()
    r = 2 ** vl.tensor([-1, 3], dtype=vl.int32)
    rt = 2 ** torch.tensor([-1, 3], dtype=torch.int32)
    assert r.dtype == vl.int32 and r.tolist() == rt.tolist()
    b = [[True, False, True], [False, False, True]]
    assert vl.diff(vl.tensor(b)).tolist() == torch.diff(torch.tensor(b)).tolist()
    assert (vl.tensor(b) ** True).dtype == vl.bool
    u = vl.tensor([[1, 0, 3]], dtype=vl.uint8)
    assert u.all().dtype == vl.uint8 and u.any(1).dtype == vl.uint8
    assert u.all().item() == torch.tensor([[1, 0, 3]], dtype=torch.uint8).all().item()
    with pytest.raises(NotImplementedError, match="frac.*'Long'"):
        vl.frac(vl.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="floor.*'Bool'"):
        vl.floor(vl.tensor([True]))
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        vl.relu(vl.tensor([True]))
    assert vl.sign(vl.tensor([True, False])).tolist() == [True, False]


@pytest.mark.parametrize("name", ["bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
                                  "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                                  "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"])
def test_special_no_grad_functions_match_torch(name):
    x = np.array([-0.7, 0.3, 1.5, 4.0])
    a = getattr(vl.special, name)(vl.tensor(x, requires_grad=True))
    b = getattr(torch.special, name)(torch.tensor(x, requires_grad=True))
    assert a.requires_grad == b.requires_grad
    np.testing.assert_allclose(a._data, b.detach().numpy(), rtol=1e-7, equal_nan=True)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "hermite_polynomial_h",
                                  "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                                  "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"])
def test_special_polynomials_match_torch(name):
    x = np.array([-0.7, 0.3, 1.5, 4.0])
    for n in (0, 1, 3, 6, -1):
        a = getattr(vl.special, name)(vl.tensor(x), n)
        b = getattr(torch.special, name)(torch.tensor(x), n)
        np.testing.assert_allclose(a._data, b.numpy(), rtol=1e-10, err_msg=f"{name} n={n}")


def test_special_zeta_and_incomplete_gamma_grad_in_second_argument():
    x = np.array([2.5, 3.0, 4.0])
    q = vl.tensor(np.array([0.5, 1.5, 2.0]), requires_grad=True)
    qt = to_torch(q)
    for name in ("zeta", "gammainc", "gammaincc"):
        q.grad = qt.grad = None
        y, yt = getattr(vl.special, name)(vl.tensor(x), q), getattr(torch.special, name)(torch.tensor(x), qt)
        assert_close(y, yt, rtol=1e-10)
        y.sum().backward()
        yt.sum().backward()
        assert_close(q.grad, qt.grad, rtol=1e-8)
        assert gradcheck(lambda t: getattr(vl.special, name)(vl.tensor(x), t), (q,))
    with pytest.raises(NotImplementedError, match="zeta.*not"):
        vl.special.zeta(vl.tensor(x, requires_grad=True), q)
