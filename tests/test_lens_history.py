"""The lens over training (history, update ratios, quantiles, plots, Trainer callback) and the
coordinate check (standard fails, µP passes; varlens and PyTorch factories)."""
import json

import numpy as np
import pytest

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from varlens.lens.coord import assert_coord_check, coord_check
from varlens.lens.history import LensHistory, LensCallback


def _mlp(width=32, act=nn.ReLU):
    return nn.Sequential(nn.Linear(16, width), act(), nn.Linear(width, width), act(), nn.Linear(width, 5))


def _train(model, history, steps, lr=0.1, seed=0):
    opt = vl.optim.SGD(model.parameters(), lr=lr)
    g = np.random.default_rng(seed)
    for _ in range(steps):
        x = vl.tensor(g.standard_normal((32, 16)).astype(np.float32))
        y = vl.tensor(g.integers(0, 5, 32))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        history.step()
    return opt


def test_history_points_every_n_steps_and_bounded(tmp_path):
    vl.manual_seed(0)
    m = _mlp()
    h = LensHistory(m, every=3, max_points=4)
    _train(m, h, 20)
    assert [p["step"] for p in h.points] == [6, 9, 12, 15, 18][-4:]       # 0, 3, ... kept: the last 4
    s, meas, pred, lo, hi = h.series("0")
    assert len(s) == 4 and np.all(meas > 0) and np.all(lo <= pred) and np.all(pred <= hi)
    # per-step, not pooled: each point holds only its own step's statistics
    assert np.all(np.abs(meas / pred - 1) < 0.5)
    path = h.save(tmp_path / "h.json")
    doc = json.loads(open(path).read())
    assert doc["schema"] == "varlens.lens.history/1" and len(doc["points"]) == 4
    h.reset()
    assert not h.points


def test_update_ratio_is_the_step_size_over_the_weight():
    vl.manual_seed(0)
    m = _mlp()
    h = LensHistory(m, every=2)
    w0 = m[0].weight.detach().numpy().copy()
    opt = vl.optim.SGD(m.parameters(), lr=0.05)
    x, y = vl.randn(32, 16), vl.randint(0, 5, (32,))
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    g = m[0].weight.grad.numpy().copy()
    opt.step()
    p = h.step()
    expect = np.linalg.norm(0.05 * g) / np.linalg.norm(w0)
    assert p["update_ratio"]["0.weight"] == pytest.approx(expect, rel=1e-5)
    # a larger learning rate gives a proportionally larger ratio
    assert 1e-5 < p["update_ratio"]["0.weight"] < 1


def test_quantiles_track_the_activation_distribution():
    vl.manual_seed(0)
    m = _mlp(act=nn.Tanh)
    h = LensHistory(m, every=1, quantiles=11, sample=100000)
    x = vl.randn(256, 16)
    out1 = m[1](m[0](x)).detach().numpy()
    F.cross_entropy(m(x), vl.randint(0, 5, (256,))).backward()
    p = h.step()
    q = np.asarray(p["quantiles"]["1|forward"])
    np.testing.assert_allclose(q, np.quantile(out1.astype(np.float64), np.linspace(0, 1, 11)), rtol=1e-5, atol=1e-6)
    assert -1 <= q[0] and q[-1] <= 1 and "1|backward" in p["quantiles"]


def test_history_sees_a_learning_rate_blow_up(tmp_path):
    vl.manual_seed(0)
    m = _mlp(width=64)
    h = LensHistory(m, every=2)
    _train(m, h, 12, lr=3.0)
    first, last = h.points[0]["update_ratio"]["4.weight"], h.points[-1]["update_ratio"]["4.weight"]
    assert first > 1e-2                   # a huge step relative to the weights
    assert h.plot_moments(tmp_path / "m.png") and h.plot_histograms(tmp_path / "hh.png")
    assert (tmp_path / "m.png").stat().st_size > 1000 and last is not None


def test_bad_arguments():
    with pytest.raises(ValueError, match="every"):
        LensHistory(_mlp(), every=0)
    with pytest.raises(RuntimeError, match="no point"):
        h = LensHistory(_mlp(), every=5)
        h.points.clear()
        h.plot_histograms("/tmp/never.png")


def _build(w):
    return nn.Sequential(nn.Linear(16, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 10))


def test_coord_check_standard_fails_and_mup_passes(tmp_path):
    std = coord_check(_build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2)
    assert not std.ok
    bad_layers = {layer for _, layer, _, _ in std.failures()}
    assert "4" in bad_layers                                   # the readout grows ~ width under Adam
    assert all(s > 0 for s, _, _, _ in std.failures())       # never at initialisation
    with pytest.raises(AssertionError, match="slope"):
        assert_coord_check(std)
    mup = coord_check(_build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2, parametrization="mup")
    assert mup.ok, mup.table()
    assert_coord_check(mup)
    assert mup.plot(tmp_path / "c.png")
    assert "PASS" in mup.table()


def test_coord_check_on_a_torch_factory():
    import torch

    def build(w):
        return torch.nn.Sequential(torch.nn.Linear(16, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                   torch.nn.ReLU(), torch.nn.Linear(w, 10))
    std = coord_check(build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2)
    mup = coord_check(build, [32, 64, 128, 256], steps=2, seeds=2, lr=1e-2, parametrization="mup")
    assert not std.ok and mup.ok


def test_lens_callback_writes_the_history(tmp_path):
    vl.manual_seed(0)
    m = _mlp()
    cb = LensCallback(every=2, out_dir=str(tmp_path))

    class T:                              # the Trainer's side of the callback protocol
        model, step, out_dir = m, 0, str(tmp_path)
    cb.on_fit_start(T)
    opt = vl.optim.SGD(m.parameters(), lr=0.1)
    for i in range(6):
        opt.zero_grad()
        F.cross_entropy(m(vl.randn(8, 16)), vl.randint(0, 5, (8,))).backward()
        opt.step()
        T.step = i
        cb.on_step_end(T)
    cb.on_fit_end(T)
    for f in ("lens_history.json", "lens_moments_forward.png", "lens_moments_backward.png", "lens_histograms.png"):
        assert (tmp_path / f).exists(), f


def test_noise_scale_warns_when_it_cannot_be_trusted():
    from varlens.lens import noise_scale as ns
    rng = np.random.default_rng(0)
    # a tiny true gradient and large noise: |G|^2 comes out <= 0 or B_simple far above b_big
    d, b_small, b_big = 50, 4, 16
    G = np.full(d, 1e-3)
    est = ns.estimate(lambda b: G + rng.standard_normal((b, d)).mean(0), None, b_small, b_big, n_batches=50, rng=rng)
    assert est.warnings and any(("<= 0" in w) or ("beyond the measured range" in w) for w in est.warnings)
    # a healthy case: no warning, and the recommendation states its assumption
    G = np.full(d, 1.0)
    est = ns.estimate(lambda b: G + rng.standard_normal((b, d)).mean(0), None, 4, 256, n_batches=400, rng=rng)
    assert not est.warnings, est.warnings
    rec = est.recommend(32, 0.1)
    assert "B_noise = B_simple" in rec["assumption"] and rec["warnings"] == []
    assert abs(est.b_simple - d / d) < 0.5        # tr(Sigma)/|G|^2 = 50 / 50
