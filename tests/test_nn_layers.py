"""Layers: gradcheck in float64 and forward/backward parity with PyTorch after copying weights."""
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


def rnd(*shape, rg=True, scale=1.0, seed=None):
    rng = np.random.default_rng(seed if seed is not None else sum(shape) * 7 + len(shape))
    return vl.tensor(rng.standard_normal(shape) * scale, dtype=D64, requires_grad=rg)


def parity_module(vm, tm, *inputs, rtol=1e-9, atol=1e-10, train=True, copy=True):
    """Copy tm's weights into vm (unless copy=False), run both on the same float64 inputs,
    compare outputs, input and parameter gradients, and buffers (running statistics)."""
    vm.double()
    tm.double()
    if copy:
        vm.load_state_dict(tm.state_dict())
    vm.train(train)
    tm.train(train)
    xs = [rnd(*s) if isinstance(s, tuple) else s for s in inputs]
    txs = [to_torch(x) for x in xs]
    out = vm(*xs)
    tout = tm(*txs)
    assert_close(out, tout, rtol, atol, "forward")
    w = np.random.default_rng(3).standard_normal(tuple(out.shape))
    (out * vl.tensor(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for x, tx in zip(xs, txs):
        if x.requires_grad:
            assert_close(x.grad, tx.grad, rtol, atol, "input grad")
    tparams = dict(tm.named_parameters())
    for name, p in vm.named_parameters():
        assert_close(p.grad, tparams[name].grad, rtol, atol, f"grad of {name}")
    tbufs = dict(tm.named_buffers())
    for name, b in vm.named_buffers():
        assert_close(b, tbufs[name], rtol, atol, f"buffer {name}")
    return out


def _r(m):
    """varlens's repr without its parameter-count comments (PyTorch has none)."""
    return "\n".join(line.split("  # ")[0] for line in repr(m).split("\n"))


# ---------------------------------------------------------------- Linear
def test_linear_parity_and_gradcheck():
    parity_module(nn.Linear(5, 3), torch.nn.Linear(5, 3), (4, 5))
    parity_module(nn.Linear(5, 3), torch.nn.Linear(5, 3), (2, 3, 5))        # leading batch dims
    parity_module(nn.Linear(5, 3, bias=False), torch.nn.Linear(5, 3, bias=False), (5,))
    x, w, b = rnd(4, 5), rnd(3, 5), rnd(3)
    assert gradcheck(F.linear, (x, w, b))
    assert gradgradcheck(F.linear, (x, w, b))


def test_linear_wrong_width_names_shapes():
    m = nn.Linear(5, 3)
    with pytest.raises(RuntimeError, match=r"\(\*, 5\).*\(4, 6\)"):
        m(vl.randn(4, 6))


def test_bilinear_parity():
    vm, tm = nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
    parity_module(vm, tm, (5, 3), (5, 4))
    assert gradcheck(lambda a, b, w: F.bilinear(a, b, w), (rnd(2, 3), rnd(2, 4), rnd(2, 3, 4)))


def test_flatten_unflatten_identity():
    x = rnd(2, 3, 4)
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Unflatten(1, (3, 4))(nn.Flatten()(x)).shape == (2, 3, 4)
    assert nn.Unflatten(1, (-1, 2))(rnd(2, 6)).shape == (2, 3, 2)
    assert nn.Identity(7, foo=1)(x) is x
    with pytest.raises(RuntimeError, match="unflattened_size"):
        nn.Unflatten(1, (5, 5))(rnd(2, 6))


# ---------------------------------------------------------------- activations
ACTS = [
    (nn.ReLU(), torch.nn.ReLU()), (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
    (nn.ELU(0.7), torch.nn.ELU(0.7)), (nn.GELU(), torch.nn.GELU()),
    (nn.GELU("tanh"), torch.nn.GELU("tanh")), (nn.SiLU(), torch.nn.SiLU()),
    (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Tanh(), torch.nn.Tanh()),
    (nn.Softplus(2.0, 3.0), torch.nn.Softplus(2.0, 3.0)), (nn.Softmax(1), torch.nn.Softmax(1)),
    (nn.LogSoftmax(-1), torch.nn.LogSoftmax(-1)), (nn.Mish(), torch.nn.Mish()),
    (nn.SELU(), torch.nn.SELU()), (nn.Hardtanh(-0.5, 0.7), torch.nn.Hardtanh(-0.5, 0.7)),
    (nn.LogSigmoid(), torch.nn.LogSigmoid()), (nn.Softsign(), torch.nn.Softsign()),
    (nn.PReLU(), torch.nn.PReLU()), (nn.CELU(0.5), torch.nn.CELU(0.5)), (nn.ReLU6(), torch.nn.ReLU6()),
]


@pytest.mark.parametrize("vm,tm", ACTS, ids=[type(a).__name__ + str(i) for i, (a, _) in enumerate(ACTS)])
def test_activation_parity_and_gradcheck(vm, tm):
    parity_module(vm, tm, rnd(4, 5, scale=3.0))
    assert gradcheck(lambda x: vm(x), (rnd(3, 4, scale=2.0),))


def test_activation_reprs_match_pytorch():
    for vm, tm in ACTS:
        assert _r(vm) == repr(tm)


# ---------------------------------------------------------------- dropout
def test_dropout_inverted_scaling_and_eval_identity():
    vl.manual_seed(1)
    d = nn.Dropout(0.3)
    x = vl.ones(200, 500)
    y = d(x)
    kept = (y._data != 0)
    assert np.allclose(y._data[kept], 1 / 0.7)                        # survivors scaled by 1/(1-p)
    n = kept.size
    sd = math.sqrt(0.7 * 0.3 / n)
    assert abs(kept.mean() - 0.7) < 5 * sd                            # keep rate 1 - p
    assert abs(y._data.mean() - 1.0) < 5 * sd / 0.7                   # E[output] = input (seed 001 §1.1)
    d.eval()
    assert d(x) is x
    assert nn.Dropout(keep_prob=0.8).p == pytest.approx(0.2)          # seed 003 §4.1.2 convention
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout(0.3)) == repr(torch.nn.Dropout(0.3))


def test_dropout_gradient_is_mask_and_gradcheck():
    x = rnd(6, 7)
    g = vl.Generator().manual_seed(5)
    y = F.dropout(x, 0.4, True, generator=g)
    y.sum().backward()
    mask = y._data / x._data
    assert_close(x.grad, mask, what="dropped units get zero gradient, kept get 1/(1-p)")
    assert set(np.round(np.unique(mask), 8)) <= {0.0, round(1 / 0.6, 8)}
    assert gradcheck(lambda x: F.dropout(x, 0.4, True, generator=vl.Generator().manual_seed(5)), (x,))


def test_dropout2d_zeroes_whole_channels():
    vl.manual_seed(2)
    x = vl.ones(8, 16, 3, 3)
    y = nn.Dropout2d(0.5)(x)._data
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0 < (per_channel == 0).all(-1).sum() < 8 * 16
    assert gradcheck(lambda x: F.dropout2d(x, 0.5, True, generator=vl.Generator().manual_seed(0)),
                     (rnd(2, 3, 2, 2),))


def test_alpha_dropout_keeps_mean_and_variance():
    vl.manual_seed(3)
    x = vl.randn(200000)
    y = nn.AlphaDropout(0.2).train()(x)._data
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.03
    assert nn.AlphaDropout(0.2).eval()(x) is x
    assert gradcheck(lambda x: F.alpha_dropout(x, 0.3, True, generator=vl.Generator().manual_seed(1)),
                     (rnd(4, 5),))


# ---------------------------------------------------------------- batch norm
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm1d_parity_train_eval_running_stats(momentum):
    vm, tm = nn.BatchNorm1d(4, momentum=momentum), torch.nn.BatchNorm1d(4, momentum=momentum)
    with torch.no_grad():
        tm.weight.uniform_(0.5, 1.5)
        tm.bias.uniform_(-0.5, 0.5)
    vm.double()
    tm.double()
    vm.load_state_dict(tm.state_dict())
    for step in range(3):
        parity_module(vm, tm, rnd(6, 4, scale=2.0, seed=step), train=True, copy=False)
        vm.zero_grad()
        tm.zero_grad()
    assert int(vm.num_batches_tracked.item()) == 3
    assert not np.allclose(vm.running_var._data, 1.0)
    parity_module(vm, tm, rnd(5, 4, seed=9), train=False, copy=False)     # eval uses running stats
    parity_module(vm, tm, rnd(3, 4, 5, seed=10), train=True, copy=False)  # (N, C, L)


def test_batchnorm2d_parity_and_no_affine_no_tracking():
    parity_module(nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3), (4, 3, 2, 5))
    parity_module(nn.BatchNorm2d(3, affine=False, track_running_stats=False),
                  torch.nn.BatchNorm2d(3, affine=False, track_running_stats=False), (4, 3, 2, 2), train=False)
    m = nn.BatchNorm2d(3).eval()
    parity_module(m, torch.nn.BatchNorm2d(3), (4, 3, 2, 2), train=False)


def test_batchnorm_gradcheck_train_and_eval_and_double_backward():
    x, w, b = rnd(5, 3), rnd(3), rnd(3)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, w, b))
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True, eps_mode="std"), (x, w, b))
    x4 = rnd(3, 2, 2, 2)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True, eps=0.1), (x4, rnd(2), rnd(2)))
    rm, rv = vl.tensor([0.1, -0.2, 0.3], dtype=D64), vl.tensor([1.5, 0.5, 2.0], dtype=D64)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False), (x, w, b))
    assert gradgradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, w, b))


