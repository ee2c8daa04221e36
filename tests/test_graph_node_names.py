"""The autograd graph as PyTorch code sees it (issue 18): node names, ``next_functions`` in
PyTorch's order, one node per loss whatever the reduction, and the values, gradients and second
derivatives of those nodes, against PyTorch 2.13 run in the same test.

Covered: F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits
(SmoothL1LossBackward0, HuberLossBackward0, BinaryCrossEntropyBackward0,
BinaryCrossEntropyWithLogitsBackward0 for every reduction), x.max() / x.min() (MaxBackward1,
MinBackward1), x.max(dim) / x.min(dim) (MaxBackward0, MinBackward0), and nn.Linear / F.linear
(AddmmBackward0(bias, input, TBackward0(weight)) and the views PyTorch puts around it for other
input ranks; docs/conventions.md, "Graph nodes").  Each loss also runs on the simulated CUDA
device (results on cuda:0, no host read inside forward and backward).
"""
import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn.functional as F
from varlens.autograd import gradcheck, gradgradcheck
from conftest import _host, assert_close, to_torch

TF = torch.nn.functional
RED = ["mean", "sum", "none"]


def tree(fn, depth=5):
    """(name(), [(subtree, index), ...]) down every edge: the same call gives PyTorch's and
    varlens' graphs (AccumulateGrad's name() is "torch::autograd::AccumulateGrad" in both)."""
    if fn is None:
        return None
    kids = [(tree(n, depth - 1), i) for n, i in fn.next_functions] if depth else []
    return fn.name(), kids


