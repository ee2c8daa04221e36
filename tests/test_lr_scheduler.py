"""Learning-rate schedules: 50 steps equal to PyTorch's, state save/load, composition, the
notes' plateau rule, and bad input."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.optim as vo
from varlens.optim import lr_scheduler as vs

ts = torch.optim.lr_scheduler
STEPS = 50


def _opt(lib, optim_name="SGD", **kw):
    a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
    mod = torch.optim if lib is torch else vo
    kw = kw or dict(lr=0.1)
    return getattr(mod, optim_name)([{"params": [a]}, {"params": [b], "lr": 0.02}], **kw)


def _run(lib, make, steps=STEPS, metrics=None, split=None, extra=None):
    """Step optimiser then scheduler; record every group's lr (and momentum/betas) per step."""
    opt = _opt(lib, **(extra or {}))
    sched = make(lib, opt)
    out = [[g["lr"] for g in opt.param_groups]]
    mom = []
    for t in range(steps):
        opt.step()
        if split is not None and t == split:
            # PyTorch's resume order: build the scheduler (it rewrites the lrs), then load
            # the optimiser's state, then the scheduler's
            sd_opt, sd = opt.state_dict(), sched.state_dict()
            sched = make(lib, opt)
            opt.load_state_dict(sd_opt)
            sched.load_state_dict(sd)
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[t])
        out.append([g["lr"] for g in opt.param_groups])
        mom.append([g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups])
        assert list(sched.get_last_lr()) == out[-1]
    return np.array(out, dtype=float), mom


def _mod(lib):
    return ts if lib is torch else vs


SCHEDULES = {
    "StepLR": lambda lib, o: _mod(lib).StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda lib, o: _mod(lib).MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3),
    "ExponentialLR": lambda lib, o: _mod(lib).ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda lib, o: _mod(lib).CosineAnnealingLR(o, T_max=12, eta_min=0.001),
    "LinearLR": lambda lib, o: _mod(lib).LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=10),
    "LambdaLR": lambda lib, o: _mod(lib).LambdaLR(o, [lambda e: 1 / (1 + e), lambda e: 0.97 ** e]),
    "MultiplicativeLR": lambda lib, o: _mod(lib).MultiplicativeLR(o, lambda e: 0.95),
    "ConstantLR": lambda lib, o: _mod(lib).ConstantLR(o, factor=0.5, total_iters=8),
    "PolynomialLR": lambda lib, o: _mod(lib).PolynomialLR(o, total_iters=30, power=2.0),
    "SequentialLR": lambda lib, o: _mod(lib).SequentialLR(
        o, [_mod(lib).LinearLR(o, start_factor=0.2, total_iters=5),
            _mod(lib).CosineAnnealingLR(o, T_max=20, eta_min=0.0),
            _mod(lib).ExponentialLR(o, gamma=0.9)], milestones=[5, 25]),
    "OneCycleLR": lambda lib, o: _mod(lib).OneCycleLR(o, max_lr=[0.5, 0.1], total_steps=STEPS + 1),
    "OneCycleLR-3phase-linear": lambda lib, o: _mod(lib).OneCycleLR(
        o, max_lr=0.3, epochs=5, steps_per_epoch=11, anneal_strategy="linear", three_phase=True),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedule_matches_torch(name):
    t, tm = _run(torch, SCHEDULES[name])
    v, vm = _run(vl, SCHEDULES[name])
    np.testing.assert_allclose(v, t, rtol=1e-13, atol=1e-15)
    assert len(set(map(tuple, v.tolist()))) >= 2         # the lr really changed over the run
    np.testing.assert_allclose(np.array(vm, float), np.array(tm, float), rtol=1e-13)


@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "LinearLR", "SequentialLR",
                                  "OneCycleLR", "LambdaLR"])
