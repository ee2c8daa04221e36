"""More of torch.optim: NAdam, RAdam, Adamax, ASGD, Rprop, LBFGS, the remaining schedulers,
swa_utils and the Optimizer API details, each against PyTorch (float64 trajectories over 50
steps, with the state saved and loaded half-way, also from a PyTorch state_dict)."""
import copy
import inspect
import math
import pickle

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.optim as vo
from varlens.optim import lr_scheduler as vs

from _optim_helpers import (ATOL, RTOL, STEPS, _compare, _compare_state, _data, _groups, _loss,
                            _params, _train)


def _to_vl_state(sd):
    """A PyTorch optimiser state_dict with its tensors turned into varlens tensors."""
    def conv(v):
        if isinstance(v, torch.Tensor):
            return vl.tensor(v.detach().numpy().copy())
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return {"state": {k: {kk: conv(vv) for kk, vv in st.items()} for k, st in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}


CASES = [
    ("NAdam", dict(lr=0.01), None),
    ("NAdam", dict(lr=0.02, betas=(0.8, 0.99), weight_decay=0.05, momentum_decay=0.01), None),
    ("NAdam", dict(lr=0.02, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), None),
    ("NAdam", dict(lr=0.01, eps=1e-3), ({"lr": 0.03}, {"betas": (0.5, 0.9), "momentum_decay": 0.0})),
    ("RAdam", dict(lr=0.01), None),
    ("RAdam", dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.05), None),
    ("RAdam", dict(lr=0.02, weight_decay=0.1, decoupled_weight_decay=True, maximize=True), None),
    ("RAdam", dict(lr=0.01), ({"lr": 0.03, "eps": 1e-3}, {"betas": (0.5, 0.8)})),
    ("Adamax", dict(lr=0.01), None),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.99), weight_decay=0.05, eps=1e-4), None),
    ("Adamax", dict(lr=0.01, maximize=True), ({"lr": 0.03}, {"betas": (0.5, 0.9)})),
    ("ASGD", dict(lr=0.05), None),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.6, t0=10, weight_decay=0.02), None),
    ("ASGD", dict(lr=0.01, t0=0, maximize=True), ({"lr": 0.005}, {"lambd": 0.1, "t0": 30})),
    ("Rprop", dict(lr=0.01), None),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1)), None),
    ("Rprop", dict(lr=0.01, maximize=True), ({"lr": 0.02}, {"etas": (0.6, 1.1)})),
    ("Adafactor", dict(lr=0.05), None),
    ("Adafactor", dict(lr=0.1, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5, weight_decay=0.1), None),
    ("Adafactor", dict(lr=0.02, maximize=True), ({"lr": 0.05, "d": 2.0}, {"eps": (1e-6, 1e-3)})),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("name,kw,groups", CASES, ids=IDS)
def test_trajectory_matches_torch(name, kw, groups):
    tp, topt = _train(torch, getattr(torch.optim, name), kw, groups)
    vp, vopt = _train(vl, getattr(vo, name), kw, groups)
    _compare(vp, tp, _data())
    _compare_state(topt, vopt)


MIDWAY = (1, 3, 6, 9, 12, 13, 15, 16, 18, 19)