def test_batchnorm_fused_gradient_equals_seed001_formulas():
    """seed 001 §2.3: the per-feature backward formulas, written out loop by loop."""
    rng = np.random.default_rng(0)
    B, M, eps = 5, 3, 1e-2
    Y = rng.standard_normal((B, M))
    gamma, beta = rng.standard_normal(M), rng.standard_normal(M)
    g = rng.standard_normal((B, M))                                     # dl/dYhat
    y = vl.tensor(Y, requires_grad=True)
    gm, bt = vl.tensor(gamma, requires_grad=True), vl.tensor(beta, requires_grad=True)
    F.batch_norm(y, None, None, gm, bt, True, eps=eps).backward(vl.tensor(g))
    for j in range(M):
        mu = sum(Y[i, j] for i in range(B)) / B
        nu = sum((Y[i, j] - mu) ** 2 for i in range(B)) / B
        std = math.sqrt(nu + eps)
        Zhat = [(Y[i, j] - mu) / std for i in range(B)]
        d_beta = sum(g[i, j] for i in range(B))
        d_gamma = sum(g[i, j] * Zhat[i] for i in range(B))
        gZ = [g[i, j] * gamma[j] for i in range(B)]
        d_nu = sum(gZ[i] * (Y[i, j] - mu) * (-0.5) * std ** -3 for i in range(B))
        d_mu = sum(gZ[i] * (-1 / std) for i in range(B)) + d_nu * (-2 / B) * sum(Y[i, j] - mu for i in range(B))
        for i in range(B):
            d_Y = gZ[i] / std + d_nu * 2 / B * (Y[i, j] - mu) + d_mu / B
            assert y.grad._data[i, j] == pytest.approx(d_Y, rel=1e-10, abs=1e-12)
        assert gm.grad._data[j] == pytest.approx(d_gamma, rel=1e-12)
        assert bt.grad._data[j] == pytest.approx(d_beta, rel=1e-12)
        assert abs(y.grad._data[:, j].sum()) < 1e-12                  # gradients sum to 0 per feature