def test_scheduler_save_load_midway(name):
    full, _ = _run(vl, SCHEDULES[name])
    resumed, _ = _run(vl, SCHEDULES[name], split=STEPS // 2)
    np.testing.assert_array_equal(full, resumed)
    np.testing.assert_allclose(resumed, _run(torch, SCHEDULES[name], split=STEPS // 2)[0], rtol=1e-13)


def test_oncecycle_with_adam_betas():
    make = lambda lib, o: _mod(lib).OneCycleLR(o, max_lr=0.01, total_steps=STEPS + 1)  # noqa: E731
    t, tm = _run(torch, make, extra=dict(optim_name="Adam", lr=1e-3))
    v, vm = _run(vl, make, extra=dict(optim_name="Adam", lr=1e-3))
    np.testing.assert_allclose(v, t, rtol=1e-13)
    np.testing.assert_allclose(np.array(vm, float), np.array(tm, float), rtol=1e-13)


def test_two_schedulers_chain_like_torch():
    def make(lib, o):
        m = _mod(lib)
        a, b = m.ExponentialLR(o, gamma=0.9), m.StepLR(o, step_size=4, gamma=0.5)

        class Both:
            def step(self):
                a.step()
                b.step()

            def get_last_lr(self):
                return b.get_last_lr()
        return Both()
    np.testing.assert_allclose(_run(vl, make)[0], _run(torch, make)[0], rtol=1e-13)


def test_cosine_recursion_tracks_closed_form():
    """The recursive form equals eta_min + (base - eta_min)(1 + cos(pi t / T)) / 2 for t <= T."""
    lrs, _ = _run(vl, SCHEDULES["CosineAnnealingLR"], steps=12)
    t = np.arange(13)
    want = 0.001 + (0.1 - 0.001) * (1 + np.cos(np.pi * t / 12)) / 2
    np.testing.assert_allclose(lrs[:, 0], want, rtol=1e-12)


def test_step_with_epoch_uses_closed_form():
    for lib in (torch, vl):
        opt = _opt(lib)
        s = _mod(lib).StepLR(opt, step_size=3, gamma=0.1)
        opt.step()
        with pytest.warns(UserWarning) if lib is torch else _nullcontext():
            s.step(7)
        assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1 ** 2)


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ---------------------------------------------------------------------------- plateau
METRICS = [1.0, 0.9, 0.8, 0.8, 0.8, 0.8, 0.79999, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.69, 0.69,
           0.69, 0.69, 0.69, 0.69, 0.69] + [0.6] * 29


@pytest.mark.parametrize("kw", [
    dict(),
    dict(patience=2),
    dict(patience=1, cooldown=2, factor=0.5, min_lr=0.005),
    dict(mode="max", patience=1, threshold=0.05, threshold_mode="abs"),
    dict(patience=2, threshold=0.0, min_lr=[0.01, 0.0]),
])
def test_plateau_matches_torch(kw):
    make = lambda lib, o: _mod(lib).ReduceLROnPlateau(o, **kw)  # noqa: E731
    t, _ = _run(torch, make, metrics=METRICS)
    v, _ = _run(vl, make, metrics=METRICS)
    np.testing.assert_allclose(v, t, rtol=1e-14)
    assert v[-1, 0] < v[0, 0] or kw.get("mode") == "max"
    resumed, _ = _run(vl, make, metrics=METRICS, split=20)
    np.testing.assert_array_equal(v, resumed)


def test_plateau_is_the_notes_rule():
    """Seed 003 §1.5.2: start at 0.1 and multiply by 0.1 when the validation loss flattens."""
    opt = _opt(vl)
    s = vs.ReduceLROnPlateau(opt, patience=3)
    losses = [1.0, 0.5, 0.3] + [0.3] * 4 + [0.2] + [0.2] * 4
    lrs = []
    for L in losses:
        s.step(L)
        lrs.append(opt.param_groups[0]["lr"])
    # 4 flat epochs (> patience 3) after 0.3 -> 0.01; 4 more after 0.2 -> 0.001
    assert lrs[:6] == [0.1] * 6
    assert lrs[6] == pytest.approx(0.01) and lrs[7:11] == [lrs[6]] * 4
    assert lrs[11] == pytest.approx(0.001)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("make,match", [
    (lambda o: vs.StepLR(o, step_size=0), "step_size must be an integer >= 1, got 0"),
    (lambda o: vs.StepLR("sgd", step_size=2), "must be a varlens.optim.Optimizer, got str"),
    (lambda o: vs.ExponentialLR(o, gamma=-0.5), "gamma"),
    (lambda o: vs.LinearLR(o, start_factor=0.0), "start_factor"),
    (lambda o: vs.LinearLR(o, end_factor=1.5), "end_factor"),
    (lambda o: vs.CosineAnnealingLR(o, T_max=0), "T_max"),
    (lambda o: vs.MultiStepLR(o, milestones=[3, -1]), "milestones"),
    (lambda o: vs.LambdaLR(o, [lambda e: 1.0]), "expected 2 lr_lambdas"),
    (lambda o: vs.LambdaLR(o, 3.0), "callable"),
    (lambda o: vs.ReduceLROnPlateau(o, factor=1.0), "factor"),
    (lambda o: vs.ReduceLROnPlateau(o, mode="avg"), "mode must be 'min' or 'max', got 'avg'"),
    (lambda o: vs.ReduceLROnPlateau(o, threshold_mode="pct"), "threshold_mode"),
    (lambda o: vs.ReduceLROnPlateau(o, min_lr=[0.0]), "expected 2 min_lrs"),
    (lambda o: vs.SequentialLR(o, [vs.StepLR(o, 2)], milestones=[3]), "one milestone fewer"),
    (lambda o: vs.SequentialLR(o, [vs.ReduceLROnPlateau(o), vs.StepLR(o, 2)], [3]), "ReduceLROnPlateau"),
    (lambda o: vs.SequentialLR(o, [vs.StepLR(_opt(vl), 2), vs.StepLR(o, 2)], [3]), "different optimizer"),
    (lambda o: vs.OneCycleLR(o, max_lr=0.1), "total_steps"),
    (lambda o: vs.StepLR(o, step_size=2, last_epoch=5), "initial_lr"),
])
def test_bad_scheduler_arguments(make, match):
    with pytest.raises((ValueError, TypeError, KeyError), match=match):
        make(_opt(vl))


def test_onecycle_past_total_steps():
    opt = _opt(vl)
    s = vs.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    opt.step()
    for _ in range(3):
        s.step()
    with pytest.raises(ValueError, match="total_steps is 3"):
        s.step()
    assert math.isfinite(opt.param_groups[0]["lr"])


def test_warns_when_scheduler_steps_before_optimizer():
    opt = _opt(vl)
    s = vs.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before optimizer.step"):
        s.step()
    opt2 = _opt(vl)
    s2 = vs.StepLR(opt2, step_size=2)
    opt2.step()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()
