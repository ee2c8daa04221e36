"""scaled_dot_product_attention: finite differences and PyTorch parity for every mask kind."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck, gradgradcheck
from varlens.ops.nn.attention import scaled_dot_product_attention as sdpa

from conftest import assert_close, to_torch


def _qkv(L=5, S=6, E=4, Ev=3, batch=(2, 3)):
    q = vl.randn(*batch, L, E, dtype=vl.float64, requires_grad=True)
    k = vl.randn(*batch, S, E, dtype=vl.float64, requires_grad=True)
    v = vl.randn(*batch, S, Ev, dtype=vl.float64, requires_grad=True)
    return q, k, v


MASKS = ["none", "causal", "bool", "bool_broadcast", "float", "scale1"]


def _kwargs(kind, L, S):
    g = np.random.default_rng(3)
    if kind == "causal":
        return {"is_causal": True}, {"is_causal": True}
    if kind == "bool":
        m = g.random((2, 3, L, S)) > 0.3
        m[..., 0] = True  # every query sees at least one key
        return {"attn_mask": vl.tensor(m)}, {"attn_mask": torch.from_numpy(m)}
    if kind == "bool_broadcast":
        m = g.random((L, S)) > 0.5
        m[:, 0] = True
        return {"attn_mask": vl.tensor(m)}, {"attn_mask": torch.from_numpy(m)}
    if kind == "float":
        m = g.standard_normal((L, S))
        return {"attn_mask": vl.tensor(m, dtype=vl.float64)}, {"attn_mask": torch.from_numpy(m)}
    if kind == "scale1":
        return {"scale": 1.0}, {"scale": 1.0}
    return {}, {}


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("LS", [(5, 6), (4, 4)])
def test_sdpa_matches_torch(kind, LS):
    L, S = LS
    q, k, v = _qkv(L, S)
    kw, tkw = _kwargs(kind, L, S)
    tq, tk, tv = to_torch(q), to_torch(k), to_torch(v)
    out = sdpa(q, k, v, **kw)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw)
    assert_close(out, tout, what=f"forward {kind}")
    w = np.random.default_rng(0).standard_normal(out.shape)
    (out * vl.tensor(w, dtype=vl.float64)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    for a, b, n in ((q, tq, "dq"), (k, tk, "dk"), (v, tv, "dv")):
        assert_close(a.grad, b.grad, what=f"{n} {kind}")


@pytest.mark.parametrize("kind", MASKS)
def test_sdpa_gradcheck(kind):
    q, k, v = _qkv(4, 5, 3, 2, batch=(2,))
    kw, _ = _kwargs(kind, 4, 5)
    if "attn_mask" in kw and kw["attn_mask"].ndim == 4:
        kw["attn_mask"] = kw["attn_mask"][0, 0]
    gradcheck(lambda a, b, c: sdpa(a, b, c, **kw), (q, k, v))


def test_sdpa_second_derivatives_through_composite():
    q, k, v = _qkv(3, 4, 2, 2, batch=(1,))
    gradgradcheck(lambda a, b, c: sdpa(a, b, c, is_causal=True), (q, k, v))


def test_sdpa_dropout_is_inverted_and_differentiable():
    q, k, v = _qkv(4, 4, 3, 3, batch=(2,))
    g = vl.Generator().manual_seed(1)
    out = sdpa(q, k, v, dropout_p=0.5, generator=g)
    # the same draw again gives the same result, and gradcheck holds with a fixed mask
    gradcheck(lambda a, b, c: sdpa(a, b, c, dropout_p=0.5, generator=vl.Generator().manual_seed(1)), (q, k, v))
    assert out.shape == (2, 4, 3)


@pytest.mark.parametrize("dtype", [vl.float32, vl.float64])
def test_sdpa_dropout_keeps_a_boolean_mask_and_matches_torch_with_that_mask(dtype):
    """With dropout the node keeps the keep-mask as booleans (1 byte an entry) and no P' beside P;
    forward and gradients equal PyTorch's maths with the same mask: softmax(q k^T / sqrt(E)) * keep
    / (1 - p) @ v, in the input's dtype."""
    L, S, E, p = 5, 6, 4, 0.3
    g = np.random.default_rng(5)
    q, k, v = (vl.tensor(g.standard_normal((2, 3, n, E)), dtype=dtype, requires_grad=True) for n in (L, S, S))
    out = sdpa(q, k, v, dropout_p=p, generator=vl.Generator().manual_seed(7))
    saved = out.grad_fn.saved
    keep = saved[4]
    assert keep.dtype == bool and keep.shape == (2, 3, L, S)
    assert 0 < keep.sum() < keep.size
    big = [a for a in saved if a is not None and getattr(a, "shape", ())[-2:] == (L, S) and a.dtype != bool]
    assert len(big) == 1, "only P itself is kept at (L, S) size in floats"
    w = g.standard_normal(out.shape)
    (out * vl.tensor(w, dtype=dtype)).sum().backward()
    tq, tk, tv = (to_torch(t) for t in (q, k, v))
    tp = torch.softmax(tq @ tk.transpose(-1, -2) / math.sqrt(E), -1) * torch.from_numpy(keep) / (1 - p)
    tout = tp @ tv
    (tout * torch.from_numpy(w).to(tout.dtype)).sum().backward()
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == vl.float32 else {}
    assert out.dtype == dtype and q.grad.dtype == dtype and v.grad.dtype == dtype
    assert_close(out, tout, what="forward", **tol)
    for a, b, n in ((q, tq, "dq"), (k, tk, "dk"), (v, tv, "dv")):
        assert_close(a.grad, b.grad, what=n, **tol)


def test_sdpa_dropout_second_order_route_matches_first_order():
    """create_graph=True goes through the composite (the mask as numbers): the same gradients."""
    q, k, v = _qkv(4, 4, 3, 3, batch=(2,))
    first = vl.autograd.grad(sdpa(q, k, v, dropout_p=0.4, generator=vl.Generator().manual_seed(2)).sum(),
                             (q, k, v))
    second = vl.autograd.grad(sdpa(q, k, v, dropout_p=0.4, generator=vl.Generator().manual_seed(2)).sum(),
                              (q, k, v), create_graph=True)
    for a, b in zip(first, second):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    gradgradcheck(lambda a, b, c: sdpa(a, b, c, dropout_p=0.4, generator=vl.Generator().manual_seed(2)),
                  (q, k, v))


def test_unit_variance_logits_with_scale():
    """Seed 000 / 002: q.k has variance d; scaled by 1/sqrt(d) it is ~1."""
    d = 256
    q = vl.randn(4096, d, dtype=vl.float64)
    k = vl.randn(4096, d, dtype=vl.float64)
    dots = (q * k).sum(1)
    assert abs(dots.var().item() / d - 1) < 0.1
    assert abs((dots / math.sqrt(d)).var().item() - 1) < 0.1


def test_sdpa_bad_shapes():
    q = vl.randn(2, 5, 4)
    with pytest.raises(RuntimeError, match="last dim 4 must equal key's 3"):
        sdpa(q, vl.randn(2, 6, 3), vl.randn(2, 6, 3))
    with pytest.raises(RuntimeError, match="key has 6 positions but value has 7"):
        sdpa(q, vl.randn(2, 6, 4), vl.randn(2, 7, 3))
