"""The fused neural-network ops, layers and losses on the (simulated) CUDA device.

Each layer or function runs twice from the same weights and inputs: on the CPU and with every
tensor on the device (varlens/core/simulated_cuda.py on machines without a GPU).  Outputs,
input gradients and parameter gradients must match in float64 and float32, stay on cuda:0, and
the device's forward + backward must run inside ``forbid_host_sync()`` (no ``.item()``, boolean
mask, host copy or value check that reads device data).  Then a small MLP and a Transformer
encoder layer train a few steps on the device and follow the CPU run.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from conftest import _host

DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])


def _tol(dtype):
    return dict(rtol=1e-9, atol=1e-10) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)


def _close(dev, cpu, dtype, what):
    assert dev.is_cuda, f"{what}: came back on {dev.device}"
    assert str(dev.device) == "cuda:0", f"{what}: on {dev.device}"
    a, b = _host(dev._data), cpu._data
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    if b.dtype.kind == "f":
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} on the device, {b.dtype} on the CPU"
    np.testing.assert_allclose(a, b, err_msg=what, **_tol(dtype))


def _tensors(arrays, dtype, grad, device):
    out = []
    for i, a in enumerate(arrays):
        if a.dtype == np.float64:
            t = vl.tensor(a.astype(dtype))
            t = t.cuda() if device else t
            out.append(t.requires_grad_(i in grad))
        else:
            t = vl.tensor(a)
            out.append(t.cuda() if device else t)
    return out


def _outs(y):
    ys = y if isinstance(y, (tuple, list)) else (y,)
    return [t for t in ys if isinstance(t, vl.Tensor) and t.dtype.kind == "f"]


def check(sim, make, arrays, dtype, grad=(0,), module=True, extra=None):
    """``make(dtype)`` builds a Module (copied, then moved with .cuda()) or a function of the inputs.
    The inputs whose positions are in ``grad`` get gradients; every parameter does."""
    f_cpu = make(dtype)
    f_dev = copy.deepcopy(f_cpu).cuda() if module else f_cpu
    xs_c = _tensors(arrays, dtype, grad, False)
    xs_d = _tensors(arrays, dtype, grad, True)
    yc = _outs(f_cpu(*xs_c))
    with sim.forbid_host_sync():
        yd = _outs(f_dev(*xs_d))
    assert len(yc) == len(yd) and yc
    rng = np.random.default_rng(7)
    ws = [rng.standard_normal(t.shape).astype(dtype) for t in yc]
    for i, (a, b) in enumerate(zip(yd, yc)):
        _close(a, b, dtype, f"output {i}")
    lc = sum((t * vl.tensor(w)).sum() for t, w in zip(yc, ws) if t.requires_grad)
    ld = sum((t * vl.tensor(w).cuda()).sum() for t, w in zip(yd, ws) if t.requires_grad)
    if isinstance(lc, vl.Tensor):
        lc.backward()
        with sim.forbid_host_sync():
            ld.backward()
        for i in grad:
            _close(xs_d[i].grad, xs_c[i].grad, dtype, f"gradient of input {i}")
        if module:
            for (n, pc), (_, pd) in zip(f_cpu.named_parameters(), f_dev.named_parameters()):
                if pc.grad is not None:
                    assert pd.grad is not None, f"{n}: no gradient on the device"
                    _close(pd.grad, pc.grad, dtype, f"gradient of {n}")
    if module:
        for (n, bc), (_, bd) in zip(f_cpu.named_buffers(), f_dev.named_buffers()):
            if bc is not None and bc.dtype.kind == "f":
                _close(bd, bc, dtype, f"buffer {n}")
    if extra is not None:
        extra(f_cpu, f_dev)
    return f_cpu, f_dev


R = np.random.default_rng(0)


def N(*s):
    return R.standard_normal(s)


def I(hi, *s):  # noqa: E743 - integer class indices
    return R.integers(0, hi, s).astype(np.int64)


# ---------------------------------------------------------------- layers
def _mha(dtype, **kw):
    return nn.MultiheadAttention(8, 2, batch_first=True, **kw).to(dtype)


LAYERS = {
    "Linear": (lambda dt: nn.Linear(4, 3).to(dt), [N(5, 4)]),
    "Linear3d": (lambda dt: nn.Linear(4, 3).to(dt), [N(2, 5, 4)]),
    "Linear_nobias": (lambda dt: nn.Linear(4, 3, bias=False).to(dt), [N(5, 4)]),
    "BatchNorm1d": (lambda dt: nn.BatchNorm1d(4).to(dt), [N(6, 4)]),
    "BatchNorm1d_3d": (lambda dt: nn.BatchNorm1d(4).to(dt), [N(3, 4, 5)]),
    "BatchNorm1d_cumulative": (lambda dt: nn.BatchNorm1d(4, momentum=None).to(dt), [N(6, 4)]),
    "BatchNorm1d_eval": (lambda dt: nn.BatchNorm1d(4).to(dt).eval(), [N(6, 4)]),
    "BatchNorm2d": (lambda dt: nn.BatchNorm2d(3).to(dt), [N(2, 3, 4, 4)]),
    "BatchNorm2d_std_eps": (lambda dt: nn.BatchNorm2d(3, eps_mode="std").to(dt), [N(2, 3, 4, 4)]),
    "LayerNorm": (lambda dt: nn.LayerNorm(4).to(dt), [N(5, 4)]),
    "LayerNorm_2axes": (lambda dt: nn.LayerNorm((3, 4)).to(dt), [N(2, 3, 4)]),
    "LayerNorm_noaffine": (lambda dt: nn.LayerNorm(4, elementwise_affine=False).to(dt), [N(5, 4)]),
    "GroupNorm": (lambda dt: nn.GroupNorm(2, 4).to(dt), [N(3, 4, 5)]),
    "InstanceNorm1d": (lambda dt: nn.InstanceNorm1d(4, affine=True, track_running_stats=True).to(dt),
                       [N(3, 4, 5)]),
    "InstanceNorm2d": (lambda dt: nn.InstanceNorm2d(3).to(dt), [N(2, 3, 4, 4)]),
    "RMSNorm": (lambda dt: nn.RMSNorm(4).to(dt), [N(3, 4)]),
    "LocalResponseNorm": (lambda dt: nn.LocalResponseNorm(3).to(dt), [N(2, 5, 4)]),
    "Embedding": (lambda dt: nn.Embedding(10, 4).to(dt), [np.array([[1, 2, 3], [3, 3, 9]])]),
    "Embedding_padding": (lambda dt: nn.Embedding(10, 4, padding_idx=3).to(dt), [np.array([[1, 0, 3], [3, 3, 9]])]),
    "MultiheadAttention": (lambda dt: _Self(_mha(dt)), [N(2, 5, 8)]),
    "MultiheadAttention_kv": (lambda dt: _Cross(_mha(dt)), [N(2, 5, 8), N(2, 6, 8)]),
    "TransformerEncoderLayer": (lambda dt: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                                      batch_first=True).to(dt), [N(2, 5, 8)]),
    "TransformerEncoderLayer_prenorm_gelu": (
        lambda dt: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True,
                                              activation="gelu").to(dt), [N(2, 5, 8)]),
    "TransformerDecoderLayer": (lambda dt: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0,
                                                                      batch_first=True).to(dt),
                                [N(2, 5, 8), N(2, 4, 8)]),
    "MultiheadAttention_kdim_vdim": (lambda dt: _KV(nn.MultiheadAttention(8, 2, kdim=6, vdim=5).to(dt)),
                                     [N(5, 2, 8), N(7, 2, 6), N(7, 2, 5)]),
    "MultiheadAttention_unbatched_per_head": (lambda dt: _KV(_mha(dt), average_attn_weights=False),
                                              [N(5, 8), N(6, 8), N(6, 8)]),
    "Transformer": (lambda dt: _Seq2Seq(nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).to(dt)),
                    [N(2, 5, 8), N(2, 4, 8)]),
    "TransformerEncoder_padding": (lambda dt: _Encoder(nn.TransformerEncoder(nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False).to(dt)), [N(2, 5, 8)]),
    "ReLU": (lambda dt: nn.ReLU(), [N(5, 4)]),
    "GELU": (lambda dt: nn.GELU(), [N(5, 4)]),
    "GELU_tanh": (lambda dt: nn.GELU(approximate="tanh"), [N(5, 4)]),
    "SiLU": (lambda dt: nn.SiLU(), [N(5, 4)]),
    "Tanh": (lambda dt: nn.Tanh(), [N(5, 4)]),
    "Sigmoid": (lambda dt: nn.Sigmoid(), [N(5, 4)]),
    "Softmax": (lambda dt: nn.Softmax(dim=1), [N(5, 4)]),
    "LogSoftmax": (lambda dt: nn.LogSoftmax(dim=-1), [N(5, 4)]),
    "ELU": (lambda dt: nn.ELU(), [N(5, 4)]),
    "LeakyReLU": (lambda dt: nn.LeakyReLU(0.1), [N(5, 4)]),
    "Softplus": (lambda dt: nn.Softplus(), [N(5, 4)]),
    "Mish": (lambda dt: nn.Mish(), [N(5, 4)]),
}


class _Self(nn.Module):
    """Self-attention with a causal float mask, returning the output and the averaged weights."""

    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, x):
        m = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device, dtype=x.dtype)
        return self.mha(x, x, x, attn_mask=m)


class _KV(nn.Module):
    """Attention with separate keys and values (keyword arguments passed through)."""

    def __init__(self, mha, **kw):
        super().__init__()
        self.mha, self.kw = mha, kw

    def forward(self, q, k, v):
        return self.mha(q, k, v, **self.kw)


class _Seq2Seq(nn.Module):
    def __init__(self, tr):
        super().__init__()
        self.tr = tr

    def forward(self, src, tgt):
        m = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device, dtype=tgt.dtype)
        return self.tr(src, tgt, tgt_mask=m, tgt_is_causal=True)


class _Encoder(nn.Module):
    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    def forward(self, x):
        pad = vl.tensor([[False] * 5, [False] * 3 + [True] * 2]).to(x.device)
        return self.enc(x, src_key_padding_mask=pad)


class _Cross(nn.Module):
    """Attention of queries over a second sequence (keys = values), with a key padding mask."""

    def __init__(self, mha):
        super().__init__()
        self.mha = mha

    def forward(self, q, kv):
        pad = vl.tensor([[False] * 6, [False] * 4 + [True] * 2]).to(q.device)
        return self.mha(q, kv, kv, key_padding_mask=pad)


@DTYPES
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_on_device_matches_cpu(name, dtype, sim_cuda):
    make, arrays = LAYERS[name]
    grad = () if arrays[0].dtype.kind == "i" else tuple(i for i, a in enumerate(arrays) if a.dtype == np.float64)
    check(sim_cuda, make, arrays, dtype, grad=grad)


@DTYPES
def test_batchnorm_running_stats_stay_on_device(dtype, sim_cuda):
    """Three training steps then eval: the running statistics are updated on the device, without a
    host sync, and match the CPU's; eval mode uses them."""
    cpu = nn.BatchNorm1d(4, momentum=None).to(dtype)
    dev = copy.deepcopy(cpu).cuda()
    for step in range(3):
        x = N(6, 4).astype(dtype)
        yc = cpu(vl.tensor(x))
        with sim_cuda.forbid_host_sync():
            yd = dev(vl.tensor(x).cuda())
        _close(yd, yc, dtype, f"step {step}")
    for n in ("running_mean", "running_var", "num_batches_tracked"):
        bd, bc = getattr(dev, n), getattr(cpu, n)
        assert bd.is_cuda, n
        np.testing.assert_allclose(_host(bd._data), bc._data, err_msg=n, **_tol(dtype))
    cpu.eval()
    dev.eval()
    x = N(6, 4).astype(dtype)
    with sim_cuda.forbid_host_sync():
        yd = dev(vl.tensor(x).cuda())
    _close(yd, cpu(vl.tensor(x)), dtype, "eval")


