"""The extra PyTorch Tensor API of varlens/ops/extra.py against torch: values, gradients
(float64), in-place variants, and errors."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck

RNG = np.random.default_rng(0)


def pair(a, grad=False):
    return vl.tensor(a.copy(), requires_grad=grad), torch.tensor(a.copy(), requires_grad=grad)


def check(fv, ft, a, grad=True, **kw):
    """Same value, and the same gradient of sum(out * w), for one input array."""
    v, t = pair(a, grad)
    ov, ot = fv(v), ft(t)
    np.testing.assert_allclose(np.asarray(ov.detach().numpy(), dtype=float),
                               ot.detach().numpy().astype(float), rtol=1e-12, atol=1e-12, **kw)
    if grad:
        w = RNG.standard_normal(tuple(ot.shape))
        (ov * vl.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(v.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


CASES = [
    ("index_add", lambda x: x.index_add(1, vl.tensor(np.array([0, 2, 0])), vl.tensor(np.ones((3, 3)) * 2.0)),
     lambda x: x.index_add(1, torch.tensor([0, 2, 0]), torch.ones(3, 3, dtype=torch.float64) * 2.0)),
    ("index_add alpha", lambda x: x.index_add(0, vl.tensor(np.array([1])), vl.tensor(np.ones((1, 4))), alpha=3),
     lambda x: x.index_add(0, torch.tensor([1]), torch.ones(1, 4, dtype=torch.float64), alpha=3)),
    ("index_copy", lambda x: x.index_copy(1, vl.tensor(np.array([3, 1])), vl.tensor(np.zeros((3, 2)))),
     lambda x: x.index_copy(1, torch.tensor([3, 1]), torch.zeros(3, 2, dtype=torch.float64))),
    ("index_fill", lambda x: x.index_fill(1, vl.tensor(np.array([0, 3])), -1.0),
     lambda x: x.index_fill(1, torch.tensor([0, 3]), -1.0)),
    ("fmod", lambda x: x.fmod(0.7), lambda x: x.fmod(0.7)),
    ("frac", lambda x: x.frac(), lambda x: x.frac()),
    ("diff", lambda x: x.diff(dim=1), lambda x: x.diff(dim=1)),
    ("diff n=2 dim0", lambda x: vl.diff(x, n=2, dim=0), lambda x: torch.diff(x, n=2, dim=0)),
    ("narrow", lambda x: x.narrow(1, 1, 2), lambda x: x.narrow(1, 1, 2)),
    ("narrow negative start", lambda x: vl.narrow(x, 0, -2, 2), lambda x: torch.narrow(x, 0, -2, 2)),
    ("median dim", lambda x: x.median(dim=1).values, lambda x: x.median(dim=1).values),
    ("median keepdim", lambda x: x.median(0, keepdim=True).values, lambda x: x.median(0, keepdim=True).values),
    ("median all", lambda x: x.median(), lambda x: x.median()),
    ("rot90", lambda x: x.rot90(1, (0, 1)), lambda x: x.rot90(1, (0, 1))),
    ("rot90 k=3", lambda x: vl.rot90(x, 3, (0, 1)), lambda x: torch.rot90(x, 3, (0, 1))),
    ("rot90 k=2", lambda x: vl.rot90(x, 2, (0, 1)), lambda x: torch.rot90(x, 2, (0, 1))),
    ("fliplr", lambda x: x.fliplr(), lambda x: x.fliplr()),
    ("flipud", lambda x: vl.flipud(x), lambda x: torch.flipud(x)),
    ("reshape_as", lambda x: x.reshape_as(vl.zeros(4, 3)), lambda x: x.reshape_as(torch.zeros(4, 3))),
]


@pytest.mark.parametrize("name,fv,ft", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fv, ft):
    check(fv, ft, RNG.standard_normal((3, 4)))


def test_logit_and_nan_to_num():
    p = RNG.uniform(0.05, 0.95, (3, 4))
    check(lambda x: x.logit(), lambda x: x.logit(), p)
    check(lambda x: vl.logit(x, eps=0.1), lambda x: torch.logit(x, eps=0.1), p)
    a = RNG.standard_normal((3, 4))
    a[0, 0], a[1, 1], a[2, 2] = np.nan, np.inf, -np.inf
    check(lambda x: x.nan_to_num(), lambda x: x.nan_to_num(), a)
    check(lambda x: vl.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
          lambda x: torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0), a)


def test_gradcheck_of_composed_ops():
    x = vl.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda t: t.index_add(1, vl.tensor(np.array([0, 0])), t[:, :2] * 2.0), (x,))
    assert gradcheck(lambda t: t.median(dim=1).values, (x,))
    assert gradcheck(lambda t: t.diff(n=2, dim=1), (x,))


def test_counting_and_histograms():
    a = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    v, t = pair(a)
    assert v.count_nonzero().item() == t.count_nonzero().item()
    assert v.count_nonzero(dim=1).tolist() == t.count_nonzero(dim=1).tolist()
    ints = np.array([0, 3, 3, 1, 5])
    assert vl.bincount(vl.tensor(ints)).tolist() == torch.bincount(torch.tensor(ints)).tolist()
    w = np.array([0.5, 1.0, 2.0, 0.0, 1.5])
    np.testing.assert_allclose(vl.bincount(vl.tensor(ints), weights=vl.tensor(w), minlength=8).numpy(),
                               torch.bincount(torch.tensor(ints), weights=torch.tensor(w), minlength=8).numpy())
    x = RNG.standard_normal(200)
    np.testing.assert_allclose(vl.histc(vl.tensor(x), bins=7, min=-2, max=2).numpy(),
                               torch.histc(torch.tensor(x), bins=7, min=-2, max=2).numpy())
    with pytest.raises(RuntimeError, match="non-negative integers"):
        vl.bincount(vl.tensor(np.array([1, -1])))


INPLACE = [
    ("scatter_", lambda x: x.scatter_(1, vl.tensor(np.array([[0], [2], [1]])), 9.0),
     lambda x: x.scatter_(1, torch.tensor([[0], [2], [1]]), 9.0)),
    ("scatter_add_", lambda x: x.scatter_add_(0, vl.tensor(np.array([[0, 1, 2, 0]])), vl.tensor(np.ones((1, 4)))),
     lambda x: x.scatter_add_(0, torch.tensor([[0, 1, 2, 0]]), torch.ones(1, 4, dtype=torch.float64))),
    ("masked_fill_", lambda x: x.masked_fill_(x > 0, 0.5), lambda x: x.masked_fill_(x > 0, 0.5)),
    ("index_add_", lambda x: x.index_add_(1, vl.tensor(np.array([1])), vl.tensor(np.ones((3, 1)))),
     lambda x: x.index_add_(1, torch.tensor([1]), torch.ones(3, 1, dtype=torch.float64))),
    ("clamp_min_", lambda x: x.clamp_min_(0.1), lambda x: x.clamp_min_(0.1)),
    ("clamp_max_", lambda x: x.clamp_max_(0.1), lambda x: x.clamp_max_(0.1)),
    ("floor_", lambda x: x.floor_(), lambda x: x.floor_()),
    ("round_", lambda x: x.round_(), lambda x: x.round_()),
    ("sign_", lambda x: x.sign_(), lambda x: x.sign_()),
    ("square_", lambda x: x.square_(), lambda x: x.square_()),
    ("reciprocal_", lambda x: x.reciprocal_(), lambda x: x.reciprocal_()),
    ("fmod_", lambda x: x.fmod_(0.3), lambda x: x.fmod_(0.3)),
    ("nan_to_num_", lambda x: x.nan_to_num_(), lambda x: x.nan_to_num_()),
    ("unsqueeze_", lambda x: x.unsqueeze_(0), lambda x: x.unsqueeze_(0)),
    ("t_", lambda x: x.t_(), lambda x: x.t_()),
]


@pytest.mark.parametrize("name,fv,ft", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_matches_torch_and_returns_self(name, fv, ft):
    a = RNG.standard_normal((3, 4))
    v, t = pair(a)
    rv, rt = fv(v), ft(t)
    assert rv is v
    assert tuple(v.shape) == tuple(t.shape)
    np.testing.assert_allclose(v.numpy(), t.numpy(), rtol=1e-12)


def test_inplace_inside_autograd_matches_torch_gradient():
    a = RNG.standard_normal((3, 4))
    v, t = pair(a, grad=True)
    hv, ht = v * 2, t * 2
    hv.masked_fill_(hv > 0, 0.0)
    ht.masked_fill_(ht > 0, 0.0)
    hv.index_add_(1, vl.tensor(np.array([0])), v[:, 1:2])
    ht.index_add_(1, torch.tensor([0]), t[:, 1:2])
    hv.sum().backward()
    ht.sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), t.grad.numpy())


def test_inplace_on_a_leaf_that_requires_grad_is_refused():
    v = vl.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        v.clamp_min_(0.5)


def test_type_and_storage_queries():
    v = vl.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    t = torch.tensor(v.numpy())
    assert v.stride() == t.stride() and v.t().stride() == t.t().stride()
    assert v.element_size() == t.element_size() and v.nbytes == t.nbytes
    assert str(v.byte().dtype) == "uint8" and str(v.short().dtype) == "int16" and str(v.char().dtype) == "int8"
    assert v.type_as(vl.zeros(1, dtype=vl.float64)).dtype == np.float64
    e = vl.zeros(10000).exponential_(2.0, generator=vl.Generator().manual_seed(0))
    assert abs(float(e.mean().item()) - 0.5) < 0.03 and float(e.min().item()) >= 0
    r = vl.zeros(1000).random_(0, 5, generator=vl.Generator().manual_seed(0))
    assert set(np.unique(r.numpy()).tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}


def test_bad_input_messages():
    x = vl.zeros(3, 4)
    with pytest.raises(RuntimeError, match="narrow"):
        x.narrow(1, 3, 2)
    with pytest.raises(IndexError, match="index_add: index out of range"):
        x.index_add(1, vl.tensor(np.array([4])), vl.ones(3, 1))
    with pytest.raises(RuntimeError, match="source must have shape"):
        x.index_add(1, vl.tensor(np.array([1])), vl.ones(2, 1))
    with pytest.raises(RuntimeError, match="1-D integer"):
        x.index_fill(1, vl.tensor(np.array([[1]])), 0.0)


@pytest.mark.parametrize("dim,size,step", [(2, 4, 2), (3, 3, 3), (2, 10, 1), (-1, 2, 1), (0, 1, 1), (2, 3, 4)])
def test_unfold_matches_torch(dim, size, step):
    a = RNG.standard_normal((2, 3, 10, 7))
    check(lambda x: x.unfold(dim, size, step), lambda x: x.unfold(dim, size, step), a)


def test_unfold_patchify_gradcheck_and_errors():
    x = vl.tensor(RNG.standard_normal((1, 2, 4, 6)), requires_grad=True)
    assert gradcheck(lambda t: t.unfold(2, 2, 2).unfold(3, 3, 3), (x,))  # ViT-style patches
    with pytest.raises(RuntimeError, match="larger than dimension"):
        x.unfold(2, 5, 1)
    with pytest.raises(RuntimeError, match="must be positive"):
        x.unfold(2, 2, 0)