def _arrays(seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal((4, 3)) * 2
    y = r.standard_normal((4, 3))
    p = r.uniform(0.05, 0.95, (4, 3))       # probabilities, away from 0 and 1
    t = r.uniform(0, 1, (4, 3))
    w = r.uniform(0.5, 1.5, (4, 3))
    pw = r.uniform(0.5, 2.0, (3,))
    return x, y, p, t, w, pw


# name -> (function of (lib's functional module, lib, a, b, reduction, consts), which arrays a and b are)
LOSSES = {
    "smooth_l1": (lambda M, L, a, b, r, c: M.smooth_l1_loss(a, b, reduction=r, beta=0.5), "xy"),
    "smooth_l1_beta1": (lambda M, L, a, b, r, c: M.smooth_l1_loss(a, b, reduction=r), "xy"),
    "huber": (lambda M, L, a, b, r, c: M.huber_loss(a, b, reduction=r, delta=0.7), "xy"),
    "huber_weight": (lambda M, L, a, b, r, c: M.huber_loss(a, b, reduction=r, delta=0.7, weight=c["w"]), "xy"),
    "bce": (lambda M, L, a, b, r, c: M.binary_cross_entropy(a, b, reduction=r), "pt"),
    "bce_weight": (lambda M, L, a, b, r, c: M.binary_cross_entropy(a, b, weight=c["w"], reduction=r), "pt"),
    "bce_logits": (lambda M, L, a, b, r, c: M.binary_cross_entropy_with_logits(a, b, reduction=r), "xt"),
    "bce_logits_weights": (lambda M, L, a, b, r, c: M.binary_cross_entropy_with_logits(
        a, b, c["w"], reduction=r, pos_weight=c["pw"]), "xt"),
}


def _make(lib, name, target_grad, seed=0):
    """(a, b, consts) as float64 tensors of ``lib`` for the loss ``name``."""
    x, y, p, t, w, pw = _arrays(seed)
    arrs = {"x": x, "y": y, "p": p, "t": t}
    which = LOSSES[name][1]
    if lib is vl:
        a = vl.tensor(arrs[which[0]], requires_grad=True)
        b = vl.tensor(arrs[which[1]], requires_grad=target_grad)
        return a, b, {"w": vl.tensor(w), "pw": vl.tensor(pw)}
    a = torch.tensor(arrs[which[0]], requires_grad=True)
    b = torch.tensor(arrs[which[1]], requires_grad=target_grad)
    return a, b, {"w": torch.tensor(w), "pw": torch.tensor(pw)}


def _call(lib, name, a, b, red, c):
    return LOSSES[name][0](F if lib is vl else TF, lib, a, b, red, c)


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("target_grad", [False, True], ids=["target_const", "target_grad"])
def test_loss_graph_matches_torch(name, red, target_grad):
    """One node named as PyTorch's, edges (input, target) as PyTorch's, for every reduction (the
    weighted Huber loss is Mul (and Mean/Sum) over HuberLossBackward0 there too)."""
    va, vb, vc = _make(vl, name, target_grad)
    ta, tb, tc = _make(torch, name, target_grad)
    v, t = _call(vl, name, va, vb, red, vc), _call(torch, name, ta, tb, red, tc)
    assert tree(v.grad_fn) == tree(t.grad_fn)
    assert repr(v.grad_fn).split()[0] == repr(t.grad_fn).split()[0]
    assert f"grad_fn=<{t.grad_fn.name()}>" in repr(v)
    assert v.dtype == vl.float64 and tuple(v.shape) == tuple(t.shape)


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_values_gradients_and_second_derivatives_match_torch(name, red):
    va, vb, vc = _make(vl, name, True)
    ta, tb, tc = _make(torch, name, True)
    v, t = _call(vl, name, va, vb, red, vc), _call(torch, name, ta, tb, red, tc)
    assert_close(v, t, 1e-12, 1e-12, "value")
    gw = np.random.default_rng(5).standard_normal(tuple(t.shape))
    vg = vl.autograd.grad((v * vl.tensor(gw)).sum(), (va, vb), create_graph=True)
    tg = torch.autograd.grad((t * torch.tensor(gw)).sum(), (ta, tb), create_graph=True)
    for a, b, what in zip(vg, tg, ("d/dinput", "d/dtarget")):
        assert_close(a, b, 1e-10, 1e-12, what)
    # second derivatives: the gradient of <first gradients, fixed weights> (recorded backward)
    r = np.random.default_rng(6)
    w0, w1 = r.standard_normal(va.shape), r.standard_normal(vb.shape)
    vh = vl.autograd.grad((vg[0] * vl.tensor(w0)).sum() + (vg[1] * vl.tensor(w1)).sum(), (va, vb))
    th = torch.autograd.grad((tg[0] * torch.tensor(w0)).sum() + (tg[1] * torch.tensor(w1)).sum(), (ta, tb))
    for a, b, what in zip(vh, th, ("d2/dinput", "d2/dtarget")):
        assert_close(a, b, 1e-9, 1e-11, what)


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_gradcheck_and_gradgradcheck_float64(name, red):
    a, b, c = _make(vl, name, True, seed=3)
    fn = lambda u, v: _call(vl, name, u, v, red, c)   # noqa: E731
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("op", ["bce", "bce_logits"])
def test_weight_that_requires_grad_is_refused_as_in_torch(op):
    f = {"bce": lambda M, a, b, w: M.binary_cross_entropy(a, b, weight=w),
         "bce_logits": lambda M, a, b, w: M.binary_cross_entropy_with_logits(a, b, weight=w)}[op]
    for M, L in ((F, vl), (TF, torch)):
        p = L.tensor([0.3, 0.6], requires_grad=True)
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
            f(M, p, L.tensor([0.0, 1.0]), L.tensor([1.0, 2.0], requires_grad=True))
    with pytest.raises(RuntimeError, match="argument 'pos_weight'"):
        F.binary_cross_entropy_with_logits(vl.zeros(2, requires_grad=True), vl.ones(2),
                                           pos_weight=vl.ones(2, requires_grad=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_node_on_simulated_device(name, red, dtype, sim_cuda):
    """On cuda:0: the same node, result and gradients on the device, equal to the CPU's, with no
    host read in forward or backward."""
    outs = []
    for dev in (False, True):
        a, b, c = _make(vl, name, True)
        a, b = vl.tensor(a._data.astype(dtype)), vl.tensor(b._data.astype(dtype))
        c = {k: vl.tensor(v._data.astype(dtype)) for k, v in c.items()}
        if dev:
            a, b, c = a.cuda(), b.cuda(), {k: v.cuda() for k, v in c.items()}
        a.requires_grad_(True)
        b.requires_grad_(True)
        with sim_cuda.forbid_host_sync() if dev else _nullctx():
            loss = _call(vl, name, a, b, red, c)
            (loss * loss).sum().backward()
        outs.append((loss, a.grad, b.grad))
    (cl, cga, cgb), (dl, dga, dgb) = outs
    assert dl.is_cuda and dga.is_cuda and dgb.is_cuda
    assert dl.grad_fn.name() == cl.grad_fn.name() and dl.dtype == cl.dtype
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for d, c_, what in ((dl, cl, "loss"), (dga, cga, "d/dinput"), (dgb, cgb, "d/dtarget")):
        np.testing.assert_allclose(_host(d._data), _host(c_._data), err_msg=what, **tol)


def test_loss_second_derivative_on_simulated_device(sim_cuda):
    """create_graph on the device: the recorded backward of each loss node stays on cuda:0
    without host reads, and matches the CPU's second derivative."""
    for name in LOSSES:
        res = []
        for dev in (False, True):
            a, b, c = _make(vl, name, False)
            if dev:
                a, c = a.detach().cuda().requires_grad_(True), {k: v.cuda() for k, v in c.items()}
                b = b.cuda()
            with sim_cuda.forbid_host_sync() if dev else _nullctx():
                g, = vl.autograd.grad(_call(vl, name, a, b, "mean", c), (a,), create_graph=True)
                h, = vl.autograd.grad((g * g).sum(), (a,))
            res.append(h)
        assert res[1].is_cuda
        np.testing.assert_allclose(_host(res[1]._data), _host(res[0]._data), rtol=1e-12, atol=1e-12, err_msg=name)


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ---------------------------------------------------------------- max / min
MAXMIN = {
    "max": lambda L, x: x.max(),
    "min": lambda L, x: x.min(),
    "torch.max": lambda L, x: L.max(x),
    "max_dim": lambda L, x: x.max(1).values,
    "max_dim_neg_keepdim": lambda L, x: x.max(-1, keepdim=True)[0],
    "min_dim": lambda L, x: x.min(0)[0],
    "torch.min_dim_kw": lambda L, x: L.min(x, dim=1).values,
    "max_0d_dim": lambda L, x: x[0, 0].max(0).values,
    "amax": lambda L, x: x.amax(),
    "amax_dim": lambda L, x: x.amax(1),
    "maximum": lambda L, x: L.max(x, x.flip(0)),
}


@pytest.mark.parametrize("name", list(MAXMIN))
def test_max_min_nodes_match_torch(name):
    """x.max() is MaxBackward1 (gradient shared among ties), x.max(dim) MaxBackward0 (the gradient
    goes to the returned index); names, edges, values and gradients as PyTorch's, ties included."""
    a = np.array([[1.0, 3.0, 3.0, -2.0], [3.0, 0.5, -2.0, 3.0], [0.0, -2.0, 1.0, 1.0]])
    vx, tx = vl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    v, t = MAXMIN[name](vl, vx), MAXMIN[name](torch, tx)
    # (x[0, 0] is IndexBackward0 in varlens, two SelectBackward0 in PyTorch: only the top compared)
    depth = 0 if name == "max_0d_dim" else 5
    assert tree(v.grad_fn, depth) == tree(t.grad_fn, depth)
    assert_close(v, t, 0, 0, "value")
    w = np.arange(1.0, 1.0 + t.numel()).reshape(tuple(t.shape))
    (v * vl.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    assert_close(vx.grad, tx.grad, 0, 0, "grad")


def test_max_min_dim_gradcheck_and_second_derivative():
    x = vl.tensor(np.random.default_rng(2).standard_normal((3, 5)), requires_grad=True)
    for f in (lambda u: u.max(1).values, lambda u: u.min(0, keepdim=True)[0] ** 2, lambda u: u.max() ** 2,
              lambda u: u.min() * u.max(0)[0]):
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


def test_max_min_on_simulated_device(sim_cuda):
    a = np.random.default_rng(4).standard_normal((4, 6))
    res = []
    for dev in (False, True):
        x = vl.tensor(a)
        x = (x.cuda() if dev else x).requires_grad_(True)
        with sim_cuda.forbid_host_sync() if dev else _nullctx():
            m = x.max(1)
            y = m.values.sum() + x.min() + x.max() * 2 + x.min(0, keepdim=True)[0].sum()
            y.backward()
        res.append((y, x.grad, m.indices, m.values.grad_fn.name()))
    assert res[1][0].is_cuda and res[1][1].is_cuda and res[1][2].is_cuda
    assert res[1][3] == res[0][3] == "MaxBackward0"
    for d, c in zip(res[1][:3], res[0][:3]):
        np.testing.assert_array_equal(_host(d._data), _host(c._data))


# ---------------------------------------------------------------- nn.Linear / F.linear
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 2, 3, 4)], ids=["1d", "2d", "3d", "4d"])
@pytest.mark.parametrize("input_grad", [True, False])
@pytest.mark.parametrize("weight_grad", [True, False])
def test_linear_graph_matches_torch(bias, shape, input_grad, weight_grad):
    """AddmmBackward0 with edges (bias, input, TBackward0(weight)) for a 2-D input, MmBackward0
    without a bias; ViewBackward0 / UnsafeViewBackward0 / SqueezeBackward4 on top for other ranks,
    with the input's ViewBackward0 / UnsqueezeBackward0 inside, as PyTorch 2.13 records them."""
    a = np.random.default_rng(0).standard_normal(shape)
    vm, tm = vl.nn.Linear(4, 2, bias=bias), torch.nn.Linear(4, 2, bias=bias)
    vm.weight.requires_grad_(weight_grad)
    tm.weight.requires_grad_(weight_grad)
    vx = vl.tensor(a, dtype=vl.float32, requires_grad=input_grad)
    v = vm(vx)
    t = tm(torch.tensor(a, dtype=torch.float32, requires_grad=input_grad))
    if not (input_grad or weight_grad or bias):     # nothing requires grad: no node in either
        assert v.grad_fn is None and t.grad_fn is None
        return
    assert tree(v.grad_fn) == tree(t.grad_fn)
    assert repr(v.grad_fn).split()[0] == repr(t.grad_fn).split()[0]
    # the walk reaches exactly the leaves that require grad (through the display-only nodes)
    want = [p for p, on in ((vm.bias, bias), (vx, input_grad), (vm.weight, weight_grad)) if on]
    assert [id(p) for p in _leaves(v.grad_fn)] == [id(p) for p in want]


def _leaves(fn):
    out = []
    for n, _ in fn.next_functions:
        if n is None:
            continue
        if type(n).__name__ == "AccumulateGrad":
            out.append(n.variable)
        else:
            out.extend(_leaves(n))
    return out


def test_functional_linear_edges_and_transpose_node():
    x = vl.randn(5, 4, requires_grad=True)
    w = vl.randn(3, 4, requires_grad=True)
    b = vl.randn(3)
    fn = F.linear(x, w, b).grad_fn
    (nb, i0), (nx, i1), (nt, i2) = fn.next_functions
    assert nb is None and nx.variable is x and (i0, i1, i2) == (0, 0, 0)
    assert type(nt).__name__ == "TBackward0" and repr(nt).startswith("<TBackward0 object at 0x")
    assert nt.next_functions[0][0].variable is w and nt.name() == "TBackward0"
    assert fn.name() == "AddmmBackward0"


def test_linear_nodes_on_simulated_device(sim_cuda):
    m = vl.nn.Linear(4, 2).cuda()
    x = vl.randn(2, 3, 4, device="cuda", requires_grad=True)
    with sim_cuda.forbid_host_sync():
        y = m(x)
        y.sum().backward()
    assert y.is_cuda and x.grad.is_cuda and m.weight.grad.is_cuda
    assert tree(y.grad_fn) == ("ViewBackward0", [(("AddmmBackward0", [
        (("torch::autograd::AccumulateGrad", []), 0),
        (("ViewBackward0", [(("torch::autograd::AccumulateGrad", []), 0)]), 0),
        (("TBackward0", [(("torch::autograd::AccumulateGrad", []), 0)]), 0)]), 0)])


# ---------------------------------------------------------------- nll_loss, cross_entropy, soft_margin_loss
# F.nll_loss is one node (NllLossBackward0; NllLoss2DBackward0 with the views PyTorch adds for
# other ranks), F.soft_margin_loss one node (SoftMarginLossBackward0), and the one fused
# CrossEntropy node shows PyTorch's chain (NllLoss -> LogSoftmax -> input; the smoothing and
# probability-target layouts) through display-only nodes.
_SHAPES = {1: (5,), 2: (4, 5), 3: (2, 5, 3), 4: (2, 5, 3, 2), 5: (2, 5, 2, 2, 2)}


def _cls_arrays(rank, seed=0):
    r = np.random.default_rng(seed)
    s = _SHAPES[rank]
    x = r.standard_normal(s)
    t = r.integers(0, 5, () if rank == 1 else (s[0],) + s[2:])
    p = r.uniform(0.1, 1.0, s)
    p = p / p.sum(axis=0 if rank == 1 else 1, keepdims=True)
    return x, t, p, r.uniform(0.5, 1.5, 5), np.where(r.random(s) > 0.5, 1.0, -1.0)


# name -> (call(M, x, target, reduction, weight), rank, target kind: "idx" class indices, "p" probabilities, "pm" +-1)
CLS = {f"nll_{k}d": ((lambda M, x, t, r, w: M.nll_loss(x, t, reduction=r)), k, "idx") for k in _SHAPES}
CLS.update({f"ce_{k}d": ((lambda M, x, t, r, w: M.cross_entropy(x, t, reduction=r)), k, "idx") for k in _SHAPES})
CLS.update({
    "nll_weight_ignore": (lambda M, x, t, r, w: M.nll_loss(x, t, weight=w, ignore_index=2, reduction=r), 2, "idx"),
    "nll_3d_weight_ignore": (lambda M, x, t, r, w: M.nll_loss(x, t, weight=w, ignore_index=1, reduction=r), 3, "idx"),
    "ce_weight_ignore": (lambda M, x, t, r, w: M.cross_entropy(x, t, weight=w, ignore_index=2, reduction=r), 2, "idx"),
    "ce_smooth": (lambda M, x, t, r, w: M.cross_entropy(x, t, reduction=r, label_smoothing=0.2), 2, "idx"),
    "ce_smooth_weight_3d": (lambda M, x, t, r, w: M.cross_entropy(x, t, weight=w, reduction=r, label_smoothing=0.2),
                            3, "idx"),
    "ce_probs": (lambda M, x, t, r, w: M.cross_entropy(x, t, reduction=r), 2, "p"),
    "ce_probs_1d": (lambda M, x, t, r, w: M.cross_entropy(x, t, reduction=r), 1, "p"),
    "ce_probs_smooth_weight": (lambda M, x, t, r, w: M.cross_entropy(x, t, weight=w, reduction=r,
                                                                     label_smoothing=0.1), 2, "p"),
    "soft_margin": (lambda M, x, t, r, w: M.soft_margin_loss(x, t, reduction=r), 2, "pm"),
    "soft_margin_1d": (lambda M, x, t, r, w: M.soft_margin_loss(x, t, reduction=r), 1, "pm"),
})


def _cls_make(L, name, seed=0, target_grad=False, dtype=np.float64):
    _, rank, kind = CLS[name]
    x, t, p, w, pm = _cls_arrays(rank, seed)
    tgt = {"idx": t, "p": p.astype(dtype), "pm": pm.astype(dtype)}[kind]
    xt = L.tensor(x.astype(dtype), requires_grad=True)
    tt = L.tensor(tgt, requires_grad=target_grad and kind == "p")
    return xt, tt, L.tensor(w.astype(dtype))


def _cls_call(L, name, x, t, red, w):
    return CLS[name][0](F if L is vl else TF, x, t, red, w)


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(CLS))
def test_class_loss_graph_matches_torch(name, red):
    """Node names and next_functions as PyTorch 2.13's, every reduction and rank."""
    tg = CLS[name][2] == "p"
    v = _cls_call(vl, name, *_cls_make(vl, name)[:2], red, _cls_make(vl, name)[2])
    t = _cls_call(torch, name, *_cls_make(torch, name)[:2], red, _cls_make(torch, name)[2])
    assert tree(v.grad_fn, 9) == tree(t.grad_fn, 9)
    assert f"grad_fn=<{t.grad_fn.name()}>" in repr(v)
    if tg:   # a probability target that requires grad is an edge too
        v = _cls_call(vl, name, *_cls_make(vl, name, target_grad=True)[:2], red, _cls_make(vl, name)[2])
        t = _cls_call(torch, name, *_cls_make(torch, name, target_grad=True)[:2], red, _cls_make(torch, name)[2])
        if "smooth" not in name:   # (smoothing of a target with grad adds nodes varlens does not show)
            assert tree(v.grad_fn, 9) == tree(t.grad_fn, 9)