# ---------------------------------------------------------------- losses and functions
def _w(n):
    return np.abs(N(n)) + 0.1




def _probs(*s):
    e = np.exp(N(*s))
    return e / e.sum(-1, keepdims=True)


def _sigm(*s):
    return 1 / (1 + np.exp(-N(*s)))


def _signs(n):
    return np.where(R.random(n) < 0.5, -1.0, 1.0)


TGT = np.array([0, 1, 2, 3, 1, 2])
TGT_IGN = np.array([0, -100, 2, 3, -100, 2])
FUNCS = {
    "cross_entropy": (lambda z, t: F.cross_entropy(z, t), [N(6, 4), TGT]),
    "cross_entropy_sum": (lambda z, t: F.cross_entropy(z, t, reduction="sum"), [N(6, 4), TGT]),
    "cross_entropy_ignore": (lambda z, t: F.cross_entropy(z, t), [N(6, 4), TGT_IGN]),
    "cross_entropy_ignore_real_class": (lambda z, t: F.cross_entropy(z, t, ignore_index=2), [N(6, 4), TGT]),
    "cross_entropy_all_ignored": (lambda z, t: F.cross_entropy(z, t), [N(3, 4), np.array([-100] * 3)]),
    "cross_entropy_smooth_weight": (lambda z, t, w: F.cross_entropy(z, t, weight=w, label_smoothing=0.2),
                                    [N(6, 4), TGT_IGN, _w(4)]),
    "cross_entropy_smooth": (lambda z, t: F.cross_entropy(z, t, label_smoothing=0.1), [N(6, 4), TGT]),
    "cross_entropy_probs": (lambda z, y: F.cross_entropy(z, y, label_smoothing=0.1), [N(6, 4), _probs(6, 4)]),
    "cross_entropy_3d_none": (lambda z, t: F.cross_entropy(z, t, reduction="none"),
                              [N(2, 4, 3), np.array([[0, 1, 2], [3, 1, 0]])]),
    "cross_entropy_1d": (lambda z, t: F.cross_entropy(z, t), [N(4), np.array(2)]),
    "nll_loss": (lambda x, t: F.nll_loss(x, t), [N(6, 4), TGT_IGN]),
    "nll_loss_weight": (lambda x, t, w: F.nll_loss(x, t, weight=w), [N(6, 4), TGT, _w(4)]),
    "nll_loss_all_ignored": (lambda x, t: F.nll_loss(x, t), [N(3, 4), np.array([-100] * 3)]),
    "nll_loss_none": (lambda x, t: F.nll_loss(x, t, reduction="none"), [N(6, 4), TGT_IGN]),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), [N(5, 4), N(5, 4)]),
    "mse_loss_none": (lambda x, y: F.mse_loss(x, y, reduction="none"), [N(5, 4), N(5, 4)]),
    "l1_loss": (lambda x, y: F.l1_loss(x, y), [N(5, 4), N(5, 4)]),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), [N(5, 4), N(5, 4)]),
    "huber_loss": (lambda x, y: F.huber_loss(x, y, delta=0.7), [N(5, 4), N(5, 4)]),
    "binary_cross_entropy": (lambda x, y, w: F.binary_cross_entropy(x, y, weight=w),
                             [_sigm(5, 4), R.random((5, 4)), _w(4)]),
    "bce_with_logits": (lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=pw),
                        [3 * N(5, 4), R.random((5, 4)), _w(4), _w(4)]),
    "bce_with_logits_plain": (lambda x, y: F.binary_cross_entropy_with_logits(x, y), [3 * N(5, 4), R.random((5, 4))]),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"), [np.log(_probs(5, 4)), _probs(5, 4)]),
    "kl_div_log_target": (lambda x, y: F.kl_div(x, y, reduction="sum", log_target=True),
                          [np.log(_probs(5, 4)), np.log(_probs(5, 4))]),
    "margin_ranking_loss": (lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2), [N(6), N(6), _signs(6)]),
    "hinge_embedding_loss": (lambda x, y: F.hinge_embedding_loss(x, y), [N(6), _signs(6)]),
    "soft_margin_loss": (lambda x, y: F.soft_margin_loss(x, y), [N(6), _signs(6)]),
    "multilabel_soft_margin_loss": (lambda x, y: F.multilabel_soft_margin_loss(x, y),
                                    [N(5, 4), R.integers(0, 2, (5, 4)).astype(np.float64)]),
    "multi_margin_loss": (lambda x, t, w: F.multi_margin_loss(x, t, p=2, weight=w), [N(6, 4), TGT, _w(4)]),
    "multilabel_margin_loss": (lambda x, t: F.multilabel_margin_loss(x, t),
                               [N(3, 4), np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 0, 0]])]),
    "cosine_embedding_loss": (lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1),
                              [N(6, 4), N(6, 4), _signs(6)]),
    "triplet_margin_loss": (lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True), [N(5, 4), N(5, 4), N(5, 4)]),
    "poisson_nll_loss": (lambda x, y: F.poisson_nll_loss(x, y, full=True), [N(5, 4), 3 * R.random((5, 4))]),
    "gaussian_nll_loss": (lambda x, y, v: F.gaussian_nll_loss(x, y, v), [N(5, 4), N(5, 4), R.random((5, 4))]),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [N(2, 3, 5, 4), N(2, 3, 6, 4), N(2, 3, 6, 4)]),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    [N(2, 3, 5, 4), N(2, 3, 5, 4), N(2, 3, 5, 4)]),
    "sdpa_bool_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
                       [N(2, 5, 4), N(2, 6, 4), N(2, 6, 4), np.tril(np.ones((5, 6), bool), 1)]),
    "sdpa_float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                        [N(2, 5, 4), N(2, 6, 4), N(2, 6, 4), N(5, 6)]),
    "mha_forward_causal": (
        lambda x, w, b, wo, bo: F.multi_head_attention_forward(x, x, x, 8, 2, w, b, None, None, False, 0.0, wo, bo,
                                                               is_causal=True, need_weights=True),
        [N(5, 2, 8), N(24, 8), N(24), N(8, 8), N(8)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [N(5, 4), N(4), N(4)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [N(3, 4, 5), N(4), N(4)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (4,), w), [N(5, 4), N(4)]),
    "batch_norm_eval": (lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
                        [N(6, 4), np.zeros(4) + 0.1, np.ones(4) * 1.5, N(4), N(4)]),
    "embedding_max_norm": (lambda w, i: F.embedding(i, w * 1.0, max_norm=1.0), [N(10, 4), np.array([1, 1, 4, 9])]),
    "normalize": (lambda x: F.normalize(x, dim=1), [N(5, 4)]),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b), [N(5, 4), N(5, 4)]),
    "pairwise_distance": (lambda a, b: F.pairwise_distance(a, b), [N(5, 4), N(5, 4)]),
    "pdist": (lambda a: F.pdist(a), [N(5, 4)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [N(5, 4), N(3, 4), N(3)]),
    "bilinear": (lambda a, b, w, c: F.bilinear(a, b, w, c), [N(3, 2), N(3, 4), N(5, 2, 4), N(5)]),
    "linear_cross_entropy": (lambda x, w, t: F.linear_cross_entropy(x, w, t), [N(3, 4), N(5, 4), np.array([0, 4, 2])]),
    "relu_": (lambda x: F.relu_(x * 1), [N(5, 4)]),
    "elu_": (lambda x: F.elu_(x * 1), [N(5, 4)]),
    "hardtanh_": (lambda x: F.hardtanh_(x * 1, -0.5, 0.5), [N(5, 4)]),
    "threshold_": (lambda x: F.threshold_(x * 1, 0.1, 2.0), [N(5, 4)]),
    "prelu": (lambda x, w: F.prelu(x, w), [N(3, 4, 2), N(4)]),
    "softplus_beta": (lambda x: F.softplus(x, beta=2, threshold=1), [N(5, 4)]),
    "glu": (lambda x: F.glu(x, 1), [N(3, 4, 2)]),
    "local_response_norm": (lambda x: F.local_response_norm(x, 2), [N(2, 5, 3)]),
    "one_hot_mix": (lambda x, t: x * F.one_hot(t, 4).to(x.dtype), [N(5, 4), np.array([0, 3, 1, 1, 2])]),
    "mha_forward_bias_kv_zero_attn": (
        lambda x, w, b, bk, bv, wo, bo, kpm: F.multi_head_attention_forward(
            x, x, x, 8, 2, w, b, bk, bv, True, 0.0, wo, bo, key_padding_mask=kpm),
        [N(5, 2, 8), N(24, 8), N(24), N(1, 1, 8), N(1, 1, 8), N(8, 8), N(8),
         np.array([[False] * 5, [False] * 4 + [True]])]),
}
# inputs that get no gradient (targets, class weights, masks); the rest do
NO_GRAD = {"binary_cross_entropy": (1, 2), "bce_with_logits": (2, 3), "cross_entropy_smooth_weight": (2,),
           "nll_loss_weight": (2,), "multi_margin_loss": (2,), "sdpa_float_mask": (3,),
           "batch_norm_eval": (1, 2), "margin_ranking_loss": (2,), "hinge_embedding_loss": (1,),
           "soft_margin_loss": (1,), "multilabel_soft_margin_loss": (1,), "cosine_embedding_loss": (2,),
           "poisson_nll_loss": (1,), "cross_entropy_probs": (1,), "kl_div": (1,)}