@pytest.mark.parametrize("name,kw,groups", [CASES[i] for i in MIDWAY], ids=[IDS[i] for i in MIDWAY])
def test_save_load_midway(name, kw, groups):
    """Resuming from a varlens state_dict equals the uninterrupted run; resuming from a
    PyTorch state_dict (the same layout) continues PyTorch's trajectory."""
    full, _ = _train(vl, getattr(vo, name), kw, groups)
    resumed, _ = _train(vl, getattr(vo, name), kw, groups, split=STEPS // 2)
    t_resumed, _ = _train(torch, getattr(torch.optim, name), kw, groups, split=STEPS // 2)
    _compare(resumed, t_resumed, _data())
    for a, b in zip(full, resumed):
        # equal up to the float32 scalar states (mu_product, eta, mu) that loading casts to
        # the parameters' float64, as PyTorch does
        np.testing.assert_allclose(a._data, b._data, rtol=1e-6, atol=1e-9)
    # torch's dict after 25 steps, loaded into a varlens optimiser at the same weights
    d = _data()
    tp, topt = _train(torch, getattr(torch.optim, name), kw, groups, steps=STEPS // 2)
    d2 = dict(d, **{k: t.detach().numpy().copy() for k, t in zip(("W1", "b1", "W2", "U"), tp)})
    vps = _params(vl, d2)
    vopt = getattr(vo, name)(_groups(vps, groups), **kw)
    vopt.load_state_dict(_to_vl_state(topt.state_dict()))
    for _ in range(STEPS - STEPS // 2):
        for o, ps, lib in ((topt, tp, torch), (vopt, vps, vl)):
            o.zero_grad()
            _loss(lib, d, ps).backward()
            o.step()
    _compare(vps, tp, d)


def test_nadam_momentum_warmup_formula():
    """One NAdam step from zero state against the formula written out by hand (float64):
    mu_t = beta1 (1 - 0.5 * 0.96^(t psi)); with m = (1 - beta1) g, v = (1 - beta2) g^2,
    the step is lr (1 - mu_1)/(1 - mu_1) g/d + lr mu_2/(1 - mu_1 mu_2) m/d, d = |g| + eps."""
    g = np.array([0.5, -2.0, 3.0])
    p = vl.tensor(np.zeros(3), requires_grad=True)
    lr, b1, b2, psi, eps = 0.1, 0.9, 0.999, 0.004, 1e-8
    opt = vo.NAdam([p], lr=lr, betas=(b1, b2), momentum_decay=psi, eps=eps)
    p.grad = vl.tensor(g.copy())
    opt.step()
    mu1 = b1 * (1 - 0.5 * 0.96 ** psi)
    mu2 = b1 * (1 - 0.5 * 0.96 ** (2 * psi))
    prod1 = float(np.float32(mu1))                 # kept as a float32 scalar, as PyTorch
    d = np.sqrt((1 - b2) * g * g / (1 - b2)) + eps
    want = -lr * (1 - mu1) / (1 - prod1) * g / d - lr * mu2 / (1 - prod1 * mu2) * (1 - b1) * g / d
    np.testing.assert_allclose(p._data, want, rtol=1e-12)


def test_radam_is_sgd_with_momentum_until_rho_exceeds_5():
    """RAdam's first steps (rho_t <= 5, here t <= 5 for beta2 = 0.999) move by lr m_hat
    (bias-corrected momentum, no adaptive denominator); later ones are rectified Adam."""
    g = np.array([1.0, -3.0])
    p = vl.tensor(np.zeros(2), requires_grad=True)
    opt = vo.RAdam([p], lr=0.01)
    for t in range(1, 8):
        before = p._data.copy()
        p.grad = vl.tensor(g.copy())
        opt.step()
        rho_inf = 2 / 0.001 - 1
        rho_t = rho_inf - 2 * t * 0.999 ** t / (1 - 0.999 ** t)
        # a constant gradient: m_hat = g, v_hat = g^2
        if rho_t <= 5:
            np.testing.assert_allclose(before - p._data, 0.01 * g, rtol=1e-12)
        else:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            v = (1 - 0.999 ** t) * g * g
            step = 0.01 * g * math.sqrt(1 - 0.999 ** t) / (np.sqrt(v) + 1e-8) * r
            np.testing.assert_allclose(before - p._data, step, rtol=1e-10)
    assert t > 5 and rho_t > 5


def test_rprop_step_sizes_follow_the_sign():
    p = vl.tensor(np.zeros(3), requires_grad=True)
    opt = vo.Rprop([p], lr=0.1, etas=(0.5, 2.0), step_sizes=(0.01, 0.3))
    grads = [[1.0, 1.0, 1.0], [1.0, -1.0, 0.0], [1.0, -1.0, 5.0], [2.0, 1.0, 5.0]]
    sizes = []
    for g in grads:
        p.grad = vl.tensor(np.array(g))
        opt.step()
        sizes.append(opt.state[p]["step_size"]._data.copy())
    # same sign: x2 (capped at 0.3); flip: x0.5 and that step is skipped (its g counts as 0
    # next time); a zero product: unchanged
    np.testing.assert_allclose(sizes[0], [0.1, 0.1, 0.1])
    np.testing.assert_allclose(sizes[1], [0.2, 0.05, 0.1])
    np.testing.assert_allclose(sizes[2], [0.3, 0.05, 0.1])
    np.testing.assert_allclose(sizes[3], [0.3, 0.025, 0.2])   # flip again (prev was kept 0)
    np.testing.assert_allclose(p._data, [-(0.1 + 0.2 + 0.3 + 0.3), -0.1 + 0.05, -(0.1 + 0.1 + 0.2)])


def test_asgd_average_is_the_mean_of_iterates_after_t0():
    p = vl.tensor(np.array([1.0, -2.0]), requires_grad=True)
    opt = vo.ASGD([p], lr=0.1, lambd=0.0, t0=3)
    iterates = []
    for _ in range(10):
        p.grad = vl.tensor(p._data.copy())           # gradient of |p|^2 / 2
        opt.step()
        iterates.append(p._data.copy())
    # step t averages with mu = 1/max(1, t - 1 - t0) (set by the step before), so up to step
    # t0 + 2 = 5 the average is the iterate itself and from then on the plain mean of
    # iterates 5, 6, ...
    np.testing.assert_allclose(opt.state[p]["ax"]._data, np.mean(iterates[4:], axis=0), rtol=1e-6)
    assert not np.allclose(opt.state[p]["ax"]._data, iterates[-1])


def test_adafactor_factored_second_moment():
    """For a matrix, Adafactor keeps only row and column means of g^2; with one step from
    zero state (weight t^-0.8 = 1 at t = 1) its estimate is R C / mean(R): exact for a
    rank-one g^2, which the step then turns into lr-scaled sign-like updates g / |g|."""
    u, v = np.array([1.0, 2.0, 0.5]), np.array([0.3, -1.0, 2.0, 0.1])
    g = np.outer(u, v)                        # g^2 = (u^2)(v^2)^T is rank one
    p = vl.tensor(np.ones((3, 4)), requires_grad=True)
    opt = vo.Adafactor([p], lr=0.01, d=1e9)   # no clipping
    p.grad = vl.tensor(g)
    opt.step()
    R, C = opt.state[p]["row_var"]._data, opt.state[p]["col_var"]._data
    assert R.shape == (3, 1) and C.shape == (1, 4)
    np.testing.assert_allclose(R @ C / R.mean(), g * g, rtol=1e-12)
    # alpha = max(1e-3, RMS(p) = 1) * min(lr, 1/sqrt(1)) = 0.01
    np.testing.assert_allclose(p._data, 1 - 0.01 * np.sign(g), rtol=1e-12)


def test_muon_matches_torch():
    """PyTorch orthogonalises in bfloat16; varlens emulates that rounding, so 50 float64 steps
    agree to rounding (bfloat16 would show as ~1e-3).  The orthogonalised update has its
    singular values pushed near 1, and matches PyTorch's bit for bit on small matrices."""
    d = _data()
    out = {}
    for lib, mod in ((vl, vo), (torch, torch.optim)):
        ps = _params(lib, d)
        W1, W2 = ps[0], ps[2]
        opt = mod.Muon([{"params": [W1]}, {"params": [W2], "nesterov": False,
                                           "adjust_lr_fn": "match_rms_adamw"}], lr=0.02)
        for t in range(STEPS):
            if t == STEPS // 2:
                sd = opt.state_dict()
                opt = mod.Muon([{"params": [W1]}, {"params": [W2], "nesterov": False,
                                                   "adjust_lr_fn": "match_rms_adamw"}], lr=0.02)
                opt.load_state_dict(sd)
            opt.zero_grad()
            _loss(lib, d, ps).backward()
            opt.step()
        out[lib] = (W1, W2)
    for v, t in zip(out[vl], out[torch]):
        np.testing.assert_allclose(v._data, t.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert np.abs(out[vl][0]._data - d["W1"]).max() > 0.05
    from torch.optim._muon import _zeropower_via_newtonschulz
    from varlens.optim.muon import _NS_COEFFS, _orthogonalize
    for shape in [(5, 4), (3, 7), (16, 8)]:
        G = np.random.default_rng(0).normal(size=shape)
        O = _orthogonalize(G, _NS_COEFFS, 5, 1e-7)
        want = _zeropower_via_newtonschulz(torch.tensor(G), _NS_COEFFS, 5, 1e-7).float().numpy()
        np.testing.assert_array_equal(O, want)
        s = np.linalg.svd(O.astype(np.float64), compute_uv=False)
        assert 0.6 < s.min() and s.max() < 1.25


def test_muon_rejects_non_matrices():
    with pytest.raises(ValueError, match=r"only 2-D parameters.*params\[0\] has shape \(3,\)"):
        vo.Muon([vl.tensor([1.0, 2.0, 3.0], requires_grad=True)])
    with pytest.raises(ValueError, match="adjust_lr_fn must be"):
        vo.Muon([vl.tensor(np.ones((2, 2)), requires_grad=True)], adjust_lr_fn="sqrt")


# ---------------------------------------------------------------------------- LBFGS
LBFGS_CASES = [dict(), dict(max_iter=5, history_size=3), dict(line_search_fn="strong_wolfe"),
               dict(lr=0.5, max_iter=7, history_size=4, line_search_fn="strong_wolfe")]


def _lbfgs_run(lib, cls, kw, steps=4, split=None, load=None):
    d = _data()
    ps = _params(lib, d)
    opt = cls(ps, **kw)
    losses = []

    def closure():
        opt.zero_grad()
        loss = _loss(lib, d, ps)
        loss.backward()
        return loss
    for s in range(steps):
        if split == s:
            sd = opt.state_dict()
            opt = cls(ps, **kw)
            opt.load_state_dict(load(sd) if load else sd)
        losses.append(float(opt.step(closure).detach()))
    return ps, opt, losses


@pytest.mark.parametrize("kw", LBFGS_CASES, ids=[str(i) for i in range(len(LBFGS_CASES))])
def test_lbfgs_matches_torch(kw):
    vp, vopt, vloss = _lbfgs_run(vl, vo.LBFGS, kw)
    tp, topt, tloss = _lbfgs_run(torch, torch.optim.LBFGS, kw)
    np.testing.assert_allclose(vloss, tloss, rtol=1e-9)
    assert vloss[-1] < 0.2 * vloss[0]
    for v, t in zip(vp, tp):
        np.testing.assert_allclose(v._data, t.detach().numpy(), rtol=1e-7, atol=1e-8)
    vst, tst = vopt.state[vp[0]], topt.state[tp[0]]
    assert set(vst) == set(tst)
    for key in ("func_evals", "n_iter"):
        assert vst[key] == tst[key], key
    assert len(vst["old_dirs"]) == len(tst["old_dirs"])
    # resume from our own dict and from PyTorch's, two steps in
    rp, _, rloss = _lbfgs_run(vl, vo.LBFGS, kw, split=2)
    np.testing.assert_allclose(rloss, vloss, rtol=1e-12)
    tp2, topt2, _ = _lbfgs_run(torch, torch.optim.LBFGS, kw, steps=2)
    d = _data()
    ps = _params(vl, dict(d, **{k: t.detach().numpy().copy()
                                for k, t in zip(("W1", "b1", "W2", "U"), tp2)}))
    o = vo.LBFGS(ps, **kw)
    o.load_state_dict(_to_vl_state(topt2.state_dict()))

    def closure():
        o.zero_grad()
        loss = _loss(vl, d, ps)
        loss.backward()
        return loss
    for _ in range(2):
        o.step(closure)
    for v, t in zip(ps, tp):
        np.testing.assert_allclose(v._data, t.detach().numpy(), rtol=1e-7, atol=1e-8)


def test_lbfgs_minimises_a_quadratic_exactly():
    """On a strictly convex quadratic, L-BFGS with the strong Wolfe search reaches the
    solution of A x = b (to the gradient tolerance) within a few iterations."""
    rng = np.random.default_rng(1)
    M = rng.normal(size=(6, 6))
    A = M @ M.T + 6 * np.eye(6)
    b = rng.normal(size=6)
    x = vl.tensor(np.zeros(6), requires_grad=True)
    At, bt = vl.tensor(A), vl.tensor(b)
    opt = vo.LBFGS([x], line_search_fn="strong_wolfe", tolerance_grad=1e-10,
                   tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ (At @ x)) - bt @ x
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(x._data, np.linalg.solve(A, b), rtol=1e-7, atol=1e-9)
    assert opt.state[x]["n_iter"] <= 12


def test_lbfgs_bad_input():
    p = vl.tensor(np.zeros(2), requires_grad=True)
    with pytest.raises(ValueError, match="line_search_fn must be None or 'strong_wolfe', got 'armijo'"):
        vo.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameter groups"):
        vo.LBFGS([{"params": [p]}, {"params": [vl.tensor([1.0], requires_grad=True)]}])
    with pytest.raises(ValueError, match="history_size must be an integer >= 1, got 0"):
        vo.LBFGS([p], history_size=0)
    with pytest.raises(ValueError, match=r"lr \(learning rate\) must be >= 0"):
        vo.LBFGS([p], lr=-1)
    opt = vo.LBFGS([p])
    with pytest.raises(TypeError, match="closure must be a callable"):
        opt.step(None)
    assert opt.param_groups[0]["max_eval"] == 25 == torch.optim.LBFGS(
        [torch.zeros(1, requires_grad=True)]).param_groups[0]["max_eval"]


# ---------------------------------------------------------------------------- schedulers
ts = torch.optim.lr_scheduler


def _sopt(lib, name="SGD", **kw):
    a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
    mod = torch.optim if lib is torch else vo
    kw = kw or dict(lr=0.1, momentum=0.9)
    return getattr(mod, name)([{"params": [a]}, {"params": [b], "lr": 0.02}], **kw)


def _m(lib):
    return ts if lib is torch else vs


class _Half:
    """A callable object (its attributes are saved in state_dict, a lambda's are not)."""

    def __init__(self):
        self.base = 2.0

    def __call__(self, x):
        return 1 / (self.base ** (x - 1))


SCHED = {
    "LambdaLR": lambda lib, o: _m(lib).LambdaLR(o, lambda e: 1 / (1 + 0.1 * e)),
    "MultiplicativeLR": lambda lib, o: _m(lib).MultiplicativeLR(o, [lambda e: 0.95, lambda e: 0.9]),
    "StepLR": lambda lib, o: _m(lib).StepLR(o, step_size=6, gamma=0.5),
    "MultiStepLR": lambda lib, o: _m(lib).MultiStepLR(o, milestones=[4, 9, 9, 30], gamma=0.4),
    "ConstantLR": lambda lib, o: _m(lib).ConstantLR(o),
    "LinearLR": lambda lib, o: _m(lib).LinearLR(o, start_factor=0.25, total_iters=12),
    "ExponentialLR": lambda lib, o: _m(lib).ExponentialLR(o, gamma=0.95),
    "PolynomialLR": lambda lib, o: _m(lib).PolynomialLR(o, total_iters=40, power=1.5),
    "CosineAnnealingLR": lambda lib, o: _m(lib).CosineAnnealingLR(o, T_max=15, eta_min=0.002),
    "ChainedScheduler": lambda lib, o: _m(lib).ChainedScheduler(
        [_m(lib).ConstantLR(o, factor=0.1, total_iters=20), _m(lib).ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler-opt": lambda lib, o: _m(lib).ChainedScheduler(
        [_m(lib).LinearLR(o, start_factor=0.5, total_iters=4),
         _m(lib).CosineAnnealingLR(o, T_max=10)], optimizer=o),
    "SequentialLR": lambda lib, o: _m(lib).SequentialLR(
        o, [_m(lib).LinearLR(o, start_factor=0.1, total_iters=6),
            _m(lib).CosineAnnealingWarmRestarts(o, T_0=7, T_mult=2)], milestones=[6]),
    "SequentialLR-chained": lambda lib, o: _m(lib).SequentialLR(
        o, [_m(lib).ChainedScheduler([_m(lib).StepLR(o, 5, 0.5), _m(lib).ExponentialLR(o, 0.97)]),
            _m(lib).ConstantLR(o, factor=0.5, total_iters=3)], milestones=[12]),
    "CyclicLR": lambda lib, o: _m(lib).CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.05], step_size_up=5,
                                                 step_size_down=3),
    "CyclicLR-triangular2": lambda lib, o: _m(lib).CyclicLR(
        o, base_lr=[0.01, 0.001], max_lr=0.2, step_size_up=4, mode="triangular2",
        base_momentum=0.7, max_momentum=[0.95, 0.9]),
    "CyclicLR-exp_range": lambda lib, o: _m(lib).CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range", gamma=0.97,
        cycle_momentum=False),
    "CyclicLR-scale_fn": lambda lib, o: _m(lib).CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=_Half(), scale_mode="iterations"),
    "CosineAnnealingWarmRestarts": lambda lib, o: _m(lib).CosineAnnealingWarmRestarts(
        o, T_0=5, eta_min=0.001),
    "CosineAnnealingWarmRestarts-mult": lambda lib, o: _m(lib).CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2),
    "OneCycleLR": lambda lib, o: _m(lib).OneCycleLR(o, max_lr=0.3, total_steps=61),
    "SWALR": lambda lib, o: (torch.optim.swa_utils if lib is torch else vo.swa_utils).SWALR(
        o, swa_lr=[0.05, 0.01], anneal_epochs=8),
    "SWALR-linear-0": lambda lib, o: (torch.optim.swa_utils if lib is torch else vo.swa_utils).SWALR(
        o, swa_lr=0.05, anneal_epochs=0, anneal_strategy="linear"),
}


def _srun(lib, make, steps=60, split=None, opt_kw=None):
    opt = _sopt(lib, **(opt_kw or {}))
    sched = make(lib, opt)
    out = [[g["lr"] for g in opt.param_groups]]
    mom = [[g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups]]
    for t in range(steps):
        opt.step()
        if split is not None and t == split:
            sd_opt, sd = opt.state_dict(), sched.state_dict()
            opt = _sopt(lib, **(opt_kw or {}))
            sched = make(lib, opt)
            opt.load_state_dict(sd_opt)
            sched.load_state_dict(sd)
        sched.step()
        out.append([g["lr"] for g in opt.param_groups])
        mom.append([g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups])
        assert list(sched.get_last_lr()) == out[-1]
    return np.array(out, dtype=float), np.array(mom, dtype=float)


@pytest.mark.parametrize("name", list(SCHED))
def test_every_schedule_matches_torch_and_resumes(name):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch's SWALR/SequentialLR chatter
        t, tm = _srun(torch, SCHED[name])
        tr, _ = _srun(torch, SCHED[name], split=23)
        v, vm = _srun(vl, SCHED[name])
        vr, _ = _srun(vl, SCHED[name], split=23)
    np.testing.assert_allclose(v, t, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(vm, tm, rtol=1e-12, atol=1e-15)
    assert len(np.unique(np.r_[0.1, v[:, 0]])) > 1     # the schedule really changes the lr
    np.testing.assert_allclose(vr, tr, rtol=1e-12, atol=1e-15)
    if "SWALR" not in name and "Sequential" not in name and "Chained" not in name:
        np.testing.assert_array_equal(vr, v)           # resuming changes nothing


def test_cyclic_lr_with_adam_cycles_beta1():
    make = SCHED["CyclicLR"]
    t, tm = _srun(torch, make, opt_kw=dict(name="Adam", lr=0.1))
    v, vm = _srun(vl, make, opt_kw=dict(name="Adam", lr=0.1))
    np.testing.assert_allclose(v, t, rtol=1e-12)
    np.testing.assert_allclose(vm, tm, rtol=1e-12)
    assert vm.min() == pytest.approx(0.8) and vm.max() == pytest.approx(0.9)


def test_warm_restarts_fractional_epochs_match_torch():
    epochs = [0.0, 0.5, 1.25, 2.0, 2.9, 3.0, 4.5, 7.75, 9.0, 12.3, 20.0, 21.0, 22.5, 46.0]
    out = {}
    for lib in (torch, vl):
        opt = _sopt(lib)
        s = _m(lib).CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01)
        lrs = []
        for e in epochs:
            opt.step()
            s.step(e)
            lrs.append(opt.param_groups[0]["lr"])
        s.step()                                   # an interleaved plain step continues from there
        lrs.append(opt.param_groups[0]["lr"])
        out[lib is torch] = lrs
    np.testing.assert_allclose(out[False], out[True], rtol=1e-12)
    # the closed form: T_0 = 3, T_mult = 2 -> restarts at 3, 9, 21, 45; epoch 12.3 is 3.3 into 12
    assert out[False][9] == pytest.approx(0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * 3.3 / 12)) / 2)