def test_nll_and_soft_margin_are_single_nodes():
    x = vl.randn(4, 5, requires_grad=True)
    for loss in (F.nll_loss(x, vl.tensor([0, 1, 2, 3])), F.soft_margin_loss(x, vl.ones(4, 5))):
        (n, i), = loss.grad_fn.next_functions
        assert n.variable is x and i == 0
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'target'"):
        F.soft_margin_loss(x, vl.ones(4, 5, requires_grad=True))


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(CLS))
def test_class_loss_values_gradients_and_second_derivatives_match_torch(name, red):
    tg = CLS[name][2] == "p"
    vx, vt, vw = _cls_make(vl, name, 1, tg)
    tx, tt, tw = _cls_make(torch, name, 1, tg)
    v, t = _cls_call(vl, name, vx, vt, red, vw), _cls_call(torch, name, tx, tt, red, tw)
    assert_close(v, t, 1e-12, 1e-12, "value")
    assert v.dtype == vl.float64 and tuple(v.shape) == tuple(t.shape)
    gw = np.random.default_rng(5).standard_normal(tuple(t.shape))
    vin, tin = ((vx, vt), (tx, tt)) if tg else ((vx,), (tx,))
    vg = vl.autograd.grad((v * vl.tensor(gw)).sum(), vin, create_graph=True)
    tg_ = torch.autograd.grad((t * torch.tensor(gw)).sum(), tin, create_graph=True)
    for a, b in zip(vg, tg_):
        assert_close(a, b, 1e-10, 1e-12, "first derivative")
    r = np.random.default_rng(6)
    ws = [r.standard_normal(tuple(a.shape)) for a in vin]
    vs = sum((a * vl.tensor(w)).sum() for a, w in zip(vg, ws))
    ts = sum((a * torch.tensor(w)).sum() for a, w in zip(tg_, ws))
    # (nll's gradient does not depend on its input: PyTorch records a zero second derivative there,
    # varlens none)
    vh = vl.autograd.grad(vs, vin, allow_unused=True) if vs.requires_grad else (None,) * len(vin)
    th = torch.autograd.grad(ts, tin, allow_unused=True) if ts.requires_grad else (None,) * len(tin)
    for a, b in zip(vh, th):
        a = np.zeros(tuple(vin[0].shape)) if a is None else _host(a._data)
        b = np.zeros(tuple(vin[0].shape)) if b is None else b.detach().numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11, err_msg="second derivative")


