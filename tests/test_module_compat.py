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


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [1, 2, "same"])
def test_conv_padding_modes_match_torch(n, mode, pad):
    tc = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[n]
    vc = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[n]
    t = tc(2, 3, 3, padding=pad, padding_mode=mode).double()
    v = vc(2, 3, 3, padding=pad, padding_mode=mode, dtype=vl.float64)
    assert repr(v) == repr(t)
    v.load_state_dict({k: a.detach().numpy() for k, a in t.state_dict().items()})
    x = np.random.default_rng(n).standard_normal((2, 2) + (5,) * n)
    tx, vx = torch.tensor(x, requires_grad=True), vl.tensor(x, requires_grad=True)
    to, vo = t(tx), v(vx)
    to.pow(2).sum().backward()
    vo.pow(2).sum().backward()
    np.testing.assert_allclose(vo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(v.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_bad_padding_modes_are_refused_as_torch():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("kv,zero", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("unbatched", [False, True])
def test_multihead_attention_bias_kv_and_zero_attn_match_torch(batch_first, kv, zero, unbatched):
    torch.manual_seed(0)
    t = torch.nn.MultiheadAttention(8, 2, add_bias_kv=kv, add_zero_attn=zero, batch_first=batch_first).double()
    v = nn.MultiheadAttention(8, 2, add_bias_kv=kv, add_zero_attn=zero, batch_first=batch_first, dtype=vl.float64)
    assert list(v.state_dict()) == list(t.state_dict())
    v.load_state_dict({k: a.detach().numpy() for k, a in t.state_dict().items()})
    g = np.random.default_rng(1)
    x = g.standard_normal((4, 8) if unbatched else ((2, 4, 8) if batch_first else (4, 2, 8)))
    kpm = None if unbatched else np.array([[False, False, True, False], [False, False, False, False]])
    tx, vx = torch.tensor(x, requires_grad=True), vl.tensor(x, requires_grad=True)
    to, tw = t(tx, tx, tx, key_padding_mask=None if kpm is None else torch.tensor(kpm))
    vo, vw = v(vx, vx, vx, key_padding_mask=None if kpm is None else vl.tensor(kpm))
    (to.pow(2).sum() + tw.sum()).backward()
    (vo.pow(2).sum() + vw.sum()).backward()
    np.testing.assert_allclose(vo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vw.detach().numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    if kv:
        np.testing.assert_allclose(v.bias_k.grad.numpy(), t.bias_k.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lazy_linear_takes_in_features_from_its_first_input_and_becomes_a_linear():
    v, t = nn.LazyLinear(3), torch.nn.LazyLinear(3)
    assert repr(v) == repr(t)
    opt = vl.optim.SGD(v.parameters(), lr=0.1)        # made before the parameters have shapes
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    y = v(vl.tensor(x))
    t(torch.tensor(x))
    assert type(v) is nn.Linear and repr(v) == repr(t) and tuple(v.weight.shape) == (3, 5)
    bound = 1 / np.sqrt(5)                             # Linear's default initialisation
    assert np.abs(v.weight.detach().numpy()).max() <= bound and np.abs(v.bias.detach().numpy()).max() <= bound
    w0 = v.weight.detach().numpy().copy()
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(v.weight.detach().numpy(), w0 - 0.1 * x.sum(0)[None, :].repeat(3, 0), rtol=1e-5)


def test_hardtanh_keeps_integer_dtype_as_torch():
    v = vl.nn.functional.hardtanh(vl.tensor([-3, 0, 3]))
    t = torch.nn.functional.hardtanh(torch.tensor([-3, 0, 3]))
    assert str(v.dtype) == str(t.dtype).replace("torch.", "") and v.tolist() == t.tolist()


def test_fashion_mnist_bad_arguments_and_damaged_files(tmp_path):
    from varlens import datasets
    with pytest.raises(TypeError, match="train must be a bool"):
        datasets.fashion_mnist(train="test")
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        (tmp_path / name).write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ValueError, match="is damaged.*make data"):
        datasets.fashion_mnist(root=str(tmp_path))


def test_parameter_containers_order_and_repr_as_torch():
    from collections import OrderedDict

    def make(T):
        return (T.nn.ParameterList([T.nn.Parameter(T.ones(())), T.nn.Parameter(T.ones(2, 3, dtype=T.float64))]),
                T.nn.ParameterDict({"s": T.nn.Parameter(T.ones(())), "i": T.nn.Parameter(T.ones(2, dtype=T.float16))}),
                T.nn.ParameterList(), T.nn.ParameterDict(),
                T.nn.ParameterDict(OrderedDict([("s", T.nn.Parameter(T.ones(1))), ("i", T.nn.Parameter(T.ones(2)))])))
    for v, t in zip(make(vl), make(torch)):
        assert repr(v).replace("varlens.", "torch.") == repr(t)
        assert list(dict(v.named_parameters())) == list(dict(t.named_parameters()))   # torch sorts a plain dict
    v, t = make(vl)[4], make(torch)[4]
    v.update({"z": nn.Parameter(vl.ones(1)), "a": nn.Parameter(vl.ones(1))})
    t.update({"z": torch.nn.Parameter(torch.ones(1)), "a": torch.nn.Parameter(torch.ones(1))})
    assert list(v.keys()) == list(t.keys())
