"""The variance lens on PyTorch models (varlens/lens/torch_adapter.py).

The same network is built in varlens and in PyTorch with copied weights and fed the same
batches; the two lenses must agree record for record and row for row (measured to float32
tolerance, the same predictions, the same verdicts).  Then the traps of measuring a torch
model: modules called twice, in-place ops, torch.no_grad, scaled_dot_product_attention,
nn.MultiheadAttention's fast path, torch.compile, and the torch-op statistics used off the CPU.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tnn = torch.nn
TF = torch.nn.functional

import varlens as vl  # noqa: E402
import varlens.nn as vnn  # noqa: E402
import varlens.nn.functional as VF  # noqa: E402
from varlens.lens import Lens  # noqa: E402
from varlens.lens import torch_adapter  # noqa: E402
from varlens.lens.compare import compare, summary  # noqa: E402
from varlens.lens.report import to_json  # noqa: E402


# ----------------------------------------------------------------------------- models, both frameworks
def _mlp(nn, F):
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))


def _resnet(nn, F):
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU()
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            return F.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.act = nn.ReLU()
            self.block = Block(8)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            x = self.block(self.act(self.bn(self.stem(x))))
            return self.fc(x.mean(dim=(2, 3)))
    return Net()


def _preln_block(nn, F, d=16):
    class Block(nn.Module):
        """Pre-LN Transformer block, one head, causal attention."""

        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, d)
            self.v = nn.Linear(d, d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            h = self.ln1(x)
            a = F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h), is_causal=True)
            x = x + self.proj(a)
            return x + self.fc2(self.act(self.fc(self.ln2(x))))
    return Block()


def _gpt_block(nn, F, d=16, h=4):
    class Block(nn.Module):
        """nanoGPT's block: one qkv projection split into heads with views, a causal SDPA, a
        transpose/contiguous/view back; then an average-pooled readout through flatten."""

        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.pool = nn.AvgPool2d(2)
            self.head = nn.Linear(d * 5 // 2, 3)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
            q = q.view(B, T, h, C // h).transpose(1, 2)
            k = k.view(B, T, h, C // h).transpose(1, 2)
            v = v.view(B, T, h, C // h).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            z = F.adaptive_avg_pool2d(self.pool(x.unsqueeze(1)), (1, 1)).flatten(1) + x.mean(dim=(1, 2)).unsqueeze(1)
            return self.head(self.pool(x.unsqueeze(1)).flatten(1)) + z
    return Block()


CASES = {"mlp": (_mlp, (24, 12)), "resnet": (_resnet, (6, 3, 8, 8)), "preln": (_preln_block, (4, 10, 16)),
         "gpt_block": (_gpt_block, (3, 10, 16))}


def _pair(name, seed=0):
    build, shape = CASES[name]
    torch.manual_seed(seed)
    tm, vm = build(tnn, TF), build(vnn, VF)
    sd = {k: vl.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items() if v.is_floating_point()}
    vm.load_state_dict(sd, strict=False)
    return tm, vm, shape


def _run_both(name, steps=2, seed=0, **lens_kw):
    tm, vm, shape = _pair(name, seed)
    lt, lv = Lens(tm, **lens_kw), Lens(vm, **lens_kw)
    g = np.random.default_rng(seed)
    for _ in range(steps):
        x = g.standard_normal(shape).astype(np.float32)
        tm(torch.from_numpy(x)).square().mean().backward()
        lt.step()
        vm(vl.tensor(x)).square().mean().backward()
        lv.step()
        tm.zero_grad()
        vm.zero_grad()
    return lt, lv


def _close(a, b, scale=1.0, rel=2e-4):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not (math.isfinite(a) and math.isfinite(b)):
            return (math.isnan(a) and math.isnan(b)) or a == b
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6 * scale)
    return a == b


def _assert_same_stats(sa, sb, what):
    da, db = sa.as_dict(), sb.as_dict()
    assert set(da) == set(db), what
    q = abs(da.get("second_moment") or 0.0) or 1.0
    for k in da:
        if k == "headroom":
            continue
        if k == "frac_zero" and da[k] is not None and db[k] is not None:
            # exact zeros can be a rounding matter: torch's fused attention backward leaves ~1e-9
            # where the varlens formula cancels to 0 exactly (a query that sees one key)
            assert abs(da[k] - db[k]) <= 0.05, (what, k, da[k], db[k])
            continue
        # second_moment_se is the spread of per-row second moments: for normalised outputs the
        # rows are equal to rounding, so it is compared on the scale of the moment itself
        assert _close(da[k], db[k], scale=math.sqrt(q) if k == "mean" else q), (what, k, da[k], db[k])


def assert_same_records(lt, lv):
    kt = [r.key for r in lt.ordered()]
    kv = [r.key for r in lv.ordered()]
    assert kt == kv
    for k in kt:
        a, b = lt[k], lv[k]
        for f in ("level", "kind", "producer", "source", "rows"):
            assert getattr(a, f) == getattr(b, f), (k, f, getattr(a, f), getattr(b, f))
        assert sorted(a.consumers) == sorted(b.consumers), k
        assert sorted(a.params) == sorted(b.params), (k, sorted(a.params), sorted(b.params))
        assert sorted(a.arrays) == sorted(b.arrays), k
        _assert_same_stats(a.out, b.out, (k, "out"))
        _assert_same_stats(a.grad, b.grad, (k, "grad"))
        assert len(a.inputs) == len(b.inputs), k
        for ia, ib in zip(a.inputs, b.inputs):
            assert ia.producer == ib.producer and ia.n == ib.n, k
            assert _close(ia.q, ib.q), (k, ia.q, ib.q)
        assert _close(a.cross, b.cross, rel=1e-3), k
        assert _close(a.inp_var_group, b.inp_var_group), k
        for f in ("unit_q", "grad_unit_q"):
            ua, ub = getattr(a, f), getattr(b, f)
            assert (ua is None) == (ub is None), (k, f)
            if ua is not None:
                np.testing.assert_allclose(ua, ub, rtol=2e-4, atol=1e-12, err_msg=f"{k} {f}")
        for p, vb in b.params.items():
            if isinstance(vb, np.ndarray):
                np.testing.assert_allclose(a.params[p], vb, rtol=2e-4, atol=1e-7, err_msg=f"{k} {p}")


def assert_same_rows(rt, rv):
    assert [(r.key, r.direction) for r in rt] == [(r.key, r.direction) for r in rv]
    for a, b in zip(rt, rv):
        what = (a.key, a.direction)
        assert a.type == b.type and a.level == b.level, what
        assert a.verdict == b.verdict, (what, a.verdict, b.verdict)
        assert a.agrees == b.agrees, what
        for f in ("measured", "predicted_local", "predicted_chain", "ratio", "ci_low", "ci_high", "relative"):
            va, vb = getattr(a, f), getattr(b, f)
            assert _close(va, vb, scale=abs(vb or 0.0) or 1.0, rel=1e-3), (what, f, va, vb)


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_and_varlens_lenses_agree_row_for_row(name):
    lt, lv = _run_both(name)
    assert_same_records(lt, lv)
    for level in ("module", "op"):
        rt, rv = compare(lt, level=level), compare(lv, level=level)
        assert rt and any(r.predicted_chain is not None for r in rt)
        assert_same_rows(rt, rv)
    st, sv = summary(compare(lt)), summary(compare(lv))
    assert {d: s["verdict"] for d, s in st.items()} == {d: s["verdict"] for d, s in sv.items()}
    jt, jv = to_json(lt), to_json(lv)
    assert jt["schema"] == jv["schema"] and set(jt) == set(jv)
    assert [t["key"] for t in jt["tensors"]] == [t["key"] for t in jv["tensors"]]


def test_preln_block_records_attention_internals_and_residuals():
    lt, _ = _run_both("preln", steps=1)
    keys = set(lt.records)
    assert {"(model):sdpa", "(model):sdpa.logits", "(model):sdpa.softmax", "(model):add", "(model):add#1"} <= keys
    logits = lt["(model):sdpa.logits"]
    # causal mask: the logits a query may attend to, 4 x 10 x 11 / 2 of them
    assert logits.out.n == 4 * 10 * 11 // 2
    assert lt["(model):add"].cross_n == 1            # the residual's cross term was measured
    soft = lt["(model):sdpa.softmax"]
    assert 0 < soft.out.entropy_sum / soft.out.entropy_n < math.log(10)


def test_host_and_torch_op_statistics_agree(monkeypatch):
    """The torch-op path (used off the CPU and for other dtypes) gives the host kernel's numbers."""
    tm, _, shape = _pair("resnet")
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(shape).astype(np.float32))

    def run():
        lens = Lens(tm)
        tm(x).square().mean().backward()
        lens.step()
        lens.detach()
        tm.zero_grad()
        return lens
    host = run()
    monkeypatch.setattr(torch_adapter, "_host_view", lambda t: None)
    dev = run()
    assert_same_records(dev, host)
    for rec in host.ordered():
        d = dev[rec.key]
        if rec.unit_q is not None:
            np.testing.assert_allclose(d.unit_q, rec.unit_q, rtol=1e-5)
        if "in_fmean_sum" in rec.params:
            np.testing.assert_allclose(d.params["in_fmean_sum"], rec.params["in_fmean_sum"], rtol=1e-5, atol=1e-9)


