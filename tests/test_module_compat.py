"""Module API details a PyTorch user relies on: repr, load_state_dict's result, forward hooks
with kwargs / always_call, and gradients through attention masks and returned weights."""
import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn


def _pair(build):
    return build(nn), build(torch.nn)


@pytest.mark.parametrize("build", [
    lambda m: m.Linear(3, 4),
    lambda m: m.Sequential(m.Linear(3, 4), m.ReLU(), m.Sequential(m.Linear(4, 4), m.Dropout(0.1))),
    lambda m: m.ModuleList([m.Linear(2, 2) for _ in range(3)] + [m.ReLU(), m.ReLU(), m.Tanh()]),
    lambda m: m.ModuleList([]),
    lambda m: m.ModuleDict({"a": m.Linear(1, 1), "b": m.Sequential()}),
    lambda m: m.LSTM(3, 4, 2, batch_first=True),
    lambda m: m.TransformerEncoderLayer(8, 2, 16, batch_first=True),
    lambda m: m.MultiheadAttention(8, 2),
])
def test_repr_is_pytorchs(build):
    v, t = _pair(build)
    assert repr(v) == repr(t)


def test_summary_keeps_the_parameter_counts():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert m.summary().splitlines() == ["Sequential(  # 16 params",
                                        "  (0): Linear(in_features=3, out_features=4, bias=True)  # 16 params",
                                        "  (1): ReLU()", ")"]


def test_load_state_dict_result_and_bad_argument_as_torch():
    for lib in (nn, torch.nn):
        m = lib.Linear(2, 2)
        sd = dict(m.state_dict())
        assert repr(m.load_state_dict(sd)) == "<All keys matched successfully>"
        sd.pop("bias")
        sd["x"] = sd["weight"][0]
        r = m.load_state_dict(sd, strict=False)
        assert repr(r) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['x'])"
        assert r.missing_keys == ["bias"] and r.unexpected_keys == ["x"]
        with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
            m.load_state_dict([1, 2])


def _hook_run(T):
    class M(T.nn.Module):
        def forward(self, x, scale=1.0):
            if scale < 0:
                raise ValueError("negative scale")
            return x * scale

    m, log = M(), []
    h1 = m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] + 1,), {"scale": kw.get("scale", 1.0) * 2}),
                                     with_kwargs=True)
    h2 = m.register_forward_hook(lambda mod, a, kw, out: log.append(("kw", sorted(kw))) or out + 100,
                                 with_kwargs=True)
    h3 = m.register_forward_hook(lambda mod, a, out: log.append(("always", out is None)), always_call=True)
    res = [m(T.ones(2), scale=3.0).tolist()]
    with pytest.raises(ValueError):
        m(T.ones(2), scale=-1.0)
    for h in (h1, h2, h3):
        h.remove()
    res.append(m(T.ones(2), scale=2.0).tolist())
    return res, log


def test_forward_hooks_with_kwargs_and_always_call_match_torch():
    assert _hook_run(vl) == _hook_run(torch)


def test_float_attn_mask_gets_its_gradient_and_weights_are_differentiable():
    g = np.random.default_rng(0)
    q, k, v = g.standard_normal((2, 3, 4, 8)), g.standard_normal((2, 3, 5, 8)), g.standard_normal((2, 3, 5, 8))
    m = g.standard_normal((4, 5))
    tq, tk, tv, tm = [torch.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    vq, vk, vv, vm = [vl.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    vo = vl.nn.functional.scaled_dot_product_attention(vq, vk, vv, attn_mask=vm)
    to.pow(2).sum().backward()
    vo.pow(2).sum().backward()
    np.testing.assert_allclose(vo.detach().numpy(), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, b in ((vm, tm), (vq, tq), (vk, tk), (vv, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)

    torch.manual_seed(0)
    tmha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    vmha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=vl.float64)
    vmha.load_state_dict({n: p.detach().numpy() for n, p in tmha.state_dict().items()})
    x = g.standard_normal((2, 4, 8))
    tx, vx = torch.tensor(x, requires_grad=True), vl.tensor(x, requires_grad=True)
    (_, tw), (_, vw) = tmha(tx, tx, tx), vmha(vx, vx, vx)
    assert vw.requires_grad and tw.requires_grad
    tw.pow(2).sum().backward()
    vw.pow(2).sum().backward()
    np.testing.assert_allclose(vw.detach().numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
