"""Transformer-XL relative attention (seed 003 §7.6): gradcheck, PyTorch parity, the four-term
forms (7.6.1) and (7.6.2), shift invariance, memory semantics, and a training run where the
memory is what makes the task solvable."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
from varlens import nn
from varlens.autograd import gradcheck
from varlens.nn.relative import (RelativeMultiheadAttention, TransformerXL, rel_shift)

from conftest import assert_close


def _attn(d=8, h=2, seed=0):
    vl.manual_seed(seed)
    a = RelativeMultiheadAttention(d, h, dtype=vl.float64)
    nn.init.normal_(a.r_w_bias, std=0.5)
    nn.init.normal_(a.r_r_bias, std=0.5)
    return a


def _sin_row(dist, d):
    inv = 1.0 / 10000.0 ** (np.arange(0, d, 2) / d)
    return np.concatenate([np.sin(dist * inv), np.cos(dist * inv)])


def test_rel_shift_moves_row_i_left_by_T_minus_1_minus_i():
    T, K = 3, 5
    x = vl.tensor(np.arange(T * K, dtype=np.float64).reshape(T, K))
    out = rel_shift(x).detach().numpy()
    for i in range(T):
        for j in range(K):
            if j + T - 1 - i < K:
                assert out[i, j] == x.detach().numpy()[i, j + T - 1 - i]


def test_scores_equal_explicit_four_terms_of_eq_7_6_2():
    """Each valid score equals q.k + u.k + q.r_{i-j} + v.r_{i-j}, built term by term with the
    distance embedding computed directly (no shift trick)."""
    d, H, B, T, M = 8, 2, 2, 4, 3
    a = _attn(d, H)
    x = vl.randn(B, T, d, dtype=vl.float64)
    mem = vl.randn(B, M, d, dtype=vl.float64)
    s, _ = a.scores(x, mem)
    s = s.detach().numpy()
    cat = np.concatenate([mem.detach().numpy(), x.detach().numpy()], 1)
    W = a.qkv_net.weight.detach().numpy()
    Dh = d // H
    q = cat[:, M:] @ W[:d].T
    k = cat @ W[d:2 * d].T
    WR = a.r_net.weight.detach().numpy()
    u, v = a.r_w_bias.detach().numpy(), a.r_r_bias.detach().numpy()
    for b in range(B):
        for h in range(H):
            sl = slice(h * Dh, (h + 1) * Dh)
            for i in range(T):
                for j in range(M + i + 1):
                    r = (WR @ _sin_row(M + i - j, d))[sl]
                    qi, kj = q[b, i, sl], k[b, j, sl]
                    ref = (qi @ kj + u[h] @ kj + qi @ r + v[h] @ r) / math.sqrt(Dh)
                    assert abs(s[b, h, i, j] - ref) < 1e-10


def test_eq_7_6_1_four_term_expansion_is_exact():
    g = np.random.default_rng(0)
    n, d, dk = 5, 6, 4
    E, U = g.standard_normal((n, d)), g.standard_normal((n, d))
    WK, WQ = g.standard_normal((d, dk)), g.standard_normal((d, dk))
    full = (E + U) @ WK @ WQ.T @ (E + U).T
    a, b = E @ WK @ WQ.T @ E.T, E @ WK @ WQ.T @ U.T
    c, dd = U @ WK @ WQ.T @ E.T, U @ WK @ WQ.T @ U.T
    np.testing.assert_allclose(full, a + b + c + dd, rtol=1e-12, atol=1e-12)
    # and the absolute position-position term (d) is NOT a function of i - j alone
    assert abs(dd[0, 1] - dd[2, 3]) > 1e-6


def test_scores_depend_on_positions_only_through_the_distance():
    """Prepend s tokens: the scores between the old tokens (now at i + s, j + s) are unchanged."""
    d, s, T = 8, 3, 5
    a = _attn(d)
    x = vl.randn(1, T, d, dtype=vl.float64)
    pre = vl.randn(1, s, d, dtype=vl.float64)
    S = a.scores(x)[0].detach().numpy()
    S2 = a.scores(vl.cat([pre, x], 1))[0].detach().numpy()
    tri = np.tril(np.ones((T, T), bool))
    np.testing.assert_allclose(S2[:, :, s:, s:][:, :, tri], S[:, :, tri], rtol=1e-12, atol=1e-12)
    # with learned absolute positions the same shift would change the scores
    U = np.random.default_rng(1).standard_normal((T + s, d))
    A1 = (x.detach().numpy()[0] + U[:T]) @ (x.detach().numpy()[0] + U[:T]).T
    A2 = (x.detach().numpy()[0] + U[s:]) @ (x.detach().numpy()[0] + U[s:]).T
    assert np.abs(A1 - A2).max() > 1e-3


def test_memory_equals_attending_over_the_longer_sequence_and_gets_no_gradient():
    d, M, T = 8, 3, 4
    a = _attn(d)
    mem = vl.randn(2, M, d, dtype=vl.float64, requires_grad=True)
    x = vl.randn(2, T, d, dtype=vl.float64, requires_grad=True)
    y = a(x, mem)
    y_full = a(vl.cat([mem.detach(), x.detach()], 1))[:, M:]
    assert_close(y, y_full, rtol=1e-10, atol=1e-12, what="memory vs full sequence")
    assert np.abs(y.detach().numpy() - a(x).detach().numpy()).max() > 1e-3  # memory changes the output
    (y * y).sum().backward()
    assert mem.grad is None
    assert x.grad is not None and np.abs(x.grad.detach().numpy()).sum() > 0


def test_gradcheck_input_and_memory_path():
    a = _attn(6, 2)
    x = vl.randn(2, 3, 6, dtype=vl.float64, requires_grad=True)
    mem = vl.randn(2, 2, 6, dtype=vl.float64)
    gradcheck(lambda t: a(t, mem), [x])
    gradcheck(lambda t: a(t), [x])


def test_gradcheck_parameters_u_v_and_projections():
    """gradcheck perturbs the parameters in place; the closure reads them from the module."""
    a = _attn(6, 2)
    x = vl.randn(1, 3, 6, dtype=vl.float64)
    mem = vl.randn(1, 2, 6, dtype=vl.float64)
    gradcheck(lambda *ps: a(x, mem), [a.r_w_bias, a.r_r_bias, a.r_net.weight, a.qkv_net.weight])


def _torch_rel_attention(a, x, mem):
    """Reference in PyTorch: the same formulas with the distance looked up by index."""
    P = {n: torch.tensor(p.detach().numpy(), requires_grad=True) for n, p in a.named_parameters()}
    B, T, d = x.shape
    H, Dh = a.n_head, a.d_head
    cat = torch.cat([mem, x], 1)
    K = cat.shape[1]
    M = K - T
    w = cat @ P["qkv_net.weight"].T
    q = w[:, M:, :d].reshape(B, T, H, Dh).transpose(1, 2)
    k = w[:, :, d:2 * d].reshape(B, K, H, Dh).transpose(1, 2)
    v = w[:, :, 2 * d:].reshape(B, K, H, Dh).transpose(1, 2)
    inv = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    dist = torch.arange(0, K, dtype=torch.float64)[:, None] * inv
    R = torch.cat([torch.sin(dist), torch.cos(dist)], -1)  # row = distance
    r = (R @ P["r_net.weight"].T).reshape(K, H, Dh).transpose(0, 1)  # (H, K, Dh)
    ac = (q + P["r_w_bias"][:, None]) @ k.transpose(-1, -2)
    bd_tab = (q + P["r_r_bias"][:, None]) @ r.transpose(-1, -2)  # (B, H, T, dist)
    i = torch.arange(T)[:, None]
    j = torch.arange(K)[None, :]
    dd = (i + M - j).clamp(min=0)
    bd = torch.gather(bd_tab, -1, dd.expand(B, H, T, K))
    s = (ac + bd) / math.sqrt(Dh)
    s = s.masked_fill(j > i + M, float("-inf"))
    y = torch.softmax(s, -1) @ v
    y = y.transpose(1, 2).reshape(B, T, H * Dh)
    return y @ P["o_net.weight"].T, P


def test_pytorch_parity_values_and_gradients():
    a = _attn(8, 2)
    x = vl.randn(2, 4, 8, dtype=vl.float64, requires_grad=True)
    mem = vl.randn(2, 3, 8, dtype=vl.float64)
    y = a(x, mem)
    (y * y).sum().backward()
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt, P = _torch_rel_attention(a, xt, torch.tensor(mem.detach().numpy()))
    (yt * yt).sum().backward()
    assert_close(y, yt, rtol=1e-10, atol=1e-12, what="output")
    assert_close(x.grad, xt.grad, rtol=1e-9, atol=1e-11, what="dx")
    for n, p in a.named_parameters():
        assert_close(p.grad, P[n].grad, rtol=1e-9, atol=1e-11, what=n)


def test_bad_input_names_the_argument():
    a = RelativeMultiheadAttention(8, 2)
    with pytest.raises(ValueError, match="mem"):
        a(vl.randn(2, 3, 8), vl.randn(1, 3, 8))
    with pytest.raises(ValueError, match="x must be"):
        a(vl.randn(2, 3, 6))
    with pytest.raises(ValueError, match="n_head"):
        RelativeMultiheadAttention(10, 3)


def _periodic_batch(rng, B, L, period, V):
    pat = rng.integers(0, V, (B, period))
    reps = -(-L // period)
    return np.tile(pat, (1, reps))[:, :L]


def test_memory_lets_the_model_copy_across_segments():
    """Streams repeat a random pattern of period 10 and segments hold 8 tokens: the next
    token is the one 10 back, which lies in the previous segment.  With memory the model
    learns to copy it; resetting the memory every segment leaves it guessing."""
    V, period, seg, B = 8, 10, 8, 16
    rng = np.random.default_rng(0)
    vl.manual_seed(0)
    model = TransformerXL(V, d_model=32, n_head=2, n_layer=1, mem_len=seg, dim_feedforward=64)
    opt = vl.optim.Adam(model.parameters(), lr=5e-3)
    for step in range(110):
        data = _periodic_batch(rng, B, 3 * seg + 1, period, V)
        mems = None
        opt.zero_grad()
        total = 0
        for s in range(3):
            inp = vl.tensor(data[:, s * seg:(s + 1) * seg])
            tgt = vl.tensor(data[:, s * seg + 1:(s + 1) * seg + 1])
            logits, mems = model(inp, mems)
            total = total + nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        total.backward()
        opt.step()

    def eval_loss(reset):
        data = _periodic_batch(np.random.default_rng(99), 64, 3 * seg + 1, period, V)
        mems, losses = None, []
        with vl.no_grad():
            for s in range(3):
                logits, mems = model(vl.tensor(data[:, s * seg:(s + 1) * seg]), None if reset else mems)
                if s > 0:
                    t = vl.tensor(data[:, s * seg + 1:(s + 1) * seg + 1])
                    losses.append(float(nn.functional.cross_entropy(logits.reshape(-1, V), t.reshape(-1))))
        return np.mean(losses)
    with_mem, without = eval_loss(False), eval_loss(True)
    assert with_mem < 0.5 * without, (with_mem, without)
    assert with_mem < 0.6 * math.log(V)