@pytest.mark.parametrize("make,match", [
    (lambda o: vs.ChainedScheduler([]), "at least one scheduler"),
    (lambda o: vs.ChainedScheduler([vs.StepLR(o, 2), vs.ReduceLROnPlateau(o)]), "ReduceLROnPlateau"),
    (lambda o: vs.ChainedScheduler([vs.StepLR(o, 2), vs.StepLR(_sopt(vl), 2)]), "different optimizer"),
    (lambda o: vs.ChainedScheduler([3]), "must be a learning-rate scheduler"),
    (lambda o: vs.CyclicLR(o, 0.01, 0.1, mode="cosine"), "mode must be"),
    (lambda o: vs.CyclicLR(o, 0.01, [0.1]), "expected 2 max_lr"),
    (lambda o: vs.CyclicLR(o, -0.01, 0.1), r"base_lr\[0\] must be >= 0"),
    (lambda o: vs.CyclicLR(o, 0.01, 0.1, scale_mode="epoch"), "scale_mode"),
    (lambda o: vs.CyclicLR(vo.Adagrad([vl.tensor([1.0], requires_grad=True)]), 0.01, 0.1),
     "momentum or beta1"),
    (lambda o: vs.CosineAnnealingWarmRestarts(o, T_0=0), "T_0 must be a positive integer, got 0"),
    (lambda o: vs.CosineAnnealingWarmRestarts(o, T_0=2.5), "T_0"),
    (lambda o: vs.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), "T_mult must be an integer >= 1"),
    (lambda o: vs.CosineAnnealingWarmRestarts(o, T_0=2).step(-1), "epoch must be >= 0"),
    (lambda o: vo.swa_utils.SWALR(o, swa_lr=0.1, anneal_strategy="exp"), "anneal_strategy"),
    (lambda o: vo.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=-1), "anneal_epochs"),
    (lambda o: vo.swa_utils.SWALR(o, swa_lr=[0.1]), "expected 2 swa_lr"),
])
def test_bad_scheduler_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make(_sopt(vl))


