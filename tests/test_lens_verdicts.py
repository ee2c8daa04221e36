"""Calibrated verdicts (issue 23, item 3) and numerics (item 4) of the variance lens."""
import math

import numpy as np
import pytest

import varlens as vl
from varlens import nn
from varlens.lens import report
from varlens.lens import testbeds as T
from varlens.lens.compare import compare, flagged, summary
from varlens.lens.probes import Lens
from varlens.lens.records import F16_MAX, F16_TINY

F = nn.functional


@pytest.mark.parametrize("family,kw", [
    ("mlp", dict(width=64, depth=6)),
    ("functional", dict(width=64, depth=6)),
    ("cnn", dict(width=16, depth=3, batch=16)),
    ("resnet", dict(width=8, depth=2, batch=16)),
    ("transformer", dict(width=32, depth=2, batch=8)),
])
def test_healthy_networks_are_not_flagged(family, kw):
    """He-initialised MLPs, CNNs, ResNets and pre-LN Transformers, 3 seeds: at most 5% of rows
    get a warning verdict (drift, exploding, vanishing, non-finite)."""
    n_flag, n = T.false_alarm_rate(family, seeds=(0, 1, 2), **kw)
    assert n >= 30
    assert n_flag <= 0.05 * n, (family, n_flag, n)


def test_a_layer_scaling_by_1_25_is_caught_in_19_of_20_seeds():
    """A Linear that multiplies its output by 1.25, anywhere in a 10-layer net of width 256:
    its local ratio (1.5625 in E[y^2]) leaves its calibrated interval."""
    caught = []
    for seed in range(20):
        ok, at, row = T.detects(seed, width=256, depth=10, factor=1.25, batch=32)
        caught.append(ok)
        assert row.ratio_local == pytest.approx(1.5625, rel=0.15)
    assert sum(caught) >= 19, caught
    # and a healthy layer at the same place in the same nets is not
    for seed in range(3):
        ok, _, _ = T.detects(seed, width=256, depth=10, factor=1.0, batch=32)
        assert not ok


def test_local_and_chained_ratios_are_both_reported():
    model, x = T.build("mlp", width=64, depth=4, seed=3, fault_at=1, factor=1.5)
    _, rows = T.run(model, x)
    fwd = {r.key: r for r in rows if r.direction == "forward"}
    bad, after = fwd["2"], fwd["4"]
    assert bad.verdict == "drift" and bad.ratio_local == pytest.approx(2.25, rel=0.1)
    # downstream layers do what their rule says (local ratio ~1) though the chain is off by 2.25
    assert after.verdict == "stable" and 0.85 < after.ratio_local < 1.15
    assert after.ratio == pytest.approx(2.25, rel=0.25) and after.chain_agrees is False
    assert bad.local_low < bad.ratio_local < bad.local_high


def test_conv_intervals_count_samples_not_entries():
    """The standard error of a conv output's second moment comes from per-sample second moments
    (rows), not from C*H*W entries taken as independent."""
    model, x = T.build("cnn", width=8, depth=2, seed=0, batch=16)
    lens, rows = T.run(model, x)
    r = next(r for r in rows if r.key == "0" and r.direction == "forward")
    st = lens.records["0"].out
    per_sample = lens.records["0"].out.rows
    assert per_sample == 16
    naive = math.sqrt(st.var * 2 / st.n)          # what C*H*W independent entries would give
    assert r.se > 2 * naive


class _ReZero(nn.Module):
    def __init__(self, d, L, kind):
        super().__init__()
        self.kind = kind
        self.lins = nn.ModuleList([nn.Linear(d, d) for _ in range(L)])
        self.alpha = nn.Parameter(vl.zeros(L))
        self.bns = nn.ModuleList([nn.BatchNorm1d(d) for _ in range(L)])
        if kind == "zero-gamma":
            for b in self.bns:
                nn.init.zeros_(b.weight)
        if kind == "fixup":
            for lin in self.lins:
                nn.init.zeros_(lin.weight)
                nn.init.zeros_(lin.bias)

    def forward(self, x):
        for i, lin in enumerate(self.lins):
            if self.kind == "rezero":
                x = x + self.alpha[i] * F.relu(lin(x))
            elif self.kind == "zero-gamma":
                x = x + self.bns[i](F.relu(lin(x)))
            else:
                x = x + lin(F.relu(x))
        return x