@DTYPES
@pytest.mark.parametrize("name", list(FUNCS))
def test_function_on_device_matches_cpu(name, dtype, sim_cuda):
    fn, arrays = FUNCS[name]
    skip = NO_GRAD.get(name, ())
    grad = tuple(i for i, a in enumerate(arrays) if a.dtype == np.float64 and i not in skip)
    check(sim_cuda, lambda dt: fn, arrays, dtype, grad=grad, module=False)


@DTYPES
@pytest.mark.parametrize("fn", ["batch_norm", "instance_norm"])
def test_functional_running_stats_on_device(fn, dtype, sim_cuda):
    """F.batch_norm / F.instance_norm in training update the running buffers in place, on the device."""
    x = N(4, 3, 5).astype(dtype)
    outs = []
    for device in (False, True):
        rm, rv = vl.tensor(np.zeros(3, dtype)), vl.tensor(np.ones(3, dtype))
        xx = vl.tensor(x)
        if device:
            rm, rv, xx = rm.cuda(), rv.cuda(), xx.cuda()
        with sim_cuda.forbid_host_sync() if device else _nullctx():
            y = getattr(F, fn)(xx, rm, rv, training=True) if fn == "batch_norm" else F.instance_norm(xx, rm, rv)
        outs.append((y, rm, rv))
    for a, b, what in zip(outs[1], outs[0], ("output", "running_mean", "running_var")):
        _close(a, b, dtype, what)