# ---------------------------------------------------------------------------- swa_utils
def _nets():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(16, 4))
    Y = rng.normal(size=(16, 2))
    nets = {}
    for lib in (vl, torch):
        lib.manual_seed(0)
        nets[lib] = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.BatchNorm1d(5), lib.nn.Tanh(),
                                      lib.nn.Linear(5, 2)).double()
    nets[torch].load_state_dict({k: torch.from_numpy(np.array(v._data))
                                 for k, v in nets[vl].state_dict().items()})
    return nets, X, Y


@pytest.mark.parametrize("how", ["swa", "ema", "ema_multi", "swa_multi", "buffers"])
def test_averaged_model_matches_torch(how):
    nets, X, Y = _nets()
    out = {}
    for lib in (vl, torch):
        su = torch.optim.swa_utils if lib is torch else vo.swa_utils
        net = nets[lib]
        kw = {"swa": {}, "ema": dict(avg_fn=su.get_ema_avg_fn(0.8)),
              "ema_multi": dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.7)),
              "swa_multi": dict(multi_avg_fn=su.get_swa_multi_avg_fn()),
              "buffers": dict(multi_avg_fn=su.get_ema_multi_avg_fn(0.5), use_buffers=True)}[how]
        avg = su.AveragedModel(net, **kw)
        opt = (torch.optim if lib is torch else vo).SGD(net.parameters(), lr=0.1, momentum=0.9)
        x, y = lib.tensor(X), lib.tensor(Y)
        for _ in range(6):
            opt.zero_grad()
            ((net(x) - y) ** 2).mean().backward()
            opt.step()
            avg.update_parameters(net)
        out[lib] = (avg, net)
    (va, vn), (ta, tn) = out[vl], out[torch]
    assert int(va.n_averaged.item()) == int(ta.n_averaged.item()) == 6
    tsd = ta.state_dict()
    for k, v in va.state_dict().items():
        np.testing.assert_allclose(np.asarray(v._data, dtype=float), tsd[k].double().numpy(),
                                   rtol=1e-9, atol=1e-12, err_msg=k)
    # the average differs from the last weights (it really averaged)
    assert not np.allclose(va.module[0].weight._data, vn[0].weight._data)
    va.eval()
    ta.eval()
    np.testing.assert_allclose(va(vl.tensor(X))._data, ta(torch.tensor(X)).detach().numpy(),
                               rtol=1e-9, atol=1e-12)


