"""Optimisers: 50-step float64 trajectories equal to PyTorch's, state save/load mid-way,
the notes' variants against hand-written NumPy references, and bad input."""
import math

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.optim as vo

from _optim_helpers import ATOL, RTOL, STEPS, _compare, _compare_state, _data, _train


CASES = [
    ("SGD", dict(lr=0.05), None),
    ("SGD", dict(lr=0.05, momentum=0.9), None),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01), None),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.02), None),
    ("SGD", dict(lr=0.01, momentum=0.5, maximize=True), None),
    ("SGD", dict(lr=0.05, momentum=0.9), ({"lr": 0.01}, {"momentum": 0.5, "nesterov": True})),
    ("Adagrad", dict(lr=0.1), None),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1), None),
    ("Adagrad", dict(lr=0.05, maximize=True), ({"lr": 0.2}, {"eps": 1e-3})),
    ("RMSprop", dict(lr=0.005), None),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.01), None),
    ("RMSprop", dict(lr=0.005, alpha=0.9, maximize=True), ({"lr": 0.02}, {"centered": True})),
    ("Adadelta", dict(), None),
    ("Adadelta", dict(lr=0.5, rho=0.95, eps=1e-5, weight_decay=0.05), None),
    ("Adadelta", dict(maximize=True), ({"lr": 0.3}, {"rho": 0.5})),
    ("Adam", dict(lr=0.01), None),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), amsgrad=True, weight_decay=0.05), None),
    ("Adam", dict(lr=0.01, maximize=True, eps=1e-3), ({"lr": 0.03}, {"betas": (0.5, 0.9)})),
    ("AdamW", dict(lr=0.01), None),
    ("AdamW", dict(lr=0.02, amsgrad=True, weight_decay=0.1), ({"lr": 0.005}, {"weight_decay": 0.5})),
]


