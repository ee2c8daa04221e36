"""Op-level recording of the variance lens (issue 23, item 1) and the rules for every op (item 2):
functional code, residual additions, attention internals, user arithmetic, the core's hook slot."""
import math
import sys

import numpy as np
import pytest

import varlens as vl
import varlens.autograd
from varlens import nn
from varlens.lens import rules
from varlens.lens import testbeds as T
from varlens.lens.compare import compare, flagged
from varlens.lens.probes import Lens

F = nn.functional


def _core():
    return sys.modules[varlens.autograd.Function.__module__]


def _rows_by(rows, direction="forward"):
    return {r.key: r for r in rows if r.direction == direction}


def test_ops_are_named_by_innermost_module_and_op():
    model, x = T.build("functional", width=16, depth=3, seed=0, batch=8)
    lens, rows = T.run(model, x, level="all")
    keys = set(lens.records)
    assert {"layers.0:linear", "layers.1:linear", "(model):relu", "(model):relu#1"} <= keys
    assert lens.records["(model):relu"].level == "op" and lens.records["(model):relu"].path == "(model)"
    # the module view has the Linear modules only; the op view the ops only
    mod = compare(lens)
    assert {r.key for r in mod} == {"layers.0", "layers.1", "layers.2", "(model)"}
    ops = compare(lens, level="op")
    assert {r.key for r in ops} >= {"(model):relu", "layers.2:linear"} and all(r.level == "op" for r in ops)


def test_functional_relu_mlp_gets_chained_and_backward_predictions():
    model, x = T.build("functional", width=64, depth=4, seed=1, batch=32)
    _, rows = T.run(model, x)
    lin = [r for r in rows if r.key.startswith("layers.")]
    assert len(lin) == 8
    fwd = [r for r in lin if r.direction == "forward"]
    assert all(r.predicted_chain is not None for r in fwd)
    # the chain runs through the F.relu ops: layer k's chain is not its own measured input
    assert all(0.7 < r.ratio < 1.4 for r in fwd)
    bwd = [r for r in lin if r.direction == "backward" and r.key != "layers.3"]
    assert all(r.predicted_local is not None and 0.8 < r.ratio_local < 1.25 for r in bwd)
    assert not flagged(rows)


def test_module_rows_without_a_module_rule_use_the_op_that_made_their_output():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(32, 32)

        def forward(self, x):
            return x + self.lin(F.relu(x)) * 0.5

    model = nn.Sequential(Block(), Block())
    x = vl.tensor(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32))
    lens, rows = T.run(model, x)
    fwd = _rows_by(rows)
    assert lens.records["0"].source == "0:add"
    for k in ("0", "1"):
        assert fwd[k].predicted_local is not None and fwd[k].verdict == "stable"
    ops = _rows_by(compare(lens, level="op"))
    mul = ops["0:mul"]
    assert mul.predicted_local == pytest.approx(0.25 * lens.records["0.lin"].out.second_moment, rel=1e-9)


def test_residual_stream_grows_as_predicted_with_and_without_norm():
    gen = np.random.default_rng(2)

    class Res(nn.Module):
        def __init__(self, d, L, norm):
            super().__init__()
            self.lins = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in range(L)])
            self.norms = nn.ModuleList([nn.LayerNorm(d) if norm else nn.Identity() for _ in range(L)])
            for lin in self.lins:
                lin.weight._data = (gen.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)

        def forward(self, x):
            for n, lin in zip(self.norms, self.lins):
                x = x + lin(n(x))
            return x

    x = vl.tensor(gen.standard_normal((64, 96)).astype(np.float32))
    # pre-LN: E[x^2] = 1 + L (each block adds a unit-variance branch)
    lens, rows = T.run(Res(96, 32, True), x, level="op")
    adds = [r for r in rows if r.op == "add" and r.direction == "forward"]
    assert len(adds) == 32
    assert adds[-1].predicted_chain == pytest.approx(33, rel=0.1)
    assert all(abs(math.log(r.measured / r.predicted_chain)) < 0.1 for r in adds)
    assert not flagged(compare(lens))
    # no norm, W ~ N(0, 1/d): x + Wx doubles E[x^2] per block (2^L)
    lens, rows = T.run(Res(96, 10, False), x, level="op")
    adds = [r for r in rows if r.op == "add" and r.direction == "forward"]
    growth = adds[-1].predicted_chain / adds[0].predicted_chain
    assert growth == pytest.approx(2 ** 9, rel=0.3)
    assert adds[-1].measured / adds[0].measured == pytest.approx(growth, rel=0.2)
    assert all(r.verdict != "drift" for r in rows)