def test_swa_default_is_the_mean_of_snapshots():
    lin = vl.nn.Linear(3, 2)
    avg = vo.swa_utils.AveragedModel(lin)
    snaps = []
    for i in range(5):
        lin.weight._data[...] = np.random.default_rng(i).normal(size=(2, 3))
        snaps.append(lin.weight._data.copy())
        avg.update_parameters(lin)
    np.testing.assert_allclose(avg.module.weight._data, np.mean(snaps, axis=0), rtol=1e-6)


def test_update_bn_matches_torch():
    nets, X, _ = _nets()
    batches = [X[i:i + 4] for i in range(0, 16, 4)]
    for lib in (vl, torch):
        su = torch.optim.swa_utils if lib is torch else vo.swa_utils
        nets[lib].eval()
        su.update_bn([(lib.tensor(b), 0) for b in batches], nets[lib])
        assert not nets[lib].training                 # the mode is restored
        assert nets[lib][1].momentum == 0.1
    vbn, tbn = nets[vl][1], nets[torch][1]
    np.testing.assert_allclose(vbn.running_mean._data, tbn.running_mean.numpy(), rtol=1e-10)
    np.testing.assert_allclose(vbn.running_var._data, tbn.running_var.numpy(), rtol=1e-10)
    # a cumulative average over the batches: not the momentum-0.1 running estimate
    assert np.abs(vbn.running_mean._data).max() > 1e-3