@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", ["nll_2d", "nll_3d_weight_ignore", "nll_1d", "soft_margin", "ce_4d",
                                  "ce_smooth_weight_3d", "ce_probs"])
def test_class_loss_gradcheck_and_gradgradcheck_float64(name, red):
    x, t, w = _cls_make(vl, name, 3)
    fn = lambda u: _cls_call(vl, name, u, t, red, w)   # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_nll_every_target_ignored_is_nan_with_zero_gradient_as_torch():
    for M, L in ((F, vl), (TF, torch)):
        x = L.tensor(np.ones((2, 3)), requires_grad=True)
        loss = M.nll_loss(x, L.tensor([1, 1]), ignore_index=1)
        loss.backward()
        assert np.isnan(float(loss)) and np.all(x.grad.numpy() == 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("red", RED)
@pytest.mark.parametrize("name", list(CLS))
def test_class_loss_on_simulated_device(name, red, dtype, sim_cuda):
    """On cuda:0: same node names, result and input gradient equal to the CPU's, no host read in
    forward or backward."""
    outs = []
    for dev in (False, True):
        x, t, w = _cls_make(vl, name, 2, dtype=dtype)
        if dev:
            x, t, w = x.detach().cuda().requires_grad_(True), t.cuda(), w.cuda()
        with sim_cuda.forbid_host_sync() if dev else _nullctx():
            loss = _cls_call(vl, name, x, t, red, w)
            (loss * loss).sum().backward()
        outs.append((loss, x.grad))
    (cl, cg), (dl, dg) = outs
    assert dl.is_cuda and dg.is_cuda and dl.dtype == cl.dtype
    assert tree(dl.grad_fn, 9) == tree(cl.grad_fn, 9)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_host(dl._data), _host(cl._data), err_msg="loss", **tol)
    np.testing.assert_allclose(_host(dg._data), _host(cg._data), err_msg="d/dinput", **tol)


def test_nll_and_soft_margin_second_derivative_on_simulated_device(sim_cuda):
    for name in ("ce_3d", "soft_margin", "ce_smooth", "ce_probs"):
        res = []
        for dev in (False, True):
            x, t, w = _cls_make(vl, name, 4)
            if dev:
                x, t, w = x.detach().cuda().requires_grad_(True), t.cuda(), w.cuda()
            with sim_cuda.forbid_host_sync() if dev else _nullctx():
                g, = vl.autograd.grad(_cls_call(vl, name, x, t, "mean", w), (x,), create_graph=True)
                h, = vl.autograd.grad((g * g).sum() + g.sum(), (x,), allow_unused=True)
            res.append(h)
        assert res[1].is_cuda
        np.testing.assert_allclose(_host(res[1]._data), _host(res[0]._data), rtol=1e-12, atol=1e-12, err_msg=name)