def test_correlated_branches_use_the_measured_cross_term():
    class Corr(nn.Module):
        def forward(self, x):
            return x + x * 0.5          # the branch is the skip, scaled: E[a b] = 0.5 E[x^2], not 0

    model = nn.Sequential(nn.Linear(16, 16), Corr())
    x = vl.tensor(np.random.default_rng(3).standard_normal((32, 16)).astype(np.float32))
    lens, rows = T.run(model, x, level="op")
    add = _rows_by(rows)["1:add"]
    q = lens.records["0"].out.second_moment
    assert add.predicted_local == pytest.approx(2.25 * q, rel=1e-6)       # (1 + 0.5)^2
    assert add.predicted_local != pytest.approx(1.25 * q, rel=0.05)       # what independence would say
    assert add.verdict == "stable"


def test_skip_path_enters_the_backward_prediction():
    class Blk(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.Identity()           # the "Identity norm slot" of a residual MLP
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            return x + F.relu(self.fc(self.norm(x)))

    model = nn.Sequential(*[Blk() for _ in range(4)])
    gen = np.random.default_rng(4)
    for m in model:
        T._he(m.fc, gen, 0.5)
    x = vl.tensor(np.random.default_rng(40).standard_normal((64, 64)).astype(np.float32))
    lens, rows = T.run(model, x)
    bwd = [r for r in rows if r.direction == "backward" and r.predicted_local is not None]
    assert len(bwd) >= 10          # every backward row but the model output (and the data, which needs no grad)
    assert all(r.verdict in ("stable", "no rule") for r in rows), [(r.key, r.direction, r.verdict) for r in rows]
    # the stream's gradient = skip + branch: the local prediction sums both edges
    r1 = _rows_by(rows, "backward")["1"]
    assert 0.85 < r1.ratio_local < 1.15


def test_transformer_encoder_layer_is_not_flagged():
    vl.manual_seed(0)
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first)
        x = vl.tensor(np.random.default_rng(5).standard_normal((16, 8, 32)).astype(np.float32))
        lens, rows = T.run(layer, x)
        assert not flagged(rows), [(r.key, r.direction, r.verdict) for r in flagged(rows)]
        n1 = [r for r in rows if r.key == "norm1"]
        assert all(r.predicted_local is not None for r in n1)


def test_attention_internals_are_recorded_and_predicted():
    vl.manual_seed(1)
    mha = nn.MultiheadAttention(64, 4, batch_first=True)
    x = vl.tensor(np.random.default_rng(6).standard_normal((8, 24, 64)).astype(np.float32))

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    lens, rows = T.run(Wrap(), x, level="op")
    by = _rows_by(rows)
    lg, sm = by["attn:sdpa.logits"], by["attn:sdpa.softmax"]
    assert lg.predicted_local == pytest.approx(lg.measured, rel=0.15)
    assert sm.predicted_local == pytest.approx(sm.measured, rel=0.1)
    assert "mean_entropy" in sm.extra and "frac_saturated" in sm.extra
    assert sm.extra["mean_entropy"] <= math.log(24) + 1e-9
    out = by["attn:sdpa"]
    assert out.predicted_local == pytest.approx(out.measured, rel=0.15)
    assert _rows_by(rows, "backward")["attn:sdpa"].predicted_local is not None