def test_batchnorm_std_eps_matches_seed004_key_eq21():
    """seed 004 Key Eq. 21: d zbar_k / d z_j = (K delta_jk - 1 - (z_k - mu)(z_j - mu)/(sigma (sigma+eps))) / (K (sigma+eps))."""
    rng = np.random.default_rng(1)
    K, eps = 6, 1e-3
    z = rng.standard_normal(K)
    mu, sigma = z.mean(), z.std()
    J = np.array([[(K * (j == k) - 1 - (z[k] - mu) * (z[j] - mu) / (sigma * (sigma + eps))) / (K * (sigma + eps))
                   for j in range(K)] for k in range(K)])
    g = rng.standard_normal(K)
    x = vl.tensor(z.reshape(K, 1), requires_grad=True)
    F.batch_norm(x, None, None, None, None, True, eps=eps, eps_mode="std").backward(vl.tensor(g.reshape(K, 1)))
    np.testing.assert_allclose(x.grad._data[:, 0], J.T @ g, rtol=1e-10, atol=1e-12)


def test_batchnorm_forward_moments_and_errors():
    x = rnd(64, 3, scale=3.0)
    bn = nn.BatchNorm1d(3).double()
    with vl.no_grad():
        bn.weight.copy_(vl.tensor([2.0, 0.5, 1.0]))
        bn.bias.copy_(vl.tensor([1.0, -1.0, 0.0]))
    y = bn(x)._data
    np.testing.assert_allclose(y.mean(0), [1.0, -1.0, 0.0], atol=1e-12)      # mean = beta (seed 001 §2.2)
    nu = x._data.var(0)
    np.testing.assert_allclose(y.var(0), np.array([4.0, 0.25, 1.0]) * nu / (nu + 1e-5), rtol=1e-10)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(rnd(1, 3))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        bn(rnd(2, 3, 2, 2))
    with pytest.raises(ValueError, match="expected 3 channels"):
        bn(rnd(4, 5))
    assert _r(nn.BatchNorm2d(3)) == repr(torch.nn.BatchNorm2d(3))