def test_torch_summary_counts_nan_and_inf_and_keeps_all_nonfinite_tensors():
    t = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, -3.0]])
    sm = torch_adapter.torch_summary(t)
    assert sm[0] == 4 and sm[5] == 1 and sm[6] == 1 and sm[4] == 1
    assert math.isclose(sm[1], 0.0) and math.isclose(sm[3], 3.0)
    from varlens.lens.records import summarize
    ref = summarize(t.numpy())
    for a, b in zip(sm[:7], ref[:7]):
        assert math.isclose(a, b, abs_tol=1e-12)
    allnan = torch_adapter.torch_summary(torch.full((2, 2), float("nan")))
    assert allnan[0] == 0 and allnan[5] == 4


# ----------------------------------------------------------------------------- traps
def test_module_called_twice_gets_two_records_with_their_own_gradients():
    class Twice(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tnn.Linear(8, 8)

        def forward(self, x):
            return self.fc(torch.relu(self.fc(x)))
    torch.manual_seed(0)
    m = Twice()
    lens = Lens(m)
    m(torch.randn(16, 8)).square().sum().backward()
    lens.step()
    for k in ("fc", "fc#1", "fc:linear", "fc:linear#1"):
        assert lens[k].out.n == 128 and lens[k].grad.n == 128, k
    assert lens["fc"].out.second_moment != lens["fc#1"].out.second_moment
    assert lens["fc#1"].producer == "(model):relu"
    assert lens["fc"].weight.n == 64 and lens["fc#1"].weight.n == 0   # weights read once


def test_in_place_ops_are_measured_before_and_after_they_write():
    def build(inplace):
        class Net(tnn.Module):
            def __init__(self):
                super().__init__()
                self.conv = tnn.Conv2d(3, 4, 3, padding=1)
                self.bn = tnn.BatchNorm2d(4)
                self.relu = tnn.ReLU(inplace=inplace)
                self.conv2 = tnn.Conv2d(4, 4, 3, padding=1)

            def forward(self, x):
                h = self.relu(self.bn(self.conv(x)))
                y = self.conv2(h)
                if inplace:
                    y += h
                else:
                    y = y + h
                return y
        torch.manual_seed(0)
        return Net()
    x = torch.randn(4, 3, 6, 6)
    lenses = []
    for inplace in (False, True):
        m = build(inplace)
        lens = Lens(m)          # tensor hooks, not full backward hooks: in-place ops do not break them
        m(x).square().mean().backward()
        lens.step()
        lenses.append(lens)
    plain, inpl = lenses
    assert [r.key for r in plain.ordered()] == [r.key for r in inpl.ordered()]
    for r in plain.ordered():
        s = inpl[r.key]
        assert math.isclose(s.out.second_moment, r.out.second_moment, rel_tol=1e-6), r.key
        assert math.isclose(s.grad.second_moment, r.grad.second_moment, rel_tol=1e-5), r.key
        assert math.isclose(s.inp_q, r.inp_q, rel_tol=1e-6), r.key
    # the ReLU's input is the BatchNorm output before the ReLU overwrote it
    assert math.isclose(inpl["relu"].inp_q, inpl["bn"].out.second_moment, rel_tol=1e-9)
    # dL/d(bn output) is dL/d(relu output) masked where the ReLU was off: the hook on the BatchNorm
    # output, registered before the in-place ReLU, receives the gradient of the value before it wrote
    assert inpl["bn"].grad.n == inpl["relu"].grad.n > 0
    assert inpl["bn"].grad.zeros > inpl["relu"].grad.zeros
    assert inpl["bn"].grad.second_moment < inpl["relu"].grad.second_moment


def test_no_grad_evaluation_gives_forward_rows_only():
    tm, _, shape = _pair("resnet")
    tm.eval()
    lens = Lens(tm)
    with torch.no_grad():
        tm(torch.randn(*shape))
    lens.step()
    rows = compare(lens)
    assert rows and all(r.direction == "forward" for r in rows)
    assert all(rec.grad.n == 0 for rec in lens.ordered())
    assert lens["bn"].params.get("channel_mean") is not None      # eval BatchNorm: running statistics rule


def test_multihead_attention_fast_path_is_turned_off_while_sampling_only():
    torch.manual_seed(0)
    enc = tnn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True, dropout=0.0).eval()
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        ref = enc(x)                             # fused inference path
        lens = Lens(enc)
        got = enc(x)                             # sampled: the same maths through Python functions
        lens.step()
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert lens["self_attn:multi_head_attention_forward"].out.n == 3 * 5 * 16
    assert lens["linear1:linear"].out.n == 3 * 5 * 32
    assert lens["(model):add"].out.n == 3 * 5 * 16
    lens.detach()
    with torch.no_grad():
        torch.testing.assert_close(enc(x), ref)


