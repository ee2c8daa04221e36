"""varlens/ops/more.py against torch: values and gradients (float64), errors."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck

RNG = np.random.default_rng(0)


def run(fv, ft, arrays, grad=True):
    vs = [vl.tensor(a.copy(), requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a.copy(), requires_grad=grad) for a in arrays]
    ov, ot = fv(*vs), ft(*ts)
    if isinstance(ot, tuple):
        ov, ot = ov[0], ot[0]
    np.testing.assert_allclose(np.asarray(ov.detach().numpy(), dtype=float), ot.detach().numpy().astype(float),
                               rtol=1e-10, atol=1e-12)
    if grad:
        w = RNG.standard_normal(tuple(ot.shape))
        (ov * vl.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        for a, b in zip(vs, ts):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


U = lambda *s: RNG.uniform(-0.9, 0.9, s)  # noqa: E731
N = lambda *s: RNG.standard_normal(s)  # noqa: E731
P = lambda *s: RNG.uniform(0.5, 3.0, s)  # noqa: E731
SIGNS = RNG.standard_normal((3, 4))

CASES = [
    ("atan", lambda x: x.atan(), lambda x: x.atan(), [N(3, 4)]),
    ("asin", lambda x: vl.asin(x), lambda x: torch.asin(x), [U(3, 4)]),
    ("acos", lambda x: vl.acos(x), lambda x: torch.acos(x), [U(3, 4)]),
    ("atan2", lambda y, x: vl.atan2(y, x), lambda y, x: torch.atan2(y, x), [N(3, 4), N(3, 4)]),
    ("erfinv", lambda x: vl.erfinv(x), lambda x: torch.erfinv(x), [U(3, 4)]),
    ("lgamma", lambda x: vl.lgamma(x), lambda x: torch.lgamma(x), [P(3, 4)]),
    ("digamma", lambda x: vl.digamma(x), lambda x: torch.digamma(x), [P(3, 4)]),
    ("tan", lambda x: vl.tan(x), lambda x: torch.tan(x), [U(3, 4)]),
    ("sinh", lambda x: vl.sinh(x), lambda x: torch.sinh(x), [N(3, 4)]),
    ("cosh", lambda x: vl.cosh(x), lambda x: torch.cosh(x), [N(3, 4)]),
    ("hypot", lambda a, b: vl.hypot(a, b), lambda a, b: torch.hypot(a, b), [N(3, 4), N(3, 4)]),
    ("logaddexp", lambda a, b: vl.logaddexp(a, b), lambda a, b: torch.logaddexp(a, b), [N(3, 4) * 30, N(3, 4)]),
    ("xlogy", lambda a, b: vl.xlogy(a, b), lambda a, b: torch.xlogy(a, b), [N(3, 4), P(3, 4)]),
    ("exp2", lambda x: vl.exp2(x), lambda x: torch.exp2(x), [N(3, 4)]),
    ("erfc", lambda x: vl.erfc(x), lambda x: torch.erfc(x), [N(3, 4)]),
    ("deg2rad", lambda x: vl.deg2rad(x), lambda x: torch.deg2rad(x), [N(3, 4)]),
    ("copysign", lambda a: vl.copysign(a, vl.tensor(SIGNS)), lambda a: torch.copysign(a, torch.tensor(SIGNS)), [N(3, 4)]),
    ("addmm", lambda i, a, b: vl.addmm(i, a, b, beta=0.5, alpha=2.0),
     lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0), [N(3, 5), N(3, 4), N(4, 5)]),
    ("baddbmm", lambda i, a, b: vl.baddbmm(i, a, b), lambda i, a, b: torch.baddbmm(i, a, b),
     [N(2, 3, 5), N(2, 3, 4), N(2, 4, 5)]),
    ("addmv", lambda i, a, b: vl.addmv(i, a, b), lambda i, a, b: torch.addmv(i, a, b), [N(3), N(3, 4), N(4)]),
    ("addr", lambda i, a, b: vl.addr(i, a, b), lambda i, a, b: torch.addr(i, a, b), [N(3, 4), N(3), N(4)]),
    ("trace", lambda x: vl.trace(x), lambda x: torch.trace(x), [N(4, 4)]),
    ("cross", lambda a, b: vl.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1), [N(4, 3), N(4, 3)]),
    ("kron", lambda a, b: vl.kron(a, b), lambda a, b: torch.kron(a, b), [N(2, 3), N(3, 2)]),
    ("cdist", lambda a, b: vl.cdist(a, b), lambda a, b: torch.cdist(a, b), [N(4, 3), N(5, 3)]),
    ("cdist p1", lambda a, b: vl.cdist(a, b, p=1), lambda a, b: torch.cdist(a, b, p=1), [N(4, 3), N(5, 3)]),
    ("tile", lambda x: vl.tile(x, (2, 1, 3)), lambda x: torch.tile(x, (2, 1, 3)), [N(3, 4)]),
    ("vstack", lambda a, b: vl.vstack([a, b]), lambda a, b: torch.vstack([a, b]), [N(4), N(4)]),
    ("hstack", lambda a, b: vl.hstack([a, b]), lambda a, b: torch.hstack([a, b]), [N(2, 3), N(2, 1)]),
    ("dstack", lambda a, b: vl.dstack([a, b]), lambda a, b: torch.dstack([a, b]), [N(2, 3), N(2, 3)]),
    ("column_stack", lambda a, b: vl.column_stack([a, b]), lambda a, b: torch.column_stack([a, b]), [N(3), N(3, 2)]),
    ("masked_select", lambda x: vl.masked_select(x, vl.tensor(np.array([True, False, True, True]))),
     lambda x: torch.masked_select(x, torch.tensor([True, False, True, True])), [N(3, 4)]),
    ("take", lambda x: vl.take(x, vl.tensor(np.array([[0, 5], [11, 5]]))),
     lambda x: torch.take(x, torch.tensor([[0, 5], [11, 5]])), [N(3, 4)]),
    ("take_along_dim", lambda x: vl.take_along_dim(x, vl.tensor(np.array([[0], [3], [1]])), 1),
     lambda x: torch.take_along_dim(x, torch.tensor([[0], [3], [1]]), 1), [N(3, 4)]),
    ("kthvalue", lambda x: vl.kthvalue(x, 2, 1).values, lambda x: torch.kthvalue(x, 2, 1).values, [N(3, 4)]),
    ("quantile dim", lambda x: vl.quantile(x, 0.3, dim=1), lambda x: torch.quantile(x, 0.3, dim=1), [N(3, 5)]),
    ("quantile vec", lambda x: vl.quantile(x, vl.tensor(np.array([0.1, 0.5, 0.9]))),
     lambda x: torch.quantile(x, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)), [N(3, 5)]),
    ("quantile keepdim", lambda x: vl.quantile(x, 0.75, dim=0, keepdim=True),
     lambda x: torch.quantile(x, 0.75, dim=0, keepdim=True), [N(4, 3)]),
    ("logcumsumexp", lambda x: vl.logcumsumexp(x, 1), lambda x: torch.logcumsumexp(x, 1), [N(3, 5) * 10]),
    ("aminmax", lambda x: vl.aminmax(x, dim=1).max, lambda x: torch.aminmax(x, dim=1).max, [N(3, 4)]),
    ("clamp_min", lambda x: vl.clamp_min(x, 0.1), lambda x: torch.clamp_min(x, 0.1), [N(3, 4)]),
]


@pytest.mark.parametrize("name,fv,ft,arrays", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fv, ft, arrays):
    run(fv, ft, arrays)


@pytest.mark.parametrize("interp", ["lower", "higher", "nearest", "midpoint"])
def test_quantile_interpolations(interp):
    a = N(2, 7)
    v = vl.quantile(vl.tensor(a), 0.4, dim=1, interpolation=interp).numpy()
    t = torch.quantile(torch.tensor(a), 0.4, dim=1, interpolation=interp).numpy()
    np.testing.assert_allclose(v, t)


def test_non_differentiable_helpers_match_torch():
    s = np.array([1.0, 3.0, 5.0, 7.0])
    v = np.array([[0.0, 3.0], [6.0, 9.0]])
    assert vl.searchsorted(vl.tensor(s), vl.tensor(v)).tolist() == torch.searchsorted(torch.tensor(s), torch.tensor(v)).tolist()
    assert vl.searchsorted(vl.tensor(s), vl.tensor(v), right=True).tolist() == \
        torch.searchsorted(torch.tensor(s), torch.tensor(v), right=True).tolist()
    assert vl.bucketize(vl.tensor(v), vl.tensor(s)).tolist() == torch.bucketize(torch.tensor(v), torch.tensor(s)).tolist()
    x = np.array([[0.0, -1.0], [2.0, -0.0]])
    assert vl.argwhere(vl.tensor(x)).tolist() == torch.argwhere(torch.tensor(x)).tolist()
    assert vl.signbit(vl.tensor(x)).tolist() == torch.signbit(torch.tensor(x)).tolist()
    assert vl.heaviside(vl.tensor(x), vl.tensor(0.5)).tolist() == \
        torch.heaviside(torch.tensor(x), torch.tensor(0.5, dtype=torch.float64)).tolist()


def test_gradchecks_and_zero_distance_gradient():
    x = vl.tensor(RNG.uniform(-0.8, 0.8, 5), requires_grad=True)
    for f in (vl.asin, vl.acos, vl.atan, vl.erfinv):
        assert gradcheck(f, (x,))
    a = vl.tensor(N(3, 2), requires_grad=True)
    vl.cdist(a, a).sum().backward()  # zero distances on the diagonal: zero gradient there, no NaN
    assert np.isfinite(a.grad.numpy()).all()
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    torch.cdist(ta, ta).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    (g,) = vl.autograd.grad(vl.erfinv(x).sum(), x, create_graph=True)  # second derivative
    (h,) = vl.autograd.grad(g.sum(), x)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad(torch.erfinv(tx).sum(), tx, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-9)


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="size 3"):
        vl.cross(vl.zeros(2, 4), vl.zeros(2, 4))
    with pytest.raises(RuntimeError, match="k must be in"):
        vl.kthvalue(vl.zeros(3), 4)
    with pytest.raises(ValueError, match="q must be"):
        vl.quantile(vl.zeros(3), 1.5)
    with pytest.raises(RuntimeError, match="2-D"):
        vl.trace(vl.zeros(3))
    with pytest.raises(RuntimeError, match="bool"):
        vl.masked_select(vl.zeros(3), vl.tensor(np.array([1, 0, 1])))
    assert math.isclose(vl.tensor(np.array([0.0, 0.5])).atan2(vl.tensor(np.array([1.0, 1.0])))[1].item(),
                        math.atan2(0.5, 1.0))


SPD = np.eye(4) * 4 + RNG.standard_normal((3, 4, 4))
LIN = [
    ("inv", lambda a: vl.linalg.inv(a), lambda a: torch.linalg.inv(a), [SPD]),
    ("inverse method", lambda a: a.inverse(), lambda a: a.inverse(), [SPD]),
    ("det", lambda a: vl.det(a), lambda a: torch.det(a), [SPD]),
    ("slogdet", lambda a: vl.linalg.slogdet(a).logabsdet, lambda a: torch.linalg.slogdet(a).logabsdet, [SPD]),
    ("logdet", lambda a: vl.logdet(a), lambda a: torch.logdet(a), [SPD @ np.swapaxes(SPD, -1, -2)]),
    ("solve matrix", lambda a, b: vl.linalg.solve(a, b), lambda a, b: torch.linalg.solve(a, b), [SPD, N(3, 4, 2)]),
    ("solve vector", lambda a, b: vl.linalg.solve(a, b), lambda a, b: torch.linalg.solve(a, b), [SPD, N(3, 4)]),
]


@pytest.mark.parametrize("name,fv,ft,arrays", LIN, ids=[c[0] for c in LIN])
def test_linalg_matches_torch(name, fv, ft, arrays):
    run(fv, ft, arrays)


def test_linalg_gradcheck_second_order_and_errors():
    a = vl.tensor(np.eye(3) * 3 + RNG.standard_normal((3, 3)), requires_grad=True)
    assert gradcheck(vl.linalg.inv, (a,)) and gradcheck(vl.det, (a,))
    (g,) = vl.autograd.grad(vl.linalg.inv(a).sum(), a, create_graph=True)
    (h,) = vl.autograd.grad(g.sum(), a)
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.inv(ta).sum(), ta, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), ta)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-9)
    with pytest.raises(RuntimeError, match="square matrix"):
        vl.linalg.inv(vl.zeros(2, 3))
    sign = vl.linalg.slogdet(vl.tensor(np.array([[0.0, 1.0], [1.0, 0.0]]))).sign.item()
    assert sign == -1.0