# ---------------------------------------------------------------- layer norm, RMS norm, group norm
def test_layernorm_parity_and_gradcheck():
    parity_module(nn.LayerNorm(5), torch.nn.LayerNorm(5), (3, 4, 5))
    parity_module(nn.LayerNorm((4, 5), bias=False), torch.nn.LayerNorm((4, 5), bias=False), (3, 4, 5))
    parity_module(nn.LayerNorm(5, elementwise_affine=False), torch.nn.LayerNorm(5, elementwise_affine=False), (2, 5))
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b), (rnd(3, 4), rnd(4), rnd(4)))
    assert gradgradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b), (rnd(3, 4), rnd(4), rnd(4)))
    with pytest.raises(RuntimeError, match="normalized_shape"):
        nn.LayerNorm(4)(rnd(3, 5))
    assert _r(nn.LayerNorm(5)) == repr(torch.nn.LayerNorm(5))


def test_layernorm_output_moments_seed003():
    x = rnd(4, 50, scale=2.0)
    y = F.layer_norm(x, (50,))._data
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    s2 = x._data.var(1)
    np.testing.assert_allclose(y.var(1), s2 / (s2 + 1e-5), rtol=1e-10)


def test_rmsnorm_parity_and_gradcheck():
    parity_module(nn.RMSNorm(5), torch.nn.RMSNorm(5), (3, 5))
    parity_module(nn.RMSNorm((2, 5), eps=1e-3), torch.nn.RMSNorm((2, 5), eps=1e-3), (3, 2, 5))
    assert gradcheck(lambda x, w: F.rms_norm(x, (4,), w, 1e-3), (rnd(3, 4), rnd(4)))
    assert gradgradcheck(lambda x, w: F.rms_norm(x, (4,), w, 1e-3), (rnd(3, 4), rnd(4)))


def test_groupnorm_parity_and_gradcheck():
    parity_module(nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4), (3, 4, 2, 2))
    assert _r(nn.GroupNorm(2, 4)) == repr(torch.nn.GroupNorm(2, 4))
    parity_module(nn.BatchNorm1d(3, bias=False), torch.nn.BatchNorm1d(3, bias=False), (4, 3))
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (rnd(2, 4, 3), rnd(4), rnd(4)))