def test_scaled_dot_product_attention_logits_match_a_direct_computation():
    torch.manual_seed(0)

    class Attn(tnn.Module):
        def forward(self, q, k, v):
            return TF.scaled_dot_product_attention(q, k, v, scale=0.5)
    q, k, v = (torch.randn(2, 3, 7, 8) for _ in range(3))
    lens = Lens(Attn())
    Attn.__call__(lens.model, q, k, v)
    lens.step()
    s = (q @ k.transpose(-2, -1) * 0.5).double()
    rec = lens["(model):sdpa.logits"]
    assert math.isclose(rec.out.second_moment, float((s * s).mean()), rel_tol=1e-6)
    assert rec.params["scale"] == 0.5 and rec.params["d"] == 8
    p = torch.softmax(s, -1)
    ent = float(-(p * p.log()).sum(-1).mean())
    soft = lens["(model):sdpa.softmax"]
    assert math.isclose(soft.out.entropy_sum / soft.out.entropy_n, ent, rel_tol=1e-5)


def test_compiled_models_are_refused_with_the_way_out():
    m = tnn.Linear(3, 3)
    cm = torch.compile(m)
    with pytest.raises(TypeError, match="_orig_mod"):
        Lens(cm)
    Lens(cm._orig_mod).detach()


def test_a_model_that_is_neither_framework_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        Lens(np.zeros(3))
    with pytest.raises(TypeError, match="builtins.dict"):
        Lens({})