def test_scaled_dot_product_attention_with_causal_mask_and_scale():
    class Att(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.proj = nn.Linear(32, 96)
            self.scale = scale

        def forward(self, x):
            B, Tn, _ = x.shape
            q, k, v = self.proj(x).reshape(B, Tn, 3, 2, 16).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)

    x = vl.tensor(np.random.default_rng(7).standard_normal((16, 12, 32)).astype(np.float32))
    for scale in (None, 1.0):                 # 1/sqrt(d) and unscaled
        vl.manual_seed(2)
        lens, rows = T.run(Att(scale), x, level="op")
        by = _rows_by(rows)
        lg, sm = by["(model):sdpa.logits"], by["(model):sdpa.softmax"]
        s = lens.records["(model):sdpa.logits"].params["scale"]
        assert s == pytest.approx(1 / 4 if scale is None else 1.0)
        assert lg.predicted_local == pytest.approx(lg.measured, rel=0.2)
        # masked entries are zeros: the causal rule averages rows with 1..12 keys
        assert sm.predicted_local == pytest.approx(sm.measured, rel=0.15)


def test_a_tapped_logit_gets_the_prediction_of_the_op_that_made_it():
    from varlens.lens import experiments as E
    res = E.attention_scaling(d=32, heads=2, seq_len=8, batch=4)
    assert "attn.logits" in res["lens"]["without"]

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)
            self.lens = None

        def forward(self, x):
            s = self.q(x) @ self.k(x).transpose(-2, -1)
            return self.lens.tap("logits", s)

    model = Logits()
    x = vl.tensor(np.random.default_rng(8).standard_normal((4, 10, 16)).astype(np.float32))
    lens = Lens(model)
    model.lens = lens
    model(x).sum().backward()
    lens.detach()
    row = _rows_by(compare(lens))["logits"]
    assert lens.records["logits"].source == "(model):matmul"
    assert row.predicted_local == pytest.approx(row.measured, rel=0.3)


def test_user_arithmetic_gets_rows_and_rules():
    class Arith(nn.Module):
        def forward(self, x):
            y = x * 3.0
            return (y - 1.0) / 2.0

    model = nn.Sequential(nn.Linear(8, 8), Arith())
    x = vl.tensor(np.random.default_rng(9).standard_normal((16, 8)).astype(np.float32))
    lens, rows = T.run(model, x, level="op")
    by = _rows_by(rows)
    for k in ("1:mul", "1:sub", "1:div"):
        assert by[k].predicted_local == pytest.approx(by[k].measured, rel=1e-5), k


def test_no_rule_rows_say_why_and_never_disappear():
    class Odd(nn.Module):
        def forward(self, x):
            return x / (x.abs() + 1.0)            # division by a tensor: no rule

    model = nn.Sequential(nn.Linear(8, 8), Odd())
    x = vl.tensor(np.random.default_rng(10).standard_normal((16, 8)).astype(np.float32))
    lens, rows = T.run(model, x, level="all")
    div = _rows_by(rows)["1:div"]
    assert div.verdict == "no rule" and "division by a tensor" in div.note
    assert len({r.key for r in rows}) == len(lens.records)


def test_the_core_hook_slot_is_empty_outside_a_recorded_forward():
    core = _core()
    model, x = T.build("mlp", width=8, depth=2, seed=0, batch=4)
    assert core.op_hook is None
    seen = []
    lens = Lens(model)
    model.register_forward_pre_hook(lambda m, a: seen.append(core.op_hook))
    model(x).sum().backward()
    assert core.op_hook is None               # cleared when the model's forward returned
    lens.step()
    lens.detach()
    model(x)
    assert core.op_hook is None and not any(r.out.calls > 1 for r in lens.records.values())
    # ops=False: module records only, the slot never set
    lens = Lens(model, ops=False)
    model(x)
    lens.detach()
    assert all(r.level == "module" for r in lens.records.values())