@pytest.mark.parametrize("name,kw,groups", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_trajectory_matches_torch(name, kw, groups):
    tp, topt = _train(torch, getattr(torch.optim, name), kw, groups)
    vp, vopt = _train(vl, getattr(vo, name), kw, groups)
    _compare(vp, tp, _data())
    _compare_state(topt, vopt)          # PyTorch's layout, keys and values


@pytest.mark.parametrize("name,kw,groups", [CASES[i] for i in (2, 3, 8, 10, 13, 16, 19)],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_save_load_midway_equals_uninterrupted(name, kw, groups):
    full, _ = _train(vl, getattr(vo, name), kw, groups)
    resumed, _ = _train(vl, getattr(vo, name), kw, groups, split=STEPS // 2)
    tp, _ = _train(torch, getattr(torch.optim, name), kw, groups)
    for a, b, t in zip(full, resumed, tp):
        np.testing.assert_array_equal(a._data, b._data)
        np.testing.assert_allclose(b._data, t.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_state_dict_is_a_snapshot_and_load_casts_dtype():
    p = vl.tensor([1.0, 2.0], dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([p], lr=0.1, momentum=0.9)
    p.grad = vl.tensor([1.0, 1.0], dtype=vl.float64)
    opt.step()
    sd = opt.state_dict()
    before = sd["state"][0]["momentum_buffer"]._data.copy()
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"]._data, before)
    q = vl.tensor([1.0, 2.0], dtype=vl.float32, requires_grad=True)
    o2 = vo.SGD([q], lr=0.1, momentum=0.9)
    o2.load_state_dict(sd)
    assert o2.state[q]["momentum_buffer"].dtype == vl.float32
    assert o2.param_groups[0]["params"][0] is q


def test_closure_zero_grad_and_version():
    p = vl.tensor([3.0], dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    v0 = p._version[0]
    loss = opt.step(closure)
    assert loss.item() == 9.0
    assert p.item() == 3.0 - 0.25 * 6.0
    assert p._version[0] == v0 + 1
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad._data, [0.0])
    opt.zero_grad()
    assert p.grad is None


def test_a_saved_tensor_refuses_backward_after_step():
    p = vl.tensor([1.0, 2.0], dtype=vl.float64, requires_grad=True)
    y = (p * p).sum()
    p.grad = vl.tensor([1.0, 1.0], dtype=vl.float64)
    vo.SGD([p], lr=0.1).step()
    with pytest.raises(RuntimeError):
        y.backward()


def test_add_param_group_and_named_params():
    a = vl.tensor([1.0], dtype=vl.float64, requires_grad=True)
    b = vl.tensor([1.0], dtype=vl.float64, requires_grad=True)
    opt = vo.Adam([("a", a)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["a"]
    opt.add_param_group({"params": [b], "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    a.grad = vl.tensor([1.0], dtype=vl.float64)
    b.grad = vl.tensor([1.0], dtype=vl.float64)
    opt.step()
    # Adam's first step is lr * g / (|g| + eps) per weight: 0.1 and 0.5
    np.testing.assert_allclose([a.item(), b.item()], [1 - 0.1 / (1 + 1e-8), 1 - 0.5 / (1 + 1e-8)])


# ---------------------------------------------------------------------------- notes' variants
def test_ema_momentum_equals_heavy_ball_with_scaled_lr():
    """Seed 004 §B.1.1 EMA momentum (eta, gamma) == heavy ball (eta (1 - gamma), mu = gamma)."""
    for nesterov in (False, True):
        ema, _ = _train(vl, vo.SGD, dict(lr=0.1, momentum=0.7, momentum_style="ema", nesterov=nesterov))
        hb, _ = _train(vl, vo.SGD, dict(lr=0.1 * (1 - 0.7), momentum=0.7, nesterov=nesterov))
        for a, b in zip(ema, hb):
            np.testing.assert_allclose(a._data, b._data, rtol=1e-11, atol=1e-13)


def test_ema_momentum_running_average_example():
    """Seed 004 (B.31)-(B.32): averaging [1, 1, 1] with gamma = .1 from 0 gives .9, .99, .999;
    dividing by 1 - gamma^t (B.35) gives exactly 1 each time."""
    p = vl.tensor([0.0], dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([p], lr=1.0, momentum=0.1, momentum_style="ema")
    got = []
    for t in range(1, 4):
        p.grad = vl.tensor([1.0], dtype=vl.float64)
        opt.step()
        m = opt.state[p]["momentum_buffer"].item()
        got.append(m)
        assert m / (1 - 0.1 ** t) == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(got, [0.9, 0.99, 0.999], rtol=1e-15)


def test_adam_bias_correction_example():
    """The same example inside Adam (beta1 = 0.1): exp_avg is .9, .99, .999 and, bias
    corrected with eps = 0, a constant gradient 1 moves the weight by exactly lr per step."""
    p = vl.tensor([0.0], dtype=vl.float64, requires_grad=True)
    opt = vo.Adam([p], lr=0.01, betas=(0.1, 0.5), eps=0.0)
    for t, want in enumerate([0.9, 0.99, 0.999], start=1):
        p.grad = vl.tensor([1.0], dtype=vl.float64)
        opt.step()
        assert opt.state[p]["exp_avg"].item() == pytest.approx(want, rel=1e-15)
        assert opt.state[p]["exp_avg_sq"].item() == pytest.approx(1 - 0.5 ** t, rel=1e-15)
        assert p.item() == pytest.approx(-0.01 * t, rel=1e-13)
    # without the correction the first step would have been 0.01 * 0.9 / sqrt(0.5) ~ 0.0127


def _numpy_adam(g_fn, w, steps, lr, b1, b2, eps, inside):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, steps + 1):
        g = g_fn(w)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
        w = w - lr * mh / (np.sqrt(vh + eps) if inside else np.sqrt(vh) + eps)
    return w


def _quad_grad(A, c):
    return lambda w: A @ w - c


@pytest.mark.parametrize("inside", [False, True])
def test_adam_eps_placement_against_numpy(inside):
    """Seed 003 eq. 4.2.4 (eps inside the root) and seed 004 Definition 16 (outside)."""
    rng = np.random.default_rng(1)
    M = rng.normal(size=(4, 4))
    A, c, w0 = M @ M.T + np.eye(4), rng.normal(size=4), rng.normal(size=4)
    eps = 1e-2                                 # large, so the two placements differ visibly
    p = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    opt = vo.Adam([p], lr=0.05, betas=(0.9, 0.99), eps=eps, eps_inside_sqrt=inside)
    for _ in range(STEPS):
        p.grad = vl.tensor(A @ p._data - c, dtype=vl.float64)
        opt.step()
    want = _numpy_adam(_quad_grad(A, c), w0, STEPS, 0.05, 0.9, 0.99, eps, inside)
    other = _numpy_adam(_quad_grad(A, c), w0, STEPS, 0.05, 0.9, 0.99, eps, not inside)
    np.testing.assert_allclose(p._data, want, rtol=1e-11)
    assert np.abs(want - other).max() > 1e-4


@pytest.mark.parametrize("inside", [False, True])
def test_rmsprop_bias_correction_against_numpy(inside):
    """Seed 003 eq. 4.2.3 with Remark 4.2.4's division of r by 1 - beta^t."""
    rng = np.random.default_rng(2)
    M = rng.normal(size=(3, 3))
    A, c, w0 = M @ M.T + np.eye(3), rng.normal(size=3), rng.normal(size=3)
    lr, beta, eps = 0.01, 0.99, 1e-3
    p = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    opt = vo.RMSprop([p], lr=lr, alpha=beta, eps=eps, bias_correction=True, eps_inside_sqrt=inside)
    w, r = w0.copy(), np.zeros(3)
    for t in range(1, STEPS + 1):
        p.grad = vl.tensor(A @ p._data - c, dtype=vl.float64)
        opt.step()
        g = A @ w - c
        r = beta * r + (1 - beta) * g * g
        rh = r / (1 - beta ** t)
        w = w - lr * g / (np.sqrt(rh + eps) if inside else np.sqrt(rh) + eps)
    np.testing.assert_allclose(p._data, w, rtol=1e-11)


def test_rmsprop_running_average_of_constant_gradient():
    """Seed 003 Remark 4.2.4: with r_0 = 0 and a constant gradient g, r_t = (1 - beta^t) g^2."""
    p = vl.tensor([0.0], dtype=vl.float64, requires_grad=True)
    opt = vo.RMSprop([p], lr=0.0, alpha=0.99)
    for t in range(1, 6):
        p.grad = vl.tensor([3.0], dtype=vl.float64)
        opt.step()
        assert opt.state[p]["square_avg"].item() == pytest.approx((1 - 0.99 ** t) * 9.0, rel=1e-13)


def test_seed004_adadelta_is_rmsprop_with_eps_inside():
    """Seed 004 Definition 11: G <- gamma G + (1 - gamma) g^2, W <- W - eta g / sqrt(G + eps)."""
    rng = np.random.default_rng(3)
    M = rng.normal(size=(3, 3))
    A, c, w0 = M @ M.T + np.eye(3), rng.normal(size=3), rng.normal(size=3)
    eta, gamma, eps = 0.02, 0.9, 1e-4
    p = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    opt = vo.RMSprop([p], lr=eta, alpha=gamma, eps=eps, eps_inside_sqrt=True)
    w, G = w0.copy(), np.zeros(3)
    for _ in range(STEPS):
        p.grad = vl.tensor(A @ p._data - c, dtype=vl.float64)
        opt.step()
        g = A @ w - c
        G = gamma * G + (1 - gamma) * g * g
        w = w - eta * g / np.sqrt(G + eps)
    np.testing.assert_allclose(p._data, w, rtol=1e-11)
    # Zeiler's Adadelta (varlens.optim.Adadelta) is a different method
    q = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    o2 = vo.Adadelta([q], lr=eta, rho=gamma, eps=eps)
    for _ in range(STEPS):
        q.grad = vl.tensor(A @ q._data - c, dtype=vl.float64)
        o2.step()
    assert np.abs(q._data - w).max() > 1e-3


def test_adamw_shrinks_by_one_minus_lr_wd_and_adam_l2_does_not():
    """Seed 003 eq. 4.2.5: with zero gradient AdamW multiplies the weights by (1 - eta lambda)."""
    w0 = np.array([1.0, -2.0, 0.5])
    p = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    q = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    oa = vo.AdamW([p], lr=0.1, weight_decay=0.2)
    ob = vo.Adam([q], lr=0.1, weight_decay=0.2)
    for t in range(1, 6):
        p.grad = vl.tensor(np.zeros(3), dtype=vl.float64)
        q.grad = vl.tensor(np.zeros(3), dtype=vl.float64)
        oa.step()
        ob.step()
        np.testing.assert_allclose(p._data, w0 * (1 - 0.1 * 0.2) ** t, rtol=1e-13)
    assert np.abs(q._data - p._data).max() > 0.1


def test_sgd_weight_decay_is_the_l2_penalty_gradient():
    """Seed 003 Remark 4.1.1 (sign corrected): a step on L + lambda |W|^2 is
    (1 - 2 eta lambda) W - eta grad L; varlens' weight_decay is the coefficient of |W|^2 / 2."""
    lam, eta = 0.3, 0.1
    w0 = np.array([1.0, -1.0])
    p = vl.tensor(w0.copy(), dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([p], lr=eta, weight_decay=2 * lam)
    g = np.array([0.5, 0.25])
    p.grad = vl.tensor(g, dtype=vl.float64)
    opt.step()
    np.testing.assert_allclose(p._data, (1 - 2 * eta * lam) * w0 - eta * g, rtol=1e-15)


# ---------------------------------------------------------------------------- quadratic toy
def _quadratic_iterates(eta, lam, mu=0.0, steps=100, w0=1.0):
    """GD / heavy ball with varlens on L(w) = lam w^2 / 2 (seed 003 §4.2.2)."""
    w = vl.tensor([w0], dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([w], lr=eta, momentum=mu)
    out = [w0]
    for _ in range(steps):
        opt.zero_grad()
        (0.5 * lam * w * w).sum().backward()
        opt.step()
        out.append(w.item())
    return np.array(out)


@pytest.mark.parametrize("eta_lam", [0.1, 0.5, 1.0, 1.5, 1.99, 2.0, 2.01, 2.5, -0.1])
def test_gd_on_quadratic_converges_iff_eta_lambda_in_0_2(eta_lam):
    lam = 4.0 if eta_lam > 0 else -4.0          # eta > 0 always; eta lam < 0 means lam < 0
    w = _quadratic_iterates(eta_lam / lam, lam, steps=60)
    nz = w[:-1] != 0
    np.testing.assert_allclose(w[1:][nz] / w[:-1][nz], 1 - eta_lam, rtol=1e-12)  # factor 1 - eta lam
    if 0 < eta_lam < 2:
        assert abs(w[-1]) < 0.999 ** 60 * abs(w[0])
    elif eta_lam == 2.0:
        assert abs(w[-1]) == pytest.approx(1.0)                                # oscillates forever
    else:
        assert abs(w[-1]) > 1.5


def test_momentum_critical_damping_rate():
    """mu = (1 - sqrt(eta lam))^2 converges at rate 1 - sqrt(eta lam) (measured from the
    iterates), faster than GD's 1 - eta lam and than any other mu."""
    eta, lam = 0.01, 1.0
    mu_c = (1 - math.sqrt(eta * lam)) ** 2
    w = _quadratic_iterates(eta, lam, mu_c, steps=400)
    rate = (abs(w[400]) / abs(w[200])) ** (1 / 200)   # w_t = (a + b t) r^t: poly factor 2^(1/200)
    assert rate == pytest.approx(1 - math.sqrt(eta * lam), abs=0.005)
    gd = _quadratic_iterates(eta, lam, 0.0, steps=400)
    assert (abs(gd[400]) / abs(gd[200])) ** (1 / 200) == pytest.approx(1 - eta * lam, rel=1e-10)

    def measured(mu):
        x = _quadratic_iterates(eta, lam, mu, steps=400)
        return float(np.max(np.abs(x[300:]))) ** (1 / 300)
    assert measured(mu_c) < measured(0.6) and measured(mu_c) < measured(0.95)


def test_momentum_doubles_the_stable_range():
    """Heavy ball converges for 0 < eta lam < 2 (1 + mu) (inventory §8.6): beyond GD's 2."""
    lam, mu = 1.0, 0.9
    assert abs(_quadratic_iterates(3.5, lam, mu, steps=300)[-1]) < 1e-3
    assert abs(_quadratic_iterates(3.9, lam, mu, steps=300)[-1]) > 1e3
    assert abs(_quadratic_iterates(2.5, lam, 0.0, steps=60)[-1]) > 1e3


# ---------------------------------------------------------------------------- bad input
def _p():
    return vl.tensor([1.0, 2.0], requires_grad=True)


@pytest.mark.parametrize("make,match", [
    (lambda: vo.SGD([], lr=0.1), "empty parameter list"),
    (lambda: vo.SGD([_p()], lr=-0.1), r"lr \(learning rate\) must be >= 0.*-0.1"),
    (lambda: vo.Adam([{"params": [_p()], "lr": -1.0}]), r"lr.*-1.0"),
    (lambda: vo.SGD([_p()], lr=0.1, momentum=1.0), r"momentum must be >= 0.0 and < 1.0, got 1.0"),
    (lambda: vo.SGD([_p()], lr=0.1, momentum=-0.5), r"momentum.*-0.5"),
    (lambda: vo.RMSprop([_p()], momentum=1.5), "momentum"),
    (lambda: vo.Adam([_p()], betas=(1.0, 0.9)), r"betas\[0\].*1.0"),
    (lambda: vo.AdamW([_p()], betas=(0.9, -0.1)), r"betas\[1\]"),
    (lambda: vo.Adam([_p()], betas=0.9), "betas must be a pair"),
    (lambda: vo.SGD([_p()], lr=0.1, weight_decay=-1), "weight_decay"),
    (lambda: vo.SGD([_p()], lr=0.1, nesterov=True), "Nesterov"),
    (lambda: vo.SGD([_p()], lr=0.1, momentum=0.9, momentum_style="ema", dampening=0.5), "dampening"),
    (lambda: vo.SGD([_p()], lr=0.1, momentum_style="polyak"), "momentum_style"),
    (lambda: vo.Adagrad([_p()], lr_decay=-1), "lr_decay"),
    (lambda: vo.Adadelta([_p()], rho=1.5), "rho"),
    (lambda: vo.RMSprop([_p()], alpha=-0.1), "alpha"),
    (lambda: vo.Adam([_p()], eps=-1e-8), "eps"),
    (lambda: vo.SGD([_p()], lr="big"), "lr"),
])
def test_bad_hyperparameters(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_bad_parameters():
    x = vl.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="non-leaf"):
        vo.SGD([x * 2], lr=0.1)
    with pytest.raises(TypeError, match="floating-point.*int64"):
        vo.SGD([vl.tensor([1, 2])], lr=0.1)
    with pytest.raises(TypeError, match="single Tensor"):
        vo.SGD(x, lr=0.1)
    with pytest.raises(TypeError, match="ordered collection"):
        vo.SGD({x}, lr=0.1)
    with pytest.raises(TypeError, match=r"params\[1\] is a list"):
        vo.SGD([x, [1.0]], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        vo.SGD([{"params": [x]}, {"params": [x]}], lr=0.1)
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        from varlens.optim.optimizer import Optimizer, required
        Optimizer([x], {"lr": required})


def test_load_state_dict_mismatch():
    a, b = _p(), _p()
    o1 = vo.SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    o2 = vo.SGD([a, b], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        o2.load_state_dict(o1.state_dict())
    o3 = vo.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        o3.load_state_dict(o2.state_dict())
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        o3.load_state_dict({"params": []})


@pytest.mark.parametrize("name,kw", [(c[0], c[1]) for c in CASES[1:20:3]])
def test_float32_stays_float32_and_tracks_torch(name, kw):
    """Python-scalar hyperparameters must not promote float32 parameters or state."""
    d = {k: v.astype(np.float32) for k, v in _data(5).items()}

    def run(lib):
        ps = [lib.tensor(d[k].copy(), requires_grad=True) for k in ("W1", "b1", "W2", "U")]
        mod = torch.optim if lib is torch else vo
        opt = getattr(mod, name)(ps, **kw)
        X, Y = lib.tensor(d["X"]), lib.tensor(d["Y"])
        for _ in range(20):
            opt.zero_grad()
            r = lib.tanh(X @ ps[0] + ps[1]) @ ps[2] - Y
            (r * r).mean().backward()
            opt.step()
        return ps, opt
    vp, vopt = run(vl)
    tp, _ = run(torch)
    for v, t in zip(vp, tp):
        assert v.dtype == vl.float32
        np.testing.assert_allclose(v._data, t.detach().numpy(), rtol=2e-4, atol=2e-5)
    for st in vopt.state.values():
        for key, val in st.items():
            assert val.dtype == vl.float32, key


def test_tensor_lr_is_kept_as_float():
    p = vl.tensor([1.0], dtype=vl.float64, requires_grad=True)
    opt = vo.SGD([p], lr=vl.tensor(0.5, dtype=vl.float64))
    assert isinstance(opt.param_groups[0]["lr"], float)
    p.grad = vl.tensor([2.0], dtype=vl.float64)
    opt.step()
    assert p.item() == 0.0


def test_step_hooks():
    p = vl.tensor([1.0], dtype=vl.float64, requires_grad=True)
    opt = vo.Adam([p], lr=0.1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append(("pre", p.item())))
    opt.register_step_post_hook(lambda o, a, k: seen.append(("post", p.item())))
    p.grad = vl.tensor([1.0], dtype=vl.float64)
    opt.step()
    assert seen[0] == ("pre", 1.0) and seen[1][0] == "post" and seen[1][1] < 1.0
    h1.remove()
    opt.step()
    assert [s[0] for s in seen] == ["pre", "post", "post"]