def test_ops_without_a_rule_get_rows_marked_no_rule():
    class Odd(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tnn.Linear(6, 6)

        def forward(self, x):
            return torch.cumsum(self.fc(x), dim=1)
    lens = Lens(Odd())
    lens.model(torch.randn(5, 6)).sum().backward()
    lens.step()
    rows = compare(lens, level="op")
    cum = [r for r in rows if r.key == "(model):cumsum"]
    assert cum and all(r.measured is not None for r in cum)
    assert any(r.verdict == "no rule" or (r.predicted_local is None and r.predicted_chain is None and
                                          "no rule" in (r.note or "")) for r in cum)
    assert compare(lens)                                         # module view: not empty either


def test_sampling_every_n_steps_and_detach():
    m = _mlp(tnn, TF)
    lens = Lens(m, every=3)
    x = torch.randn(4, 12)
    for _ in range(6):
        m(x).sum().backward()
        lens.step()
    assert lens.steps_sampled == 2 and lens["0"].out.calls == 2
    assert torch_adapter._torch.overrides._get_current_function_mode() is None
    lens.detach()
    n = lens["0"].out.calls
    m(x).sum().backward()
    assert lens["0"].out.calls == n
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())


def _wrapped_mlp():
    class Wrapped(tnn.Module):                     # not a Sequential tree: the module-hook path
        def __init__(self):
            super().__init__()
            self.body = _mlp(tnn, TF)

        def forward(self, x):
            return self.body(x)
    return Wrapped()