@pytest.mark.parametrize("kind", ["rezero", "zero-gamma", "fixup"])
def test_zero_initialised_branches_are_zero_init_not_vanishing(kind):
    x = vl.tensor(np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32))
    lens, rows = T.run(_ReZero(32, 4, kind), x, level="all")
    verdicts = {r.verdict for r in rows}
    assert "vanishing" not in verdicts and "drift" not in verdicts
    zero = [r for r in rows if r.verdict == "zero-init"]
    assert len(zero) >= 4
    assert all(r.measured == 0.0 for r in zero)
    # the stream itself is untouched: its rows are stable
    assert all(r.verdict == "stable" for r in rows if r.op == "add" and r.direction == "forward")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_overflowed_tensor_is_non_finite_not_vanishing():
    class Boom(nn.Module):
        def forward(self, x):
            return x * 1e30

    model = nn.Sequential(nn.Linear(8, 8), Boom(), nn.Linear(8, 8))
    x = vl.tensor((np.random.default_rng(2).standard_normal((4, 8)) * 1e10).astype(np.float32))
    lens, rows = T.run(model, x)
    fwd = {r.key: r for r in rows if r.direction == "forward"}
    assert fwd["1"].verdict == "non-finite" and fwd["1"].extra["inf"] > 0
    assert all(r.verdict != "vanishing" for r in rows)
    first = lens.first_nonfinite["forward"]
    assert first["key"] == "1:mul" and first["path"] == "1" and first["op"] == "mul" and first["inputs_finite"]


def test_an_all_nan_tensor_keeps_its_row_its_count_and_its_json():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    x = vl.tensor(np.full((4, 8), np.nan, np.float32))
    lens, rows = T.run(model, x)
    fwd = {r.key: r for r in rows if r.direction == "forward"}
    assert {"0", "1", "2"} <= set(fwd)
    assert fwd["0"].verdict == "non-finite" and fwd["0"].measured is None and fwd["0"].extra["nan"] == 32
    summ = summary(rows, lens)
    assert summ["forward"]["nan_or_inf"] >= 96 and summ["forward"]["verdict"] == "non-finite"
    doc = report.to_json(lens, rows)
    assert {t["key"] for t in doc["tensors"]} >= {"0", "1", "2"}
    assert lens.first_nonfinite["forward"]["inputs_finite"] is False     # the data was NaN already


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_all_nan_backward_is_not_read_as_stable():
    class Sq(nn.Module):
        def forward(self, x):
            return vl.sqrt(x * 0.0) + x          # forward finite, d sqrt at 0 is Inf

    model = nn.Sequential(nn.Linear(8, 8), Sq(), nn.Linear(8, 8))
    x = vl.tensor(np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32))
    lens, rows = T.run(model, x)
    first = lens.first_nonfinite["backward"]
    assert first["key"] == "1:mul" and first["by"] == ["1:sqrt"]
    bwd = {r.key: r for r in rows if r.direction == "backward"}
    assert bwd["0"].verdict == "non-finite"
    summ = summary(rows, lens)
    assert summ["backward"]["verdict"] == "non-finite" and summ["backward"]["nan_or_inf"] > 0
    assert "non-finite" in report.table(rows)


def test_float16_and_bfloat16_headroom_is_reported_for_float32_runs():
    class Mix(nn.Module):
        def forward(self, x):
            return x * 1e5, x * 1e-7

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16)
            self.mix = Mix()

        def forward(self, x):
            big, small = self.mix(self.lin(x))
            return big + small

    x = vl.tensor(np.random.default_rng(4).standard_normal((64, 16)).astype(np.float32))
    lens, rows = T.run(Net(), x, level="all")
    recs = lens.records
    hb, hs = recs["mix:mul"].out.headroom(), recs["mix:mul#1"].out.headroom()
    a_big = np.abs(recs["lin"].out.amax * 1e5)
    assert hb["max_abs"] == pytest.approx(a_big, rel=1e-5)
    assert hb["float16_margin_log2"] == pytest.approx(math.log2(F16_MAX / a_big), rel=1e-5)
    assert hb["float16_margin_log2"] < 0 and hb["float16_frac_overflow"] > 0.2
    assert hb["bfloat16_margin_log2"] > 100
    assert hs["float16_frac_subnormal"] > 0.9 and hs["bfloat16_frac_subnormal"] == 0.0
    assert hs["sampled"] == min(64 * 16, 4096)
    row = next(r for r in rows if r.key == "mix:mul" and r.direction == "forward")
    assert row.extra["headroom"]["float16_frac_overflow"] == hb["float16_frac_overflow"]
    # exact fraction below float16's smallest normal
    lin = recs["lin"].out
    assert F16_TINY == 2.0 ** -14 and lin.headroom()["sampled"] > 0


def test_verdict_classes_and_summary_fields():
    model, x = T.build("mlp", width=32, depth=3, seed=0)
    lens, rows = T.run(model, x)
    s = summary(rows, lens)
    for d in ("forward", "backward"):
        for k in ("n_drift", "n_zero_init", "n_no_rule", "n_nonfinite", "first_nonfinite"):
            assert k in s[d]
    assert {r.verdict for r in rows} <= {"stable", "drift", "exploding", "vanishing", "zero-init", "non-finite",
                                          "no rule"}
    assert all(r.note for r in rows if r.verdict == "no rule")
