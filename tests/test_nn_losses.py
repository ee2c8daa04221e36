"""Losses: gradcheck in float64, parity with PyTorch (values and gradients), the notes' claims."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from varlens.autograd import gradcheck, gradgradcheck
from conftest import assert_close, to_torch

D64 = vl.float64
TF = torch.nn.functional


def rnd(*shape, rg=True, seed=0, scale=1.0):
    return vl.tensor(np.random.default_rng(seed).standard_normal(shape) * scale, dtype=D64, requires_grad=rg)


def both(vfn, tfn, *args, rtol=1e-10, atol=1e-12):
    """Run vfn on varlens args and tfn on torch copies; compare value and gradients of every arg
    that requires grad (reduction 'none' outputs are contracted with fixed weights)."""
    targs = [to_torch(a) if isinstance(a, vl.Tensor) else a for a in args]
    out, tout = vfn(*args), tfn(*targs)
    assert_close(out, tout, rtol, atol, "value")
    w = np.random.default_rng(11).standard_normal(tuple(out.shape))
    (out * vl.tensor(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for a, ta in zip(args, targs):
        if isinstance(a, vl.Tensor) and a.requires_grad:
            assert_close(a.grad, ta.grad, rtol, atol, "grad")
            a.grad = None


RED = ["mean", "sum", "none"]


@pytest.mark.parametrize("red", RED)
def test_regression_losses_parity_and_gradcheck(red):
    x, y = rnd(4, 3, seed=1, scale=2.0), rnd(4, 3, seed=2, rg=False)
    for vf, tf in [(F.mse_loss, TF.mse_loss), (F.l1_loss, TF.l1_loss),
                   (lambda a, b, reduction: F.huber_loss(a, b, reduction, delta=0.7),
                    lambda a, b, reduction: TF.huber_loss(a, b, reduction, delta=0.7)),
                   (lambda a, b, reduction: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
                    lambda a, b, reduction: TF.smooth_l1_loss(a, b, reduction=reduction, beta=0.5))]:
        both(lambda a, b: vf(a, b, reduction=red), lambda a, b: tf(a, b, reduction=red), x, y)
        assert gradcheck(lambda a: vf(a, y, reduction=red), (x,))
    # the loss modules wrap the same functions
    assert_close(nn.MSELoss(reduction=red)(x, y), TF.mse_loss(to_torch(x), to_torch(y), reduction=red))
    assert_close(nn.HuberLoss(red, 0.7)(x, y), TF.huber_loss(to_torch(x), to_torch(y), red, 0.7))


def test_mse_gradient_factor_two_seed003_example_166():
    """seed 003 Example 1.6.6 writes the gradient of ||z - y||^2 as z - y; it is 2 (z - y)
    (z - y is the gradient of half the squared error)."""
    z, y = rnd(5, seed=3), rnd(5, seed=4, rg=False)
    F.mse_loss(z, y, reduction="sum").backward()
    assert_close(z.grad, 2 * (z._data - y._data))
    z.grad = None
    (0.5 * F.mse_loss(z, y, reduction="sum")).backward()
    assert_close(z.grad, z._data - y._data)


@pytest.mark.parametrize("red", RED)
def test_cross_entropy_class_indices_parity(red):
    x = rnd(6, 5, seed=5, scale=2.0)
    t = vl.tensor([0, 4, 2, 2, 1, 3])
    w = vl.tensor([0.5, 1.0, 2.0, 1.5, 0.7], dtype=D64)
    both(lambda a: F.cross_entropy(a, t, reduction=red), lambda a: TF.cross_entropy(a, to_torch(t), reduction=red), x)
    assert gradcheck(lambda a: F.cross_entropy(a, t, reduction=red), (x,))
    for kw in [dict(weight=w), dict(label_smoothing=0.2), dict(weight=w, label_smoothing=0.3, ignore_index=2),
               dict(ignore_index=4)]:
        tkw = {k: (to_torch(v) if isinstance(v, vl.Tensor) else v) for k, v in kw.items()}
        both(lambda a: F.cross_entropy(a, t, reduction=red, **kw),
             lambda a: TF.cross_entropy(a, to_torch(t), reduction=red, **tkw), x)
        assert gradcheck(lambda a: F.cross_entropy(a, t, reduction=red, **kw), (x,))


def test_cross_entropy_spatial_unbatched_and_probabilities():
    x4 = rnd(2, 3, 4, 2, seed=6)
    t4 = vl.tensor(np.random.default_rng(0).integers(0, 3, (2, 4, 2)))
    t4[0, 1, 1] = -100
    for red in RED:
        both(lambda a: F.cross_entropy(a, t4, reduction=red, label_smoothing=0.1),
             lambda a: TF.cross_entropy(a, to_torch(t4), reduction=red, label_smoothing=0.1), x4)
    assert gradcheck(lambda a: F.cross_entropy(a, t4), (x4,))
    x1 = rnd(4, seed=7)
    both(lambda a: F.cross_entropy(a, vl.tensor(2)), lambda a: TF.cross_entropy(a, torch.tensor(2)), x1)
    # class probabilities (soft targets), including a gradient with respect to the target
    xp_ = rnd(5, 4, seed=8)
    p = vl.softmax(rnd(5, 4, seed=9, rg=False), 1).requires_grad_()
    w = vl.tensor([1.0, 2.0, 0.5, 1.0], dtype=D64)
    for red in RED:
        both(lambda a, b: F.cross_entropy(a, b, weight=w, reduction=red, label_smoothing=0.1),
             lambda a, b: TF.cross_entropy(a, b, weight=to_torch(w), reduction=red, label_smoothing=0.1), xp_, p)
    assert gradcheck(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), (xp_, p))
    p4 = vl.softmax(rnd(2, 3, 4, 2, seed=10, rg=False), 1)
    both(lambda a: F.cross_entropy(a, p4), lambda a: TF.cross_entropy(a, to_torch(p4)), x4)


def test_cross_entropy_double_backward():
    x = rnd(3, 4, seed=12)
    t = vl.tensor([1, 0, 3])
    assert gradgradcheck(lambda a: F.cross_entropy(a, t, label_smoothing=0.1), (x,))
    assert gradgradcheck(lambda a: F.cross_entropy(a, t), (x,))
    assert gradgradcheck(lambda a: F.cross_entropy(a, vl.softmax(vl.tensor(np.eye(3, 4)), 1)), (x,))


def test_cross_entropy_gradient_is_p_minus_y():
    """seed 001 §3.1 and seed 003 Example 1.6.6: d CE / d logits = softmax(z) - y (per example)."""
    z = rnd(4, 6, seed=13, scale=3.0)
    t = vl.tensor([5, 0, 2, 2])
    F.cross_entropy(z, t, reduction="sum").backward()
    p = np.exp(z._data) / np.exp(z._data).sum(1, keepdims=True)
    y = np.eye(6)[t._data]
    np.testing.assert_allclose(z.grad._data, p - y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(z.grad._data.sum(1), 0, atol=1e-14)      # entries sum to zero
    # and for any target distribution (rows summing to 1)
    z.grad = None
    q = np.random.default_rng(0).dirichlet(np.ones(6), size=4)
    F.cross_entropy(z, vl.tensor(q), reduction="sum").backward()
    np.testing.assert_allclose(z.grad._data, p - q, rtol=1e-12, atol=1e-14)
    # logit form: -sum y z + log sum exp z (seed 003 Example 1.6.6)
    val = F.cross_entropy(z, t, reduction="sum").item()
    direct = sum(-z._data[i, t._data[i]] + math.log(np.exp(z._data[i]).sum()) for i in range(4))
    assert val == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("kind", ["float32", "float64", "smoothing", "probs"])
def test_cross_entropy_frees_its_softmax_rows_after_backward(kind):
    """The node keeps softmax(z) as a saved value, not an attribute, so the engine drops it once
    the loss's backward has run (it is as large as the logits); retain_graph=True keeps it, and
    a second backward gives the same gradient again."""
    import gc
    import weakref

    dt = vl.float32 if kind == "float32" else D64
    z = vl.tensor(np.random.default_rng(14).standard_normal((8, 5)), dtype=dt, requires_grad=True)
    t = vl.softmax(rnd(8, 5, seed=15, rg=False), 1) if kind == "probs" else vl.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    kw = {"label_smoothing": 0.1} if kind == "smoothing" else {}
    loss = F.cross_entropy(z, t, **kw)
    p = loss.grad_fn.saved[0]
    np.testing.assert_allclose(p.sum(1), 1, rtol=1e-6)   # softmax rows
    loss.backward(retain_graph=True)
    g1 = z.grad.numpy().copy()
    z.grad = None
    ref = weakref.ref(p)
    del p
    loss.backward()
    np.testing.assert_array_equal(z.grad.numpy(), g1)
    gc.collect()
    assert loss.grad_fn.saved is None and ref() is None, "the softmax rows outlived the backward"


def test_cross_entropy_bad_input_messages():
    x = vl.randn(3, 5)
    with pytest.raises(IndexError, match="target class index 7 is out of range for 5 classes"):
        F.cross_entropy(x, vl.tensor([0, 7, 1]))
    with pytest.raises(IndexError, match="index -3 is out of range for 5 classes"):
        nn.CrossEntropyLoss()(x, vl.tensor([0, -3, 1]))
    with pytest.raises(ValueError, match=r"target must have shape \(3,\)"):
        F.cross_entropy(x, vl.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.cross_entropy(x, vl.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\)"):
        F.cross_entropy(x, vl.tensor([0, 1, 2]), weight=vl.ones(4))


@pytest.mark.parametrize("red", RED)
def test_nll_loss_parity(red):
    lp = vl.log_softmax(rnd(5, 4, seed=14), 1).detach().requires_grad_()
    t = vl.tensor([0, 3, 1, 1, 2])
    w = vl.tensor([1.0, 0.5, 2.0, 1.0], dtype=D64)
    both(lambda a: F.nll_loss(a, t, weight=w, ignore_index=1, reduction=red),
         lambda a: TF.nll_loss(a, to_torch(t), weight=to_torch(w), ignore_index=1, reduction=red), lp)
    assert gradcheck(lambda a: F.nll_loss(a, t, weight=w, reduction=red), (lp,))
    lp4 = rnd(2, 3, 2, seed=15)
    t4 = vl.tensor([[0, 2], [1, 1]])
    both(lambda a: nn.NLLLoss(reduction=red)(a, t4), lambda a: torch.nn.NLLLoss(reduction=red)(a, to_torch(t4)), lp4)


@pytest.mark.parametrize("red", RED)
def test_binary_losses_parity(red):
    x = rnd(4, 3, seed=16, scale=3.0)
    x._data[0, 0] = 0.0                                # sigmoid'(0): the fused op is exact here
    y = vl.tensor(np.random.default_rng(1).random((4, 3)), requires_grad=True)
    w = vl.tensor([0.5, 1.0, 2.0], dtype=D64)
    pw = vl.tensor([3.0, 1.0, 0.5], dtype=D64)
    both(lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, reduction=red, pos_weight=pw),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, to_torch(w), reduction=red, pos_weight=to_torch(pw)),
         x, y)
    both(lambda a, b: nn.BCEWithLogitsLoss(reduction=red)(a, b),
         lambda a, b: torch.nn.BCEWithLogitsLoss(reduction=red)(a, b), x, y)
    assert gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, pos_weight=pw, reduction=red), (x, y))
    assert gradgradcheck(lambda a: F.binary_cross_entropy_with_logits(a, y.detach(), pos_weight=pw), (x,))
    pr = vl.sigmoid(x).detach().requires_grad_()
    both(lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=red),
         lambda a, b: TF.binary_cross_entropy(a, b, weight=to_torch(w), reduction=red), pr, y, rtol=1e-9)
    assert gradcheck(lambda a: F.binary_cross_entropy(a, y.detach(), reduction=red), (pr,))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x, y)


def test_bce_with_logits_large_logits_are_finite():
    x = vl.tensor([-800.0, 800.0, 0.0], dtype=D64, requires_grad=True)
    y = vl.tensor([1.0, 0.0, 1.0], dtype=D64)
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="sum")
    assert loss.item() == pytest.approx(1600 + math.log(2))
    loss.backward()
    np.testing.assert_allclose(x.grad._data, [-1.0, 1.0, -0.5])      # sigmoid(x) - y


@pytest.mark.filterwarnings("ignore:reduction")
@pytest.mark.filterwarnings("ignore:kl_div")
@pytest.mark.parametrize("red", ["mean", "sum", "none", "batchmean"])
def test_kl_div_parity(red):
    lp = vl.log_softmax(rnd(3, 4, seed=17), 1).detach().requires_grad_()
    q = vl.softmax(rnd(3, 4, seed=18, rg=False), 1)
    q[0, 1] = 0.0                                      # a zero target entry contributes 0
    both(lambda a: F.kl_div(a, q, reduction=red), lambda a: TF.kl_div(a, to_torch(q), reduction=red), lp)
    lq = vl.log(vl.softmax(rnd(3, 4, seed=19, rg=False), 1)).requires_grad_()
    both(lambda a, b: nn.KLDivLoss(reduction=red, log_target=True)(a, b),
         lambda a, b: torch.nn.KLDivLoss(reduction=red, log_target=True)(a, b), lp, lq)
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction=red, log_target=True), (lp, lq))
    qq = vl.softmax(rnd(3, 4, seed=24, rg=False), 1).requires_grad_()
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction=red), (lp, qq))


@pytest.mark.parametrize("red", RED)
def test_gaussian_nll_parity(red):
    x, y = rnd(4, 3, seed=20), rnd(4, 3, seed=21, rg=False)
    var = vl.tensor(np.random.default_rng(2).random((4, 3)) + 0.1, requires_grad=True)
    var1 = vl.tensor(np.random.default_rng(3).random((4, 1)) + 0.1, requires_grad=True)
    both(lambda a, v: F.gaussian_nll_loss(a, y, v, reduction=red, full=True),
         lambda a, v: TF.gaussian_nll_loss(a, to_torch(y), v, reduction=red, full=True), x, var)
    both(lambda a, v: nn.GaussianNLLLoss(reduction=red)(a, y, v),
         lambda a, v: torch.nn.GaussianNLLLoss(reduction=red)(a, to_torch(y), v), x, var1)
    assert gradcheck(lambda a, v: F.gaussian_nll_loss(a, y, v, reduction=red), (x, var))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, y, -var)


def test_poisson_nll_parity():
    x = rnd(3, 4, seed=22)
    y = vl.tensor(np.random.default_rng(4).poisson(2.0, (3, 4)).astype(float))
    both(lambda a: F.poisson_nll_loss(a, y), lambda a: TF.poisson_nll_loss(a, to_torch(y)), x)
    both(lambda a: nn.PoissonNLLLoss(full=True)(a, y), lambda a: torch.nn.PoissonNLLLoss(full=True)(a, to_torch(y)), x)
    assert gradcheck(lambda a: F.poisson_nll_loss(a, y, full=True), (x,))
    both(lambda a: nn.SmoothL1Loss(beta=0.3)(a, y), lambda a: torch.nn.SmoothL1Loss(beta=0.3)(a, to_torch(y)), x)
    both(lambda a: nn.L1Loss(reduction="sum")(a, y), lambda a: torch.nn.L1Loss(reduction="sum")(a, to_torch(y)), x)


def test_l1_l2_penalties_seed003_4_1_1():
    m = nn.Linear(3, 2).double()
    lam = 1e-2
    pen = F.l2_penalty(m, lam)
    expect = lam * sum((p._data ** 2).sum() for p in m.parameters())
    assert pen.item() == pytest.approx(expect, rel=1e-12)
    pen.backward()
    assert_close(m.weight.grad, 2 * lam * m.weight._data)             # gradient 2 lambda W
    w = rnd(3, 3, seed=23)
    assert F.l1_penalty([w], 0.5).item() == pytest.approx(0.5 * np.abs(w._data).sum())
    assert gradcheck(lambda w: F.l1_penalty(w) + F.l2_penalty(w, 0.3), (w,))
    with pytest.raises(ValueError, match="no tensors"):
        F.l2_penalty([])