@pytest.mark.parametrize("kind", ["hooks", "sequential"])
def test_nothing_is_attached_between_sampled_steps(kind):
    """Between samples the model runs as without the lens (nothing to pay on those steps): no
    module hook, and on the Sequential path no lens forward on the Sequentials."""
    m = _wrapped_mlp() if kind == "hooks" else _mlp(tnn, TF)
    lens = Lens(m, every=3)
    assert lens._seq == (kind == "sequential")
    x = torch.randn(4, 12)

    def hooked(mod):
        return bool(mod._forward_hooks and mod._forward_pre_hooks)

    def lens_forward(mod):
        return "forward" in mod.__dict__
    probe = hooked if kind == "hooks" else lens_forward
    attached = []
    for _ in range(6):
        attached.append(all(probe(mod) for mod in m.modules() if kind == "hooks" or
                            isinstance(mod, tnn.Sequential)))
        assert attached[-1] or not any(hooked(mod) or lens_forward(mod) for mod in m.modules())
        m(x).sum().backward()
        lens.step()
    assert attached == [True, False, False, True, False, False]
    key = "body.0" if kind == "hooks" else "0"
    assert lens.steps_sampled == 2 and lens[key].out.calls == 2 and lens[key].grad.calls == 2
    lens.detach()
    for _ in range(3):
        lens.step()
        assert not any(hooked(mod) or lens_forward(mod) for mod in m.modules())


def test_sequential_path_leaves_a_deep_copy_plain():
    """A deep copy of the model made while the lens's forward is on it runs as plain Sequential
    (the copy's forward is bound to the copy, which the lens does not know) and is not recorded."""
    import copy
    m = _mlp(tnn, TF)
    lens = Lens(m)
    twin = copy.deepcopy(m)
    x = torch.randn(4, 12)
    torch.testing.assert_close(twin(x), m(x))
    assert lens["0"].out.calls == 1                # the original's call only
    lens.detach()


def _replay_model():
    torch.manual_seed(0)
    inner = tnn.Sequential(tnn.Linear(16, 16), tnn.Tanh())
    act = tnn.GELU()
    return tnn.Sequential(tnn.Flatten(), tnn.Linear(12, 16), tnn.ReLU(inplace=True), tnn.Linear(16, 16), act,
                          tnn.Dropout(0.2), inner, tnn.Identity(), tnn.Linear(16, 16), act, tnn.LeakyReLU(0.1),
                          tnn.Linear(16, 3))


