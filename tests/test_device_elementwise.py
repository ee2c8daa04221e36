"""The elementwise op families on the (simulated) CUDA device, beyond the op table.

tests/test_device_ops_table.py runs the op table's rows on the device; this file covers the
other functions of varlens/ops/pointwise.py, activation.py, special.py, compare.py and
varlens/special.py: each runs on cuda:0 with host syncs forbidden in forward and backward, and
its values, dtype and gradients must equal the CPU result (which the CPU suites hold to PyTorch),
float64 and float32.  A few device-specific behaviours are checked against PyTorch directly:
clamp with Tensor bounds (the gradient reaching the bounds), nan_to_num's gradient, and that
value checks needing a host read (integer division by zero) are not made on the device.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn.functional as F
import varlens.special as S
from conftest import assert_close


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _pos(rng, shape):
    return rng.uniform(0.2, 2.0, shape)


def _unit(rng, shape):
    return rng.uniform(-0.9, 0.9, shape)


def _prob(rng, shape):
    return rng.uniform(0.1, 0.9, shape)


def _above1(rng, shape):
    return rng.uniform(1.1, 3.0, shape)


def _with_nonfinite(rng, shape):
    a = rng.standard_normal(shape)
    a.flat[0], a.flat[1], a.flat[2] = np.nan, np.inf, -np.inf
    return a


def _like(x, v):
    """A 0-d tensor ``v`` with x's dtype on x's device."""
    return vl.tensor(v, dtype=x.dtype).to(x.device)


# name: (function of Tensors, input generators); every float input requires grad
UNARY = {
    "exp2": (vl.exp2, _normal), "erfc": (vl.erfc, _normal), "log2": (vl.log2, _pos), "log10": (vl.log10, _pos),
    "ceil": (vl.ceil, _normal), "trunc": (vl.trunc, _normal), "round_decimals": (lambda x: vl.round(x, decimals=1), _normal),
    "atan": (vl.atan, _normal), "asin": (vl.asin, _unit), "acos": (vl.acos, _unit), "tan": (vl.tan, _unit),
    "sinh": (vl.sinh, _normal), "cosh": (vl.cosh, _normal), "asinh": (vl.asinh, _normal), "acosh": (vl.acosh, _above1),
    "atanh": (vl.atanh, _unit), "sinc": (vl.sinc, _normal), "deg2rad": (vl.deg2rad, _normal),
    "rad2deg": (vl.rad2deg, _normal), "frac": (vl.frac, _normal), "logit": (vl.logit, _prob),
    "logit_eps": (lambda x: vl.logit(x, 0.2), _prob), "nan_to_num": (vl.nan_to_num, _with_nonfinite),
    "nan_to_num_values": (lambda x: vl.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-3.0), _with_nonfinite),
    "sgn": (vl.sgn, _normal), "positive": (vl.positive, _normal), "signbit": (vl.signbit, _normal),
    "square": (vl.square, _normal), "rsqrt": (vl.rsqrt, _pos), "reciprocal": (vl.reciprocal, _pos),
    "float_power": (lambda x: vl.float_power(x, 2), _normal),
    "frexp_mantissa": (lambda x: vl.frexp(x)[0], _normal), "frexp_exponent": (lambda x: vl.frexp(x)[1], _normal),
    "ldexp": (lambda x: vl.ldexp(x, vl.tensor([1, 2, -1, 0]).to(x.device)), _normal),
    "heaviside": (lambda x: vl.heaviside(x, _like(x, 0.5)), _normal),
    # activations (ops/activation.py), both GELUs, and the float32 kernels' device composites
    "relu": (vl.relu, _normal), "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5), _normal),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), _normal), "elu": (lambda x: F.elu(x, 0.7), _normal),
    "gelu_exact": (F.gelu, _normal), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), _normal),
    "silu": (F.silu, _normal), "softplus": (F.softplus, _normal),
    "softplus_beta": (lambda x: F.softplus(x * 10, beta=3.0, threshold=5.0), _normal),
    "tanh": (vl.tanh, _normal), "sigmoid": (vl.sigmoid, _normal), "cube": (lambda x: x ** 3, _normal),
    # special functions (ops/special.py, varlens/special.py): B.special(xp) on the device
    "erfinv": (vl.erfinv, _unit), "lgamma": (vl.lgamma, _pos), "digamma": (vl.digamma, _pos),
    "polygamma": (lambda x: vl.polygamma(2, x), _pos), "i0": (vl.i0, _normal), "mvlgamma": (lambda x: vl.mvlgamma(x, 2), _above1),
    "expit": (S.expit, _normal), "special_logit": (lambda x: S.logit(x, 0.15), _prob), "ndtr": (S.ndtr, _normal),
    "ndtri": (S.ndtri, _prob), "log_ndtr": (S.log_ndtr, _normal), "erfcx": (S.erfcx, _normal), "i0e": (S.i0e, _normal),
    "i1": (S.i1, _normal), "i1e": (S.i1e, _normal), "entr": (S.entr, _pos), "bessel_j0": (S.bessel_j0, _normal),
    "modified_bessel_k0": (S.modified_bessel_k0, _pos), "spherical_bessel_j0": (S.spherical_bessel_j0, _normal),
    "bessel_j1": (S.bessel_j1, _normal), "bessel_y0": (S.bessel_y0, _pos), "bessel_y1": (S.bessel_y1, _pos),
    "modified_bessel_i0": (S.modified_bessel_i0, _normal), "modified_bessel_i1": (S.modified_bessel_i1, _normal),
    "modified_bessel_k1": (S.modified_bessel_k1, _pos), "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, _pos),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, _pos), "airy_ai": (S.airy_ai, _normal),
    "multigammaln": (lambda x: S.multigammaln(x, 3), _above1), "psi": (S.psi, _pos), "gammaln": (S.gammaln, _pos),
    "chebyshev_t": (lambda x: S.chebyshev_polynomial_t(x, 3), _unit),
    "chebyshev_u": (lambda x: S.chebyshev_polynomial_u(x, 2), _unit),
    "shifted_chebyshev_t": (lambda x: S.shifted_chebyshev_polynomial_t(x, 2), _unit),
    "shifted_chebyshev_u": (lambda x: S.shifted_chebyshev_polynomial_u(x, 3), _unit),
    "hermite_he": (lambda x: S.hermite_polynomial_he(x, 3), _unit),
    "laguerre_l": (lambda x: S.laguerre_polynomial_l(x, 2), _unit),
    "legendre_p": (lambda x: S.legendre_polynomial_p(x, 4), _unit),
    # a CPU 0-d degree (as PyTorch allows): a degree on the device is read once, a host sync (CuPy has no
    # eval_hermite; varlens/special.py), checked in tests/test_device_cupy_api.py
    "hermite_h": (lambda x: S.hermite_polynomial_h(x, vl.tensor(2)), _unit),
    # comparisons and tests (ops/compare.py)
    "isnan": (vl.isnan, _with_nonfinite), "isinf": (vl.isinf, _with_nonfinite), "isfinite": (vl.isfinite, _with_nonfinite),
    "isposinf": (vl.isposinf, _with_nonfinite), "isneginf": (vl.isneginf, _with_nonfinite),
    "gt_scalar": (lambda x: x > 0.1, _normal), "scalar_lt": (lambda x: 0.1 < x, _normal),
    "logical_not": (lambda x: vl.logical_not(x > 0), _normal), "bitwise_not": (lambda x: ~(x > 0), _normal),
    # clamp and where with numbers and 0-d Tensors
    "clamp_0d_bounds": (lambda x: vl.clamp(x, _like(x, -0.3), _like(x, 0.4)), _normal),
    "clamp_max_0d": (lambda x: x.clamp(max=_like(x, 0.2)), _normal),
    "clamp_max_number": (lambda x: vl.clamp(x, max=0.2), _normal),
    "where_numbers": (lambda x: vl.where(x > 0, x, 0.0), _normal),
    "where_scalar_branches": (lambda x: vl.where(x > 0, 1.0, -2.0) * x, _normal),
}

BINARY = {
    "atan2": (vl.atan2, _normal, _normal), "hypot": (vl.hypot, _normal, _normal),
    "logaddexp": (vl.logaddexp, _normal, _normal), "logaddexp2": (vl.logaddexp2, _normal, _normal),
    "copysign": (vl.copysign, _normal, _normal), "fmax": (vl.fmax, _normal, _normal), "fmin": (vl.fmin, _normal, _normal),
    "remainder": (vl.remainder, _normal, _pos), "fmod": (vl.fmod, _normal, _pos),
    "div_floor": (lambda a, b: vl.div(a, b, rounding_mode="floor"), _normal, _pos),
    "div_trunc": (lambda a, b: vl.div(a, b, rounding_mode="trunc"), _normal, _pos),
    "lerp": (lambda a, b: vl.lerp(a, b, 0.3), _normal, _normal),
    "addcmul": (lambda a, b: vl.addcmul(a, b, b, value=0.5), _normal, _normal),
    "addcdiv": (lambda a, b: vl.addcdiv(a, a, b, value=0.5), _normal, _pos),
    "xlogy": (vl.xlogy, _normal, _pos), "xlog1py": (S.xlog1py, _normal, _pos),
    "igamma": (lambda a, x: vl.igamma(a.detach(), x), _pos, _pos),
    "igammac": (lambda a, x: vl.igammac(a.detach(), x), _pos, _pos),
    "zeta": (lambda s, q: S.zeta(s.detach() + 1.5, q), _pos, _pos),
    "nextafter": (vl.nextafter, _normal, _normal),
    "clamp_tensor_bounds": (lambda x, c: vl.clamp(x, c - 0.5, c + 0.5), _normal, _normal),
    "clamp_min_tensor": (lambda x, c: vl.clamp(x, min=c), _normal, _normal),
    "maximum": (vl.maximum, _normal, _normal), "minimum": (vl.minimum, _normal, _normal),
    "eq": (vl.eq, _normal, _normal), "ne": (vl.ne, _normal, _normal), "lt": (lambda a, b: a < b, _normal, _normal),
    "le": (lambda a, b: a <= b, _normal, _normal), "ge": (lambda a, b: a >= b, _normal, _normal),
    "isclose": (lambda a, b: vl.isclose(a, a + b * 1e-9), _normal, _normal),
    "logical_and": (lambda a, b: vl.logical_and(a > 0, b > 0), _normal, _normal),
    "logical_xor": (lambda a, b: vl.logical_xor(a > 0, b > 0), _normal, _normal),
    "bitwise_xor": (lambda a, b: vl.bitwise_xor(a > 0, b > 0), _normal, _normal),
    "where_tensors": (lambda a, b: vl.where(a > b, a, b * 2), _normal, _normal),
}

CASES = {**{k: (v[0], v[1:]) for k, v in UNARY.items()}, **{k: (v[0], v[1:]) for k, v in BINARY.items()}}
TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-6)}


def _run(fn, arrays, dtype, device, sim=None):
    ts = [vl.tensor(a.astype(dtype)).to(device).requires_grad_(True) for a in arrays]
    if sim is None:
        y = fn(*ts)
        if y.requires_grad:
            y.sum().backward()
    else:
        with sim.forbid_host_sync():
            y = fn(*ts)
            if y.requires_grad:
                (y * 1.0).sum().backward()
    return y, [t.grad for t in ts]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(CASES))
def test_elementwise_on_device_matches_cpu(name, dtype, sim_cuda):
    fn, gens = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [g(rng, (3, 4)) for g in gens]
    with np.errstate(all="ignore"):
        yc, gc = _run(fn, arrays, dtype, "cpu")
        yd, gd = _run(fn, arrays, dtype, "cuda", sim_cuda)
    assert yd.is_cuda, f"{name}: the output is on {yd.device}"
    assert yd.dtype == yc.dtype, f"{name}: dtype {yd.dtype} on the device, {yc.dtype} on the CPU"
    assert yd.requires_grad == yc.requires_grad
    assert_close(yd.detach(), yc.detach().numpy(), what=f"{name} value", **TOL[dtype])
    for i, (a, b) in enumerate(zip(gd, gc)):
        assert (a is None) == (b is None), f"{name}: gradient of input {i} on one device only"
        if a is not None:
            assert a.is_cuda, f"{name}: the gradient of input {i} is on {a.device}"
            assert a.dtype == b.dtype
            assert_close(a, b.numpy(), what=f"{name} grad of input {i}", **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_clamp_tensor_bounds_gradients_match_torch(dtype, sim_cuda):
    """clamp with Tensor bounds on the device: gradients reach x and both bounds as in PyTorch,
    including ties (x == bound) and crossed bounds (lo > hi gives hi)."""
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 0.3, -0.2])
    lo = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.6, -1.0])
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.4, -0.5])
    vs = [vl.tensor(a.astype(dtype)).cuda().requires_grad_(True) for a in (x, lo, hi)]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, lo, hi)]
    with sim_cuda.forbid_host_sync():
        y = vl.clamp(*vs)
        y.backward(vl.ones(7, dtype=dtype).cuda())
    torch.clamp(*ts).backward(torch.ones(7, dtype=torch.float64))
    assert y.is_cuda and y.dtype == dtype
    assert_close(y.detach(), torch.clamp(*ts).detach())
    for v, t in zip(vs, ts):
        assert v.grad.is_cuda
        assert_close(v.grad, t.grad)


def test_clamp_0d_bound_dtype_and_gradient_match_torch(sim_cuda):
    """A 0-d float64 bound defers to a float32 input (PyTorch's promotion); its gradient counts
    the clamped entries."""
    a = np.array([-1.0, 0.2, 0.7, 3.0])
    x = vl.tensor(a.astype(np.float32)).cuda().requires_grad_(True)
    lo = vl.tensor(0.5, dtype=vl.float64).cuda().requires_grad_(True)
    xt, lot = torch.tensor(a, dtype=torch.float32, requires_grad=True), torch.tensor(0.5, dtype=torch.float64,
                                                                                     requires_grad=True)
    with sim_cuda.forbid_host_sync():
        y = x.clamp(min=lo)
        y.sum().backward()
    yt = xt.clamp(min=lot)
    yt.sum().backward()
    assert y.dtype == vl.float32 and yt.dtype == torch.float32
    assert_close(y.detach(), yt.detach())
    assert_close(x.grad, xt.grad)
    assert_close(lo.grad, lot.grad)


def test_nan_to_num_matches_torch_on_device(sim_cuda):
    a = np.array([np.nan, np.inf, -np.inf, 1.5, -0.5])
    x = vl.tensor(a).cuda().requires_grad_(True)
    xt = torch.tensor(a, requires_grad=True)
    with sim_cuda.forbid_host_sync():
        y = vl.nan_to_num(x, nan=2.0, neginf=-9.0)
        (y * vl.tensor(np.arange(5.0)).cuda()).sum().backward()
    yt = torch.nan_to_num(xt, nan=2.0, neginf=-9.0)
    (yt * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    assert_close(y.detach(), yt.detach())
    assert_close(x.grad, xt.grad)


def _integer_ops(i):
    four = vl.tensor(4).to(i.device)
    return {"exp": vl.exp(i), "sigmoid": vl.sigmoid(i), "erf": vl.erf(i), "sqrt": vl.sqrt(i), "lgamma": vl.lgamma(i),
            "clamp": vl.clamp(i, 2, 5), "clamp_float": vl.clamp(i, 1.5), "floor_divide": vl.floor_divide(i, 4),
            "remainder": i % 4, "pow": i ** 2, "eq": i == 3, "rgt": 3 < i, "gcd": vl.gcd(i, four),
            "lcm": vl.lcm(i, four), "shift": vl.bitwise_left_shift(i, 2), "isin": vl.isin(i, four),
            "sign_bool": vl.sign(i > 2), "where": vl.where(i > 3, i, 0), "nan_to_num": vl.nan_to_num(i)}


def test_integer_and_bool_inputs_on_device(sim_cuda):
    """Float-only ops promote integer input to float32 on the device too; integer arithmetic,
    comparisons with numbers on either side and the integer-only functions stay on the device."""
    a = np.array([[1, 2, 3], [4, 5, 6]])
    with sim_cuda.forbid_host_sync():
        outs = _integer_ops(vl.tensor(a).cuda())
    ref = _integer_ops(vl.tensor(a))
    for k, v in outs.items():
        assert v.is_cuda, k
        assert v.dtype == ref[k].dtype, (k, v.dtype, ref[k].dtype)
        assert_close(v, ref[k].numpy(), rtol=1e-6, atol=1e-7, what=k)


@pytest.mark.simulator_only
def test_integer_division_by_zero_is_not_checked_on_device(sim_cuda):
    """On the CPU an integer division by zero raises (as PyTorch's CPU kernels); on the device the
    check would read the divisor on the host, so it is skipped (PyTorch's CUDA kernels do not
    raise either).  No host sync happens."""
    a, b = vl.tensor([5, 7]), vl.tensor([2, 0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        vl.remainder(a, b)
    before = sim_cuda.host_syncs[0]
    with sim_cuda.forbid_host_sync():
        r = vl.remainder(a.cuda(), b.cuda())
    assert r.is_cuda and sim_cuda.host_syncs[0] == before
    assert r.cpu().tolist()[0] == 1


def test_zero_dim_inputs_on_device(sim_cuda):
    """0-d device tensors (reductions' results) go through the same ops without leaving the device."""
    for dtype in (np.float64, np.float32):
        x = vl.tensor(np.array(0.3, dtype=dtype)).cuda().requires_grad_(True)
        with sim_cuda.forbid_host_sync():
            y = F.gelu(x) + F.gelu(x, approximate="tanh") + vl.sigmoid(x) + F.silu(x) + vl.erf(x) + vl.clamp(x, 0.0, 0.2)
            y.backward()
        xc = vl.tensor(np.array(0.3, dtype=dtype)).requires_grad_(True)
        yc = F.gelu(xc) + F.gelu(xc, approximate="tanh") + vl.sigmoid(xc) + F.silu(xc) + vl.erf(xc) + vl.clamp(xc, 0.0, 0.2)
        yc.backward()
        assert y.is_cuda and y.dtype == dtype and x.grad.is_cuda
        assert_close(y.detach(), yc.detach().numpy(), rtol=1e-6)
        assert_close(x.grad, xc.grad.numpy(), rtol=1e-6)


def test_equal_allclose_isclose_on_device(sim_cuda):
    """equal/allclose compute on the device and return Python bools (as in PyTorch); isclose
    stays a device tensor."""
    a = vl.tensor([1.0, 2.0], dtype=vl.float64).cuda()
    b = vl.tensor([1.0, 2.0 + 1e-12], dtype=vl.float64).cuda()
    assert vl.allclose(a, b) is True and vl.allclose(a, b + 1) is False
    assert vl.equal(a, a) is True and vl.equal(a, b) is False and vl.equal(a, a[:1]) is False
    c = vl.isclose(a, b, rtol=0.0, atol=1e-13)
    assert c.is_cuda and c.cpu().tolist() == [True, False]


def test_second_derivative_on_device(sim_cuda):
    """create_graph through the elementwise backwards (they are written in primitives that
    dispatch on the array library), on the device."""
    x = vl.tensor(np.linspace(-1.5, 1.5, 7)).cuda().requires_grad_(True)
    xc = vl.tensor(np.linspace(-1.5, 1.5, 7)).requires_grad_(True)
    outs = []
    for t in (x, xc):
        y = (F.gelu(t, approximate="tanh") + vl.tanh(t) * vl.sigmoid(t) + F.elu(t) + vl.atan(t)).sum()
        (g,) = vl.autograd.grad(y, t, create_graph=True)
        g.sum().backward()
        outs.append((g, t.grad))
    assert outs[0][0].is_cuda and outs[0][1].is_cuda
    assert_close(outs[0][0].detach(), outs[1][0].detach().numpy(), rtol=1e-10)
    assert_close(outs[0][1], outs[1][1].numpy(), rtol=1e-10)


def test_fft_frequencies_on_device(sim_cuda):
    """fftfreq/rfftfreq honour device= (as torch.fft's), with the CPU's values."""
    for f in (vl.fft.fftfreq, vl.fft.rfftfreq):
        d = f(7, 0.1, device="cuda", dtype=vl.float64)
        c = f(7, 0.1, dtype=vl.float64)
        assert d.is_cuda and d.dtype == vl.float64
        assert_close(d, c.numpy())