def test_all_ignored_targets_give_nan_and_zero_gradient(sim_cuda):
    """PyTorch's answer when every target is ignore_index: a NaN loss and a zero gradient; on the
    device it comes without reading the denominator on the host."""
    z = vl.tensor(N(3, 4)).cuda().requires_grad_(True)
    t = vl.tensor(np.array([-100] * 3)).cuda()
    for f in (F.cross_entropy, lambda a, b: F.nll_loss(F.log_softmax(a, 1), b)):
        z.grad = None
        with sim_cuda.forbid_host_sync():
            loss = f(z, t)
            loss.backward()
        assert np.isnan(_host(loss._data))
        assert z.grad.is_cuda and not _host(z.grad._data).any()


# ---------------------------------------------------------------- random masks drawn on the device
@pytest.mark.parametrize("make, shape, share", [
    (lambda: nn.Dropout(0.3), (40, 50), ()),
    (lambda: nn.Dropout1d(0.3), (8, 30, 6), (2,)),
    (lambda: nn.Dropout2d(0.3), (8, 30, 3, 4), (2, 3)),
    (lambda: nn.Dropout3d(0.3), (4, 30, 2, 3, 2), (2, 3, 4)),
])
def test_dropout_masks_are_drawn_on_device(make, shape, share, sim_cuda):
    """The mask is drawn on the device (the device's generator), the survivors are scaled by
    1/(1-p), whole channels are shared for the channel variants, and the gradient is the mask."""
    m = make().cuda().train()
    x = vl.tensor(np.abs(N(*shape)) + 0.5).cuda().requires_grad_(True)
    with sim_cuda.forbid_host_sync():
        y = m(x)
        y.sum().backward()
    assert y.is_cuda and x.grad.is_cuda
    yh, xh, gh = _host(y._data), _host(x._data), _host(x.grad._data)
    kept = yh != 0
    np.testing.assert_allclose(yh[kept], xh[kept] / 0.7, rtol=1e-12)
    np.testing.assert_allclose(gh, kept / 0.7, rtol=1e-12)
    assert 0.15 < 1 - kept.mean() < 0.45
    if share:
        assert (kept == kept.all(axis=share, keepdims=True)).all()
    m.eval()
    assert m(x) is x or np.array_equal(_host(m(x)._data), xh)