# ---------------------------------------------------------------- embedding
def test_embedding_parity_repeated_indices_and_padding():
    vm, tm = nn.Embedding(10, 3, padding_idx=2), torch.nn.Embedding(10, 3, padding_idx=2)
    idx = vl.tensor([[1, 2, 1], [4, 1, 9]])
    out = parity_module(vm, tm, idx)
    assert out.shape == (2, 3, 3)
    g = vm.weight.grad._data
    assert np.all(g[2] == 0)                                               # padding row: no gradient
    assert np.all(nn.Embedding(5, 2, padding_idx=0).weight._data[0] == 0)  # and zero-initialised


def test_embedding_grad_accumulates_many_lookups_and_gradcheck():
    w = rnd(6, 4)
    idx = vl.tensor(np.random.default_rng(0).integers(0, 6, size=(50,)))   # many repeats per row
    out = F.embedding(idx, w)
    gout = np.random.default_rng(1).standard_normal((50, 4))
    out.backward(vl.tensor(gout))
    expect = np.zeros((6, 4))
    for i, r in enumerate(idx._data):
        expect[r] += gout[i]
    np.testing.assert_allclose(w.grad._data, expect, rtol=1e-12)
    # the padding row's value reaches the output but by definition gets no gradient, so the
    # finite-difference check runs on a table whose padding row is held at zero
    keep = vl.tensor([[1.0], [1.0], [1.0], [1.0], [1.0], [0.0]], dtype=D64)
    assert gradcheck(lambda w: F.embedding(vl.tensor([0, 3, 3, 5]), w * keep, padding_idx=5), (rnd(6, 2),))
    assert gradgradcheck(lambda w: F.embedding(vl.tensor([0, 3, 3]), w) ** 2, (rnd(6, 2),))
    with pytest.raises(IndexError, match="index 6 is out of range.*6 rows"):
        F.embedding(vl.tensor([6]), w)


def test_embedding_max_norm_renormalises_like_pytorch():
    vm, tm = nn.Embedding(6, 3, max_norm=1.0), torch.nn.Embedding(6, 3, max_norm=1.0)
    vm.load_state_dict(tm.state_dict())
    idx = [0, 2, 2, 5]
    out, tout = vm(vl.tensor(idx)), tm(torch.tensor(idx))
    assert_close(out, tout, rtol=1e-5, atol=1e-6)
    assert_close(vm.weight, tm.weight.detach(), rtol=1e-5, atol=1e-6)    # rows renormalised in place


def test_embedding_from_pretrained():
    t = vl.tensor([[1.0, 2.0], [3.0, 4.0]])
    e = nn.Embedding.from_pretrained(t)
    assert not e.weight.requires_grad
    assert_close(e(vl.tensor([1, 0])), np.array([[3.0, 4.0], [1.0, 2.0]], dtype=np.float32))
    assert nn.Embedding.from_pretrained(t, freeze=False).weight.requires_grad
    assert _r(nn.Embedding(10, 3, padding_idx=2)) == repr(torch.nn.Embedding(10, 3, padding_idx=2))


# ---------------------------------------------------------------- functional odds and ends
def test_pad_modes_parity_and_gradcheck():
    x = rnd(2, 3, 4)
    for mode, pad in [("constant", (1, 2)), ("constant", (-1, 2, 1, 0)), ("reflect", (2, 1)),
                      ("replicate", (1, 2, 2, 1)), ("circular", (1, 2))]:
        tx = to_torch(x)
        y = F.pad(x, pad, mode=mode, value=None if mode != "constant" else 0.5)
        ty = torch.nn.functional.pad(tx, pad, mode=mode, value=None if mode != "constant" else 0.5)
        assert_close(y, ty, what=mode)
        assert gradcheck(lambda x: F.pad(x, pad, mode=mode), (x,))


def test_normalize_cosine_similarity_one_hot():
    a, b = rnd(3, 4), rnd(3, 4, seed=5)
    assert_close(F.normalize(a, dim=1), torch.nn.functional.normalize(to_torch(a), dim=1))
    assert_close(F.cosine_similarity(a, b), torch.nn.functional.cosine_similarity(to_torch(a), to_torch(b)))
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b), (a, b))
    assert gradcheck(lambda a: F.normalize(a, dim=0), (a,))
    assert_close(F.one_hot(vl.tensor([0, 2]), 3), np.array([[1, 0, 0], [0, 0, 1]]))
