"""MultiheadAttention and Transformer layers: PyTorch parity (same weights), gradcheck, masks."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck
from varlens.nn.attention import MultiheadAttention
from varlens.nn.transformer import (Transformer, TransformerDecoderLayer, TransformerEncoder,
                                    TransformerEncoderLayer, generate_square_subsequent_mask)

from conftest import assert_close, to_torch


def copy_to_torch(vmod, tmod):
    sd = {k: torch.from_numpy(np.array(v.numpy(), copy=True)) for k, v in vmod.state_dict().items()}
    missing, unexpected = tmod.load_state_dict(sd, strict=True)
    assert not missing and not unexpected


def _compare_grads(vmod, tmod, rtol=1e-6, atol=1e-8):
    tparams = dict(tmod.named_parameters())
    for name, p in vmod.named_parameters():
        assert p.grad is not None, name
        assert_close(p.grad, tparams[name].grad, rtol=rtol, atol=atol, what=f"grad {name}")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "kpm", "bool_attn", "float_attn", "causal"])
def test_mha_matches_torch(batch_first, masks):
    E, H, L, S, N = 8, 2, 4, 5, 3
    m = MultiheadAttention(E, H, batch_first=batch_first).double()
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=torch.float64)
    copy_to_torch(m, tm)
    shape_q = (N, L, E) if batch_first else (L, N, E)
    shape_k = (N, S, E) if batch_first else (S, N, E)
    q = vl.randn(*shape_q, dtype=vl.float64, requires_grad=True)
    kv = vl.randn(*shape_k, dtype=vl.float64, requires_grad=True)
    kw, tkw = {}, {}
    rng = np.random.default_rng(1)
    if masks == "kpm":
        kp = rng.random((N, S)) > 0.6
        kp[:, 0] = False
        kw["key_padding_mask"], tkw["key_padding_mask"] = vl.tensor(kp), torch.from_numpy(kp)
    elif masks == "bool_attn":
        am = rng.random((L, S)) > 0.6
        am[:, 0] = False
        kw["attn_mask"], tkw["attn_mask"] = vl.tensor(am), torch.from_numpy(am)
    elif masks == "float_attn":
        am = rng.standard_normal((L, S))
        kw["attn_mask"], tkw["attn_mask"] = vl.tensor(am, dtype=vl.float64), torch.from_numpy(am)
    elif masks == "causal":
        am = np.triu(np.ones((L, S), dtype=bool), 1)
        kw["attn_mask"], tkw["attn_mask"] = vl.tensor(am), torch.from_numpy(am)
    out, w = m(q, kv, kv, **kw)
    tq, tkv = to_torch(q), to_torch(kv)
    tout, tw = tm(tq, tkv, tkv, **tkw)
    assert_close(out, tout, what="output")
    assert_close(w, tw, what="averaged weights")
    g = rng.standard_normal(out.shape)
    (out * vl.tensor(g, dtype=vl.float64)).sum().backward()
    (tout * torch.from_numpy(g)).sum().backward()
    assert_close(q.grad, tq.grad, what="dquery")
    assert_close(kv.grad, tkv.grad, what="dkey/value")
    _compare_grads(m, tm)


def test_mha_self_attention_gradcheck():
    m = MultiheadAttention(4, 2).double()
    x = vl.randn(3, 2, 4, dtype=vl.float64, requires_grad=True)
    gradcheck(lambda a: m(a, a, a)[0], (x,))


def test_mha_rejects_bad_input():
    m = MultiheadAttention(8, 2)
    with pytest.raises(RuntimeError, match="query has 6 features, expected embed_dim=8"):
        m(vl.randn(3, 2, 6), vl.randn(3, 2, 6), vl.randn(3, 2, 6))
    with pytest.raises(ValueError, match="divisible"):
        MultiheadAttention(7, 2)
    with pytest.raises(RuntimeError, match=r"key_padding_mask must have shape \(2, 3\)"):
        x = vl.randn(3, 2, 8)
        m(x, x, x, key_padding_mask=vl.zeros(3, 2).bool())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, norm_first=norm_first,
              activation=activation, batch_first=True)
    m = TransformerEncoderLayer(**kw).double()
    tm = torch.nn.TransformerEncoderLayer(**kw, dtype=torch.float64)
    copy_to_torch(m, tm)
    x = vl.randn(2, 5, 8, dtype=vl.float64, requires_grad=True)
    mask = generate_square_subsequent_mask(5, dtype=vl.float64)
    out = m(x, src_mask=mask)
    tx = to_torch(x)
    tout = tm(tx, src_mask=torch.from_numpy(mask.numpy()))
    assert_close(out, tout, rtol=1e-6, atol=1e-9, what="encoder layer")
    out.sum().backward()
    tout.sum().backward()
    assert_close(x.grad, tx.grad, rtol=1e-6, atol=1e-9, what="dx")
    _compare_grads(m, tm)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, norm_first=norm_first)
    m = TransformerDecoderLayer(**kw).double()
    tm = torch.nn.TransformerDecoderLayer(**kw, dtype=torch.float64)
    copy_to_torch(m, tm)
    t = vl.randn(4, 2, 8, dtype=vl.float64, requires_grad=True)
    mem = vl.randn(6, 2, 8, dtype=vl.float64, requires_grad=True)
    out = m(t, mem, tgt_mask=generate_square_subsequent_mask(4, dtype=vl.float64))
    tt, tmem = to_torch(t), to_torch(mem)
    tout = tm(tt, tmem, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64))
    assert_close(out, tout, rtol=1e-6, atol=1e-9, what="decoder layer")
    (out ** 2).sum().backward()
    (tout ** 2).sum().backward()
    assert_close(mem.grad, tmem.grad, rtol=1e-6, atol=1e-9, what="dmemory")
    _compare_grads(m, tm)


def test_full_transformer_matches_torch():
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
              dropout=0.0)
    m = Transformer(**kw).double()
    tm = torch.nn.Transformer(**kw, dtype=torch.float64)
    copy_to_torch(m, tm)
    src, tgt = vl.randn(5, 2, 8, dtype=vl.float64), vl.randn(4, 2, 8, dtype=vl.float64)
    out = m(src, tgt, tgt_mask=Transformer.generate_square_subsequent_mask(4, dtype=vl.float64))
    tout = tm(to_torch(src), to_torch(tgt),
              tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64))
    assert_close(out, tout, rtol=1e-6, atol=1e-9, what="transformer")


def test_encoder_stack_layers_are_independent_copies():
    layer = TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = TransformerEncoder(layer, 3)
    w = [l.linear1.weight for l in enc.layers]
    assert w[0] is not w[1] and np.array_equal(w[0].detach().numpy(), w[1].detach().numpy())
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))