def test_swa_bad_input():
    with pytest.raises(ValueError, match=r"decay must be a number in \[0, 1\], got 1.5"):
        vo.swa_utils.get_ema_avg_fn(1.5)
    with pytest.raises(ValueError, match="only one of avg_fn and multi_avg_fn"):
        vo.swa_utils.AveragedModel(vl.nn.Linear(2, 2), avg_fn=vo.swa_utils.get_swa_avg_fn(),
                                   multi_avg_fn=vo.swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="model must be a varlens.nn.Module"):
        vo.swa_utils.AveragedModel([1, 2])


# ---------------------------------------------------------------------------- API surface
def _public(cls):
    return {m for m in dir(cls) if not m.startswith("_")}


STILL_MISSING = {"SparseAdam", "swap_in_optimizer_params_and_state"}
PROBED = ["optim", "optimizer", "lr_scheduler", "swa_utils"]


def _probe_modules(mod):
    import importlib
    tm = {"optim": torch.optim, "optimizer": importlib.import_module("torch.optim.optimizer"),
          "lr_scheduler": ts, "swa_utils": torch.optim.swa_utils}[mod]
    vm = {"optim": vo, "optimizer": importlib.import_module("varlens.optim.optimizer"),
          "lr_scheduler": vs, "swa_utils": vo.swa_utils}[mod]
    return tm, vm