@pytest.mark.parametrize("ops", [True, False])
def test_replayed_passes_record_what_the_general_path_records(monkeypatch, ops):
    """On the Sequential path a pass that repeats the last one's calls is recorded by
    TorchLens._replay; recording every pass by the general path instead gives the same records
    (in-place leaf, views, dropout, a nested Sequential, a module called twice, detail steps)."""
    def run():
        m = _replay_model()
        lens = Lens(m, weight_every=3, ops=ops)
        g = np.random.default_rng(0)
        for step in range(8):
            torch.manual_seed(step)                    # the same dropout masks both ways
            m(torch.from_numpy(g.standard_normal((6, 3, 4)).astype(np.float32))).square().mean().backward()
            lens.step()
            m.zero_grad()
        lens.detach()
        return lens
    replayed = []
    orig = torch_adapter.TorchLens._replay

    def spy(self, q, plan):
        replayed.append((self._detail, sum(p is not None for _, p in plan)))
        return orig(self, q, plan)
    monkeypatch.setattr(torch_adapter.TorchLens, "_replay", spy)
    fast = run()
    # 8 passes, the first by the general path; the in-place ReLU splits each pass in two flushes;
    # the detail steps (steps 0, 3 and 6) after the first are replayed too
    assert len(replayed) == 14 and sum(n for _, n in replayed) >= 70
    assert sum(d for d, _ in replayed) == 4

    def general(self, q, plan):
        for e in q:
            self._flush_one(e)
    monkeypatch.setattr(torch_adapter.TorchLens, "_replay", general)
    slow = run()
    assert_same_records(fast, slow)
    for rec in fast.ordered():
        other = slow[rec.key]
        assert {k: v for k, v in rec.params.items() if not isinstance(v, np.ndarray)} == \
            {k: v for k, v in other.params.items() if not isinstance(v, np.ndarray)}, rec.key
        for f in ("out", "grad"):
            a, b = getattr(rec, f), getattr(other, f)
            assert (a.calls, a.n, a.shape, a.rows, a.zeros) == (b.calls, b.n, b.shape, b.rows, b.zeros), (rec.key, f)
            assert (a.tiny16, a.tiny_bf16, a.over16, a.num_n) == (b.tiny16, b.tiny_bf16, b.over16, b.num_n), \
                (rec.key, f)
        assert (rec.unit_calls, rec.grad_unit_calls) == (other.unit_calls, other.grad_unit_calls), rec.key
        assert [(i.n, i.shape, i.producer) for i in rec.inputs] == [(i.n, i.shape, i.producer) for i in other.inputs]
    assert [r.key for r in compare(fast, level="all")] == [r.key for r in compare(slow, level="all")]


def test_one_function_leaves_recorded_from_module_hooks_match_the_function_mode(monkeypatch):
    """A Sequential of one-function leaves is recorded without the function mode, its ops made
    from the module hooks (torch_adapter._LEAF_CALLS); the same model recorded through the
    function mode gives the same records."""
    def build():
        torch.manual_seed(0)
        return tnn.Sequential(tnn.Flatten(), tnn.Linear(12, 16), tnn.ReLU(inplace=True), tnn.Linear(16, 16),
                              tnn.Tanh(), tnn.Dropout(0.2), tnn.Linear(16, 16), tnn.Sigmoid(), tnn.Identity(),
                              tnn.Linear(16, 16), tnn.GELU(approximate="tanh"), tnn.Linear(16, 16), tnn.SiLU(),
                              tnn.Linear(16, 16), tnn.LeakyReLU(0.1), tnn.Linear(16, 3))

    def run(lens_of):
        m = build()
        lens = lens_of(m)
        g = np.random.default_rng(0)
        for _ in range(3):
            torch.manual_seed(1)                       # the same dropout masks both ways
            m(torch.from_numpy(g.standard_normal((6, 3, 4)).astype(np.float32))).square().mean().backward()
            lens.step()
            m.zero_grad()
        return lens
    fast = run(Lens)
    assert not fast._use_mode
    seen = []

    def spy(module, args, output):
        seen.append(torch_adapter._torch.overrides._get_current_function_mode())
    m = build()
    lens = Lens(m)
    m[1].register_forward_hook(spy)
    m(torch.randn(2, 3, 4))
    assert seen == [None]                              # the function mode was not entered
    with monkeypatch.context() as mp:
        mp.setattr(torch_adapter, "_CONTAINERS", set())   # Sequential unknown: the function mode records
        slow = run(Lens)
    assert slow._use_mode
    assert_same_records(fast, slow)
    assert {"1:linear", "2:relu", "4:tanh", "5:dropout", "7:sigmoid", "10:gelu", "12:silu", "14:leaky_relu",
            "0:reshape"} <= set(fast.records)
    for rec in fast.ordered():                         # the scalars the rules read, exactly
        other = slow[rec.key].params
        assert {k: v for k, v in rec.params.items() if not isinstance(v, np.ndarray)} == \
            {k: v for k, v in other.items() if not isinstance(v, np.ndarray)}, rec.key
    assert [r.key for r in compare(fast, level="op")] == [r.key for r in compare(slow, level="op")]


def test_tap_and_context_manager():
    m = tnn.Linear(4, 4)
    x = torch.randn(3, 4, requires_grad=True)
    with Lens(m) as lens:
        y = lens.tap("scores", torch.tanh(m(x)), kind="tanh")
        y.sum().backward()
        lens.step()
    assert lens["scores"].out.n == 12 and lens["scores"].grad.n == 12 and lens["scores"].out.sat_n == 12
    assert not m._forward_hooks