def test_two_lenses_both_see_every_op():
    model, x = T.build("mlp", width=8, depth=2, seed=0, batch=4)
    a, b = Lens(model), Lens(model)
    model(x)
    a.detach()
    b.detach()
    assert a.records["0:linear"].out.calls == 1 and b.records["0:linear"].out.calls == 1
    assert _core().op_hook is None


def test_softmax_rule_matches_monte_carlo():
    g = np.random.default_rng(11)
    for v, n in ((0.25, 16), (1.0, 64), (4.0, 32), (16.0, 8)):
        z = g.standard_normal((40000, n)) * math.sqrt(v)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        m1, m2, m3 = rules.softmax_moments(v, n)
        assert m1 == pytest.approx(1 / n, rel=1e-6)
        assert m2 == pytest.approx((p ** 2).mean(), rel=0.02)
        assert m3 == pytest.approx((p ** 3).mean(), rel=0.04)


def test_gelu_silu_by_quadrature_match_monte_carlo():
    z = np.random.default_rng(12).standard_normal(400000) * 1.3 + 0.2
    x = rules.Moments(0.2, 1.3 ** 2 + 0.04)
    for name, f in (("gelu", rules.UNARY["gelu"]), ("silu", rules.UNARY["silu"])):
        m = rules.unary_forward(f, x)
        assert m.q == pytest.approx(np.mean(f(z) ** 2), rel=0.02), name
    # exp: E[e^{2z}] = e^{2m + 2v} exactly (a Monte Carlo mean undersamples the log-normal tail)
    assert rules.unary_forward(np.exp, x).q == pytest.approx(math.exp(0.4 + 2 * 1.69), rel=1e-6)
    h = 1e-4
    dg = (rules.UNARY["gelu"](z + h) - rules.UNARY["gelu"](z - h)) / (2 * h)
    assert rules.unary_backward(1.0, rules.UNARY["gelu"], x) == pytest.approx(np.mean(dg ** 2), rel=0.02)


def test_conv_rule_counts_the_padding_border():
    g = np.random.default_rng(13)
    W = g.standard_normal((8, 4, 3, 3)) * 0.2
    xs = g.standard_normal((256, 4, 6, 6)) * 1.5 + 0.3
    y = F.conv2d(vl.tensor(xs), vl.tensor(W), None, padding=1)._data
    pred = rules.conv_forward(rules.Moments(0.3, 1.5 ** 2 + 0.09), W, None, xs.shape, 1, (1, 1, 1, 1), 1)
    assert pred.q == pytest.approx(np.mean(y ** 2), rel=0.03)
    no_border = rules.linear_forward(rules.Moments(0.3, 1.5 ** 2 + 0.09), W.reshape(8, -1))
    assert no_border.q > 1.15 * pred.q                            # ignoring the border is visibly wrong
    assert rules.padding_fraction(W.shape, xs.shape, 1, 1) == pytest.approx(1 - (16 / 18) ** 2)
    # backward: each input gets the taps whose output exists
    gy = g.standard_normal((256, 8, 6, 6))
    gx = vl.tensor(xs, requires_grad=True)
    F.conv2d(gx, vl.tensor(W), None, padding=1).backward(vl.tensor(gy))
    got = rules.conv_backward_padded(1.0, W, xs.shape, 1, (1, 1, 1, 1), 1)
    assert got == pytest.approx(np.mean(gx.grad._data ** 2), rel=0.03)