def test_device_dropout_follows_the_device_generator(sim_cuda):
    """vl.cuda.manual_seed makes device dropout reproducible, and the CPU generator is untouched."""
    x = vl.ones(200, device="cuda")
    vl.cuda.manual_seed(3)
    a = _host(F.dropout(x, 0.5)._data)
    cpu_state = vl.random.default_generator.get_state()
    vl.cuda.manual_seed(3)
    b = _host(F.dropout(x, 0.5)._data)
    np.testing.assert_array_equal(a, b)
    assert vl.random.default_generator.get_state()["bit_generator"] == cpu_state["bit_generator"]


@pytest.mark.parametrize("fn", [
    lambda x: F.alpha_dropout(x, 0.3, training=True),
    lambda x: F.feature_alpha_dropout(x, 0.3, training=True),
    lambda x: F.rrelu(x, training=True),
    lambda x: F.gumbel_softmax(x, tau=0.5, hard=True),
    lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.3),
])
def test_random_functions_run_on_device(fn, sim_cuda):
    x = vl.tensor(N(4, 6, 5)).cuda().requires_grad_(True)
    with sim_cuda.forbid_host_sync():
        y = fn(x)
        y.sum().backward()
    assert y.is_cuda and x.grad.is_cuda
    assert np.isfinite(_host(x.grad._data)).all()


