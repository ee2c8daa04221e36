"""Optimiser identities of the notes (seed 003 §4.1-4.2, seed 004 §B.1).

These are exact identities of recursions, checked to rounding error; the
stochastic one (minibatch unbiasedness) is Monte Carlo.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.theory.registry import all_of, claim, exact, mc_mean, rng_for, with_wrong


def _spectral_radius(mu, eta_lam):
    """Heavy-ball on one eigendirection, in u = eta v: (u, w) -> (mu u + eta lam w, w - mu u - eta lam w)."""
    M = np.array([[mu, eta_lam], [-mu, 1.0 - eta_lam]])
    return float(np.abs(np.linalg.eigvals(M)).max())


@claim("optim.l2_step_equivalence", "003", "Remark 4.1.1 L1218-1226", "optim",
       "One GD step on L + lambda |W|^2 equals W <- (1 - 2 eta lambda) W - eta grad L. The notes print the "
       "penalty gradient with a minus sign (-2 lambda W); the + sign is tested", corrected=True)
def l2_step():
    g = rng_for("optim.l2_step_equivalence")
    X, y, W = g.standard_normal((50, 5)), g.standard_normal(50), g.standard_normal(5)
    eta, lam = 0.05, 0.1
    grad_unreg = -2 / 50 * X.T @ (y - X @ W)
    step_full = W - eta * (grad_unreg + 2 * lam * W)
    step_decay = (1 - 2 * eta * lam) * W - eta * grad_unreg
    step_printed = W - eta * (grad_unreg - 2 * lam * W)     # the notes' -2 lambda W
    return with_wrong(exact(np.abs(step_full - step_decay).max(), 0.0),
                      {"the printed -2 lambda W (inventory E12)": float(np.abs(step_printed - step_decay).max())})


@claim("optim.gd_quadratic_contraction", "003", "§4.2.2 L1323-1338", "optim",
       "GD on (1/2) W^T A W contracts eigencomponent i by exactly (1 - eta lambda_i) per step and "
       "converges iff eta < 2/lambda_max. Wrong value: the factor (1 - 2 eta lambda_i) of the loss W^T A W "
       "without the 1/2 (the factor-2 slip of inventory E4)")
def gd_quadratic():
    g = rng_for("optim.gd_quadratic_contraction")
    Q, _ = np.linalg.qr(g.standard_normal((4, 4)))
    lam = np.array([0.5, 1.0, 3.0, 7.0])
    A = Q @ np.diag(lam) @ Q.T
    W = g.standard_normal(4)
    eta = 0.2
    c0 = Q.T @ W
    for _ in range(10):
        W = W - eta * A @ W
    err = np.abs(Q.T @ W - c0 * (1 - eta * lam) ** 10).max()
    conv = [np.linalg.norm(np.linalg.matrix_power(np.eye(4) - e * A, 400) @ c0) < 1e-3 for e in (0.2, 0.28)]
    div = np.linalg.norm(np.linalg.matrix_power(np.eye(4) - 0.29 * A, 400) @ c0) > 1e3
    r = with_wrong(exact(err, 0.0, 1e-12),
                   {"(1 - 2 eta lambda)^t": float(np.abs(c0 * ((1 - 2 * eta * lam) ** 10 - (1 - eta * lam) ** 10)).max())})
    r.passed = r.passed and all(conv) and bool(div)
    return r


@claim("optim.momentum_trace_det", "003", "§4.2.2 (4.2.2) L1350-1354", "optim",
       "The heavy-ball matrix per eigendirection has trace mu + 1 - eta lambda and determinant mu "
       "(the notes print the transpose of the (v, W) map; same trace, determinant and eigenvalues). No wrong "
       "value: the misprint (inventory E14) has the same trace, determinant and spectrum, so there is nothing "
       "printed to reject")
def momentum_trace_det():
    mu, eta, lam = 0.9, 0.1, 2.0
    M = np.array([[mu, -eta * mu], [lam, 1 - eta * lam]])   # as printed in (4.2.2)
    Mt = np.array([[mu, lam], [-eta * mu, 1 - eta * lam]])  # the column update of (v, W)
    r1 = exact(np.trace(M), mu + 1 - eta * lam)
    r2 = exact(np.linalg.det(M), mu, 1e-12)
    r3 = exact(np.abs(np.sort_complex(np.linalg.eigvals(M)) - np.sort_complex(np.linalg.eigvals(Mt))).max(), 0.0, 1e-12)
    return all_of([r1, r2, r3])


@claim("optim.momentum_doubles_lr_range", "003", "§4.2.2 L1354", "optim",
       "Heavy-ball converges iff 0 < eta lambda < 2(1 + mu): the boundary found by bisection on the "
       "spectral radius is 3.0 at mu = 0.5 and 3.8 at mu = 0.9 (GD: 2), tending to twice GD's range; each mu "
       "must reject GD's 2 and 'exactly twice GD's' 4 (at mu = 0.99 the gap is 0.02)")
def momentum_range():
    out = []
    for mu in (0.5, 0.9, 0.99):
        lo, hi = 1.0, 4.5
        for _ in range(60):
            mid = (lo + hi) / 2
            if _spectral_radius(mu, mid) < 1:
                lo = mid
            else:
                hi = mid
        out.append(with_wrong(exact(lo, 2 * (1 + mu), 1e-6), {"GD's range, 2": 2.0, "twice GD's, 4": 4.0}))
    return all_of(out)


@claim("optim.critical_damping", "003", "§4.2.2 L1356-1358", "optim",
       "mu = (1 - sqrt(eta lambda))^2 gives a double eigenvalue and rate 1 - sqrt(eta lambda) (eta lambda "
       "= 0.01: mu = 0.81, rate 0.9 vs GD's 0.99). The notes' '1 - sqrt(eta lambda) ~ sqrt(1 - eta lambda)' "
       "is false (0.9 vs 0.995); the rate itself is tested", corrected=True)
def critical_damping():
    el = 0.01
    mu = (1 - math.sqrt(el)) ** 2
    return all_of([with_wrong(exact(mu, 0.81, 1e-12), {"1 - sqrt(eta lambda), unsquared": 1 - math.sqrt(el)}),
                   with_wrong(exact(_spectral_radius(mu, el), 0.9, 1e-6),
                              {"the printed sqrt(1 - eta lambda) (inventory E15)": math.sqrt(1 - el)})])


@claim("optim.heavy_ball_unrolled", "003", "§4.2.1 L1305-1313", "optim",
       "v_t = g_{t-1} + mu v_{t-1} with v_0 = 0 unrolls to sum_k mu^k g_{t-1-k}. Wrong value: 004's EMA "
       "weights (1 - mu) mu^k (the other convention)")
def heavy_ball_unrolled():
    g = rng_for("optim.heavy_ball_unrolled")
    grads = g.standard_normal((30, 3))
    mu, v = 0.9, np.zeros(3)
    for gt in grads:
        v = gt + mu * v
    unrolled = sum(mu ** k * grads[-1 - k] for k in range(30))
    return with_wrong(exact(np.abs(v - unrolled).max(), 0.0, 1e-12),
                      {"EMA weights (1 - mu) mu^k": float(np.abs(v - (1 - mu) * unrolled).max())})


@claim("optim.ema_equals_heavy_ball", "004", "§B.1.1 (B.18)-(B.20); 003 (4.2.1)", "optim",
       "EMA momentum (eta, gamma) gives exactly the iterates of heavy-ball with (eta(1-gamma), mu = gamma) "
       "(50 steps on a 2-D quadratic). Wrong value: heavy-ball with eta itself, not eta(1-gamma)")
def ema_heavy_ball():
    A = np.array([[3.0, 0.5], [0.5, 1.0]])
    eta, gam = 0.1, 0.9
    w1 = w2 = np.array([1.0, -2.0])
    w3 = w1
    m = v = v3 = np.zeros(2)
    err = err3 = 0.0
    for _ in range(50):
        m = gam * m + (1 - gam) * (A @ w1)
        w1 = w1 - eta * m
        v = A @ w2 + gam * v
        w2 = w2 - eta * (1 - gam) * v
        v3 = A @ w3 + gam * v3
        w3 = w3 - eta * v3
        err = max(err, np.abs(w1 - w2).max())
        err3 = max(err3, np.abs(w1 - w3).max())
    return with_wrong(exact(err, 0.0, 1e-13), {"heavy-ball with eta, not eta(1-gamma)": float(err3)})


@claim("optim.ema_weights", "004", "§B.1.1 (B.13) L208-240; §B.1.4 L548-557", "optim",
       "A zero-initialised EMA gives a k-step-old gradient weight gamma^k (1-gamma); the weights of T "
       "real terms sum to 1 - gamma^T (missing mass gamma^T). 004's (B.33)-(B.34) print (1-gamma)^t; "
       "the exponent 1 is tested", corrected=True)
def ema_weights():
    gam, T = 0.7, 12
    basis = np.eye(T)
    weights = []
    for k in range(T):          # response of A_T to a unit gradient at step k+1
        a = 0.0
        for t in range(T):
            a = gam * a + (1 - gam) * basis[k, t]
        weights.append(a)
    expect = np.array([gam ** (T - 1 - k) * (1 - gam) for k in range(T)])
    printed = np.array([gam ** (T - 1 - k) * (1 - gam) ** (k + 1) for k in range(T)])   # (B.34): (1-gamma)^t
    return all_of([with_wrong(exact(np.abs(np.array(weights) - expect).max(), 0.0, 1e-15),
                              {"the printed (1-gamma)^t (inventory E23)": float(np.abs(printed - expect).max())}),
                   with_wrong(exact(sum(weights), 1 - gam ** T, 1e-14),
                              {"the printed (1-gamma)^t (inventory E23)": float(printed.sum())})])


@claim("optim.bias_correction_example", "004", "§B.1.4 (B.31)-(B.36) L528-572", "optim",
       "EMA of [1, 1, 1] with gamma = 0.1 and a_0 = 0 is 0.9, 0.99, 0.999; dividing by 1 - gamma^t gives 1, 1, 1. "
       "Wrong value: dividing by 1 - gamma (the t dropped: 1, 1.1, 1.11)")
def bias_correction():
    a, vals, corr = 0.0, [], []
    for t in range(1, 4):
        a = 0.1 * a + 0.9 * 1.0
        vals.append(a)
        corr.append(a / (1 - 0.1 ** t))
    wrong = np.array(vals) / (1 - 0.1)
    return all_of([exact(np.abs(np.array(vals) - [0.9, 0.99, 0.999]).max(), 0.0, 1e-15),
                   with_wrong(exact(np.abs(np.array(corr) - 1).max(), 0.0, 1e-15),
                              {"1/(1 - gamma), not 1/(1 - gamma^t)": float(np.abs(wrong - 1).max())})])


@claim("optim.rmsprop_underweighted", "003", "Remark 4.2.4 L1379", "optim",
       "RMSProp with r_0 = 0 and a constant squared gradient g^2 gives r_t = (1 - beta^t) g^2 "
       "(beta = 0.99, t = 1..100). Wrong values: no zero-init bias (r_t = g^2) and (1 - beta)^t")
def rmsprop_underweighted():
    beta, g2, r, err = 0.99, 2.5, 0.0, 0.0
    e_full = e_pow = 0.0
    for t in range(1, 101):
        r = beta * r + (1 - beta) * g2
        err = max(err, abs(r - (1 - beta ** t) * g2))
        e_full = max(e_full, abs(g2 - (1 - beta ** t) * g2))
        e_pow = max(e_pow, abs((1 - beta) ** t * g2 - (1 - beta ** t) * g2))
    return with_wrong(exact(err, 0.0, 1e-13), {"no zero-init bias: r_t = g^2": e_full, "(1 - beta)^t g^2": e_pow})


@claim("optim.adam_first_step", "003", "§4.2.4 (4.2.4); 004 Def 16", "optim",
       "Adam's bias-corrected first step is eta g/sqrt(g^2 + eps) (003, eps inside the root) or "
       "eta g/(|g| + eps) (004 and PyTorch, eps outside); both ~ eta sign(g). Each must reject the other "
       "placement of eps (inventory E16; differs by 5e-5 at g = 1e-3)")
def adam_first_step():
    g = np.array([0.3, -2.0, 1e-3])
    eta, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    m = (1 - b1) * g / (1 - b1)
    v = (1 - b2) * g * g / (1 - b2)
    inside = eta * m / np.sqrt(v + eps)
    outside = eta * m / (np.sqrt(v) + eps)
    return all_of([with_wrong(exact(np.abs(inside - eta * g / np.sqrt(g * g + eps)).max(), 0.0, 1e-15),
                              {"eps outside the root": float(np.abs(outside - eta * g / np.sqrt(g * g + eps)).max())}),
                   with_wrong(exact(np.abs(outside - eta * np.sign(g)).max(), 0.0, 1e-6),
                              {"eps inside the root": float(np.abs(inside - eta * np.sign(g)).max())})])


@claim("optim.adamw_shrink", "003", "Remark 4.2.5 (4.2.5) L1409-1413", "optim",
       "With zero gradient AdamW shrinks weights by exactly (1 - eta lambda) per step, while Adam with "
       "L2 in the loss shrinks them by an amount scaled by eta/(sqrt(r~) + eps) instead. Wrong values: a "
       "factor (1 - 2 eta lambda) (the gradient of lambda |w|^2) for AdamW; AdamW's shrink for Adam + L2")
def adamw_shrink():
    eta, lam, eps = 0.01, 0.1, 1e-8
    w_adamw = np.array([1.0, -3.0])
    w_l2 = w_adamw.copy()
    m = v = np.zeros(2)
    for t in range(1, 6):
        w_adamw = (1 - eta * lam) * w_adamw - 0.0           # zero loss gradient
        grad = lam * w_l2                                    # L2 in the loss (lambda/2 |w|^2)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w_l2 = w_l2 - eta * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + eps)
    w0 = np.array([1.0, -3.0])
    r1 = with_wrong(exact(np.abs(w_adamw - w0 * (1 - eta * lam) ** 5).max(), 0.0, 1e-15),
                    {"(1 - 2 eta lambda) per step":
                     float(np.abs(w0 * ((1 - 2 * eta * lam) ** 5 - (1 - eta * lam) ** 5)).max())})
    # Adam+L2 moves each weight by about eta per step whatever its size (a sign-like step, within 1%),
    # so the two weights shrink by the same amount instead of the same factor
    r2 = with_wrong(exact(np.abs(np.abs(w0 - w_l2) - 5 * eta).max(), 0.0, 0.01 * 5 * eta),
                    {"AdamW's decoupled shrink": float(np.abs(np.abs(w0 * (1 - (1 - eta * lam) ** 5)) - 5 * eta).max())})
    return all_of([r1, r2])


@claim("optim.varlens_adamw_decoupled", "003", "Remark 4.2.5 (4.2.5)", "optim",
       "varlens.optim.AdamW with zero gradients multiplies every weight by exactly (1 - lr weight_decay) per "
       "step (5 steps, lr 0.01, weight_decay 0.1), whatever the weight's size. Wrong value: varlens.optim.Adam "
       "with the same weight_decay (L2 coupled into the gradient, then normalised)")
def varlens_adamw():
    import varlens as vl
    from varlens import optim
    w0 = np.array([1.0, -3.0, 0.25])
    p = vl.tensor(w0.copy(), requires_grad=True)
    opt = optim.AdamW([p], lr=0.01, weight_decay=0.1)
    q = vl.tensor(w0.copy(), requires_grad=True)
    coupled = optim.Adam([q], lr=0.01, weight_decay=0.1)
    for _ in range(5):
        p.grad = vl.zeros(3, dtype=vl.float64)
        q.grad = vl.zeros(3, dtype=vl.float64)
        opt.step()
        coupled.step()
    want = w0 * (1 - 0.01 * 0.1) ** 5
    return with_wrong(exact(np.abs(p.detach().numpy() - want).max(), 0.0, 1e-15),
                      {"Adam with weight_decay (coupled L2)": float(np.abs(q.detach().numpy() - want).max())})


@claim("optim.minibatch_unbiased", "003", "Remark 1.5.2 L258-267", "optim",
       "A uniformly sampled minibatch gradient (B = 8) of a least-squares loss is an unbiased estimate "
       "of the full-batch gradient (each coordinate within 5 standard errors). Wrong value: the batch's sum, "
       "not its mean (B times the full gradient)")
def minibatch_unbiased():
    g = rng_for("optim.minibatch_unbiased")
    n, d = 200, 3
    X, y, w = g.standard_normal((n, d)), g.standard_normal(n), g.standard_normal(d)
    per = 2 * (X @ w - y)[:, None] * X          # per-example gradients of (x w - y)^2
    full = per.mean(0)
    idx = np.array([g.choice(n, 8, replace=False) for _ in range(40_000)])
    mb = per[idx].mean(1)
    return all_of([with_wrong(mc_mean(mb[:, j] - full[j], 0.0), {f"sum of the batch (coordinate {j})": 7 * full[j]})
                   for j in range(d)])


@claim("optim.adagrad_step_nonincreasing", "004", "§B.1.3 L465-473", "optim",
       "Adagrad sums squared gradients, so with a constant gradient the step varlens.optim.Adagrad takes "
       "shrinks like 1/sqrt(t): steps are non-increasing and step_t/step_1 = 1/sqrt(t) (eps negligible). Wrong "
       "values: 1/t (the sum without its root) and a constant step (an average, as RMSProp)")
def adagrad_nonincreasing():
    import varlens as vl
    from varlens import optim
    p = vl.tensor(np.zeros(1), requires_grad=True)
    opt = optim.Adagrad([p], lr=0.1, eps=1e-12)
    prev, steps = 0.0, []
    for _ in range(16):
        p.grad = vl.tensor(np.array([0.7]))
        opt.step()
        cur = float(p.detach().numpy()[0])
        steps.append(prev - cur)
        prev = cur
    ratios = np.array(steps) / steps[0]
    t = np.arange(1, 17)
    r = with_wrong(exact(np.abs(ratios - 1 / np.sqrt(t)).max(), 0.0, 1e-9),
                   {"1/t": float(np.abs(1 / t - 1 / np.sqrt(t)).max()), "constant": float(np.abs(1 - 1 / np.sqrt(t)).max())})
    r.passed = r.passed and all(a >= b for a, b in zip(steps, steps[1:]))
    return r


@claim("optim.eps_bounds_the_step", "004", "§B.1.2 (B.24), (B.26) L396-400", "optim",
       "The adaptive factor eta/(G + eps) never exceeds eta/eps (B.24), and eta/sqrt(G + eps) never exceeds "
       "eta/sqrt(eps) (B.26), whatever the squared-gradient average G >= 0 (checked on G down to 0); each "
       "must reject the other form's bound")
def eps_bound():
    G = np.concatenate([[0.0], np.logspace(-12, 3, 200)])
    eta, eps = 0.01, 1e-6
    a = (eta / (G + eps)).max()
    b = (eta / np.sqrt(G + eps)).max()
    return all_of([with_wrong(exact(a, eta / eps, 1e-9 * eta / eps), {"eta/sqrt(eps)": eta / math.sqrt(eps)}),
                   with_wrong(exact(b, eta / math.sqrt(eps), 1e-9 * eta / math.sqrt(eps)), {"eta/eps": eta / eps})])