def test_is_torch_module_does_not_need_torch_imported():
    import ast
    import inspect
    src = inspect.getsource(torch_adapter)
    top = [n for n in ast.parse(src).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not any("torch" == a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names)
    assert not any((n.module or "").split(".")[0] == "torch" for n in top if isinstance(n, ast.ImportFrom))
    assert torch_adapter.is_torch_module(tnn.Linear(2, 2)) and not torch_adapter.is_torch_module(vnn.Linear(2, 2))


# ----------------------------------------------------------------------------- command line, examples, coordinate check
FACTORY = '''
import torch, torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc = nn.Linear(16, 50)

    def forward(self, idx):
        return self.fc(torch.relu(self.emb(idx)))

def make_lm():
    return Net()

def make_mlp_with_input():
    return nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3)), torch.randn(16, 10)

def not_a_model():
    return 3
'''


def test_cli_runs_the_lens_on_a_factory_in_a_user_file(tmp_path, capsys):
    import json

    from varlens.cli import main
    f = tmp_path / "user_models.py"
    f.write_text(FACTORY)
    out = tmp_path / "lens.json"
    assert main(["lens", "--torch", f"{f}:make_mlp_with_input", "--steps", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "varlens.lens/1" and doc["meta"]["framework"] == "torch"
    assert doc["steps_sampled"] == 2
    keys = [t["key"] for t in doc["tensors"]]
    assert keys[:2] == ["0", "0"] and "2" in keys
    text = capsys.readouterr().out
    assert "forward" in text and "Tanh" in text
    assert main(["lens", "--torch", f"{f}:make_lm", "--input-shape", "4,7", "--vocab", "50", "--level", "op"]) == 0
    assert "fc:linear" in capsys.readouterr().out


def test_cli_errors_name_what_is_wrong(tmp_path, capsys):
    from varlens.cli import main
    f = tmp_path / "user_models.py"
    f.write_text(FACTORY)
    assert main(["lens", "--torch", f"{f}:make_lm"]) == 2
    assert "--input-shape" in capsys.readouterr().err
    assert main(["lens", "--torch", f"{f}:not_a_model"]) == 2
    assert "builtins.int" in capsys.readouterr().err
    assert main(["lens", "--torch", f"{f}:missing"]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["lens", "--torch", str(f)]) == 2
    assert "FACTORY" in capsys.readouterr().err
    assert main(["lens", "--torch", f"{tmp_path / 'nope.py'}:make_lm"]) == 2


def test_module_path_factories_and_the_documented_examples():
    import os
    from varlens.lens import torch_run
    fn = torch_run.load_factory("torch.nn:Identity")
    assert fn is tnn.Identity
    root = os.path.join(os.path.dirname(__file__), "..", "docs", "examples", "lens_torch")
    model, make = torch_run.build(torch_run.load_factory(os.path.join(root, "nanogpt.py") + ":make_model"),
                                  "2,16", 256)
    lens = torch_run.run_lens(model, make, steps=1)
    assert "h.0.attn:sdpa.logits" in lens.records and "h.3:add#1" in lens.records
    assert lens["h.0.attn.c_attn"].grad.n > 0
    rows = compare(lens)
    assert sum(r.predicted_chain is not None for r in rows) > len(rows) // 2
    model, make = torch_run.build(torch_run.load_factory(os.path.join(root, "resnet.py") + ":make_model"))
    lens = torch_run.run_lens(model, make, steps=1)
    assert lens["layers.0.bn2"].grad.n > 0 and lens["layers.2:add"].cross_n == 1
    assert compare(lens)


def test_coord_check_on_a_torch_factory():
    from varlens.lens.coord import coord_check

    def build(w):
        return tnn.Sequential(tnn.Linear(16, w), tnn.ReLU(), tnn.Linear(w, w), tnn.ReLU(), tnn.Linear(w, 10))
    std = coord_check(build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2)
    assert not std.ok and "4" in {layer for _, layer, _, _ in std.failures()}
    mup = coord_check(build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2, parametrization="mup")
    assert mup.ok, mup.table()