def test_embedding_repeated_rows_accumulate_on_device(sim_cuda):
    """Repeated indices add their gradients (a scatter-add on the device), the padding row gets none."""
    e = nn.Embedding(5, 3, padding_idx=0).double().cuda()
    idx = vl.tensor(np.array([[1, 1, 0], [1, 4, 0]])).cuda()
    with sim_cuda.forbid_host_sync():
        e(idx).sum().backward()
    g = _host(e.weight.grad._data)
    np.testing.assert_array_equal(g[:, 0], [0, 3, 0, 0, 1])


def test_generate_square_subsequent_mask_device(sim_cuda):
    m = nn.Transformer.generate_square_subsequent_mask(4, device="cuda", dtype=vl.float32)
    assert m.is_cuda and m.dtype == np.float32
    np.testing.assert_array_equal(_host(m._data), np.triu(np.full((4, 4), -np.inf), 1).astype(np.float32))


# ---------------------------------------------------------------- training runs
def _train(model, batches, lossf, device, sim, steps):
    opt = vl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for i in range(steps):
        x, t = batches[i]
        x, t = vl.tensor(x), vl.tensor(t)
        if device:
            x, t = x.cuda(), t.cuda()
        ctx = sim.forbid_host_sync() if device else _nullctx()
        with ctx:
            opt.zero_grad()
            loss = lossf(model(x), t)
            loss.backward()
            opt.step()
        losses.append(float(_host(loss._data)))
    return losses


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@DTYPES
def test_mlp_trains_on_device_like_cpu(dtype, sim_cuda):
    """Linear + BatchNorm1d + ReLU + Dropout (p = 0 for the comparison) + cross-entropy, six SGD
    steps: the device run follows the CPU run, loss by loss and weight by weight."""
    vl.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 3)).to(dtype)
    dev = copy.deepcopy(cpu).cuda()
    batches = [(N(8, 6).astype(dtype), I(3, 8)) for _ in range(2)] * 3   # two batches, seen in turn
    lc = _train(cpu, batches, F.cross_entropy, False, sim_cuda, 6)
    ld = _train(dev, batches, F.cross_entropy, True, sim_cuda, 6)
    np.testing.assert_allclose(ld, lc, **_tol(dtype))
    assert lc[-2] < lc[0] and lc[-1] < lc[1]   # it learns
    for (n, pc), (_, pd) in zip(cpu.state_dict().items(), dev.state_dict().items()):
        assert pd.is_cuda, n
        np.testing.assert_allclose(_host(pd._data), pc._data, err_msg=n, **_tol(dtype))


@DTYPES
def test_transformer_encoder_layer_trains_on_device_like_cpu(dtype, sim_cuda):
    """A TransformerEncoderLayer (dropout 0) with a causal mask and a linear head, token-level
    cross-entropy, four SGD steps: the device run follows the CPU run."""
    vl.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 8)
            self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
            self.head = nn.Linear(8, 7)

        def forward(self, t):
            h = self.enc(self.emb(t), src_mask=nn.Transformer.generate_square_subsequent_mask(
                t.shape[1], device=t.device, dtype=self.head.weight.dtype), is_causal=True)
            return self.head(h).transpose(1, 2)

    cpu = Net().to(dtype)
    dev = copy.deepcopy(cpu).cuda()
    toks = [I(7, 3, 6) for _ in range(4)]
    batches = [(t, np.roll(t, -1, axis=1)) for t in toks]
    lc = _train(cpu, batches, F.cross_entropy, False, sim_cuda, 4)
    ld = _train(dev, batches, F.cross_entropy, True, sim_cuda, 4)
    np.testing.assert_allclose(ld, lc, **_tol(dtype))
    for (n, pc), (_, pd) in zip(cpu.named_parameters(), dev.named_parameters()):
        np.testing.assert_allclose(_host(pd._data), pc._data, err_msg=n, **_tol(dtype))