def probe(mod):
    """The names in torch.optim.<mod>.__all__ that varlens lacks."""
    tm, vm = _probe_modules(mod)
    return sorted(n for n in tm.__all__ if not hasattr(vm, n))


@pytest.mark.parametrize("mod", PROBED)
def test_probe_every_torch_name_exists_with_its_signature(mod):
    """The probe: every public name of torch.optim(.optimizer, .lr_scheduler, .swa_utils)
    exists in varlens with torch's argument names and defaults, except STILL_MISSING."""
    tm, vm = _probe_modules(mod)
    missing = set(probe(mod))
    for name in tm.__all__:
        if name in missing:
            continue
        t, v = getattr(tm, name), getattr(vm, name)
        if not callable(t):
            continue
        tf, vf = (t.__init__, v.__init__) if inspect.isclass(t) else (t, v)
        tp, vp = inspect.signature(tf).parameters, inspect.signature(vf).parameters
        for arg, par in tp.items():
            if arg in ("self", "args", "kwargs"):
                continue
            assert arg in vp, f"{name}: argument {arg} missing"
            if par.default is not inspect.Parameter.empty:
                assert vp[arg].default == par.default, f"{name}({arg}=...) default"
            assert vp[arg].kind == par.kind or par.kind == par.POSITIONAL_OR_KEYWORD, (name, arg)
        if inspect.isclass(t):
            # (an AveragedModel's Module methods belong to varlens.nn, not to this probe)
            gone = _public(t) - _public(v) - _public(torch.nn.Module)
            assert not gone, f"{name} lacks {sorted(gone)}"
    assert missing == (STILL_MISSING if mod == "optim" else set())


def test_state_dict_hooks_and_prepend():
    p = vl.tensor([1.0, 2.0], requires_grad=True)
    opt = vo.NAdam([p], lr=0.1)
    calls = []
    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    h = opt.register_state_dict_post_hook(lambda o, sd: dict(sd, extra=1))
    opt.register_state_dict_post_hook(lambda o, sd: calls.append("first"), prepend=True)
    sd = opt.state_dict()
    assert sd["extra"] == 1 and calls == ["pre", "first"]
    h.remove()
    assert "extra" not in opt.state_dict()

    def pre(o, sd):
        sd = copy.deepcopy(sd)
        sd["param_groups"][0]["lr"] = 0.5
        return sd
    opt.register_load_state_dict_pre_hook(pre)
    opt.register_load_state_dict_post_hook(lambda o: calls.append("loaded"))
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.5 and calls[-1] == "loaded"