def test_batchnorm_eval_and_embedding_and_avgpool_rules():
    g = np.random.default_rng(14)
    bn = nn.BatchNorm2d(4)
    bn.running_mean._data = g.standard_normal(4).astype(np.float32)
    bn.running_var._data = (g.random(4) + 0.5).astype(np.float32)
    bn.weight._data = g.standard_normal(4).astype(np.float32)
    bn.eval()
    emb = nn.Embedding(50, 8)
    model = nn.Sequential(bn, nn.AvgPool2d(2))
    x = vl.tensor((g.standard_normal((32, 4, 6, 6)) * 2 + 1).astype(np.float32))
    lens, rows = T.run(model, x, level="all")
    by = _rows_by(rows)
    assert by["0"].predicted_local == pytest.approx(by["0"].measured, rel=1e-5)   # an affine map: exact
    assert by["1"].predicted_local == pytest.approx(by["1"].measured, rel=0.02)  # measured window correlation
    idx = vl.tensor(g.integers(0, 50, (64, 5)))

    class E(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = emb

        def forward(self, i):
            return self.e(i)
    lens = Lens(E())
    lens.model(idx)
    lens.detach()
    r = _rows_by(compare(lens))["e"]
    assert r.predicted_local == pytest.approx(float(np.mean(emb.weight._data.astype(np.float64) ** 2)))


class _Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.skip = nn.Identity()

    def forward(self, x):
        return self.norm(self.skip(x) + F.relu(self.fc(x)))


def _record_state(lens):
    """Everything a record accumulates, as plain values (statistics folded)."""
    out = {}
    for key, r in lens.records.items():
        st = {}
        for name in ("out", "grad", "weight", "weight_grad"):
            s = getattr(r, name)
            st[name] = (s.n, s.mean, s.m2, s.amax, s.zeros, s.nan, s.inf, s.rows, s.rq_mean, s.rq_m2, s.calls,
                        s.shape, s.num_n, s.tiny16, s.over16)
        st["inputs"] = [(i.producer, i.sum_mean, i.sum_q, i.n, i.shape) for i in r.inputs]
        st["links"] = (r.source, r.producer, list(r.consumers), r.rows, sorted(r.linked))
        st["units"] = (None if r.unit_q is None else r.unit_q.tolist(), r.unit_calls,
                       None if r.grad_unit_q is None else r.grad_unit_q.tolist(), r.grad_unit_calls)
        st["params"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.params.items()}
        out[key] = st
    return out


def test_module_hook_short_path_records_what_the_general_path_records():
    """A module returning the output of the same op inside it as when it was linked (Record.via)
    takes the forward hook's short path on ordinary sampled steps; the records must be exactly
    those of the general path (_record) for every step, detail steps included, with modules used
    twice, an Identity passing its input on, residual additions, norm layers and F.relu."""
    def build():
        vl.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), _Block(8), nn.Identity(), _Block(8), nn.Linear(8, 3))
    g = np.random.default_rng(4)
    xs = [vl.tensor(g.standard_normal((5, 6)).astype(np.float32)) for _ in range(13)]
    m_fast, m_gen = build(), build()
    lf, lg = Lens(m_fast, weight_every=3), Lens(m_gen, weight_every=3)
    calls = {"record": 0}
    orig = Lens._record

    def counted(self, *a):
        if self is lf:
            calls["record"] += 1
        return orig(self, *a)
    Lens._record = counted
    try:
        for x in xs:
            for lens, m in ((lf, m_fast), (lg, m_gen)):
                if lens is lg:
                    for r in lens.records.values():
                        r.via = None          # the general path for every module call
                out = m(x)
                (out * out).sum().backward()
                lens.step()
                for p in m.parameters():
                    p.grad = None
    finally:
        Lens._record = orig
    assert _record_state(lf) == _record_state(lg)
    modules = sum(1 for r in lf.records.values() if r.level == "module")
    # the general path: every module on the 5 detail steps (sampled steps 0, 3, 6, 9, 12), and on the
    # 8 others only the three Identity modules (their output is their input: linked by 'passed')
    assert modules == 13 and calls["record"] == 5 * 13 + 8 * 3
    assert any(r.via for r in lf.records.values())
    lf.detach()
    lg.detach()
