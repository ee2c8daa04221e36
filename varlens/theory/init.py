"""Initialisation: LeCun, He/Kaiming, Xavier/Glorot and the variance-preserving alternative.

Seed 000 Costume 2; seed 001 §3.3; seed 002; seed 003 §4.3.1 and Exercise 4.3.1.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.theory.registry import (all_of, claim, close, mc_ratio_of_means, mc_var, mc_var_clustered,
                                     rng_for, with_wrong)

VAR_RELU = 0.5 - 1.0 / (2.0 * math.pi)


def _chain_ratio(g, depth, width, var_w_times_n, n_nets=300, batch=16):
    """Per network: mean squared pre-activation at layer `depth` and at layer 1 (ReLU chain)."""
    num, den = np.empty(n_nets), np.empty(n_nets)
    for k in range(n_nets):
        x = g.standard_normal((batch, width))
        s = x @ (g.standard_normal((width, width)) * math.sqrt(var_w_times_n / width))
        den[k] = np.mean(s * s)
        for _ in range(depth - 1):
            s = np.maximum(s, 0.0) @ (g.standard_normal((width, width)) * math.sqrt(var_w_times_n / width))
        num[k] = np.mean(s * s)
    return num, den


@claim("init.lecun_linear", "000", "Costume 2 L16; 002 L33-37", "init",
       "Linear layer y_j = sum_i W_ji x_i with Var W = 1/fan_in and unit-variance inputs gives "
       "unit-variance outputs (LeCun), fan_in = 256 (16 outputs). Wrong values: the output variance under "
       "Xavier 2/(fan_in + fan_out) (1.88) and He 2/fan_in (2)",
       alternatives={"Xavier 2/(fan_in + fan_out): 2 * 256/272": 2 * 256 / 272, "He 2/fan_in: 2": 2.0})
def lecun_linear():
    g = rng_for("init.lecun_linear")
    n, outs = 256, []
    for _ in range(100):  # one weight draw per cluster: the claim is over weights and inputs
        W = g.standard_normal((16, n)) / math.sqrt(n)
        outs.append(g.uniform(-math.sqrt(3), math.sqrt(3), (200, n)) @ W.T)
    return mc_var_clustered(outs, 1.0, center=False)


@claim("init.linear_variance_product", "002", "L31", "init",
       "Var[s] = n Var[z] Var[w] for zero-mean independent z, w: n = 100, Var z = 2, Var w = 0.03 gives 6",
       alternatives={"Var z dropped (n Var w = 3)": 3.0, "sqrt(n) for n (1/sqrt(d) vs 1/d: 0.6)": 10 * 2 * 0.03})
def linear_variance_product():
    g = rng_for("init.linear_variance_product")
    n, outs = 100, []
    for _ in range(200):
        w = g.normal(0, math.sqrt(0.03), (n, 16))
        outs.append(g.normal(0, math.sqrt(2), (200, n)) @ w)
    return mc_var_clustered(outs, 6.0, center=False)


@claim("init.second_moment_not_variance", "001", "§3.3 L246", "init",
       "Var[z_i] = D Var[w] E[h^2] (second moment, not variance, of the non-zero-mean input): "
       "h = ReLU(N(0,1)), D = 200, Var w = 0.01 gives 1.0 (D Var w Var h would give 0.68)",
       alternatives={"D Var w Var h (variance for second moment)": 200 * 0.01 * VAR_RELU})
def second_moment_not_variance():
    g = rng_for("init.second_moment_not_variance")
    D, outs = 200, []
    for _ in range(200):
        w = g.normal(0, 0.1, (D, 16))
        outs.append(np.maximum(g.standard_normal((200, D)), 0.0) @ w)
    return mc_var_clustered(outs, 1.0, center=False)


@claim("init.he_first_layer", "003", "§4.3.1 L1435-1451", "init",
       "First ReLU layer: E[a_i^2] = (n/2) sigma_x^2 sigma_W^2 (n = 100, sigma_x^2 = 3, sigma_W^2 = 0.01: 1.5)",
       alternatives={"Var[a] for E[a^2]: n sigma_x^2 sigma_W^2 (1/2 - 1/(2 pi))": 3.0 * VAR_RELU,
                     "the ReLU's 1/2 left out (3)": 3.0})
def he_first_layer():
    g = rng_for("init.he_first_layer")
    outs = []
    for _ in range(200):
        W = g.normal(0, 0.1, (100, 16))
        outs.append(np.maximum(g.normal(0, math.sqrt(3), (200, 100)) @ W, 0.0))
    return mc_var_clustered(outs, 1.5, center=False)


@claim("init.he_preserves_depth", "002", "L64-70; 000 L17; 001 §3.3 L265; 003 §4.3.1", "init",
       "ReLU chain with Var w = 2/n: E[s_L^2] / E[s_1^2] = prod (1/2) n Var w = 1 at depth 12, width 64",
       alternatives={"LeCun/Xavier 1/n: 2^-11": 2.0 ** -11, "002's printed std 2/sqrt(n): 2^11": 2.0 ** 11})
def he_preserves_depth():
    num, den = _chain_ratio(rng_for("init.he_preserves_depth"), 12, 64, 2.0)
    return mc_ratio_of_means(num, den, 1.0)


@claim("init.lecun_halves_relu", "002", "L64 (product formula)", "init",
       "ReLU chain with Var w = 1/n: the second moment halves per layer, E[s_L^2]/E[s_1^2] = 2^-(L-1) "
       "(depth 10: 1/512); Xavier with equal fan-in and fan-out is the same init. Shown scaled by 2^9; wrong "
       "values: an exponent off by one, 2^-L or 2^-(L-2)",
       alternatives={"2^-L (exponent off by one)": 0.5, "2^-(L-2) (exponent off by one)": 2.0})
def lecun_halves_relu():
    num, den = _chain_ratio(rng_for("init.lecun_halves_relu"), 10, 64, 1.0)
    r = mc_ratio_of_means(num * 512.0, den, 1.0)
    r.note = "ratio scaled by 2^9"
    return r


@claim("init.he_std_not_2_over_sqrt_n", "002", "L68-70", "init",
       "He's condition (1/2) n Var w = 1 means std sqrt(2/n). 002 prints 'scaled by 2/sqrt(n_l)': as "
       "printed the per-layer factor would be (1/2) n (4/n) = 2 (explodes); tested: the corrected std "
       "keeps the factor at 1 and the printed one gives 2 per layer", corrected=True)
def he_std_corrected():
    g = rng_for("init.he_std_not_2_over_sqrt_n")
    num, den = _chain_ratio(g, 2, 128, 2.0, n_nets=400)
    ok = with_wrong(mc_ratio_of_means(num, den, 1.0), {"the printed std 2/sqrt(n): factor 2": 2.0})
    num2, den2 = _chain_ratio(g, 2, 128, 4.0, n_nets=400)
    as_printed = mc_ratio_of_means(num2 / 2.0, den2, 1.0)  # factor 2 per layer (num/den = 2)
    return all_of([ok, as_printed])


@claim("init.variance_preserving_factor", "003", "Exercise 4.3.1 L1453", "init",
       "Gaussian x and W: preserving Var (not the second moment) of ReLU(xW) needs "
       "sigma_W^2 = 1/(n(1/2 - 1/(2 pi))) = 2.9338844/n; then Var[a_i] = sigma_x^2 (n = 256, sigma_x^2 = 1)",
       alternatives={"He's 2/n instead: Var[a] = 2 (1/2 - 1/(2 pi))": 2 * VAR_RELU})
def variance_preserving_factor():
    g = rng_for("init.variance_preserving_factor")
    n, outs = 256, []
    s2 = 1.0 / (n * VAR_RELU)
    for _ in range(200):
        W = g.normal(0, math.sqrt(s2), (n, 16))
        outs.append(np.maximum(g.standard_normal((200, n)) @ W, 0.0))
    r = mc_var_clustered(outs, 1.0)
    r.passed = r.passed and abs(1.0 / VAR_RELU - 2.9338844138) < 1e-9
    return r


@claim("init.xavier_balances_fwd_bwd", "000", "Costume 2 L17", "init",
       "Xavier/Glorot Var W = 2/(fan_in + fan_out) averages the forward factor fan_in Var W and the "
       "backward factor fan_out Var W: their mean is 1 (fan_in 100, fan_out 300: 0.5 and 1.5)",
       alternatives={"1/(fan_in + fan_out) (the 2 left out)": 0.5, "LeCun 1/fan_in: (1 + 3)/2": 2.0})
def xavier_balance():
    g = rng_for("init.xavier_balances_fwd_bwd")
    fi, fo = 100, 300
    fw, bw = [], []
    for _ in range(200):
        W = g.normal(0, math.sqrt(2.0 / (fi + fo)), (fo, fi))
        fw.append(g.standard_normal((50, fi)) @ W.T)      # forward: y = W x
        bw.append(g.standard_normal((50, fo)) @ W)        # backward: dx = W^T dy
    f = mc_var_clustered(fw, fi * 2 / (fi + fo), center=False)
    b = mc_var_clustered(bw, fo * 2 / (fi + fo), center=False)
    mean = (f.measured + b.measured) / 2
    r = all_of([f, b])
    r.measured, r.expected = mean, 1.0
    r.tolerance = math.hypot(f.tolerance, b.tolerance) / 2
    r.passed = r.passed and abs(mean - 1.0) <= r.tolerance
    return r


@claim("init.varlens_kaiming_std", "003", "§4.3.1 L1449; 002 L68-70", "init",
       "varlens.nn.init.kaiming_normal_(nonlinearity='relu') draws N(0, 2/fan_in): the sample variance of a "
       "256x1024 weight (fan_in 1024) is 2/1024 within 5 standard errors (std sqrt(2/n) = 0.0442, not 002's "
       "2/sqrt(n)); it must reject LeCun's 1/fan_in, fan_out (2/256) and 002's 4/fan_in",
       alternatives={"LeCun 1/fan_in": 1 / 1024, "mode='fan_out': 2/fan_out": 2 / 256,
                     "002's printed std 2/sqrt(n): 4/fan_in": 4 / 1024,
                     "Xavier 2/(fan_in + fan_out)": 2 / (1024 + 256)})
def varlens_kaiming_std():
    import varlens as vl
    from varlens import nn
    w = vl.empty(256, 1024, dtype=vl.float64)
    nn.init.kaiming_normal_(w, nonlinearity="relu", generator=vl.Generator().manual_seed(7))
    return mc_var(w.numpy(), 2.0 / 1024)


@claim("init.equal_init_stays_symmetric", "002", "L11 (§5.6 of the inventory)", "init",
       "With all-equal (here constant) weights every hidden unit of a layer gets the same gradient, so "
       "after 20 SGD steps the units are still identical (max spread of their incoming weights: 0). No wrong "
       "value: the identity is exact (0 against rounding), and any symmetry breaking shows as a spread of "
       "the order of how far the weights moved (printed in the note)")
def equal_init_symmetric():
    import varlens as vl
    from varlens import nn, optim
    g = rng_for("init.equal_init_stays_symmetric")
    X = vl.tensor(g.standard_normal((32, 5)))
    Y = vl.tensor(g.standard_normal((32, 1)))
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    with vl.no_grad():
        for p in model.parameters():
            p.fill_(0.3)
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(20):
        opt.zero_grad()
        ((model(X) - Y) ** 2).mean().backward()
        opt.step()
    W = model[0].weight.detach().numpy()
    moved = float(np.abs(W - 0.3).max())
    r = close(float(np.abs(W - W[0]).max()), 0.0, 1e-12, 0, note=f"weights moved by {moved:.3g}")
    r.passed = r.passed and moved > 1e-3     # they did train, yet stayed identical
    return r