@DTYPES
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("form", ["2d", "offsets", "offsets_last"])
def test_embedding_bag_on_device_matches_cpu(mode, form, dtype, sim_cuda):
    """EmbeddingBag with fixed-size bags (2-D input) or offsets (an empty bag included), a padding
    index and, for 'sum', per-sample weights."""
    if form == "2d":
        idx, off = np.array([[1, 2, 0], [3, 3, 9], [0, 0, 0]]), None
    else:
        idx, off = np.array([1, 2, 0, 3, 3, 9, 4]), np.array([0, 3, 3, 5] + ([7] if form == "offsets_last" else []))
    psw = R.random(idx.shape) if mode == "sum" else None
    arrays = [idx] + ([off] if off is not None else []) + ([psw] if psw is not None else [])

    def make(dt):
        return nn.EmbeddingBag(10, 4, mode=mode, padding_idx=0, include_last_offset=form == "offsets_last").to(dt)

    def call(m):
        def f(i, *rest):
            o = rest[0] if off is not None else None
            w = rest[-1] if psw is not None else None
            return m(i, o, per_sample_weights=w)
        return f

    class Wrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *a):
            return call(self.m)(*a)

    sync_ok = mode == "max" and off is not None     # reads the offsets once (documented)
    if sync_ok:
        cpu = Wrap(make(dtype))
        dev = copy.deepcopy(cpu).cuda()
        xs = _tensors(arrays, dtype, (), False)
        xd = _tensors(arrays, dtype, (), True)
        yc, yd = cpu(*xs), dev(*xd)
        _close(yd, yc, dtype, "output")
        yc.sum().backward()
        with sim_cuda.forbid_host_sync():
            yd.sum().backward()
        _close(dev.m.weight.grad, cpu.m.weight.grad, dtype, "weight gradient")
        return
    check(sim_cuda, lambda dt: Wrap(make(dt)), arrays, dtype, grad=())


@pytest.mark.parametrize("loss", ["cross_entropy", "bce_with_logits", "mse", "sdpa_causal", "nll"])
def test_second_derivatives_on_device_match_cpu(loss, sim_cuda):
    """A gradient penalty (the gradient's squared norm, differentiated again): the fused ops'
    composites run on the device and give the CPU's parameter gradients."""
    x = N(5, 4)
    t = np.array([0, 1, -100, 3, 2])
    fns = {"cross_entropy": lambda y, tt: F.cross_entropy(y, tt, label_smoothing=0.1),
           "bce_with_logits": lambda y, tt: F.binary_cross_entropy_with_logits(y, vl.sigmoid(y.detach())),
           "mse": lambda y, tt: F.mse_loss(y, y.detach() * 0.5),
           "sdpa_causal": lambda y, tt: F.scaled_dot_product_attention(y[None], y[None], y[None], is_causal=True).sum(),
           "nll": lambda y, tt: F.nll_loss(F.log_softmax(y, 1), tt)}

    def run(device):
        vl.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 4)).double()
        xx, tt = vl.tensor(x), vl.tensor(t)
        if device:
            m, xx, tt = m.cuda(), xx.cuda(), tt.cuda()
        xx.requires_grad_(True)
        g, = vl.autograd.grad(fns[loss](m(xx), tt), xx, create_graph=True)
        return vl.autograd.grad((g * g).sum(), list(m.parameters()))

    gc = run(False)
    with sim_cuda.forbid_host_sync():
        gd = run(True)
    for i, (a, b) in enumerate(zip(gd, gc)):
        _close(a, b, np.float64, f"parameter {i}")


LOSS_MODULES = {
    "CrossEntropyLoss": (lambda dt: nn.CrossEntropyLoss(weight=vl.tensor(_w(4).astype(dt)), label_smoothing=0.1),
                         [N(6, 4), TGT_IGN]),
    "NLLLoss": (lambda dt: nn.NLLLoss(weight=vl.tensor(_w(4).astype(dt))), [N(6, 4), TGT]),
    "BCELoss": (lambda dt: nn.BCELoss(weight=vl.tensor(_w(4).astype(dt))), [_sigm(5, 4), R.random((5, 4))]),
    "BCEWithLogitsLoss": (lambda dt: nn.BCEWithLogitsLoss(pos_weight=vl.tensor(_w(4).astype(dt))),
                          [N(5, 4), R.random((5, 4))]),
    "MultiMarginLoss": (lambda dt: nn.MultiMarginLoss(weight=vl.tensor(_w(4).astype(dt))), [N(6, 4), TGT]),
    "MultiLabelSoftMarginLoss": (lambda dt: nn.MultiLabelSoftMarginLoss(weight=vl.tensor(_w(4).astype(dt))),
                                 [N(5, 4), R.integers(0, 2, (5, 4)).astype(np.float64)]),
    "HuberLoss": (lambda dt: nn.HuberLoss(delta=0.5), [N(5, 4), N(5, 4)]),
    "GaussianNLLLoss": (lambda dt: nn.GaussianNLLLoss(full=True), [N(5, 4), N(5, 4), R.random((5, 4)) + 0.1]),
}