def test_param_groups_edit_add_group_and_zero_grad():
    a = vl.tensor([1.0, 2.0], requires_grad=True)
    b = vl.tensor([3.0], requires_grad=True)
    ta, tb = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0], requires_grad=True)
    vopt, topt = vo.RAdam([a], lr=0.1), torch.optim.RAdam([ta], lr=0.1)
    for o, x, y in ((vopt, a, b), (topt, ta, tb)):
        o.add_param_group({"params": [y], "lr": 0.5, "betas": (0.5, 0.9)})
        o.param_groups[0]["lr"] = 0.05                # editing a group changes the next step
        for _ in range(3):
            o.zero_grad()
            ((x * x).sum() + (y ** 3).sum()).backward()
            o.step()
        o.zero_grad()
        assert x.grad is None and y.grad is None      # set_to_none=True by default
    np.testing.assert_allclose(a._data, ta.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(b._data, tb.detach().numpy(), rtol=1e-6)
    assert vopt.state_dict()["param_groups"][1]["params"] == [1]
    assert set(vopt.param_groups[1]) == set(topt.param_groups[1])
    with pytest.raises(ValueError, match="more than one parameter group"):
        vopt.add_param_group({"params": [a]})


@pytest.mark.parametrize("make,match", [
    (lambda p: vo.NAdam(p, lr=-0.1), r"lr \(learning rate\) must be >= 0"),
    (lambda p: vo.NAdam(p, betas=(0.9, 1.0)), r"betas\[1\] must be >= 0.0 and < 1.0, got 1.0"),
    (lambda p: vo.NAdam(p, momentum_decay=-1), "momentum_decay must be >= 0"),
    (lambda p: vo.RAdam(p, betas=(-0.1, 0.9)), r"betas\[0\]"),
    (lambda p: vo.RAdam(p, eps=-1e-8), "eps must be >= 0"),
    (lambda p: vo.Adamax(p, weight_decay=-1), "weight_decay must be >= 0"),
    (lambda p: vo.Adamax(p, betas=0.9), "betas must be a pair"),
    (lambda p: vo.ASGD(p, lr=-1), "lr"),
    (lambda p: vo.ASGD(p, weight_decay=-0.1), "weight_decay"),
    (lambda p: vo.Rprop(p, etas=(1.5, 1.2)), r"etas\[0\] \(etaminus\) must be > 0.0 and < 1.0"),
    (lambda p: vo.Rprop(p, etas=(0.5, 0.9)), r"etas\[1\] \(etaplus\) must be > 1.0"),
    (lambda p: vo.Rprop(p, step_sizes=(1.0, 0.1)), r"step_sizes\[1\] \(max\) must be >= 1.0"),
    (lambda p: vo.NAdam(p, differentiable=True), "differentiable=True is not supported"),
    (lambda p: vo.NAdam(3), "params must be an iterable of Tensors or of dicts.*got int"),
    (lambda p: vo.RAdam(p[0]), "got a single Tensor"),
    (lambda p: vo.Adamax([]), "empty parameter list"),
    (lambda p: vo.Rprop([1.0]), r"can only optimize Tensors, but params\[0\] is a float"),
    (lambda p: vo.Adafactor(p, beta2_decay=0.5), "beta2_decay must be <= 0.0"),
    (lambda p: vo.Adafactor(p, d=0.5), r"d \(clipping threshold\) must be >= 1.0"),
    (lambda p: vo.Adafactor(p, eps=(-1.0, 1e-3)), r"eps\[0\] \(epsilon1\) must be >= 0"),
])
def test_bad_optimizer_arguments(make, match):
    ps = [vl.tensor([1.0], requires_grad=True)]
    with pytest.raises((ValueError, TypeError), match=match):
        make(ps)


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "Adafactor", "Muon"])
def test_float32_stays_float32_and_pickles(name):
    p = vl.tensor(np.linspace(-1, 1, 6).reshape(2, 3), dtype=vl.float32, requires_grad=True)
    opt = getattr(vo, name)([p])
    for _ in range(3):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
    assert p.dtype == vl.float32
    for key, v in opt.state[p].items():
        if v._data.ndim:
            assert v._data.dtype == np.float32, key
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


def test_global_step_hooks_run_around_every_optimizer():
    from varlens.optim.optimizer import (register_optimizer_step_post_hook,
                                         register_optimizer_step_pre_hook)
    seen = []
    h1 = register_optimizer_step_pre_hook(lambda o, a, k: seen.append(("pre", type(o).__name__)))
    h2 = register_optimizer_step_post_hook(lambda o, a, k: seen.append(("post", type(o).__name__)))
    try:
        p = vl.tensor([1.0], requires_grad=True)
        p.grad = vl.tensor([1.0])
        local = vo.RAdam([p])
        local.register_step_pre_hook(lambda o, a, k: seen.append(("local", "RAdam")))
        local.step()
        vo.SGD([p], lr=0.1).step()
    finally:
        h1.remove()
        h2.remove()
    assert seen == [("pre", "RAdam"), ("local", "RAdam"), ("post", "RAdam"),
                    ("pre", "SGD"), ("post", "SGD")]
    vo.SGD([p], lr=0.1).step()
    assert len(seen) == 5                              # removed hooks no longer run


if __name__ == "__main__":      # print the probe: what torch.optim has that varlens lacks
    for m in PROBED:
        print(f"torch.optim{'' if m == 'optim' else '.' + m}: missing {probe(m) or 'nothing'}")