@DTYPES
@pytest.mark.parametrize("name", list(LOSS_MODULES))
def test_loss_module_on_device_matches_cpu(name, dtype, sim_cuda):
    """Loss modules whose class weights are buffers: .cuda() moves them, the loss runs on the device."""
    make, arrays = LOSS_MODULES[name]
    check(sim_cuda, make, arrays, dtype, grad=(0,))


@DTYPES
@pytest.mark.simulator_only
def test_ctc_loss_on_device_matches_cpu(dtype, sim_cuda):
    """CTC on the device: the targets and lengths are read on the host once in forward (PyTorch
    takes the lengths as host integers too); the recursion and the whole backward stay on the device."""
    lp = np.log(_probs(7, 2, 5))
    args = [np.array([[1, 2, 2], [3, 1, 0]]), np.array([7, 6]), np.array([3, 2])]
    xc = vl.tensor(lp.astype(dtype)).requires_grad_(True)
    xd = vl.tensor(lp.astype(dtype)).cuda().requires_grad_(True)
    lc = F.ctc_loss(xc, *[vl.tensor(a) for a in args])
    before = sim_cuda.host_syncs[0]
    ld = F.ctc_loss(xd, *[vl.tensor(a).cuda() for a in args])
    if not getattr(sim_cuda, "real", False):            # (host reads are counted by the simulator)
        assert sim_cuda.host_syncs[0] - before == 3      # targets, input_lengths, target_lengths
    _close(ld, lc, dtype, "loss")
    lc.backward()
    with sim_cuda.forbid_host_sync():
        ld.backward()
    _close(xd.grad, xc.grad, dtype, "gradient")


ACTIVATIONS = ["ReLU", "ReLU6", "ELU", "SELU", "CELU", "Hardtanh", "Hardswish", "Hardsigmoid", "Hardshrink",
               "Softshrink", "Tanhshrink", "Softsign", "LogSigmoid", "PReLU", "Softmin", "Threshold", "GLU"]


@DTYPES
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_module_on_device_matches_cpu(name, dtype, sim_cuda):
    def make(dt):
        cls = getattr(nn, name)
        m = cls(0.1, 0.0) if name == "Threshold" else cls(dim=1) if name == "Softmin" else cls()
        return m.to(dt)
    check(sim_cuda, make, [N(2, 4, 3, 2)], dtype, grad=(0,))


def test_mixed_devices_raise_torchs_error(sim_cuda):
    """A layer on the CPU given a CUDA input (or a CPU mask for CUDA attention) raises PyTorch's
    same-device RuntimeError instead of computing on either device."""
    x = vl.randn(4, 3, device="cuda")
    for f in (lambda: nn.Linear(3, 2)(x), lambda: nn.LayerNorm(3)(x), lambda: nn.BatchNorm1d(3)(x),
              lambda: nn.Embedding(5, 3)(vl.tensor([1, 2]).cuda()),
              lambda: F.cross_entropy(x, vl.tensor([0, 1, 2, 0])),
              lambda: F.scaled_dot_product_attention(x, x, x, attn_mask=vl.ones(4, 4, dtype=vl.bool))):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            f()


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope"])
def test_gpt_steps_on_device_match_cpu(pos, sim_cuda):
    """The GPT of varlens.models (embeddings, causal attention, LayerNorm, tied head, cross-entropy)
    takes three AdamW steps on the device without a host sync, matching the CPU run (float64: the
    key bias's gradient is zero up to rounding, which Adam's normalisation would amplify in float32)."""
    from varlens.models import gpt
    vl.manual_seed(0)
    cpu = gpt.GPT(gpt.GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, pos=pos)).double()
    dev = copy.deepcopy(cpu).cuda()
    data = [(I(11, 3, 8), I(11, 3, 8)) for _ in range(3)]
    runs = []
    for m, device in ((cpu, False), (dev, True)):
        opt = vl.optim.AdamW(m.parameters(), lr=1e-2)
        losses = []
        for x, y in data:
            x, y = vl.tensor(x), vl.tensor(y)
            if device:
                x, y = x.cuda(), y.cuda()
            with sim_cuda.forbid_host_sync() if device else _nullctx():
                _, loss = m(x, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            losses.append(float(_host(loss._data)))
        runs.append(losses)
    np.testing.assert_allclose(runs[1], runs[0], **_tol(np.float64))
    for (n, pc), (_, pd) in zip(cpu.named_parameters(), dev.named_parameters()):
        assert pd.is_cuda, n
        np.testing.assert_allclose(_host(pd._data), pc._data, err_msg=n, rtol=1e-8, atol=1e-10)


def test_module_backward_hooks_on_device(sim_cuda):
    """Full backward hooks read the input and output gradients through the identity op on the device."""
    m = nn.Linear(3, 2).double().cuda()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi[0], go[0])))
    x = vl.tensor(N(4, 3)).cuda().requires_grad_(True)
    with sim_cuda.forbid_host_sync():
        m(x).sum().backward()
    (gi, go), = seen
    assert gi.is_cuda and go.is_cuda
    np.testing.assert_allclose(_host(gi._data), _host(x.grad._data))
    np.testing.assert_array_equal(_host(go._data), np.ones((4, 2)))
